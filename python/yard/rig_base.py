"""`yard rig` (rig.py): the rig's names and limits, its errors, the values
`--delay` and `--rate` take, and the helpers every part uses: commands run,
files written atomically, what `up` requires, the lock, signals.

Standard library only, as rig.py (the relay imports it on every ssh connection).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path


PREFIX = "yard-rig-"
NET_NS = "yard-rig-net"
SERVER = "server"
BRIDGE = "br0"
HOST_DEV = "eth0"
RIG_NET = ipaddress.ip_network("198.18.0.0/15")
SUBNET = ipaddress.ip_network("198.18.0.0/24")
MAX_LOAD_HOSTS = 253          # 198.18.0.2 .. 198.18.0.254
SSH_PORT = 22
DEFAULT_STATE_DIR = Path("/run/yard-rig")
STATE_FILE = "state.json"
HOSTS_FILE = "hosts.toml"
LOCK_FILE = "/run/yard-rig.lock"
SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = Path("/run/sshd")
# Tests only: "pause:STEP" makes `up` wait at STEP (so a signal can be sent
# there), "fail:STEP" makes it fail there. Steps: namespaces, links, qdiscs,
# keys, sshd, done.
HOOK_ENV = "YARD_RIG_TEST_HOOK"
CLONE_NEWNET = 0x40000000
SSHD_READY_SECS = 10.0
KILL_GRACE_SECS = 3.0
KILL_WAIT_SECS = 5.0


class RigError(Exception):
    """A refusal or a failure, with a message meant for the user."""


class Interrupted(RigError):
    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


# ---------------------------------------------------------------- values ---

_DELAY = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)$")
_RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$")
_RATE_FACTOR = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12,
                "bps": 8, "kbps": 8 * 10**3, "mbps": 8 * 10**6, "gbps": 8 * 10**9,
                "tbps": 8 * 10**12}


def parse_delay(text: str) -> int:
    """A one-way delay such as 1ms, 250us, 0.5ms, 1s -> microseconds (1 us .. 10 s)."""
    m = _DELAY.match(str(text).strip().lower())
    if not m:
        raise RigError(f"bad --delay {text!r}: give a number and a unit, us, ms or s (e.g. 1ms)")
    us = float(m.group(1)) * {"us": 1, "ms": 1000, "s": 1_000_000}[m.group(2)]
    if not 1 <= us <= 10_000_000 or us != int(us):
        raise RigError(f"bad --delay {text!r}: between 1us and 10s, in whole microseconds")
    return int(us)


def parse_rate(text: str) -> int:
    """A link rate as tc writes it (1gbit, 100mbit, 10mbps = bytes) -> bits per second."""
    m = _RATE.match(str(text).strip().lower())
    if not m:
        raise RigError(f"bad --rate {text!r}: give a number and a unit, bit, kbit, mbit, gbit, "
                       "tbit (bits per second) or bps, kbps, mbps, gbps (bytes per second)")
    bits = float(m.group(1)) * _RATE_FACTOR[m.group(2)]
    if not 8_000 <= bits <= 100 * 10**9:
        raise RigError(f"bad --rate {text!r}: between 8kbit and 100gbit")
    return int(bits)


def _tbf_args(bits: int) -> list[str]:
    # Bucket: 4 ms worth of bytes, at least two 64 KiB segments (veth hands
    # tbf GSO packets); queue: 50 ms worth of waiting before drops.
    burst = max(bits // 8 // 250, 2 * 65536 + 3000)
    return ["tbf", "rate", f"{bits}bit", "burst", str(burst), "latency", "50ms"]


# --------------------------------------------------------------- helpers ---

def _run(args: list[str], check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    try:
        p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
    except FileNotFoundError:
        raise RigError(f"{args[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise RigError(f"{shlex.join(args)}: no answer in {timeout:g} s") from None
    if check and p.returncode != 0:
        raise RigError(f"{shlex.join(args)} failed: {(p.stderr or p.stdout).strip()}")
    return p


def _write_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _require_root() -> None:
    if os.geteuid() != 0:
        raise RigError("needs root (it makes network namespaces and runs sshd)")


def _require_tools() -> None:
    need = {"ip": "iproute2", "tc": "iproute2", "nsenter": "util-linux",
            "ssh-keygen": "openssh-client", SSHD: "openssh-server"}
    missing = [f"{tool} (Debian package {pkg})" for tool, pkg in need.items()
               if not shutil.which(tool)]
    if missing:
        raise RigError("missing: " + ", ".join(missing))


def _check_state_dir(state_dir: Path) -> None:
    """sshd's StrictModes rejects an authorized_keys file below a directory that
    others may write to, or that someone but root owns: say so before starting."""
    if not state_dir.is_absolute():
        raise RigError(f"--state-dir {state_dir}: give an absolute path")
    for d in state_dir.parents:
        st = d.stat()
        if st.st_uid != 0 or st.st_mode & 0o022:
            raise RigError(f"--state-dir {state_dir}: {d} is writable by others or not owned by "
                           "root, which sshd's StrictModes refuses (use a path such as /run/yard-rig)")


def _root_password_locked() -> bool:
    """sshd without PAM refuses a locked account ('!' in /etc/shadow), keys or not."""
    try:
        for line in Path("/etc/shadow").read_text().splitlines():
            f = line.split(":")
            if f[0] == "root" and len(f) > 1:
                return f[1].startswith("!")
    except OSError:
        pass
    return False


@contextlib.contextmanager
def _lock():
    """One `up` or `down` at a time on the machine (namespace names are global)."""
    fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RigError(f"another `yard rig up` or `down` is running (lock {LOCK_FILE})") from None
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _signals(handler):
    """SIGINT and SIGTERM go to handler while inside (main thread only)."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
