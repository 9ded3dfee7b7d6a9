"""yard-serve's command-line contract and its robustness under bad clients."""

import json
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time

import pytest

from conftest import (BIN, assert_sheds_and_recovers, echo_eventually_ok, echo_ok, model_args,
                      recv_exactly, skip_unavailable, wait_for)

SERVE = BIN / "yard-serve"


def run(*args, timeout=10):
    return subprocess.run([SERVE, *map(str, args)], capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def group_rss_kib(pgid: int) -> int:
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.getpgid(int(pid)) != pgid:
                continue
            for ln in open(f"/proc/{pid}/status"):
                if ln.startswith("VmRSS:"):
                    total += int(ln.split()[1])
        except (OSError, ProcessLookupError):
            continue
    return total


# --- the command line -------------------------------------------------------

def test_help_documents_every_flag():
    r = run("--help")
    assert r.returncode == 0
    for flag in ["--app", "--model", "--listen", "--workers", "--procs", "--max-conns",
                 "--idle-timeout", "--out", "--flush", "--backlog", "--log-level",
                 "--counter-sync", "--longpoll-ms", "--bcrypt-cost", "--offload-threads",
                 "--store-entries",
                 "--list-apps", "--list-models", "--json"]:
        assert flag.encode() in r.stdout, flag


def test_help_states_each_apps_idle_timeout_default():
    """--help lists the idle timeout each app declares: rest closes silent
    connections after 60 s, the benchmark apps never do, and 0 turns a
    default off."""
    out = run("--help").stdout.decode()
    defaults = dict(re.findall(r"^ {25}(\w+) +(\S+)", out, re.M))
    assert defaults.get("rest") == "60s", out
    for app in ("echo", "counter", "sink"):
        assert defaults.get(app) == "off", (app, out)
    assert "0 turns the app's default off" in out


@pytest.mark.parametrize("app", ["echo", "counter", "sink"])
def test_benchmark_apps_have_no_idle_timeout(serve, app):
    """A benchmark's load must never be cut short: no default, as stated at
    start-up."""
    server = serve(app, "epoll", "--log-level", "info")
    wait_for(lambda: f"idle timeout off (--app {app} has no default" in server.stderr(),
             what="the idle timeout start-up line")


@pytest.mark.parametrize("value", ["30s", "0"])
def test_chat_refuses_idle_timeout(tmp_path, value):
    """A logged-in IRC client may sit silent for hours, so chat never closes
    a connection for silence alone and --idle-timeout is a usage error that
    says why and points to --registration-timeout-ms. Needs chat's table to
    declare idle_exempt (apps/chat/init.c)."""
    try:
        r = run("--app", "chat", "--model", "epoll", "--listen", "127.0.0.1:0", "--data",
                tmp_path, "--idle-timeout", value, timeout=5)
    except subprocess.TimeoutExpired:
        pytest.fail("yard-serve served chat with --idle-timeout instead of refusing it")
    assert r.returncode == 2, r
    err = r.stderr.decode()
    assert "--idle-timeout does not apply to --app chat" in err, err
    assert "silent for hours" in err and "--registration-timeout-ms" in err, err
    assert r.stdout == b""


@pytest.mark.parametrize("args, needle", [
    (["--app", "nope", "--model", "epoll"], b"--app: unknown app 'nope'"),
    (["--app", "echo", "--model", "nope"], b"--model: unknown model 'nope'"),
    (["--model", "epoll"], b"--app is required"),
    (["--app", "echo"], b"--model is required"),
    (["--app", "echo", "--model", "epoll", "--listen", "localhost"], b"--listen: bad address"),
    (["--app", "echo", "--model", "epoll", "--listen", "1.2.3.4:99999"], b"port must be"),
    (["--app", "echo", "--model", "reactors", "--workers", "zero"], b"--workers: expected"),
    (["--app", "echo", "--model", "epoll", "--workers", "2"], b"--workers has no meaning"),
    (["--app", "echo", "--model", "thread", "--procs"], b"--procs has no meaning"),
    (["--app", "echo", "--model", "epoll", "--out", "/tmp/x"], b"--out and --flush apply"),
    (["--app", "sink", "--model", "epoll", "--flush", "sometimes"], b"--flush: expected"),
    (["--app", "echo", "--model", "epoll", "--idle-timeout", "soon"], b"--idle-timeout"),
    (["--app", "echo", "--model", "epoll", "--max-conns", "-1"], b"--max-conns"),
    (["--app", "echo", "--model", "epoll", "--bogus"], b"unknown option '--bogus'"),
    (["--app", "echo", "--model", "epoll", "--counter-sync", "perms"], b"--counter-sync applies"),
    (["--app", "counter", "--model", "epoll", "--counter-sync", "locks"], b"--counter-sync: expected"),
    (["--app", "echo", "--model", "epoll", "stray"], b"unexpected argument 'stray'"),
])
def test_usage_errors_exit_2_with_a_clear_message(args, needle):
    r = run(*args)
    assert r.returncode == 2, r
    assert needle in r.stderr, r.stderr
    assert r.stdout == b""


@pytest.mark.models()
def test_port_in_use_is_a_clear_error(model):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    port = blocker.getsockname()[1]
    try:
        r = run("--app", "echo", *model_args(model), "--listen", f"127.0.0.1:{port}")
    finally:
        blocker.close()
    assert r.returncode == 1
    assert b"Address already in use" in r.stderr
    assert f"127.0.0.1:{port}".encode() in r.stderr
    assert b"listening" not in r.stdout


def test_list_models_json_declares_traits():
    r = run("--list-models", "--json")
    assert r.returncode == 0
    models = {m["name"]: m for m in json.loads(r.stdout)}
    assert {"fork", "thread", "epoll", "reactors"} <= set(models)
    for m in models.values():
        t = m["traits"]
        for key in ["multi_threaded", "multi_process", "lightweight_threads", "event_based",
                    "explicit_concurrency"]:
            assert isinstance(t[key], bool)
        for key in ["shared_state", "ipc", "error_isolation"]:
            assert isinstance(t[key], str) and t[key]
    assert models["fork"]["traits"]["multi_process"] is True
    assert models["epoll"]["traits"]["event_based"] is True


def test_list_apps_json():
    r = run("--list-apps", "--json")
    apps = {a["name"] for a in json.loads(r.stdout)}
    assert apps >= {"echo", "counter", "sink"}


# --- stopping -----------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.models()
def test_signal_stops_within_2s_and_leaves_no_process(serve, model, sig):
    server = serve("echo", model)
    conns = [server.connect() for _ in range(5)]
    for i, c in enumerate(conns):  # every connection is live, served by its own unit
        c.sendall(b"x%d" % i)
        assert recv_exactly(c, 2) == b"x%d" % i
    idle = server.connect()  # and one that never says anything
    t0 = time.monotonic()
    assert server.stop(sig, timeout=5) == 0
    assert time.monotonic() - t0 < 2.0
    wait_for(lambda: not server.group_alive(), timeout=2, what="every server process gone")
    for c in conns + [idle]:
        c.settimeout(2)
        try:
            assert c.recv(10) == b""
        except ConnectionResetError:
            pass
        c.close()


# --- limits and bad clients ---------------------------------------------------

@pytest.mark.models()
def test_max_conns_is_honoured(serve, model):
    server = serve("echo", model, "--max-conns", "2")
    a, b = server.connect(), server.connect()
    for s in (a, b):
        s.sendall(b"hi")
        assert recv_exactly(s, 2) == b"hi"
    extra = server.connect()
    extra.settimeout(5)
    try:
        assert extra.recv(10) == b""  # closed at once
    except ConnectionResetError:
        pass
    extra.close()
    for s in (a, b):  # the others are unaffected
        s.sendall(b"ok")
        assert recv_exactly(s, 2) == b"ok"
    a.close()
    # Once one leaves, a new connection is served again.
    wait_for(lambda: echo_eventually_ok(server), timeout=10, what="a free slot after a close")
    b.close()
    assert "--max-conns 2 reached" in server.stderr()


@pytest.mark.models()
def test_idle_timeout_closes_idle_connections(serve, model):
    server = serve("echo", model, "--idle-timeout", "300ms", "--log-level", "info")
    idle = server.connect()
    idle.settimeout(10)
    t0 = time.monotonic()
    assert idle.recv(10) == b""
    assert time.monotonic() - t0 >= 0.25
    assert echo_ok(server)
    wait_for(lambda: "idle timeout" in server.stderr(), what="the close is logged")


@pytest.mark.models()
def test_abrupt_disconnect_mid_message_costs_one_connection(serve, model):
    server = serve("counter", model)
    for _ in range(20):
        s = server.connect()
        s.sendall(b"\x01" * 1000)
        # RST instead of FIN, with replies still unread.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    with server.connect() as s:
        s.sendall(b"\x00")
        (value,) = struct.unpack(">Q", recv_exactly(s, 8))
    assert value <= 20 * 1000


@pytest.mark.models()
def test_flooding_client_that_never_reads_is_contained(serve, model):
    """A client that sends 10 MB without reading is held back (backpressure),
    costs bounded memory, and does not stall the others."""
    server = serve("echo", model)
    base = group_rss_kib(server.pgid)
    flood = server.connect()
    flood.setblocking(False)
    sent = 0
    chunk = b"f" * 65536
    deadline = time.monotonic() + 10
    while sent < 10 * 1024 * 1024 and time.monotonic() < deadline:
        try:
            sent += flood.send(chunk)
        except BlockingIOError:
            # The server stopped reading: good. Make sure others still work.
            assert echo_ok(server)
            break
    for _ in range(20):
        assert echo_ok(server)
    # Bounded: the server holds at most a few hundred KiB for this peer.
    assert group_rss_kib(server.pgid) - base < 32 * 1024
    flood.close()
    assert echo_ok(server)


@pytest.mark.models()
def test_silent_clients_do_not_block_others(serve, model):
    server = serve("echo", model)
    silent = [server.connect() for _ in range(50)]
    assert echo_ok(server)
    for s in silent:
        s.close()
    assert echo_ok(server)


@pytest.mark.models()
def test_garbage_bytes_are_just_bytes_to_echo(serve, model):
    server = serve("echo", model)
    garbage = bytes(range(256)) * 64 + b"\xff\xfe\x00\r\n" * 1000
    with server.connect() as s:
        threading.Thread(target=s.sendall, args=(garbage,)).start()
        assert recv_exactly(s, len(garbage)) == garbage


# --- running out of descriptors ---------------------------------------------

# Every model whose one server process accepts and serves (fork's parent
# hands each connection to a child and keeps no descriptor for it; reactors
# --procs is a process per loop), with one accepting loop (coro-1, uring-1)
# and with several sharing one descriptor table: there another loop's accept
# must not be able to take the descriptor a shedding loop frees
# (docs/architecture.md, "Limits"). The poller changes none of that.
@pytest.mark.models(exclude=["multi_process", "poll"], extra=["coro-1", "uring-1"])
def test_out_of_descriptors_sheds_connections_and_recovers(start_server, model):
    """With RLIMIT_NOFILE at 48 (conftest.assert_sheds_and_recovers)."""
    skip_unavailable(model)
    srv = start_server(["prlimit", "--nofile=48:48", SERVE, "--app", "echo", *model_args(model),
                        "--listen", "127.0.0.1:0"])
    assert_sheds_and_recovers(srv)
    assert srv.stop() == 0, srv.stderr()
