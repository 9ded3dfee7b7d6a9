"""The chat service's disk I/O never runs on an event loop. Under the loop
and coroutine models, log appends with their fdatasync (--fsync always) and
a JOIN's replay, which reads old records from the files, run on the
engine's I/O thread: seen with `strace -f`, no thread that waits in epoll
makes those calls. With --offload-threads 0 the jobs run inline, on the
loop, and the same check sees them there (so it can fail)."""

import os
import re
import shutil
import signal
import socket

import pytest

from chatlib import Irc, add_accounts, login_pass
from conftest import BIN, model_args, wait_for

pytestmark = pytest.mark.usefixtures("yard_chat_built")

DISK_CALLS = ("pwrite64", "pread64", "fdatasync")
LINE = re.compile(r"^(\d+)\s+(\w+)\(")
# What an event loop thread waits in: epoll, or io_uring_enter for uring.
WAIT_CALLS = ("epoll_wait", "epoll_pwait", "io_uring_enter")


def trace_calls(path):
    """[(tid, syscall)] in the order strace wrote them (interrupted calls
    show once, at their start)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        m = LINE.match(line)
        if m:
            out.append((int(m.group(1)), m.group(2)))
    return out


# The models with an I/O thread (an offload pool), one variant of each: the
# poller and the processes change nothing here.
@pytest.mark.parametrize("offload", ["2", "0"])
@pytest.mark.models("plain", "offload")
def test_log_io_runs_off_the_event_loop(start_server, tmp_path, model, offload):
    strace = shutil.which("strace")
    assert strace, "strace is missing (make test installs it)"
    data = tmp_path / "data"
    data.mkdir()
    add_accounts(data, ("alice", "bob"))
    trace = tmp_path / "trace"
    srv = start_server([strace, "-f", "-qq", "-o", trace,
                        "-e", "trace=" + ",".join(WAIT_CALLS + DISK_CALLS),
                        BIN / "yard-serve", "--app", "chat", *model_args(model),
                        "--offload-threads", offload, "--listen", "127.0.0.1:0",
                        "--data", data, "--fsync", "always"],
                       # LeakSanitizer cannot run under ptrace; the other
                       # tests check for leaks.
                       env={"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
                            ":detect_leaks=0"})
    # bob's device has a read position in #io, then leaves; alice talks.
    bob = login_pass(srv.port, "bob", "pw-bob")
    bob.send("JOIN #io")
    bob.expect(r" 366 ")
    bob.send("QUIT")
    bob.expect(r"^ERROR ")
    bob.close()
    alice = login_pass(srv.port, "alice", "pw-alice")
    alice.send("JOIN #io")
    alice.expect(r" 366 ")
    for i in range(5):
        alice.send(f"PRIVMSG #io :message {i} ✓")
    alice.send("PRIVMSG bob :in private")
    # Input waits while an append runs: the answer to a PING sent last comes after all six.
    alice.send("PING :appended")
    alice.expect(r" PONG .*:appended")
    # bob comes back: the replay reads the five messages from the files. A private message
    # missed while away is not replayed (docs/chat.md): bob asks for it.
    bob = login_pass(srv.port, "bob", "pw-bob")
    bob.send("JOIN #io")
    for i in range(5):
        bob.expect(rf"PRIVMSG #io :message {i} ✓")
    bob.send("CHATHISTORY LATEST alice * 10")
    bob.expect(r"PRIVMSG bob :in private")

    def calls():
        c = trace_calls(trace)
        return c if sum(1 for _, s in c if s == "pwrite64") >= 6 else None

    seen = wait_for(calls, timeout=10, what="six appends in the trace")
    # Only what happened while serving: from the loops' first wait on.
    first = next(i for i, (_, s) in enumerate(seen) if s in WAIT_CALLS)
    serving = seen[first:]
    loops = {tid for tid, s in serving if s in WAIT_CALLS}
    disk = {}
    for tid, s in serving:
        if s in DISK_CALLS:
            disk.setdefault(s, set()).add(tid)
    assert set(disk) == set(DISK_CALLS), f"expected every kind of disk call: {disk}"
    on_loop = {s: tids & loops for s, tids in disk.items() if tids & loops}
    if offload == "0":
        assert on_loop, f"jobs inline: the loop threads {loops} should make the disk calls {disk}"
    else:
        assert not on_loop, f"disk calls on an event loop thread: {on_loop} (loops {loops})"
    alice.close()
    bob.close()
    # strace passes no signal on: stop the server itself (the first traced
    # thread is its main one), and strace exits with it.
    os.kill(seen[0][0], signal.SIGTERM)
    assert srv.proc.wait(10) == 0, srv.stderr()


@pytest.mark.models()
def test_lines_sent_right_before_a_close_are_all_stored(start_server, tmp_path, model):
    """A client that sends several messages and closes at once: each append
    is a job, the end of input arrives while one runs, and the lines behind
    it must still be read and stored, in order."""
    data = tmp_path / "data"
    data.mkdir()
    add_accounts(data, ("alice", "bob"))
    srv = start_server([BIN / "yard-serve", "--app", "chat", *model_args(model),
                        "--listen", "127.0.0.1:0", "--data", data])
    bob = login_pass(srv.port, "bob", "pw-bob")
    bob.send("JOIN #c")
    bob.expect(r" 366 ")
    alice = login_pass(srv.port, "alice", "pw-alice")
    alice.send("JOIN #c")
    alice.expect(r" 366 ")
    alice.sock.sendall("".join(f"PRIVMSG #c :last words {i} ✓\r\n" for i in range(8)).encode())
    alice.sock.shutdown(socket.SHUT_WR)
    for i in range(8):
        bob.expect(rf"PRIVMSG #c :last words {i} ✓")
    alice.close()
    bob.close()
