"""Chat under abuse, second round (issue 44): requests that cost the server far more than
they cost the client. A NICK change is one log record however many channels hear it;
output past a bound stops a client's input and closes it past a larger one (lower for
guests); flood control charges what an answer costs; guests hold only a share of the
unregistered-connection slots, and a full table sheds the oldest connections of the
addresses holding the most. Each test asserts the mechanism (records in the log, bytes
held, the refusal, the connections shed), not latencies: those are bench/'s."""

import json
import subprocess

import pytest

from chatlib import CHAT, Irc, accounts_fixture, chat_fixture, login_pass

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture("ana", "bo")
chat = chat_fixture()


def guest(port, nick, source=None):
    c = Irc(port, source=source)
    c.send(f"NICK {nick}", f"USER {nick} 0 * :{nick}")
    return c


def join(c, nick, chan):
    c.send(f"JOIN {chan}")
    c.expect(rf" 366 {nick} {chan} ")


def dump(data):
    r = subprocess.run([CHAT, "log", "dump", "--data", str(data)], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [json.loads(ln) for ln in r.stdout.splitlines()]


@pytest.mark.models(extra=["fork-pair"])
def test_a_nick_change_is_one_record(chat, model):
    """Issue 44's third attack: a guest in 50 channels wrote 50 records per NICK. Now one,
    and each member sharing channels with it hears each change once, in order, even when
    the changes come faster than the members read the log."""
    srv, data = chat(model, "--guests")
    chans = [f"#n{i}" for i in range(12)]
    ana = login_pass(srv.port, "ana", "pw-ana")
    g = guest(srv.port, "gee")
    g.expect(r" 001 gee ")
    other = guest(srv.port, "oth")                   # shares one channel only
    other.expect(r" 001 oth ")
    for ch in chans:
        join(ana, "ana", ch)
    join(other, "oth", chans[5])
    for ch in chans:
        join(g, "gee", ch)
        ana.expect(rf"^:gee!gee@yard JOIN {ch}$")
    other.expect(rf"^:gee!gee@yard JOIN {chans[5]}$")
    nicks = [f"gee{i}" for i in range(20)]
    g.send(*[f"NICK {n}" for n in nicks])            # back to back
    prev = "gee"
    for n in nicks:
        g.expect(rf"^:{prev}!{prev}@yard NICK :{n}$")
        prev = n
    for c in (ana, other):
        c.expect(rf" NICK :{nicks[-1]}$")            # the log is read in order: all told
        c.send("PING :end")
        c.expect(r"PONG yard :end$")
        heard = [ln for ln in c.lines if " NICK :" in ln]
        want, prev = [], "gee"
        for n in nicks:
            want.append(f":{prev}!{prev}@yard NICK :{n}")
            prev = n
        assert heard == want, f"{c is ana and 'ana' or 'oth'} heard {heard}"
    records = [r for r in dump(data) if r["type"] == "nick"]
    assert len(records) == len(nicks), f"{len(records)} nick records for {len(nicks)} changes"
    assert [r["text"] for r in records] == nicks
    for c in (ana, g, other):
        c.close()
