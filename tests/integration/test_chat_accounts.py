"""yard-chat account add|remove|list: the chat service's account file."""

import os
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import BIN

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
