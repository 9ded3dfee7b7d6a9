"""An installed yard-eve works without the build tree (issue 42, docs/eve.md "Installing").

`cmake --install BUILD --prefix P` puts the tools in P/bin and the Eve
runtime (archives and headers) in P/lib/switchyard. The installed yard-eve
must find that runtime relative to its own binary: the test hides the source
and build trees behind an empty tmpfs in a private mount namespace
(`unshare --user --mount`) and compiles and runs programs with it there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, ROOT

BUILD = BIN.parent
TOOLS = ["yard-serve", "yard-load", "yard-chat", "yard-cswitch", "yard-eve"]
RUNTIME = ["libyard_eve_rt.a", "libyard_coro.a", "libyard_core.a", "libyard_cli.a", "libyard_proto.a",
           "include/eve_rt.h", "include/eve_gen.h", "include/yard/coro.h"]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("prefix")
    r = subprocess.run(["cmake", "--install", str(BUILD), "--prefix", str(p)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return p


def hidden(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Runs argv with the repository and the build tree covered by empty
    directories, so that nothing of theirs can be reached."""
    covers = [ROOT] + ([BUILD] if ROOT not in BUILD.parents and BUILD != ROOT else [])
    mounts = " && ".join(f"mount -t tmpfs none '{c}'" for c in covers)
    script = f"{mounts} && cd '{cwd}' && exec \"$@\""
    return subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh",
                           *argv], capture_output=True, text=True, timeout=180)


def namespaces_work() -> str | None:
    if not shutil.which("unshare"):
        return "unshare(1) is not installed"
    r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                        "mount -t tmpfs none /mnt || mount -t tmpfs none /tmp"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return f"this machine refuses an unprivileged mount namespace ({r.stderr.strip()})"
    return None


def test_install_puts_the_tools_and_the_runtime_in_place(prefix):
    for tool in TOOLS:
        assert os.access(prefix / "bin" / tool, os.X_OK), tool
    if (BIN / "yard-tasks").exists():
        assert os.access(prefix / "bin" / "yard-tasks", os.X_OK)
    for f in RUNTIME:
        assert (prefix / "lib" / "switchyard" / f).is_file(), f


def test_installed_yard_eve_builds_and_runs_without_the_build_tree(prefix, tmp_path):
    reason = namespaces_work()
    if reason:
        pytest.skip(reason)
    work = tmp_path / "work"
    work.mkdir()
    (work / "hello.eve").write_text(
        'total : int = 0\n'
        'for (x in range(1, 11)):\n'
        '    total += x\n'
        'stdout.write_line("sum " + to_string(total) + " " + args[1])\n')
    yard_eve = str(prefix / "bin" / "yard-eve")
    # the check that the trees really are out of reach
    probe = hidden(["ls", "-A", str(ROOT)], work)
    assert probe.returncode == 0 and probe.stdout == "", probe.stdout + probe.stderr
    r = hidden([yard_eve, "build", "hello.eve", "-o", "hello"], work)
    assert r.returncode == 0, r.stderr
    r = hidden(["./hello", "installed"], work)
    assert (r.returncode, r.stdout) == (0, "sum 55 installed\n"), r.stderr
    r = hidden([yard_eve, "run", "hello.eve", "again"], work)
    assert (r.returncode, r.stdout) == (0, "sum 55 again\n"), r.stderr
    (work / "sq.eve").write_text("sq: (n: int) int:\n    return n * n\n")
    r = hidden([yard_eve, "call", "sq.eve", "sq", "12"], work)
    assert (r.returncode, r.stdout) == (0, "144\n"), r.stderr


def test_yard_eve_says_when_it_finds_no_runtime(tmp_path):
    """A yard-eve copied away from both its installation and its build tree."""
    reason = namespaces_work()
    if reason:
        pytest.skip(reason)
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(BIN / "yard-eve", alone / "yard-eve")
    (alone / "p.eve").write_text('stdout.write_line("x")\n')
    r = hidden([str(alone / "yard-eve"), "build", "p.eve", "-o", "p"], alone)
    assert r.returncode == 1
    assert "yard-eve: cannot find the Eve runtime" in r.stderr, r.stderr
    assert not (alone / "p").exists()
