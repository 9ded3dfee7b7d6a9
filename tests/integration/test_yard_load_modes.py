"""yard-load counter and rate: the calibration tests of the load-generator
issue that these modes can pass today."""

import json
import subprocess

import pytest

from conftest import BIN, wait_for

LOAD = BIN / "yard-load"


def load_json(*args, timeout=60):
    r = subprocess.run([LOAD, *map(str, args), "--json"], capture_output=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    return r.returncode, (json.loads(r.stdout) if r.stdout else None), r.stderr


@pytest.mark.models()
def test_counter_mode_ends_with_an_exact_count(serve, model):
    server = serve("counter", model)
    rc, d, err = load_json("counter", "--target", f"127.0.0.1:{server.port}", "--connections", 16,
                           "--read-ratio", "0.5", "--ops", 500)
    assert rc == 0, err
    assert d["mode"] == "counter" and d["errors"] == 0 and d["messages"] == 16 * 500
    assert d["count_final"] == d["count_initial"] + d["increments"]
    # Half reads, half increments, give or take the randomness.
    assert 0.4 * 8000 < d["increments"] < 0.6 * 8000


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_counter_mode_catches_a_lying_server(start_server, io):
    """An echo server is not a counter: its 'replies' are the request bytes
    and never form a valid count, so yard-load must fail."""
    server = start_server([BIN / "yard-serve", "--app", "echo", "--model", "epoll", "--listen",
                           "127.0.0.1:0"])
    rc, d, err = load_json("counter", "--io", io, "--target", f"127.0.0.1:{server.port}",
                           "--ops", 10, "--timeout", "1s")
    assert rc == 1
    assert b"no complete reply within --timeout" in err


def test_counter_duration(serve):
    server = serve("counter", "epoll")
    rc, d, _ = load_json("counter", "--target", f"127.0.0.1:{server.port}", "--connections", 4,
                         "--read-ratio", "1", "--duration", "300ms")
    assert rc == 0 and d["increments"] == 0 and d["count_final"] == d["count_initial"]
    assert 0.25 < d["duration_s"] < 1.5


@pytest.mark.timing  # the achieved rate within 2%
def test_rate_64_connections_at_1mbps_deliver_64mbps_to_a_sink(serve, tmp_path):
    out = tmp_path / "sink.out"
    server = serve("sink", "epoll", "--out", out)
    rc, d, err = load_json("rate", "--target", f"127.0.0.1:{server.port}", "--connections", 64,
                           "--bandwidth", "1Mbps", "--duration", "5s", "--ramp-up", "500ms",
                           timeout=30)
    assert rc == 0, err
    assert d["target_rate"] == 64e6
    assert abs(d["achieved_rate"] - 64e6) / 64e6 < 0.02
    assert d["per_connection_bps"]["min"] > 0.98e6
    # Everything sent reached the sink's file: the server kept up.
    wait_for(lambda: out.stat().st_size == d["bytes_sent"], timeout=10,
             what=f"{d['bytes_sent']} bytes in the sink's file")
    content = out.read_bytes()
    assert content == b"message\n" * (len(content) // 8)


@pytest.mark.timing  # the achieved rate within 5%
def test_rate_msg_rate_and_custom_message(serve, tmp_path):
    out = tmp_path / "sink.out"
    server = serve("sink", "thread", "--out", out)
    rc, d, err = load_json("rate", "--target", f"127.0.0.1:{server.port}", "--connections", 2,
                           "--msg-rate", 200, "--message", "hello\\tworld\\n", "--duration", "1s",
                           "--ramp-up", "0s")
    assert rc == 0, err
    wait_for(lambda: out.stat().st_size == d["bytes_sent"], what="all bytes in the file")
    assert set(out.read_bytes().splitlines()) == {b"hello\tworld"}
    # 2 connections x 200 msg/s x 12 bytes x 8 bits over 1 s.
    assert abs(d["achieved_rate"] - 2 * 200 * 12 * 8) / (2 * 200 * 12 * 8) < 0.05


@pytest.mark.parametrize("args, needle", [
    (["rate", "--bandwidth", "1Mbps"], b"rate needs --duration"),
    (["rate", "--duration", "1s"], b"exactly one of --bandwidth and --msg-rate"),
    (["rate", "--duration", "1s", "--bandwidth", "fast"], b"--bandwidth: expected"),
    (["rate", "--duration", "1s", "--bandwidth", "1Mbps", "--msg-rate", "5"], b"exactly one"),
    (["echo", "--bandwidth", "1Mbps"], b"belong to the rate mode"),
    (["counter", "--read-ratio", "1.5"], b"--read-ratio: expected a number from 0 to 1"),
    (["counter", "--duration", "0s"], b"--duration: expected"),
])
def test_mode_usage_errors(args, needle):
    r = subprocess.run([LOAD, args[0], "--target", "127.0.0.1:1", *args[1:]], capture_output=True,
                       timeout=10)
    assert r.returncode == 2
    assert needle in r.stderr


def test_echo_duration(serve):
    server = serve("echo", "epoll")
    rc, d, _ = load_json("echo", "--target", f"127.0.0.1:{server.port}", "--connections", 4,
                         "--duration", "300ms")
    assert rc == 0 and d["errors"] == 0 and d["messages"] > 0
    assert 0.25 < d["duration_s"] < 1.5


# The mode table: each mode's own flags, as --help must list them, with a
# value each accepts.
MODE_FLAGS = {
    "echo": {"--size": "64"},
    "counter": {"--read-ratio": "0.5"},
    "rate": {"--bandwidth": "1Mbps", "--msg-rate": "10", "--message": "hi", "--ramp-up": "0s",
             "--write-size": "64", "--nodelay": "on", "--pacing": "tcpkali"},
    "http": {"--scenario": "root", "--weights": "root=1", "--users-csv": "users.csv",
             "--think-time": "10ms"},
    "chat": {"--user-prefix": "u", "--password-prefix": "pw-"},
    "handshake": {"--size": "64", "--tls-resume": "off"},
}


def owners(flag: str) -> list[str]:
    """The modes that take flag (--size: echo and handshake)."""
    return [m for m, flags in MODE_FLAGS.items() if flag in flags]


def help_sections():
    """--help as {section title: [flags]}, and the modes it lists."""
    r = subprocess.run([LOAD, "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    sections, title, modes = {}, None, []
    for line in r.stdout.splitlines():
        if line and not line.startswith(" "):
            title = line.rstrip(":")
            sections[title] = []
        elif title == "Modes" and line.strip():
            modes.append(line.split()[0])
        elif line.startswith("  --"):
            sections[title].append(line.split()[0])
    return sections, modes


def test_help_lists_every_mode_with_its_own_flags():
    sections, modes = help_sections()
    assert modes == list(MODE_FLAGS)
    common = next(flags for title, flags in sections.items() if title.startswith("Common options"))
    for mode, flags in MODE_FLAGS.items():
        listed = sections[f"{mode} options"]
        for flag in flags:
            assert flag in listed, (mode, flag)
            assert flag not in common, flag
            others = [m for m in MODE_FLAGS if m != mode and flag in sections[f"{m} options"]]
            assert sorted(others) == sorted(o for o in owners(flag) if o != mode), (flag, others)
    for flag in ["--target", "--connections", "--messages", "--duration", "--rate", "--pipeline",
                 "--threads", "--timeout", "--cpu", "--hist-out", "--json"]:
        assert flag in common


@pytest.mark.parametrize("owner, flag, mode", [
    (owner, flag, mode) for owner, flags in MODE_FLAGS.items() for flag in flags
    for mode in MODE_FLAGS if mode not in owners(flag)])
def test_a_flag_of_another_mode_is_a_usage_error_naming_it_and_its_mode(owner, flag, mode):
    r = subprocess.run([LOAD, mode, "--target", "127.0.0.1:9", flag, MODE_FLAGS[owner][flag]],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r.stderr
    first = r.stderr.splitlines()[0]
    them = owners(flag)
    whose = (f"to the {them[0]} mode, not {mode}" if len(them) == 1
             else f"belongs to the {' and '.join(them)} modes, not {mode}")
    assert flag in first and whose in first, first


@pytest.mark.parametrize("args", [
    ["echo", "--size", "64"],
    ["counter", "--read-ratio", "0.25"],
    ["rate", "--duration", "1s", "--msg-rate", "10", "--message", "hi", "--ramp-up", "0s"],
    ["rate", "--duration", "1s", "--bandwidth", "1Mbps"],
    ["http", "--scenario", "mix", "--weights", "root=1", "--think-time", "10ms"],
    ["chat", "--rate", "10", "--connections", "2", "--user-prefix", "v", "--password-prefix", "x"],
])
def test_a_mode_takes_its_own_flags(args):
    """Past the flags, to the connection: port 9 refuses it (exit 1, not 2)."""
    r = subprocess.run([LOAD, args[0], "--target", "127.0.0.1:9", *args[1:]], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert "Connection refused" in r.stderr


def test_chat_refuses_pipeline():
    r = subprocess.run([LOAD, "chat", "--target", "127.0.0.1:9", "--rate", "10", "--connections",
                        "2", "--pipeline", "2"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "--pipeline belongs to the request/response modes" in r.stderr


def test_a_flag_given_twice_keeps_the_last_value(serve):
    """A mode's flags are parsed like the common ones: the last one wins."""
    server = serve("echo", "epoll")
    rc, d, err = load_json("echo", "--target", f"127.0.0.1:{server.port}", "--size", 8,
                           "--size", 40, "--messages", 5)
    assert rc == 0, err
    assert d["size"] == 40 and d["bytes_sent"] == 5 * 40
