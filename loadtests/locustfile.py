"""The REST study's Locust scenarios, against any server speaking the rest
API (yard-serve --app rest under any model, or a peer in Go/Node/Erlang).

  PasswordTest  set a user's password (bcrypt), then verify it
  UserInfo      store a user's info (JSON), then read it back
  LongPoll      GET /longPoll (the study ran it as its own scenario: name the
                classes to run on the command line to pick scenarios)

Run headless, bounded in users and time, against 127.0.0.1 only:
  locust -f loadtests/locustfile.py --headless -u 20 -r 10 -t 30s \
         --host http://127.0.0.1:8080 PasswordTest UserInfo
Each simulated user works on its own user name, so a response that does not
match what that user stored is a failure, not a race with another user.

Over HTTPS (--host https://..., docs/tls.md) the server's certificate is checked
against the system's CAs, or against YARD_TLS_CA=FILE for a CA of one's own.
"""

from __future__ import annotations

import itertools
import json
import os

from locust import HttpUser, between, task

_ids = itertools.count()
WAIT = float(os.environ.get("YARD_LOCUST_WAIT", "0"))


def _name(prefix: str) -> str:
    return f"{prefix}{os.getpid()}x{next(_ids)}"


class YardUser(HttpUser):
    """What every scenario shares: the wait, and YARD_TLS_CA."""
    abstract = True
    wait_time = between(0, WAIT)

    def on_start(self):
        ca = os.environ.get("YARD_TLS_CA")
        if ca:
            self.client.verify = ca


class PasswordTest(YardUser):
    def on_start(self):
        super().on_start()
        self.user = _name("pw")
        self.password = f"secret-{self.user}"

    @task
    def set_then_verify(self):
        body = json.dumps({"password": self.password})
        with self.client.post(f"/password/set/{self.user}", data=body,
                              name="/password/set/[user]", catch_response=True) as r:
            if r.status_code != 200 or r.text != "OK":
                r.failure(f"set: {r.status_code} {r.text!r}")
                return
        with self.client.post(f"/password/verify/{self.user}", data=body,
                              name="/password/verify/[user]", catch_response=True) as r:
            if r.status_code != 200 or r.text != "OK":
                r.failure(f"verify: {r.status_code} {r.text!r}")


class UserInfo(YardUser):
    def on_start(self):
        super().on_start()
        self.user = _name("info")
        self.n = 0

    @task
    def set_then_get(self):
        self.n += 1
        info = json.dumps({"name": self.user, "visits": self.n})
        with self.client.post(f"/user/set/{self.user}", data=info, name="/user/set/[user]",
                              catch_response=True) as r:
            if r.status_code != 200 or r.text != "OK":
                r.failure(f"set: {r.status_code} {r.text!r}")
                return
        with self.client.get(f"/user/get/{self.user}", name="/user/get/[user]",
                             catch_response=True) as r:
            if r.status_code != 200 or r.text != info:
                r.failure(f"get: {r.status_code} {r.text!r}")


class LongPoll(YardUser):
    @task
    def poll(self):
        with self.client.get("/longPoll", catch_response=True) as r:
            if r.status_code != 200 or r.text != "OK":
                r.failure(f"longPoll: {r.status_code} {r.text!r}")
