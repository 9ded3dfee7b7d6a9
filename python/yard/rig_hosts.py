"""`yard rig` (rig.py): the hosts: the saved state, the plan of hosts
(names, addresses, CPUs), the hosts file, ssh's options and command line,
and each host's sshd configuration.

Standard library only, as rig.py (the relay imports it on every ssh connection).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from .rig_base import PREFIX, SERVER, SSH_PORT, STATE_FILE, SUBNET


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
