"""The agent the harness runs on each host of a distributed trial (`python3 -m yard.agent`).

It speaks JSON lines: one request per line on stdin, one answer per line on stdout. Requests:

  {"op": "time"}                          -> {"op": "time", "t": <this host's time.time()>,
                                              "pid": <the agent's>}
  {"op": "serve", "argv": [...], "cpus": [...], "interval": s, "name": "tag"}
                                          -> {"op": "serve", "target": "HOST:PORT"} or
                                             {"op": "serve", "error": "..."}
  {"op": "sample"}                        -> {"op": "sample"}   (the server's sampling starts)
  {"op": "stop"}                          -> {"op": "stop", ...everything measured...}
  {"op": "load", "argv": [...], "cpus": [...], "timeout": s, "hist_log": true|false}
                                          -> {"op": "started", "pgid": n}, then when it ends
                                             {"op": "load", "rc", "stdout", "stderr",
                                              "hist_log_text", "left": [pids]}

Whatever it started runs in its own process group, with the kernel told to kill it if the
agent dies (PR_SET_PDEATHSIG). End of stdin (the harness stopped, or its SSH connection broke)
stops the server and kills a running load, checks that nothing is left, and exits. Standard
library only: the host needs python3 and the synced tree, nothing else.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

from .server import MeasuredServer, die_with_parent


def _say(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def _child_setup(cpus: list[int]):
    def pre() -> None:
        os.setsid()
        die_with_parent()
        if cpus:
            os.sched_setaffinity(0, set(cpus))
    return pre


def _group_alive(pgid: int) -> list[int]:
    """The pids still in process group pgid."""
    left = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    left.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return left


def _kill_group(pgid: int) -> list[int]:
    """SIGKILL the group; the pids that survived 2 s (none, unless something is wrong)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return []
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        left = _group_alive(pgid)
        if not left:
            return []
        time.sleep(0.02)
    return _group_alive(pgid)


class Agent:
    def __init__(self) -> None:
        self.server: MeasuredServer | None = None
        self.stdin = sys.stdin.buffer
        self.pending = b""

    def _line(self, timeout: float | None) -> bytes | None:
        """The next request line; b"" at end of input; None when timeout passed first."""
        while b"\n" not in self.pending:
            r, _, _ = select.select([self.stdin], [], [], timeout)
            if not r:
                return None
            chunk = os.read(self.stdin.fileno(), 65536)
            if not chunk:
                return b""
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line

    def serve(self, req: dict) -> dict:
        if self.server is not None:
            return {"op": "serve", "error": "a server is already running"}
        # The group carries the agent's pid (cgroup.OWNED_NAME): if the agent is killed, the
        # next group made on this host, or `yard rig down`, removes it.
        tag = re.sub(r"[^A-Za-z0-9_.-]", "_", str(req.get("name") or "server"))[:64]
        self.server = MeasuredServer(req["argv"], set(req.get("cpus") or []),
                                     f"yard-{os.getpid()}-{tag}",
                                     float(req.get("interval", 0.5)), orphan_dies=True)
        target = self.server.start()
        if target is None:
            out = self.server.stop()
            self.server = None
            return {"op": "serve", "error": "; ".join(out["problems"]), **out}
        return {"op": "serve", "target": target, "pid": self.server.proc.pid}

    def stop(self) -> dict:
        if self.server is None:
            return {"op": "stop", "error": "no server"}
        out = self.server.stop()
        self.server = None
        return {"op": "stop", **out}

    def load(self, req: dict) -> dict | None:
        """Run the load to its end; None when stdin closed meanwhile (it was killed)."""
        tmp = tempfile.mkdtemp(prefix="yard-agent-")
        log = os.path.join(tmp, "latency.hlog")
        argv = list(req["argv"]) + (["--hist-log", log] if req.get("hist_log") else [])
        out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        timeout = float(req.get("timeout", 600))
        try:
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                try:
                    p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                         preexec_fn=_child_setup(req.get("cpus") or []))
                except OSError as e:
                    return {"op": "load", "rc": None, "stdout": "", "stderr": str(e), "left": []}
            _say({"op": "started", "pgid": p.pid})
            deadline = time.monotonic() + timeout
            rc = None
            while rc is None:
                rc = p.poll()
                if rc is not None:
                    break
                if time.monotonic() > deadline:
                    left = _kill_group(p.pid)
                    p.wait()
                    return {"op": "load", "rc": None, "stdout": "", "left": left,
                            "stderr": f"timed out after {timeout:.0f} s; killed"}
                line = self._line(0.05)
                if line == b"":
                    _kill_group(p.pid)
                    p.wait()
                    return None
                if line is not None and line.strip():
                    self.pending = line + b"\n" + self.pending  # answered after the load
                    time.sleep(0.05)
            left = _kill_group(p.pid)  # anything it started and left behind
            with open(out_path, errors="replace") as f:
                stdout = f.read()
            with open(err_path, errors="replace") as f:
                stderr = f.read()[-4000:]
            text = None
            if req.get("hist_log") and os.path.exists(log):
                with open(log) as f:
                    text = f.read()
            return {"op": "load", "rc": rc, "stdout": stdout, "stderr": stderr,
                    "hist_log_text": text, "left": left}
        finally:
            for f in os.listdir(tmp):
                os.unlink(os.path.join(tmp, f))
            os.rmdir(tmp)

    def run(self) -> int:
        try:
            while True:
                line = self._line(None)
                if not line:
                    return 0
                try:
                    req = json.loads(line)
                    op = req["op"]
                except (ValueError, KeyError, TypeError):
                    _say({"op": "error", "error": f"not a request: {line[:200]!r}"})
                    continue
                if op == "time":
                    _say({"op": "time", "t": time.time(), "pid": os.getpid()})
                elif op == "serve":
                    _say(self.serve(req))
                elif op == "sample":
                    if self.server is not None:
                        self.server.begin_sampling()
                    _say({"op": "sample"})
                elif op == "stop":
                    _say(self.stop())
                elif op == "load":
                    res = self.load(req)
                    if res is None:
                        return 0
                    _say(res)
                else:
                    _say({"op": "error", "error": f"unknown op {op!r}"})
        finally:
            if self.server is not None:
                self.server.stop()


def main() -> int:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    return Agent().run()


if __name__ == "__main__":
    sys.exit(main())
