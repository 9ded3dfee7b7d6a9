"""`yard rig up` (rig.py): the namespaces, links, qdiscs, keys and sshds
made step by step, each step saved in the state so `down` can undo a
partial rig; a failure or a signal removes what was made.

Standard library only, as rig.py (the relay imports it on every ssh connection).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from .rig_base import (
    BRIDGE, DEFAULT_STATE_DIR, HOOK_ENV, HOSTS_FILE, HOST_DEV, Interrupted, MAX_LOAD_HOSTS, NET_NS,
    PRIVSEP_DIR, RIG_NET, RigError, SSHD, SSHD_READY_SECS, STATE_FILE, SUBNET, _check_state_dir,
    _lock, _require_root, _require_tools, _root_password_locked, _run, _signals, _tbf_args,
    _write_atomic, parse_delay, parse_rate
)
from .rig_ns import _alive, find_conflicts, rig_namespaces
from .rig_hosts import hosts_toml, plan_hosts, sshd_config
from .rig_net import SWITCH_READY, netem_available
from .rig_down import _teardown


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
