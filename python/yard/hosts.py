"""Hosts for distributed runs: the hosts file, SSH to each host, the build check and sync, and
an agent session per host (see yard/agent.py for the protocol).

Only OpenSSH is used to reach a host: `ssh` with the host's destination, port, identity file
and options, in batch mode (never a password prompt; no password is ever read from the file).
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import shlex
import subprocess
import tarfile
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

# What a host needs of this tree: the binaries, the peers as built, and the harness package
# (the agent runs from it). Globs relative to the repository.
SYNC_GLOBS = ["build/bin/*", "python/yard/*.py", "peers/go/run", "peers/go/bin/*",
              "peers/node/run", "peers/node/*.js", "peers/node/package.json",
              "peers/node/lib/**/*", "peers/node/node_modules/**/*", "peers/erlang/run",
              "peers/erlang/USAGE", "peers/erlang/ebin/*",
              "peers/elixir/run", "peers/elixir/USAGE", "peers/elixir/ebin/*",
              "peers/elixir/ebin/.built", "peers/beam_bcrypt/ebin/*", "peers/beam_bcrypt/priv/*"]
CONNECT_TIMEOUT = 10


class HostError(RuntimeError):
    """Something went wrong on one host; the message names it."""


class HostsFileError(ValueError):
    pass


@dataclass
class Host:
    name: str
    ssh: str                      # user@host
    dir: str                      # the tree's copy on that host
    cpus: list[int]
    port: int = 22
    identity: str | None = None
    address: str | None = None    # where the load hosts reach the server
    ssh_options: list[str] = field(default_factory=list)

    def where(self) -> str:
        return f"host {self.name} ({self.ssh})"

    def ssh_argv(self, command: str) -> list[str]:
        argv = ["ssh", "-p", str(self.port), "-o", "BatchMode=yes",
                "-o", f"ConnectTimeout={CONNECT_TIMEOUT}", "-o", "ServerAliveInterval=5",
                "-o", "ServerAliveCountMax=3"]
        if self.identity:
            argv += ["-i", self.identity, "-o", "IdentitiesOnly=yes"]
        return argv + self.ssh_options + [self.ssh, command]

    def run(self, command: str, timeout: float = 60, stdin: bytes | None = None
            ) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(self.ssh_argv(command), input=stdin, capture_output=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HostError(f"{self.where()}: no answer within {timeout:.0f} s") from None

    def in_dir(self, command: str) -> str:
        return f"cd {shlex.quote(self.dir)} && {command}"


@dataclass
class Hosts:
    path: Path
    server: Host
    load: list[Host]

    def all(self) -> list[Host]:
        return [self.server, *self.load]


_HOST_KEYS = {"name", "ssh", "port", "identity", "address", "dir", "cpus", "ssh_options"}
_SECRET = ("password", "passphrase", "secret")


def load_hosts(path: Path) -> Hosts:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise HostsFileError(f"{path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise HostsFileError(f"{path}: not valid TOML: {e}") from None

    def err(where: str, msg: str) -> HostsFileError:
        return HostsFileError(f"{path}: {where}: {msg}")

    for k in data:
        if k not in ("defaults", "server", "load"):
            raise err(k, "unknown table; expected defaults, server and [[load]]")
    defaults = data.get("defaults", {})

    def host(d: dict, where: str, default_name: str) -> Host:
        if not isinstance(d, dict):
            raise err(where, "must be a table")
        merged = {**defaults, **d}
        for k in merged:
            if any(s in k.lower() for s in _SECRET):
                raise err(f"{where}.{k}", "no password or secret belongs in a hosts file; use "
                          "an SSH key (identity) and an agent")
            if k not in _HOST_KEYS and k != "user":
                raise err(f"{where}.{k}", f"unknown field; expected one of {sorted(_HOST_KEYS)}")
        ssh = merged.get("ssh")
        if not isinstance(ssh, str) or not ssh:
            raise err(f"{where}.ssh", "is required: the SSH destination, user@host")
        if "@" not in ssh and isinstance(merged.get("user"), str):
            ssh = f"{merged['user']}@{ssh}"
        port = merged.get("port", 22)
        if not isinstance(port, int) or not 0 < port < 65536:
            raise err(f"{where}.port", "must be a port number")
        cpus = merged.get("cpus", [])
        if not isinstance(cpus, list) or not all(isinstance(c, int) and c >= 0 for c in cpus):
            raise err(f"{where}.cpus", "must be a list of CPU numbers")
        dir_ = merged.get("dir")
        if not isinstance(dir_, str) or not dir_.startswith("/"):
            raise err(f"{where}.dir", "is required: the absolute path of the tree on that host")
        opts = merged.get("ssh_options", [])
        if not isinstance(opts, list) or not all(isinstance(o, str) for o in opts):
            raise err(f"{where}.ssh_options", "must be a list of strings")
        ident = merged.get("identity")
        if ident is not None and not isinstance(ident, str):
            raise err(f"{where}.identity", "must be a path")
        address = merged.get("address") or ssh.rsplit("@", 1)[-1]
        name = merged.get("name") or default_name
        return Host(name=name, ssh=ssh, dir=dir_, cpus=cpus, port=port,
                    identity=os.path.expanduser(ident) if ident else None, address=address,
                    ssh_options=opts)

    if "server" not in data:
        raise err("server", "is required: the host the server runs on")
    server = host(data["server"], "server", "server")
    loads = data.get("load", [])
    if not isinstance(loads, list) or not loads:
        raise err("load", "give at least one [[load]] host")
    load = [host(d, f"load[{i}]", f"load{i + 1}") for i, d in enumerate(loads)]
    names = [h.name for h in [server, *load]]
    if len(set(names)) != len(names):
        raise err("name", f"host names must be unique, got {names}")
    return Hosts(path, server, load)


def on_each(hosts: list[Host], fn):
    """fn(host) for every host at once, each in a thread of its own (each call mostly waits
    on SSH: a connection costs a few hundred milliseconds, so a run over N hosts pays for one,
    not N): the results in the hosts' order; the first exception raised is raised here."""
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
        return list(pool.map(fn, hosts))


# --- the build: what a host must have, checked by hash, copied when it differs -------------

def manifest(repo: Path) -> dict[str, str]:
    """sha256 of every file a host needs, by path relative to the repository."""
    out = {}
    for pattern in SYNC_GLOBS:
        for p in sorted(repo.glob(pattern)):
            if p.is_file() and "__pycache__" not in p.parts:
                out[str(p.relative_to(repo))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def check_build(host: Host, man: dict[str, str], timeout: float = 120) -> list[str]:
    """The files that differ on the host, or are missing there (empty: the same build)."""
    listing = "".join(f"{h}  {p}\n" for p, h in man.items()).encode()
    r = host.run(f"cd {shlex.quote(host.dir)} 2>/dev/null || exit 3; "
                 "sha256sum --quiet -c - 2>/dev/null; exit 0", timeout, stdin=listing)
    if r.returncode == 255:
        raise HostError(f"{host.where()}: unreachable: {r.stderr.decode(errors='replace').strip()}")
    if r.returncode == 3:
        return sorted(man)
    bad = []
    for line in r.stdout.decode(errors="replace").splitlines():
        path = line.rsplit(":", 1)[0].strip()
        if path in man:
            bad.append(path)
    return bad


def sync(host: Host, repo: Path, paths: list[str], timeout: float = 600) -> None:
    """Copy paths (relative to repo) into the host's dir over SSH, as one tar stream."""
    _send_tar(host, f"mkdir -p {shlex.quote(host.dir)} && tar -C {shlex.quote(host.dir)} -xf -",
              [(repo / rel, rel) for rel in paths], timeout, "copying the build")


def copy_dir(host: Host, src: Path, dest: str, timeout: float = 120) -> str:
    """Copy the files of the local directory src into DIR/dest on the host (dest relative to
    the host's dir, replaced whole, private to its user: it may hold keys). Its path there."""
    there = f"{host.dir}/{dest}"
    q = shlex.quote(there)
    cmd = f"rm -rf {q} && mkdir -p -m 700 {q} && tar -C {q} -xf -"
    _send_tar(host, cmd, [(p, p.name) for p in sorted(src.iterdir()) if p.is_file()], timeout,
              f"copying {src.name}")
    return there


def _send_tar(host: Host, command: str, members: list[tuple[Path, str]], timeout: float,
              what: str) -> None:
    """Run command on the host with a tar stream of members (local path, name in the archive)
    on its stdin."""
    with tempfile.TemporaryFile() as errf:
        p = subprocess.Popen(host.ssh_argv(command), stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=errf)
        try:
            with tarfile.open(fileobj=p.stdin, mode="w|") as tar:
                for path, arcname in members:
                    tar.add(str(path), arcname=arcname, recursive=False)
        except BrokenPipeError:
            pass
        finally:
            try:
                p.stdin.close()
            except BrokenPipeError:
                pass
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise HostError(f"{host.where()}: {what} took over {timeout:.0f} s") from None
        errf.seek(0)
        err = errf.read()
    if p.returncode != 0:
        raise HostError(f"{host.where()}: {what} failed (exit {p.returncode}): "
                        f"{err.decode(errors='replace').strip()[-300:]}")


# --- agent sessions -------------------------------------------------------------------------

class Session:
    """The agent on one host, over one SSH connection. Closing stdin ends it: the agent then
    stops whatever it started."""

    def __init__(self, host: Host):
        self.host = host
        cmd = host.in_dir(f"PYTHONPATH={shlex.quote(host.dir + '/python')} "
                          "exec python3 -m yard.agent")
        self.proc = subprocess.Popen(host.ssh_argv(cmd), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.buf = b""
        self.offset_s = 0.0
        self.rtt_s = None
        self.agent_pid: int | None = None

    def _stderr(self) -> str:
        try:
            if self.proc.poll() is None:
                return ""
            return self.proc.stderr.read().decode(errors="replace").strip()[-300:]
        except (OSError, ValueError):
            return ""

    def send(self, msg: dict) -> None:
        try:
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise HostError(f"{self.host.where()}: connection lost "
                            f"({self._why()})") from None

    def _why(self) -> str:
        rc = self.proc.poll()
        err = self._stderr()
        return f"ssh exit {rc}" + (f": {err}" if err else "") if rc is not None else "no answer"

    def receive(self, timeout: float) -> dict:
        return receive_each([self], timeout)[0]

    def _read_some(self) -> None:
        """What the agent has written (select said there is something): HostError at its end."""
        chunk = os.read(self.proc.stdout.fileno(), 65536)
        if not chunk:
            self.proc.wait(timeout=5)
            raise HostError(f"{self.host.where()}: the host went away mid-run ({self._why()})")
        self.buf += chunk

    def _message(self) -> dict | None:
        """The next whole message in the buffer, or None."""
        if b"\n" not in self.buf:
            return None
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            raise HostError(f"{self.host.where()}: the agent said {line[:200]!r}") from None

    def ask(self, msg: dict, timeout: float = 30) -> dict:
        self.send(msg)
        return self.receive(timeout)

    def measure_clock(self, rounds: int = 5) -> None:
        """The host clock's lead on ours (seconds), from the round trip with the least delay:
        the host read its clock about halfway through it."""
        best = None
        for _ in range(rounds):
            t0 = time.time()
            ans = self.ask({"op": "time"})
            t1 = time.time()
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, ans["t"] - (t0 + t1) / 2)
        self.rtt_s, self.offset_s = best
        self.agent_pid = ans.get("pid")

    def hang_up(self) -> None:
        """Close the agent's stdin: it stops what it started and exits (close() waits)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def close(self, timeout: float = 10) -> None:
        self.hang_up()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()


def receive_each(sessions: list[Session], timeout: float) -> list[dict]:
    """The next message of every session, in their order, read as each comes: the first host
    that goes away or answers nonsense raises at once, without waiting out the others (a trial
    whose load host died ends then, not when the other hosts' loads are over)."""
    deadline = time.monotonic() + timeout
    out: list[dict | None] = [s._message() for s in sessions]
    waiting = {s.proc.stdout.fileno(): i for i, s in enumerate(sessions) if out[i] is None}
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            late = ", ".join(sessions[i].host.where() for i in waiting.values())
            raise HostError(f"{late}: no answer within {timeout:.0f} s")
        ready, _, _ = select.select(list(waiting), [], [], left)
        for fd in ready:
            i = waiting[fd]
            sessions[i]._read_some()
            out[i] = sessions[i]._message()
            if out[i] is not None:
                del waiting[fd]
    return out


def close_all(sessions) -> None:
    """Every agent told to stop at once, then each waited for."""
    for s in sessions:
        s.hang_up()
    for s in sessions:
        s.close()
