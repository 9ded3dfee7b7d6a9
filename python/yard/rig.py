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
import json
import sys
from pathlib import Path

from .rig_base import (
    DEFAULT_STATE_DIR, Interrupted, MAX_LOAD_HOSTS, NET_NS, PREFIX, RigError, STATE_FILE, _run
)
from .rig_ns import (
    _addresses_in, _alive, _cmdline, _ns_inode, _rig_sshd_pids, list_netns, netns_pids
)
from .rig_hosts import load_state, plan_hosts
from .rig_net import relay, switch
from .rig_down import down
from .rig_up import up

# The other parts' public names (and the two private ones the tests read),
# here too: `yard.rig` stays the one API (rig.up, rig.down, rig.parse_delay,
# rig.ssh_argv, ...) and `python -m yard.rig` the one entry point.
from .rig_base import (  # noqa: F401
    BRIDGE, CLONE_NEWNET, HOOK_ENV, HOSTS_FILE, HOST_DEV, KILL_GRACE_SECS, KILL_WAIT_SECS,
    LOCK_FILE, PRIVSEP_DIR, RIG_NET, SERVER, SSHD, SSHD_READY_SECS, SSH_PORT, SUBNET, parse_delay,
    parse_rate
)
from .rig_ns import (  # noqa: F401
    enter_netns, find_conflicts, rig_namespaces
)
from .rig_hosts import (  # noqa: F401
    hosts_toml, proxy_command, read_hosts, run_on, ssh_argv, ssh_options, sshd_config
)
from .rig_net import (  # noqa: F401
    IFF_NO_PI, IFF_TAP, SWITCH_READY, TUNSETIFF, netem_available
)


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
