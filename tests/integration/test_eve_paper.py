"""The Eve paper's Programs 1 and 2 as printed (issue 42, docs/eve.md "The paper's listings").

The listings are the study's text, kept outside the project in ../shared/eve/
(a sibling of the repository, as CI has it); these tests read them from
there and are skipped, saying why, where that directory is absent. They are
never copied into the project.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, ROOT

SHARED = ROOT.parent / "shared" / "eve"
PROGRAM1 = SHARED / "program1.eve"
PROGRAM2 = SHARED / "program2.eve"
YARD_EVE = BIN / "yard-eve"


def listing(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"the paper's listing {path.name} is not here: {SHARED} is absent "
                    f"(it is a sibling of the repository in CI)")
    return path


def run(argv, timeout=180, env=None, **kw):
    return subprocess.run([str(a) for a in argv], capture_output=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, **kw)


def fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


# ---- Program 1: yard-eve call ------------------------------------------------------------------

@pytest.mark.parametrize("workers", ["1", "2"])
def test_program1_as_printed_through_call(workers):
    r = run([YARD_EVE, "call", listing(PROGRAM1), "fib", "30"], env={"YARD_EVE_WORKERS": workers})
    assert (r.returncode, r.stdout, r.stderr) == (0, b"832040\n", b"")


def test_program1_small_values():
    for n in (0, 1, 2, 10):
        r = run([YARD_EVE, "call", listing(PROGRAM1), "fib", str(n)])
        assert (r.returncode, r.stdout) == (0, f"{fib(n)}\n".encode()), r.stderr


def test_program1_timed_record():
    r = run([YARD_EVE, "call", "--json", "--repeat", "3", listing(PROGRAM1), "fib", "20"],
            env={"YARD_EVE_WORKERS": "2"})
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["function"] == "fib" and rec["args"] == ["20"] and rec["result"] == fib(20)
    assert (rec["repeat"], rec["workers"], len(rec["times_s"])) == (3, 2, 3)
    assert 0 < rec["min_s"] == min(rec["times_s"]) <= rec["median_s"] == sorted(rec["times_s"])[1]


@pytest.mark.parametrize("args,message", [
    (["fob", "3"], "yard-eve: call: {f} has no function 'fob' (its functions: fib)"),
    (["fib"], "yard-eve: call: 'fib' takes 1 argument, 0 given"),
    (["fib", "1", "2"], "yard-eve: call: 'fib' takes 1 argument, 2 given"),
    (["fib", "3x"], "yard-eve: call: argument 1 of 'fib' is an int; '3x' is not a whole number"),
    (["fib", "99999999999999999999"], "yard-eve: call: argument 1 of 'fib' is an int; "
                                      "'99999999999999999999' is not a whole number"),
])
def test_program1_call_errors(args, message):
    f = listing(PROGRAM1)
    r = run([YARD_EVE, "call", f, *args])
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr.decode().startswith(message.format(f=f)), r.stderr
