"""`yard rig`: N+1 SSH-reachable hosts on one machine, made of network namespaces.

    yard rig up --load-hosts N [--delay 1ms] [--rate 1gbit] [--state-dir DIR]
    yard rig status [--json] [--state-dir DIR]
    yard rig down [--state-dir DIR]

`up` makes the namespaces yard-rig-server and yard-rig-load1..N, each joined
by a veth pair to a bridge in the namespace yard-rig-net, gives them
198.18.0.1/24 (server) and 198.18.0.(1+i)/24 (load i), runs an OpenSSH
server in each, and writes a hosts file (TOML) for the harness. Nothing is
created in the root namespace: the harness reaches each host's sshd through
a ProxyCommand that enters the host's namespace and relays (`python -m
yard.rig relay NAMESPACE HOST PORT`). See docs/harness.md, "Test rig".

This module uses the standard library only: the relay imports it on every
ssh connection.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import heapq
import ipaddress
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from .cgroup import sweep_orphans

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


# ------------------------------------------------------------ namespaces ---

def list_netns() -> list[str]:
    p = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def rig_namespaces() -> list[str]:
    return sorted(n for n in list_netns() if n.startswith(PREFIX))


def netns_pids(ns: str) -> list[int]:
    p = _run(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in p.stdout.split() if x.isdigit()]


def _alive(pid: int) -> bool:
    """Running (a zombie is dead: it holds no namespace and runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _ns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _rig_sshd_pids(state_dir: Path) -> list[int]:
    """sshd processes started with a config under this state dir, wherever they are."""
    marker = f"{state_dir}/sshd/"
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            c = _cmdline(int(d))
            if "sshd" in c.split(" ", 1)[0] and marker in c and _alive(int(d)):
                out.append(int(d))
    return out


def _prefix_for(ns: str | None) -> list[str]:
    return ["ip", "-n", ns] if ns else ["ip"]


def _addresses_in(prefix: list[str]) -> list[dict]:
    """IPv4 addresses: [{dev, address, prefixlen}] via `ip ... -4 -j addr`."""
    p = _run(prefix + ["-4", "-j", "addr", "show"], check=False)
    out = []
    try:
        links = json.loads(p.stdout or "[]")
    except ValueError:
        return out
    for link in links:
        for ai in link.get("addr_info", []):
            if ai.get("local"):
                out.append({"dev": link.get("ifname", "?"), "address": ai["local"],
                            "prefixlen": ai.get("prefixlen", 32), "peer": ai.get("address")})
    return out


def _conflicts_in(prefix: list[str]) -> list[str]:
    """Addresses in, and routes to prefixes within, 198.18.0.0/15."""
    found = []
    for a in _addresses_in(prefix):
        for addr in filter(None, (a["address"], a["peer"])):
            net = ipaddress.ip_network(f"{addr}/{a['prefixlen']}", strict=False)
            if ipaddress.ip_address(addr) in RIG_NET or (net.prefixlen >= 15 and net.overlaps(RIG_NET)):
                found.append(f"address {addr}/{a['prefixlen']} on {a['dev']}")
                break
    p = _run(prefix + ["-4", "-j", "route", "show", "table", "all"], check=False)
    try:
        routes = json.loads(p.stdout or "[]")
    except ValueError:
        routes = []
    for r in routes:
        dst = r.get("dst")
        if not dst or dst == "default":
            continue
        try:
            net = ipaddress.ip_network(dst, strict=False)
        except ValueError:
            continue
        if net.version != 4 or net.prefixlen < 15 or not net.overlaps(RIG_NET):
            continue
        # The local table's entries for an address already named add nothing.
        if found and r.get("table") == "local":
            continue
        where = f" table {r['table']}" if r.get("table") else ""
        found.append(f"route {r.get('type', 'unicast')} {dst}{where} dev {r.get('dev', '?')}")
    return found


def find_conflicts() -> list[str]:
    """Everything of 198.18.0.0/15 in use: in this (root) namespace, in every named
    namespace, and in the unnamed namespaces of running processes (containers)."""
    out = [f"root namespace: {c}" for c in _conflicts_in(["ip"])]
    seen = {_ns_inode("/proc/self/ns/net")}
    for ns in list_netns():
        ino = _ns_inode(f"/run/netns/{ns}")
        if ino in seen:
            continue
        seen.add(ino)
        out += [f"namespace {ns}: {c}" for c in _conflicts_in(["ip", "-n", ns])]
    nsenter = shutil.which("nsenter")
    for d in sorted(os.listdir("/proc"), key=lambda s: (len(s), s)):
        if not d.isdigit():
            continue
        ino = _ns_inode(f"/proc/{d}/ns/net")
        if ino is None or ino in seen or not nsenter:
            continue
        seen.add(ino)
        try:
            comm = Path(f"/proc/{d}/comm").read_text().strip()
        except OSError:
            comm = "?"
        pre = [nsenter, f"--net=/proc/{d}/ns/net", "--", "ip"]
        out += [f"the namespace of pid {d} ({comm}): {c}" for c in _conflicts_in(pre)]
    return out


def enter_netns(ns: str) -> None:
    """Move this (single-threaded) process into the named network namespace."""
    if "/" in ns or ns in ("", ".", ".."):
        raise RigError(f"bad namespace name {ns!r}")
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"setns into {ns}: {os.strerror(e)}")
    finally:
        os.close(fd)


# ----------------------------------------------------------------- state ---

def load_state(state_dir: Path) -> dict | None:
    try:
        v = json.loads((Path(state_dir) / STATE_FILE).read_text())
        return v if isinstance(v, dict) else {}
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}


def plan_hosts(load_hosts: int, state_dir: Path, cpus: list[int] | None = None) -> list[dict]:
    """The hosts of a rig: server first, then load1..N, each with its namespace,
    address, bridge port, directory and CPUs (server on the first CPU, load
    hosts over the others, wrapping around)."""
    cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    hosts = []
    for i in range(load_hosts + 1):
        name = SERVER if i == 0 else f"load{i}"
        if i == 0 or len(cpus) == 1:
            cpu = cpus[0]
        else:
            cpu = cpus[1 + (i - 1) % (len(cpus) - 1)]
        hosts.append({"name": name, "netns": PREFIX + name,
                      "address": str(SUBNET.network_address + 1 + i), "port": SSH_PORT,
                      "bridge_port": f"v-{name}", "dir": str(state_dir / "hosts" / name),
                      "cpus": [cpu], "sshd_dir": str(state_dir / "sshd" / name)})
    return hosts


def _toml_str(s: str) -> str:
    return json.dumps(str(s), ensure_ascii=False)


def _toml_list(items: list) -> str:
    return "[" + ", ".join(_toml_str(x) if isinstance(x, str) else str(x) for x in items) + "]"


def proxy_command(ns: str) -> str:
    """The ssh ProxyCommand reaching HOST:PORT inside namespace ns from anywhere
    (it names this interpreter and this package's directory: no install needed)."""
    pkg_parent = Path(__file__).resolve().parent.parent
    return (f"/usr/bin/env PYTHONPATH={shlex.quote(str(pkg_parent))} "
            f"{shlex.quote(sys.executable)} -m yard.rig relay {ns} %h %p")


def ssh_options(state_dir: Path, ns: str | None = None) -> list[str]:
    opts = ["-o", f"UserKnownHostsFile={state_dir / 'known_hosts'}",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10",
            "-o", "LogLevel=ERROR"]
    if ns:
        opts += ["-o", f"ProxyCommand={proxy_command(ns)}"]
    return opts


def hosts_toml(state_dir: Path, hosts: list[dict]) -> str:
    lines = ["# written by yard rig up", "[defaults]", 'user = "root"',
             f"identity = {_toml_str(state_dir / 'id_ed25519')}",
             "# a host's ssh_options replace these (each names its host's namespace)",
             f"ssh_options = {_toml_list(ssh_options(state_dir))}"]
    for h in hosts:
        lines += ["", "[server]" if h["name"] == SERVER else "[[load]]",
                  f"name = {_toml_str(h['name'])}",
                  f"ssh = {_toml_str('root@' + h['address'])}",
                  f"port = {h['port']}",
                  f"address = {_toml_str(h['address'])}",
                  f"dir = {_toml_str(h['dir'])}",
                  f"cpus = {_toml_list(h['cpus'])}",
                  f"ssh_options = {_toml_list(ssh_options(state_dir, h['netns']))}"]
    return "\n".join(lines) + "\n"


def read_hosts(hosts_file: Path) -> dict:
    """The hosts file as {defaults, server, load}, each host completed from
    defaults (user, identity, ssh_options)."""
    import tomllib
    v = tomllib.loads(Path(hosts_file).read_text())
    d = v.get("defaults", {})
    def full(h):
        return {"user": d.get("user", "root"), "identity": d.get("identity"),
                "ssh_options": d.get("ssh_options", []), **h}
    return {"defaults": d, "server": full(v["server"]), "load": [full(h) for h in v.get("load", [])]}


def ssh_argv(host: dict, command: str | list[str]) -> list[str]:
    """The ssh command line running command on a host of read_hosts()."""
    argv = ["ssh", "-p", str(host.get("port", SSH_PORT))]
    if host.get("identity"):
        argv += ["-i", host["identity"]]
    argv += list(host.get("ssh_options", []))
    target = host["ssh"] if "@" in host["ssh"] else f"{host['user']}@{host['ssh']}"
    cmd = command if isinstance(command, str) else shlex.join(command)
    return argv + [target, cmd]


def run_on(hosts_file: Path, name: str, command: str | list[str], **kw) -> subprocess.CompletedProcess:
    """Run command on the rig host called name (server, load1, ...) over ssh."""
    hosts = read_hosts(hosts_file)
    by_name = {h["name"]: h for h in [hosts["server"], *hosts["load"]]}
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(ssh_argv(by_name[name], command), **kw)


def sshd_config(h: dict, state_dir: Path) -> str:
    d = Path(h["sshd_dir"])
    return "\n".join([
        f"# yard rig: the sshd of host {h['name']} (namespace {h['netns']})",
        f"ListenAddress {h['address']}",
        f"Port {h['port']}",
        f"HostKey {d / 'ssh_host_ed25519_key'}",
        f"PidFile {d / 'sshd.pid'}",
        f"AuthorizedKeysFile {state_dir / 'authorized_keys'}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "HostbasedAuthentication no",
        "UsePAM no",
        "UseDNS no",
        "StrictModes yes",
        "PermitUserEnvironment no",
        "X11Forwarding no",
        "PrintMotd no",
        "PrintLastLog no",
        # A harness opens many sessions at once.
        "MaxStartups 100:30:200",
        "MaxSessions 100",
        "Subsystem sftp /usr/lib/openssh/sftp-server",
        "LogLevel INFO",
        "",
    ])


# -------------------------------------------------------------------- up ---

class _Builder:
    """Makes a rig step by step, recording each thing in the state file as soon
    as it exists, so that a failure, a signal or `down` can take it away."""

    def __init__(self, state_dir: Path, load_hosts: int, delay_us: int | None,
                 rate_bits: int | None, say):
        self.dir = state_dir
        self.say = say
        self.hosts = plan_hosts(load_hosts, state_dir)
        self.delay_us = delay_us
        self.rate_bits = rate_bits
        self.st = {"version": 1, "complete": False, "step": "start", "state_dir": str(state_dir),
                   "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                   "pid": os.getpid(), "load_hosts": load_hosts,
                   "delay_us": delay_us, "rate_bits": rate_bits,
                   "namespaces": [], "bridge": None, "links": [], "qdiscs": [],
                   "hosts": self.hosts, "keys": {}, "hosts_file": None}
        self.made_dir = False
        self.user_switch = False

    def save(self) -> None:
        if self.made_dir:
            _write_atomic(self.dir / STATE_FILE, json.dumps(self.st, indent=1))

    def step(self, name: str) -> None:
        self.st["step"] = name
        self.save()
        spec = os.environ.get(HOOK_ENV, "")
        action, _, at = spec.partition(":")
        if at != name:
            return
        if action == "fail":
            raise RigError(f"failing at step {name} as {HOOK_ENV} asks")
        if action == "pause":
            self.st["paused"] = name
            self.save()
            end = time.monotonic() + 120
            while time.monotonic() < end:
                time.sleep(0.05)

    def build(self) -> Path:
        d = self.dir
        d.mkdir(mode=0o700, parents=False, exist_ok=True)
        self.made_dir = True
        os.chmod(d, 0o700)
        self.save()
        net_ns = [NET_NS] + [h["netns"] for h in self.hosts]
        for ns in net_ns:
            _run(["ip", "netns", "add", ns])
            self.st["namespaces"].append(ns)
            self.save()
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        self.step("namespaces")

        self.user_switch = bool(self.delay_us) and not netem_available()
        self.st["switch"] = {"delay_us": self.delay_us} if self.user_switch else None
        if self.user_switch:
            self.say("yard rig: this kernel has no netem: the delay is a switch in user space "
                     "(slower than the bridge; fine for tests, not for benchmarks)",
                     file=sys.stderr)
            self.link_by_switch()
        else:
            self.link_by_bridge()
        self.step("links")

        for h in self.hosts:
            self.shape(h)
        self.step("qdiscs")

        self.make_keys()
        self.step("keys")

        if not PRIVSEP_DIR.is_dir():
            PRIVSEP_DIR.mkdir(mode=0o755)
        started = [(h, self.start_sshd(h)) for h in self.hosts]
        for h, launcher in started:
            h["sshd_pid"] = self.wait_sshd(h, launcher)
            self.save()
        self.step("sshd")

        for h in self.hosts:
            Path(h["dir"]).mkdir(mode=0o755, parents=True, exist_ok=True)
            os.chmod(h["dir"], 0o755)
        os.chmod(d / "hosts", 0o755)
        hf = d / HOSTS_FILE
        _write_atomic(hf, hosts_toml(d, self.hosts), 0o644)
        self.st["hosts_file"] = str(hf)
        self.st["complete"] = True
        self.step("done")
        return hf

    def link_by_bridge(self) -> None:
        _run(["ip", "-n", NET_NS, "link", "add", BRIDGE, "type", "bridge"])
        self.st["bridge"] = {"netns": NET_NS, "dev": BRIDGE}
        _run(["ip", "-n", NET_NS, "link", "set", BRIDGE, "up"])
        for h in self.hosts:
            _run(["ip", "-n", NET_NS, "link", "add", h["bridge_port"], "type", "veth",
                  "peer", "name", HOST_DEV, "netns", h["netns"]])
            self.st["links"].append({"netns": NET_NS, "dev": h["bridge_port"],
                                     "peer_netns": h["netns"], "peer_dev": HOST_DEV})
            self.save()
            _run(["ip", "-n", NET_NS, "link", "set", h["bridge_port"], "master", BRIDGE, "up"])
            self.address(h)

    def address(self, h: dict) -> None:
        _run(["ip", "-n", h["netns"], "addr", "add", f"{h['address']}/{SUBNET.prefixlen}",
              "dev", HOST_DEV])
        _run(["ip", "-n", h["netns"], "link", "set", HOST_DEV, "up"])

    def link_by_switch(self) -> None:
        for h in self.hosts:
            _run(["ip", "-n", h["netns"], "tuntap", "add", "dev", HOST_DEV, "mode", "tap"])
            self.st["links"].append({"netns": h["netns"], "dev": HOST_DEV, "kind": "tap"})
            self.save()
            self.address(h)
        log = self.dir / "switch.log"
        with open(log, "wb") as f:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", NET_NS, sys.executable, "-m", "yard.rig", "switch",
                 str(self.delay_us), *[h["netns"] for h in self.hosts]],
                stdin=subprocess.DEVNULL, stdout=f, stderr=f, start_new_session=True,
                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
        self.st["switch"]["pid"] = proc.pid
        self.save()
        end = time.monotonic() + SSHD_READY_SECS
        while SWITCH_READY not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > end:
                tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
                raise RigError(f"the delaying switch did not start (exit {proc.poll()}): {tail}")
            time.sleep(0.02)

    def shape(self, h: dict) -> None:
        """netem delay (and rate) on the host's egress; tbf rate on the bridge's
        egress towards the host, so each link is shaped both ways."""
        specs = []
        if self.user_switch:   # the switch delays; tbf on the host's egress only
            if self.rate_bits:
                specs.append((h["netns"], HOST_DEV, _tbf_args(self.rate_bits)))
        elif self.delay_us:
            spec = ["netem", "delay", f"{self.delay_us}us", "limit", "100000"]
            if self.rate_bits:
                spec += ["rate", f"{self.rate_bits}bit"]
            specs.append((h["netns"], HOST_DEV, spec))
        elif self.rate_bits:
            specs.append((h["netns"], HOST_DEV, _tbf_args(self.rate_bits)))
        if self.rate_bits and not self.user_switch:
            specs.append((NET_NS, h["bridge_port"], _tbf_args(self.rate_bits)))
        for ns, dev, spec in specs:
            p = _run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", *spec], check=False)
            if p.returncode != 0:
                err = (p.stderr or p.stdout).strip()
                if spec[0] == "netem" and "unknown" in err.lower():
                    raise RigError("--delay needs the netem qdisc, which this kernel lacks "
                                   f"(CONFIG_NET_SCH_NETEM; tc says: {err})")
                raise RigError(f"tc qdisc add dev {dev} root {shlex.join(spec)} in {ns} failed: {err}")
            self.st["qdiscs"].append({"netns": ns, "dev": dev, "spec": shlex.join(spec)})
            self.save()

    def make_keys(self) -> None:
        d = self.dir
        ident = d / "id_ed25519"
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "yard-rig", "-f", str(ident)])
        self.st["keys"] = {"identity": str(ident), "public": str(ident) + ".pub",
                           "authorized_keys": str(d / "authorized_keys"),
                           "known_hosts": str(d / "known_hosts")}
        self.save()
        pub = Path(str(ident) + ".pub").read_text().strip()
        _write_atomic(d / "authorized_keys", pub + "\n", 0o600)
        (d / "sshd").mkdir(mode=0o700, exist_ok=True)
        known = []
        for h in self.hosts:
            sd = Path(h["sshd_dir"])
            sd.mkdir(mode=0o700, parents=True, exist_ok=True)
            key = sd / "ssh_host_ed25519_key"
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"yard-rig-{h['name']}",
                  "-f", str(key)])
            kt, kb64 = Path(str(key) + ".pub").read_text().split()[:2]
            known.append(f"{h['address']} {kt} {kb64}")
            _write_atomic(sd / "sshd_config", sshd_config(h, d), 0o600)
        _write_atomic(d / "known_hosts", "\n".join(known) + "\n", 0o644)

    def start_sshd(self, h: dict) -> subprocess.Popen:
        sd = Path(h["sshd_dir"])
        log = open(sd / "sshd.log", "ab")
        try:
            # sshd forks into the background once listening; the launcher exits. nsenter
            # joins the host's network namespace only: `ip netns exec` would also mount a
            # fresh /sys for it, without /sys/fs/cgroup's hierarchies, and every agent on the
            # host would then measure its server by the /proc walk instead of a cgroup.
            return subprocess.Popen(["nsenter", f"--net=/run/netns/{h['netns']}", "--", SSHD,
                                     "-f", str(sd / "sshd_config"), "-E", str(sd / "sshd.log")],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True)
        finally:
            log.close()

    def wait_sshd(self, h: dict, launcher: subprocess.Popen) -> int:
        sd = Path(h["sshd_dir"])
        ready = f"Server listening on {h['address']} port {h['port']}"
        end = time.monotonic() + SSHD_READY_SECS
        while True:
            rc = launcher.poll()
            try:
                pid = int((sd / "sshd.pid").read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid:
                h["sshd_pid"] = pid
                self.save()
            try:
                log = (sd / "sshd.log").read_text(errors="replace")
            except OSError:
                log = ""
            if rc not in (None, 0) or (rc == 0 and pid and not _alive(pid)):
                tail = " | ".join(log.strip().splitlines()[-3:])
                raise RigError(f"sshd of {h['name']} did not start (exit {rc}): {tail}")
            if rc == 0 and pid and _alive(pid) and ready in log:
                return pid
            if time.monotonic() > end:
                if rc is None:
                    launcher.kill()
                    launcher.wait()
                raise RigError(f"sshd of {h['name']} not listening on {h['address']}:{h['port']} "
                               f"after {SSHD_READY_SECS:g} s (log {sd / 'sshd.log'})")
            time.sleep(0.02)


def up(load_hosts: int, delay: str | None = None, rate: str | None = None,
       state_dir: Path | str = DEFAULT_STATE_DIR, say=print) -> Path:
    """Make a rig of 1 server and load_hosts load hosts; returns the hosts file.
    Raises RigError (nothing left behind) when it refuses or fails, Interrupted
    (nothing left behind) on SIGINT/SIGTERM."""
    state_dir = Path(state_dir).absolute()
    _require_root()
    _require_tools()
    if not isinstance(load_hosts, int) or not 1 <= load_hosts <= MAX_LOAD_HOSTS:
        raise RigError(f"--load-hosts {load_hosts}: between 1 and {MAX_LOAD_HOSTS}")
    delay_us = parse_delay(delay) if delay is not None else None
    rate_bits = parse_rate(rate) if rate is not None else None
    _check_state_dir(state_dir)
    if _root_password_locked():
        raise RigError("root's password entry in /etc/shadow is locked ('!...'); sshd without "
                       "PAM refuses a locked account even with a key (unlock it with "
                       "`usermod -p '*' root`, which allows no password login either)")
    with _lock():
        existing = rig_namespaces()
        if existing:
            raise RigError(f"a rig already exists (namespaces {', '.join(existing)}); "
                           "take it down first: yard rig down")
        if (state_dir / STATE_FILE).exists():
            raise RigError(f"a rig already exists ({state_dir / STATE_FILE}); "
                           f"take it down first: yard rig down --state-dir {state_dir}")
        if state_dir.exists() and (not state_dir.is_dir() or any(state_dir.iterdir())):
            raise RigError(f"--state-dir {state_dir} exists and is not an empty directory")
        conflicts = find_conflicts()
        if conflicts:
            raise RigError(f"{RIG_NET} is already in use here: " + "; ".join(conflicts))
        b = _Builder(state_dir, load_hosts, delay_us, rate_bits, say)
        done = []

        def on_signal(signum, frame):
            # Once the rig is complete, a late signal no longer undoes it.
            if not done:
                raise Interrupted(signum)

        with _signals(on_signal):
            try:
                hf = b.build()
                done.append(hf)
                return hf
            except BaseException:
                # Undo, deaf to further signals, then re-raise.
                with _signals(signal.SIG_IGN):
                    try:
                        # Under the lock, with no yard-rig-* namespace before: every
                        # one found is ours (even one made by an `ip` cut short).
                        _teardown(b.st, state_dir, scan=True, remove_dir=b.made_dir)
                    except RigError as e:
                        say(f"yard rig: cleaning up after the failure: {e}", file=sys.stderr)
                raise


# ------------------------------------------------------------------ down ---

def _kill_all(collect, grace: float = KILL_GRACE_SECS, wait: float = KILL_WAIT_SECS) -> list[int]:
    """SIGTERM every pid collect() returns (it is asked again each round, so
    processes started meanwhile are caught), SIGKILL after grace seconds;
    returns every pid signalled. Raises RigError if any survives."""
    start = time.monotonic()
    termed: set[int] = set()
    killed: set[int] = set()
    while True:
        pids = [p for p in collect() if p != os.getpid() and _alive(p)]
        if not pids:
            return sorted(termed | killed)
        now = time.monotonic() - start
        if now > grace + wait:
            raise RigError("processes still running after SIGKILL: " +
                           ", ".join(f"{p} ({_cmdline(p)[:60]})" for p in pids))
        for p in pids:
            sig = signal.SIGKILL if now > grace else signal.SIGTERM
            if (p in killed) if sig == signal.SIGKILL else (p in termed):
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
            (killed if sig == signal.SIGKILL else termed).add(p)
            # Our own children (a test calling up() in-process) must be reaped.
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(p, os.WNOHANG)
        time.sleep(0.02)


def _teardown(st: dict, state_dir: Path, scan: bool, remove_dir: bool = True) -> list[str]:
    """Kill what runs in the rig, delete its namespaces (links, bridge and
    qdiscs go with them) and its state dir. scan: also the yard-rig-*
    namespaces and rig sshds the state does not name."""
    removed = []
    namespaces = list(dict.fromkeys(st.get("namespaces") or []))
    if scan:
        namespaces += [n for n in rig_namespaces() if n not in namespaces]
    present = set(list_netns())
    namespaces = [n for n in namespaces if n in present]

    def collect():
        pids = set()
        for h in st.get("hosts") or []:
            p = h.get("sshd_pid")
            if isinstance(p, int) and f"{state_dir}/sshd/" in _cmdline(p):
                pids.add(p)
        for ns in namespaces:
            pids.update(netns_pids(ns))
        if scan or st.get("hosts"):
            pids.update(_rig_sshd_pids(state_dir))
        return pids

    pids = _kill_all(collect)
    if pids:
        removed.append(f"{len(pids)} process(es) ({', '.join(map(str, pids))})")
    errors = []
    for ns in namespaces:
        p = _run(["ip", "netns", "del", ns], check=False)
        if p.returncode != 0:
            errors.append(f"ip netns del {ns}: {p.stderr.strip()}")
    left = [n for n in namespaces if n in set(list_netns())]
    if left:
        errors.append(f"namespaces remain: {', '.join(left)}")
    gone = [n for n in namespaces if n not in left]
    if gone:
        removed.append(f"namespaces {', '.join(gone)} (with their bridge, veth links and qdiscs)")
    # The agents just killed could not remove their servers' cgroups.
    groups = sweep_orphans()
    if groups:
        removed.append(f"cgroups {', '.join(groups)}")
    if remove_dir and state_dir.exists():
        shutil.rmtree(state_dir)
        removed.append(f"state dir {state_dir} (key pair, host keys, hosts file)")
    if errors:
        raise RigError("; ".join(errors))
    return removed


def down(state_dir: Path | str = DEFAULT_STATE_DIR) -> list[str]:
    """Take the rig down; returns what was removed (empty: there was nothing).
    Works from a missing or partial state file (finds yard-rig-* namespaces)."""
    state_dir = Path(state_dir).absolute()
    _require_root()
    with _lock(), _signals(signal.SIG_IGN):
        return _teardown(load_state(state_dir) or {}, state_dir, scan=True)


# ---------------------------------------------------------------- status ---

def _qdiscs(ns: str, dev: str | None = None) -> list[str]:
    args = ["tc", "-n", ns, "qdisc", "show"] + (["dev", dev] if dev else [])
    p = _run(args, check=False)
    return [" ".join(line.split()).removeprefix("qdisc ") for line in p.stdout.splitlines()
            if line.strip() and " noqueue " not in f" {line} "]


def status(state_dir: Path | str = DEFAULT_STATE_DIR) -> dict:
    """What exists: {"state": "up"|"none"|"partial", "problems": [...], ...}."""
    state_dir = Path(state_dir).absolute()
    st = load_state(state_dir)
    present = set(list_netns())
    found = sorted(n for n in present if n.startswith(PREFIX))
    hosts = (st or {}).get("hosts") or []
    problems = []
    if st is None and not found and not _rig_sshd_pids(state_dir):
        return {"state": "none", "state_dir": str(state_dir), "namespaces": [], "hosts": [],
                "problems": []}
    if st is None:
        problems.append(f"no state file {state_dir / STATE_FILE}")
    elif not st.get("complete"):
        problems.append(f"the state file says `up` did not finish (step {st.get('step')})")
    ns_info = []
    expected = [NET_NS] + [h["netns"] for h in hosts] if hosts else found
    for ns in list(dict.fromkeys(expected + found)):
        info = {"name": ns, "exists": ns in present}
        if ns in present:
            info["addresses"] = [f"{a['address']}/{a['prefixlen']} {a['dev']}"
                                 for a in _addresses_in(["ip", "-n", ns])]
            info["qdiscs"] = _qdiscs(ns)
            info["pids"] = netns_pids(ns)
        elif ns in expected:
            problems.append(f"namespace {ns} is missing")
        if ns not in expected:
            problems.append(f"namespace {ns} is not in the state file")
        ns_info.append(info)
    host_info = []
    for h in hosts:
        pid = h.get("sshd_pid")
        alive = isinstance(pid, int) and _alive(pid) and f"{state_dir}/sshd/" in _cmdline(pid)
        in_ns = alive and _ns_inode(f"/proc/{pid}/ns/net") == _ns_inode(f"/run/netns/{h['netns']}")
        have = h["netns"] in present and any(
            a["address"] == h["address"] for a in _addresses_in(["ip", "-n", h["netns"]]))
        if not alive:
            problems.append(f"sshd of {h['name']} ({pid}) is not running")
        elif not in_ns:
            problems.append(f"sshd of {h['name']} ({pid}) is not in namespace {h['netns']}")
        if h["netns"] in present and not have:
            problems.append(f"{h['name']} lacks its address {h['address']}")
        host_info.append({"name": h["name"], "netns": h["netns"], "address": h["address"],
                          "sshd_pid": pid, "sshd_alive": bool(alive and in_ns), "cpus": h.get("cpus")})
    sw = (st or {}).get("switch")
    if sw and not (isinstance(sw.get("pid"), int) and _alive(sw["pid"])):
        problems.append(f"the delaying switch ({sw.get('pid')}) is not running")
    hf = (st or {}).get("hosts_file")
    if st and st.get("complete") and not (hf and Path(hf).exists()):
        problems.append(f"hosts file {hf} is missing")
    return {"state": "partial" if problems else "up", "state_dir": str(state_dir),
            "hosts_file": hf, "delay_us": (st or {}).get("delay_us"),
            "rate_bits": (st or {}).get("rate_bits"), "switch": sw, "namespaces": ns_info,
            "hosts": host_info, "problems": problems}


STATUS_EXIT = {"up": 0, "none": 1, "partial": 2}


def format_status(s: dict) -> str:
    if s["state"] == "none":
        return f"yard rig: no rig (state dir {s['state_dir']})"
    extra = []
    if s.get("delay_us"):
        extra.append(f"delay {s['delay_us']}us each way" +
                     (f" (user-space switch, pid {s['switch'].get('pid')})" if s.get("switch")
                      else " (netem)"))
    if s.get("rate_bits"):
        extra.append(f"rate {s['rate_bits']}bit")
    out = [f"yard rig: {s['state']}" + (f" ({', '.join(extra)})" if extra else "") +
           f"; state dir {s['state_dir']}" + (f", hosts file {s['hosts_file']}" if s.get("hosts_file") else "")]
    sshd = {h["netns"]: h for h in s["hosts"]}
    for n in s["namespaces"]:
        if not n["exists"]:
            out.append(f"  {n['name']:<18} missing")
            continue
        h = sshd.get(n["name"])
        addrs = [a for a in n["addresses"] if not a.endswith(" lo")]
        line = f"  {n['name']:<18} {', '.join(addrs) or '-':<24}"
        if h:
            line += f" sshd {h['sshd_pid']} {'alive' if h['sshd_alive'] else 'NOT RUNNING'}"
        out.append(line)
        out += [f"  {'':<18} qdisc {q}" for q in n["qdiscs"]]
    out += [f"  problem: {p}" for p in s["problems"]]
    return "\n".join(out)


# ------------------------------------------------------------------ relay ---

def relay(ns: str | None, host: str, port: int) -> int:
    """Pump stdin/stdout <-> a TCP connection to host:port made inside namespace
    ns (ssh's ProxyCommand). Ends when the remote side closes or our reader
    goes away; an end of stdin is passed on as a half-close."""
    try:
        if ns and ns != "-":
            enter_netns(ns)
        s = socket.create_connection((host, port), timeout=15)
    except (OSError, RigError) as e:
        print(f"yard rig relay: cannot reach {host}:{port} in namespace {ns}: {e}", file=sys.stderr)
        return 1
    s.settimeout(None)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fin, fout = sys.stdin.fileno(), sys.stdout.fileno()
    poll = select.poll()
    poll.register(s, select.POLLIN)
    poll.register(fin, select.POLLIN)
    poll.register(fout, 0)          # only POLLERR/POLLHUP: our reader went away
    try:
        while True:
            for fd, ev in poll.poll():
                if fd == fout:
                    return 0
                if fd == s.fileno():
                    data = s.recv(65536)
                    if not data:
                        return 0
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fout, view):]
                elif fd == fin:
                    data = os.read(fin, 65536)
                    if data:
                        s.sendall(data)
                    else:
                        poll.unregister(fin)
                        s.shutdown(socket.SHUT_WR)
    except (BrokenPipeError, ConnectionResetError):
        return 0
    finally:
        s.close()


# ----------------------------------------------------------------- switch ---
# Where the kernel has no netem, --delay is a switch in user space: each host's
# eth0 is a TAP device whose other end this process holds; a frame read from
# one host is written to its destination (learned by source MAC, else every
# other host) D later. One traversal is one link crossing, as with netem on a
# host's egress: a round trip between two hosts gains 2D. It runs in the
# rig's network namespace, so `down` finds and kills it like everything else.

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
SWITCH_READY = "switch ready"


def _open_tap(ns: str, dev: str) -> int:
    enter_netns(ns)
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    ifr = dev.encode().ljust(16, b"\0") + (IFF_TAP | IFF_NO_PI).to_bytes(2, "little")
    fcntl.ioctl(fd, TUNSETIFF, ifr.ljust(40, b"\0"))
    os.set_blocking(fd, False)
    return fd


def switch(delay_us: int, host_namespaces: list[str]) -> int:
    ports = [_open_tap(ns, HOST_DEV) for ns in host_namespaces]
    enter_netns(NET_NS)
    print(SWITCH_READY, flush=True)
    delay = delay_us / 1e6
    where: dict[bytes, int] = {}                    # source MAC -> port
    due: list[tuple[float, int, int, bytes]] = []   # (time, seq, from port, frame)
    seq = 0
    while True:
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, _, src, frame = heapq.heappop(due)
            out = where.get(frame[:6])
            for fd in ([out] if out is not None and out != src else
                       [p for p in ports if p != src]):
                with contextlib.suppress(OSError):  # a full queue drops, as a link would
                    os.write(fd, frame)
        timeout = max(0.0, due[0][0] - now) if due else None
        ready, _, _ = select.select(ports, [], [], timeout)
        now = time.monotonic()
        for fd in ready:
            while True:
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if len(frame) < 14:
                    continue
                where[frame[6:12]] = fd
                heapq.heappush(due, (now + delay, seq, fd, frame))
                seq += 1


def netem_available() -> bool:
    """Whether tc can make a netem qdisc here (probed on the rig's own loopback)."""
    p = _run(["tc", "-n", NET_NS, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1us"],
             check=False)
    if p.returncode != 0:
        return False
    _run(["tc", "-n", NET_NS, "qdisc", "del", "dev", "lo", "root"], check=False)
    return True


# -------------------------------------------------------------------- CLI ---

def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="rig_cmd", required=True)
    u = sub.add_parser("up", help="make the rig: namespaces, bridge, sshds, hosts file")
    u.add_argument("--load-hosts", type=int, required=True, metavar="N",
                   help=f"load hosts besides the server (1..{MAX_LOAD_HOSTS})")
    u.add_argument("--delay", help="one-way delay added on each host's egress, e.g. 1ms: netem, "
                   "or a user-space switch where the kernel has no netem; a round trip between "
                   "two hosts gains twice this")
    u.add_argument("--rate", help="shape each link to this rate, both ways, e.g. 1gbit")
    d = sub.add_parser("down", help="kill everything in the rig, remove its namespaces, keys, state")
    s = sub.add_parser("status", help="what exists; exit 0 up, 1 none, 2 partial")
    s.add_argument("--json", action="store_true", help="machine-readable")
    for sp in (u, d, s):
        sp.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR),
                        help=f"keys, sshd configs, state and hosts file (default {DEFAULT_STATE_DIR})")


def cli(args) -> int:
    err = lambda m: print(f"yard rig: {m}", file=sys.stderr)  # noqa: E731
    try:
        if args.rig_cmd == "up":
            hf = up(args.load_hosts, args.delay, args.rate, args.state_dir,
                    say=lambda *a, **k: print(*a, **{"file": sys.stderr, **k}))
            for h in plan_hosts(args.load_hosts, Path(args.state_dir).absolute()):
                print(f"yard rig: {h['name']:<7} {h['address']:<12} namespace {h['netns']} "
                      f"cpus {','.join(map(str, h['cpus']))}")
            print(hf)
            return 0
        if args.rig_cmd == "down":
            removed = down(args.state_dir)
            print("yard rig: removed " + "; ".join(removed) if removed else "yard rig: nothing to remove")
            return 0
        s = status(args.state_dir)
        print(json.dumps(s, indent=1) if args.json else format_status(s))
        return STATUS_EXIT[s["state"]]
    except Interrupted as e:
        err(f"{e}; removed what it had made")
        return 128 + e.signum
    except RigError as e:
        err(str(e))
        return 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 4 and argv[0] == "relay":
        return relay(argv[1], argv[2], int(argv[3]))
    if len(argv) >= 3 and argv[0] == "switch":
        return switch(int(argv[1]), argv[2:])
    p = argparse.ArgumentParser(prog="python -m yard.rig")
    add_arguments(p)
    return cli(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
