"""How the models stop, and what they say about processes that end: the
plumbing they share (src/model/children.c).

- thread and coro drain their connections on SIGTERM: every client sees the
  end of its stream and the server exits 0 at once; a connection still busy
  after the 1.5 s grace period is named in a warning instead of holding the
  exit.
- fork reports a connection process that was killed, and keeps serving;
  reactors --procs shuts down when a reactor process ends, with exit status 1
  when it crashed and 0 when it was stopped."""

import os
import signal
import time

import pytest

from conftest import MODELS, child_pids, recv_until_closed, server_has_read, wait_for

# The "crash": a signal nobody in the server handles or blocks, so the
# process dies of it. Not SIGSEGV: AddressSanitizer catches that one and
# turns it into a report and an exit status of 1.
CRASH = signal.SIGALRM
CRASH_TEXT = f"died of signal {CRASH.value} (Alarm clock)"


def echo_once(srv, data=b"ping\n") -> bytes:
    with srv.connect() as s:
        s.sendall(data)
        got = b""
        while len(got) < len(data):
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        return got


# The models that drain their connections on SIGTERM (the module's docstring).
@pytest.mark.models(names=["thread", "coro"])
def test_stop_drains_idle_connections(serve, model):
    srv = serve("echo", model)
    clients = [srv.connect() for _ in range(3)]
    for c in clients:
        c.sendall(b"x\n")
        assert c.recv(16) == b"x\n"
    clients[0].sendall(b"half a line")  # input the app is still holding
    wait_for(lambda: server_has_read(clients[0]), what="the server to read the half line")
    start = time.monotonic()
    assert srv.stop(timeout=5) == 0
    # Woken by shutdown(), not by the grace period running out.
    assert time.monotonic() - start < 1.4
    for c in clients:
        c.settimeout(5)
        recv_until_closed(c)  # returns at the end of the stream; times out otherwise
        c.close()
    assert "still running at exit" not in srv.stderr()


@pytest.mark.models(names=["thread", "coro"])
def test_stop_names_connections_past_the_grace_period(serve, model):
    # A bcrypt hash of cost 16 takes seconds (4 s on the CI machine): the
    # connection is inside a job when the stop comes, and no shutdown() can
    # wake it.
    srv = serve("rest", model, "--bcrypt-cost", "16")
    body = b'{"password": "correct horse"}'
    c = srv.connect()
    c.sendall(b"POST /password/set/slow HTTP/1.1\r\nHost: t\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    wait_for(lambda: server_has_read(c), what="the server to read the request")
    srv.proc.send_signal(signal.SIGTERM)
    what = "connection threads" if model == "thread" else "connection coroutines"
    wait_for(lambda: f"1 {what} still running at exit" in srv.stderr(), timeout=20,
             what="the warning about the busy connection")
    assert srv.proc.wait(20) == 0
    c.close()


@pytest.mark.skipif("fork" not in MODELS, reason="fork not selected")
def test_fork_reports_a_crashed_connection_process_and_serves_on(serve):
    """A connection process killed by a signal it does not expect is one
    error line; one stopped with SIGTERM (as the server stops them) is none."""
    srv = serve("echo", "fork")
    a, b = srv.connect(), srv.connect()
    for s in (a, b):
        s.sendall(b"hi\n")
        assert s.recv(16) == b"hi\n"
    procs = wait_for(lambda: len(child_pids(srv.proc.pid)) == 2 and child_pids(srv.proc.pid),
                     what="two connection processes")
    stopped, crashed = procs
    os.kill(stopped, signal.SIGTERM)  # as the server itself stops them: not a failure
    wait_for(lambda: stopped not in child_pids(srv.proc.pid), what="the first process to end")
    os.kill(crashed, CRASH)
    line = f"connection process {crashed} {CRASH_TEXT}"
    wait_for(lambda: line in srv.stderr(), what="the crash report")
    assert f"connection process {stopped} " not in srv.stderr()
    assert echo_once(srv) == b"ping\n"  # the server serves on
    a.close()
    b.close()
    assert srv.stop() == 0


@pytest.mark.skipif("reactors-procs" not in MODELS, reason="reactors --procs not selected")
@pytest.mark.parametrize("sig, status, says", [
    (CRASH, 1, CRASH_TEXT + ": shutting down"),
    (signal.SIGTERM, 0, "stopped: shutting down"),
])
def test_reactors_procs_shut_down_when_a_reactor_ends(serve, sig, status, says):
    srv = serve("echo", "reactors-procs")
    assert echo_once(srv) == b"ping\n"
    reactors = wait_for(lambda: len(child_pids(srv.proc.pid)) == 2 and child_pids(srv.proc.pid),
                        what="two reactor processes")
    os.kill(reactors[0], sig)
    assert srv.proc.wait(10) == status
    assert f"reactor process {reactors[0]} {says}" in srv.stderr()
