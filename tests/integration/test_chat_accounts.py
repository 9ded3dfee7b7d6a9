"""yard-chat account add|remove|list: the chat service's account file."""

import os
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import BIN, libcrypt

CHAT = BIN / "yard-chat"
pytestmark = pytest.mark.usefixtures("yard_chat_built")


def account(*args, password=None, timeout=30):
    return subprocess.run([CHAT, "account", *map(str, args)], input=password, capture_output=True,
                          text=True, timeout=timeout)


def test_add_list_remove(tmp_path):
    data = tmp_path / "data"
    assert account("add", "alice", "--data", data, "--cost", 4, password="s3cret\n").returncode == 0
    assert account("add", "bob", "--data", data, "--cost", 4, password="pw\n").returncode == 0
    r = account("list", "--data", data)
    assert r.returncode == 0 and r.stdout.split() == ["alice", "bob"]
    mode = stat.S_IMODE(os.stat(data / "accounts").st_mode)
    assert mode == 0o600
    text = (data / "accounts").read_text()
    assert "s3cret" not in text and text.startswith("alice:$2b$04$")
    assert account("remove", "alice", "--data", data).returncode == 0
    assert account("list", "--data", data).stdout.split() == ["bob"]


def test_errors_are_clear(tmp_path):
    data = tmp_path / "d"
    assert account("add", "alice", "--data", data, "--cost", 4, password="x\n").returncode == 0
    r = account("add", "ALICE", "--data", data, "--cost", 4, password="y\n")
    assert r.returncode == 1 and "account 'ALICE' exists" in r.stderr
    r = account("remove", "carol", "--data", data)
    assert r.returncode == 1 and "no account 'carol'" in r.stderr
    r = account("add", "9lives", "--data", data, password="x\n")
    assert r.returncode == 2 and "not a valid account name" in r.stderr
    r = account("add", "dave", "--data", data, "--cost", 3, password="x\n")
    assert r.returncode == 2 and "--cost: expected a bcrypt cost from 4 to 31" in r.stderr
    r = account("add", "dave", password="x\n")
    assert r.returncode == 2 and "--data DIR is required" in r.stderr
    r = account("add", "dave", "--data", data, password="")
    assert r.returncode == 1 and "expected the password on the first line of stdin" in r.stderr
    r = account("frobnicate", "--data", data)
    assert r.returncode == 2 and "unknown action 'frobnicate'" in r.stderr
    # Nothing of the failed attempts reached the file.
    assert account("list", "--data", data).stdout.split() == ["alice"]


def test_several_names_at_once_all_or_none(tmp_path):
    """add NAME...: one password line each, in order; every one added, or none."""
    data = tmp_path / "data"
    r = account("add", "amy", "ben", "cy", "--data", data, "--cost", 4, password="pa\npb\npc\n")
    assert r.returncode == 0, r.stderr
    assert account("list", "--data", data).stdout.split() == ["amy", "ben", "cy"]
    # Each name got its own line, in order.
    lib = libcrypt()
    hashes = dict(line.split(":", 1) for line in (data / "accounts").read_text().split())
    for name, pw in (("amy", b"pa"), ("ben", b"pb"), ("cy", b"pc")):
        h = hashes[name].encode()
        assert h.startswith(b"$2b$04$") and lib.crypt(pw, h) == h, name
    # A missing line, a name given twice, one that exists, a bad one: nothing is added.
    r = account("add", "dee", "eve", "--data", data, "--cost", 4, password="pd\n")
    assert r.returncode == 1 and "'eve', name 2 of 2" in r.stderr and "nothing was added" in r.stderr
    r = account("add", "dee", "DEE", "--data", data, "--cost", 4, password="x\ny\n")
    assert r.returncode == 1 and "account 'DEE' is named twice" in r.stderr
    r = account("add", "dee", "BEN", "--data", data, "--cost", 4, password="x\ny\n")
    assert r.returncode == 1 and "account 'BEN' exists" in r.stderr
    r = account("add", "dee", "9x", "--data", data, "--cost", 4, password="x\ny\n")
    assert r.returncode == 2 and "'9x' is not a valid account name" in r.stderr
    assert account("list", "--data", data).stdout.split() == ["amy", "ben", "cy"]
    # remove still takes one name.
    r = account("remove", "amy", "ben", "--data", data)
    assert r.returncode == 2 and "unexpected argument 'ben'" in r.stderr


@pytest.mark.parametrize("tool", ["account", "oper", "server-password"])
def test_help_before_or_after_the_action(tool):
    for argv in (["--help"], ["-h"], ["add" if tool != "server-password" else "set", "--help"]):
        r = subprocess.run([CHAT, tool, *argv], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stdout.startswith(f"usage: yard-chat {tool} "), (argv, r)


def test_list_of_a_fresh_directory_is_empty(tmp_path):
    r = account("list", "--data", tmp_path / "none")
    assert r.returncode == 0 and r.stdout == ""


def test_concurrent_adds_lose_nothing(tmp_path):
    """20 processes add an account each at the same time: the OFD lock
    serialises their read-modify-write, so all 20 are there."""
    data = tmp_path / "data"
    names = [f"user{i}" for i in range(20)]
    with ThreadPoolExecutor(20) as ex:
        results = list(ex.map(lambda n: account("add", n, "--data", data, "--cost", 4,
                                                password="pw\n"), names))
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    assert sorted(account("list", "--data", data).stdout.split()) == sorted(names)
    assert not (data / "accounts.tmp").exists()
