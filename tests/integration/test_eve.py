"""yard-eve: compiling Eve programs and running them (issue 23, docs/eve.md).

The example programs are compiled by the build (build/bin/eve-*); these
tests also compile programs of their own with `yard-eve build` and `run`.
The conformance suites (test_echo.py, test_counter.py) run against eve-echo
and eve-counter as the server "eve".
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import BIN, ROOT, assert_sheds_and_recovers, recv_exactly, wait_for

EXAMPLES = ROOT / "examples" / "eve"
YARD_EVE = BIN / "yard-eve"
# Generated code must compile without a warning: the generator's mistakes show up here.
STRICT = {"YARD_EVE_CFLAGS": "-Wall -Wextra -Werror -Wno-unused-parameter -Wno-unused-variable"
                             " -Wno-unused-but-set-variable"}


def fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def run(argv, timeout=120, env=None, **kw):
    return subprocess.run([str(a) for a in argv], capture_output=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, **kw)


def build(tmp_path: Path, source: str, name: str = "prog") -> tuple[subprocess.CompletedProcess, Path]:
    src = tmp_path / f"{name}.eve"
    src.write_text(source)
    out = tmp_path / name
    return run([YARD_EVE, "build", src, "-o", out], env=STRICT), out


# ---- the examples ---------------------------------------------------------------------------


@pytest.mark.parametrize("workers", ["1", "2"])
def test_fib_example_values(workers):
    for n in [0, 1, 2, 12, 13, 20, 27]:
        r = run([BIN / "eve-fib", str(n)], env={"YARD_EVE_WORKERS": workers})
        assert r.returncode == 0, r.stderr
        assert r.stdout == f"{fib(n)}\n".encode()


def test_fib_bench_prints_the_tasks_record():
    r = run([BIN / "eve-fib-bench", "24", "10", "3", "2"], env={"YARD_EVE_WORKERS": "2"})
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["result"] == rec["expected"] == fib(24)
    assert rec["correct"] is True
    assert (rec["n"], rec["cutoff"], rec["repeat"], rec["workers"]) == (24, 10, 3, 2)

    def tasks(n):
        return 0 if n <= 10 else 2 + tasks(n - 1) + tasks(n - 2)
    assert rec["tasks"] == tasks(24)
    assert 0 < rec["min_s"] <= rec["median_s"]


def test_fib_bench_usage():
    r = run([BIN / "eve-fib-bench"])
    assert r.returncode == 2
    assert b"usage: fib_bench N CUTOFF REPEAT" in r.stderr


def test_examples_compile_strictly(tmp_path):
    for src in sorted(EXAMPLES.glob("*.eve")):
        out = tmp_path / src.stem
        r = run([YARD_EVE, "build", src, "-o", out], env=STRICT)
        assert r.returncode == 0, (src.name, r.stderr.decode())
        assert out.exists()


# ---- the compiler's command line -------------------------------------------------------------


def test_run_passes_arguments_and_status(tmp_path):
    r = run([YARD_EVE, "run", EXAMPLES / "fib.eve", "21"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{fib(21)}\n".encode()
    prog = tmp_path / "status.eve"
    prog.write_text('stdout.write_line("args " + to_string(args.size() - 1) + " " + args[1])\nexit(3)\n')
    r = run([YARD_EVE, "run", prog, "héllo wörld 🌍", "x"])
    assert r.returncode == 3
    assert r.stdout == "args 2 héllo wörld 🌍\n".encode()
    # run leaves no temporary directory behind
    tmp = tmp_path / "t"
    tmp.mkdir()
    r = run([YARD_EVE, "run", prog, "a"], env={"TMPDIR": str(tmp)})
    assert r.returncode == 3
    assert list(tmp.iterdir()) == []


def test_usage_errors():
    for argv in (["build"], ["build", EXAMPLES / "fib.eve"], ["build", "-o"],
                 ["build", EXAMPLES / "fib.eve", "-o", "/tmp/x", "--bogus"], ["run"],
                 ["run", "--bogus", EXAMPLES / "fib.eve"], ["c"], ["nonsense"]):
        r = run([YARD_EVE, *argv])
        assert r.returncode == 2, (argv, r.stderr)
        assert b"yard-eve" in r.stderr
    r = run([YARD_EVE, "--help"])
    assert r.returncode == 0
    for word in (b"build FILE.eve -o BIN", b"run [--debug] FILE.eve [ARGS]", b"YARD_EVE_WORKERS"):
        assert word in r.stdout


def test_a_bad_program_is_not_built(tmp_path):
    r, out = build(tmp_path, 'x : int = "text"\n')
    assert r.returncode == 1
    assert r.stderr.decode().startswith(f"{tmp_path / 'prog.eve'}:1:11: error: cannot initialize int 'x'")
    assert not out.exists()


def test_what_the_generator_refuses_is_an_error(tmp_path):
    r, out = build(tmp_path, "l : tcp_listener\n")
    assert r.returncode == 1
    assert b"prog.eve:1:1: error: a tcp_listener cannot be made by declaring it" in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("source, error", [
    ("class node:\n    next : node\n    v : int\nn : node\nstdout.write_line(to_string(n.v))\n",
     "prog.eve:2:5: error: class 'node' contains itself (field 'next')"),
    ("f: () int:\n    w : write_buffer\n    t : timer\n    on t tick [+w]:\n        w = w\n    return 1\n"
     "stdout.write_line(to_string(f()))\n",
     "prog.eve:5:9: error: 'w' belongs to an enclosing scope: a task or callback can modify the object, "
     "not make the variable refer to another one"),
    ("s : stream\n", "prog.eve:1:1: error: a stream cannot be made by declaring it"),
])
def test_the_generator_refuses_with_a_position(tmp_path, source, error):
    r, out = build(tmp_path, source)
    assert r.returncode == 1
    assert f"{tmp_path}/{error}".encode() in r.stderr, r.stderr
    assert not out.exists()


def test_generated_c_is_deterministic_with_line_directives():
    a = run([YARD_EVE, "c", EXAMPLES / "fib.eve"])
    b = run([YARD_EVE, "c", EXAMPLES / "fib.eve"])
    assert a.returncode == 0 and a.stdout == b.stdout
    text = a.stdout.decode()
    path = str(EXAMPLES / "fib.eve")
    # the two tasks of fib's finish, at their lines
    src = (EXAMPLES / "fib.eve").read_text().splitlines()
    task_lines = [i + 1 for i, line in enumerate(src) if line.strip().startswith("@ [")]
    assert len(task_lines) == 2
    for ln in task_lines:
        assert f'#line {ln} "{path}"' in text
    assert "eve_task_spawn(cx, &fin_" in text and "eve_finish_end(cx, &fin_" in text


def test_operands_run_in_the_order_written(tmp_path):
    """Arguments with effects run left to right, also when one of them is a
    lambda whose own body has operands to order (an earlier generator let the
    lambda's reuse the outer call's bookkeeping and printed 3,52)."""
    r, out = build(tmp_path, "n : int = 0\nnext: () int [+n]:\n    n += 1\n    return n\n"
                             "pair: (a: int, b: int) string:\n    return to_string(a) + \",\" + to_string(b)\n"
                             "stdout.write_line(pair(next(), ([+n] (x: int) int: x * 10 + next())(5)))\n"
                             "v : vector<int>\nv.push(7)\n"
                             "stdout.write_line(to_string(v.size()) + \" \" + to_string(v.pop()) + \" \" "
                             "+ to_string(v.size()))\n")
    assert r.returncode == 0, r.stderr
    p = run([out])
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"1,52\n1 7 0\n"


def test_runtime_errors_point_at_the_source(tmp_path):
    r, out = build(tmp_path, "z : int = 0\nif args.size() > 5:\n    z = 1\n"
                             "stdout.write_line(to_string(10 / z))\n")
    assert r.returncode == 0, r.stderr
    p = run([out])
    assert p.returncode == 1
    assert p.stderr.decode() == f"{tmp_path / 'prog.eve'}:4:32: run-time error: division by zero\n"
    r, out = build(tmp_path, "v : vector<int>\nv.push(1)\nstdout.write_line(to_string(v[3]))\n", "idx")
    assert r.returncode == 0, r.stderr
    p = run([out])
    assert p.returncode == 1
    assert f"{tmp_path / 'idx.eve'}:3:30: run-time error:".encode() in p.stderr


# ---- the language, end to end ------------------------------------------------------------------

LANG = EXAMPLES.parent.parent / "tests" / "integration" / "eve" / "lang.eve"

LANG_OUT = """hello, wörld 🌍!
19
hello|padded|
5 -1
1.5 0.1 true A
-84 97 5
3 -3 1 1024 -4
true
ac 2 true c 1
one=11;two=2; true 2
3 true false
25
p 3,-4 7
35
6050
1225
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_language_program(tmp_path, workers):
    out = tmp_path / "lang"
    r = run([YARD_EVE, "build", LANG, "-o", out], env=STRICT)
    assert r.returncode == 0, r.stderr.decode()
    p = run([out], env={"YARD_EVE_WORKERS": workers}, timeout=30)
    assert p.returncode == 0, p.stderr.decode()
    lines = p.stdout.decode().splitlines(keepends=True)
    n = LANG_OUT.count("\n")
    assert "".join(lines[:n]) == LANG_OUT
    # the emitter's callback and the timer's tick run after the top level, in either order
    assert sorted(lines[n:]) == ["moved to sum -1\n", "tick\n"]


# ---- servers --------------------------------------------------------------------------------------


def test_echo_yard_load_exact(start_server):
    server = start_server([BIN / "eve-echo", "127.0.0.1:0"])
    r = run([BIN / "yard-load", "echo", "--target", f"127.0.0.1:{server.port}", "--connections", "20",
             "--messages", "2000", "--size", "16", "--json"])
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["messages"] == 20 * 2000
    assert rec["errors"] == 0
    assert server.stop() == 0


def test_sigterm_ends_servers_within_2s(start_server):
    for prog in ("eve-echo", "eve-counter", "eve-chat"):
        server = start_server([BIN / prog, "127.0.0.1:0"])
        c = server.connect()
        t0 = time.monotonic()
        assert server.stop(timeout=2) == 0
        assert time.monotonic() - t0 < 2
        c.close()


def test_out_of_descriptors_sheds_connections_and_recovers(start_server):
    """eve-echo on two workers under RLIMIT_NOFILE 48: the clients it cannot
    take are closed, not left waiting, and it serves again afterwards."""
    server = start_server(["prlimit", "--nofile=48:48", BIN / "eve-echo", "127.0.0.1:0"],
                          env={"YARD_EVE_WORKERS": "2"})
    assert_sheds_and_recovers(server)
    assert server.stop() == 0, server.stderr()


def test_address_in_use_is_an_error_event(start_server):
    first = start_server([BIN / "eve-echo", "127.0.0.1:0"])
    r = run([BIN / "eve-echo", f"127.0.0.1:{first.port}"], timeout=10)
    assert r.returncode == 1
    assert r.stderr.startswith(b"echo: ")
    assert b"in use" in r.stderr


def lines_of(sock: socket.socket, want: int, timeout: float = 10.0) -> list[bytes]:
    buf = b""
    deadline = time.monotonic() + timeout
    while buf.count(b"\n") < want:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf.splitlines(keepends=True)


def test_chat_broadcasts_to_the_others(start_server):
    server = start_server([BIN / "eve-chat", "127.0.0.1:0"])
    a, b, c = server.connect(), server.connect(), server.connect()
    # every client is in the room: a line from each reaches the two others
    wait_for(lambda: _probe(server, a, [b, c]), what="all three joined")
    a.sendall("Grüße aus Zürich 🇨🇭\n".encode())
    a.sendall(b"second ")
    a.sendall(b"line, in two sends\n")
    for s in (b, c):
        assert lines_of(s, 2) == ["Grüße aus Zürich 🇨🇭\n".encode(), b"second line, in two sends\n"]
    b.sendall("Привет, 世界\n".encode())
    assert lines_of(a, 1) == ["Привет, 世界\n".encode()]
    assert lines_of(c, 1) == ["Привет, 世界\n".encode()]
    # a never got its own lines back
    a.settimeout(0.2)
    with pytest.raises(socket.timeout):
        a.recv(1)
    # b leaves abruptly; the room goes on
    b.close()
    a.sendall(b"after b left\n")
    assert lines_of(c, 1) == [b"after b left\n"]
    assert server.stop() == 0


def _probe(server, sender, receivers) -> bool:
    """Sends a probe line; true once every receiver got one. Then waits for
    the late copies of earlier probes, so that the test starts clean."""
    sender.sendall(b"probe\n")
    try:
        for r in receivers:
            if not set(lines_of(r, 1, timeout=0.5)) <= {b"probe\n"}:
                return False
    except TimeoutError:
        return False
    for r in receivers:
        r.settimeout(0.3)
        try:
            while r.recv(65536):
                pass
        except TimeoutError:
            pass
    return True


def test_counter_many_connections_exact(start_server):
    server = start_server([BIN / "eve-counter", "127.0.0.1:0"])
    clients, per = 6, 500
    errors = []

    def work():
        try:
            with server.connect(timeout=30) as s:
                for _ in range(per // 50):
                    s.sendall(b"\x01" * 50)
                    recv_exactly(s, 8 * 50)
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors, errors
    with server.connect() as s:
        s.sendall(b"\x00")
        assert int.from_bytes(recv_exactly(s, 8), "big") == clients * per
    assert server.stop() == 0


# ---- yard-eve call (issue 42) ---------------------------------------------------------------

CALLS = """\
import text

greeting : string = "hello"

twice: (s: string) string:
    return s + s

half: (x: float) float:
    return x / 2.0

pick: (b: bool, yes: char, no: char) char:
    if b:
        return yes
    return no

where: (s: string, c: char) int:
    return text.find(s, c)

shout: (s: string):
    stdout.write_line(greeting + " " + s)

names: () vector<string>:
    v : vector<string>
    return v

numbers: (v: vector<int>) int:
    return v.size()
"""


@pytest.mark.parametrize("args,out", [
    (["twice", 'a "q" \\ é'], 'a "q" \\ éa "q" \\ é\n'),
    (["twice", ""], "\n"),
    (["half", "3"], "1.5\n"),
    (["half", "-1e3"], "-5e+02\n"),   # to_string: the shortest %g that reads back
    (["pick", "true", "'", "n"], "'\n"),
    (["pick", "false", "y", "\\"], "\\\n"),
    (["where", "abc", "c"], "2\n"),
    (["shout", "world"], "hello world\n"),   # a void function: its own output only
])
def test_call_converts_arguments_and_prints_the_result(tmp_path, args, out):
    src = tmp_path / "calls.eve"
    src.write_text(CALLS)
    # the functions not called are static functions nobody calls
    r = run([YARD_EVE, "call", src, *args],
            env={"YARD_EVE_CFLAGS": STRICT["YARD_EVE_CFLAGS"] + " -Wno-unused-function"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == out


@pytest.mark.parametrize("args,message", [
    (["half", "x"], "argument 1 of 'half' is a float; 'x' is not a finite number"),
    (["half", "nan"], "argument 1 of 'half' is a float; 'nan' is not a finite number"),
    (["half", "1e999"], "argument 1 of 'half' is a float; '1e999' is not a finite number"),
    (["pick", "yes", "a", "b"], "argument 1 of 'pick' is a bool: true or false, not 'yes'"),
    (["pick", "true", "ab", "b"], "argument 2 of 'pick' is a char: exactly one byte, not 'ab'"),
    (["names"], "'names' returns an object, which call cannot print"),
    (["numbers", "1"], "parameter 'v' of 'numbers' is not an int, float, bool, char or string"),
    (["greeting"], "has no function 'greeting' (its functions: twice, half, pick, where, shout, names, "
                   "numbers)"),
])
def test_call_refuses_what_it_cannot_do(tmp_path, args, message):
    src = tmp_path / "calls.eve"
    src.write_text(CALLS)
    r = run([YARD_EVE, "call", src, *args])
    assert r.returncode == 2, r.stderr
    assert r.stderr.decode().startswith("yard-eve: call: ") and message in r.stderr.decode(), r.stderr
    assert r.stdout == b""


def test_call_usage(tmp_path):
    src = tmp_path / "calls.eve"
    src.write_text(CALLS)
    for argv in (["call"], ["call", src], ["call", "--repeat", "3", src, "half", "1"],
                 ["call", "--json", "--repeat", "0", src, "half", "1"], ["call", "--bogus", src, "half"]):
        r = run([YARD_EVE, *argv])
        assert r.returncode == 2 and r.stderr.startswith(b"yard-eve: call: "), (argv, r.stderr)


def test_call_on_a_bad_program_is_a_program_error(tmp_path):
    src = tmp_path / "bad.eve"
    src.write_text("f: (n: int) int:\n    return m\n")
    r = run([YARD_EVE, "call", src, "f", "1"])
    assert r.returncode == 1
    assert f"{src}:2:12: error: unknown name 'm'".encode() in r.stderr


def test_call_json_passes_the_functions_own_output_to_stderr(tmp_path):
    src = tmp_path / "calls.eve"
    src.write_text(CALLS)
    r = run([YARD_EVE, "call", "--json", "--repeat", "2", src, "shout", "x"])
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["result"] is None and rec["repeat"] == 2 and len(rec["times_s"]) == 2
    assert r.stderr == b"hello x\nhello x\n"
    r = run([YARD_EVE, "call", "--json", src, "twice", "a\nb"])
    assert json.loads(r.stdout)["result"] == "a\nba\nb"


def test_call_prints_a_programs_warnings_once(tmp_path):
    src = tmp_path / "w.eve"
    src.write_text("room : set<tcp_socket@>\n"
                   "f: (n: int) int:\n"
                   "    return n * 2\n")
    r = run([YARD_EVE, "call", src, "f", "21"])
    assert (r.returncode, r.stdout) == (0, b"42\n"), r.stderr
    assert r.stderr.decode() == (f"{src}:1:12: warning: 'tcp_socket@' as a type argument: taken as tcp_socket "
                                 "(an object is reached by reference; a task's permission on it is what its "
                                 "list names)\n")


def test_read_buffer_outside_a_data_callback_is_a_runtime_error(tmp_path):
    """socket.read_buffer() (the paper's) reads the data event being handled: in the connection
    handler there is none, which is a run-time error at its position, not a crash."""
    r, exe = build(tmp_path, "tcp_socket.listen(\"127.0.0.1:0\"):\n"
                             "    listening (addr: string):\n"
                             "        stdout.write_line(\"listening \" + addr)\n"
                             "    connection (c):\n"
                             "        v : vector<char> = c.read_buffer()\n"
                             "        stdout.write_line(to_string(v.size()))\n")
    assert r.returncode == 0, r.stderr
    p = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = p.stdout.readline().decode()
        assert line.startswith("listening 127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            assert p.wait(timeout=10) == 1
        assert p.stderr.read().decode() == (f"{tmp_path / 'prog.eve'}:5:41: run-time error: read_buffer() "
                                            "outside a data callback of this socket\n")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()


def test_write_buffer_echoes_what_read_buffer_read(tmp_path):
    """The paper's buffers in a program of our own: each data event's bytes written back."""
    r, exe = build(tmp_path, "tcp_socket.listen(\"127.0.0.1:0\"):\n"
                             "    listening (addr: string):\n"
                             "        stdout.write_line(\"listening \" + addr)\n"
                             "    connection (c):\n"
                             "        on c data [+c]:\n"
                             "            c.write_buffer(c.read_buffer())\n"
                             "on signals terminate:\n"
                             "    exit(0)\n")
    assert r.returncode == 0, r.stderr
    p = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = p.stdout.readline().decode()
        port = int(line.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            data = bytes(range(256)) * 300
            s.sendall(data)
            assert recv_exactly(s, len(data)) == data
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=5) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
