"""CHATHISTORY (IRCv3 draft/chathistory) under every model: LATEST, BEFORE, AFTER, AROUND
and BETWEEN by msgid and by timestamp, TARGETS, served from the log through its index, in a
chathistory batch; private conversations; members only; the errors; after a restart; and
a channel's events with draft/event-playback."""

import re
import subprocess
import time

import pytest

from chatlib import CHAT, accounts_fixture, chat_fixture, login_pass, login_sasl

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture("ana", "bo", "cy")
chat = chat_fixture()
CAPS = "sasl batch message-tags server-time draft/chathistory"


def history(c, nick, *args):
    """Send CHATHISTORY args; the texts of the batch that answers it, and their msgids."""
    c.send("CHATHISTORY " + " ".join(str(a) for a in args))
    ref = c.expect(rf"^:yard BATCH \+(\S+) chathistory {re.escape(str(args[1]))}$").group(1)
    texts, ids = [], []
    while True:
        m = c.expect(rf"^(?:@\S+ )?:yard BATCH -{ref}$|^@(\S+) :\S+ (?:PRIVMSG|NOTICE) \S+ :(.*)$")
        if m.group(0).startswith(":yard BATCH"):
            return texts, ids
        tags = dict(t.split("=", 1) for t in m.group(1).split(";"))
        assert tags["batch"] == ref
        texts.append(m.group(2))
        ids.append(int(tags["msgid"]))


def targets(c, t1, t2, limit):
    """CHATHISTORY TARGETS: the names in the batch that answers it, in order."""
    c.send(f"CHATHISTORY TARGETS {t1} {t2} {limit}")
    ref = c.expect(r"^:yard BATCH \+(\S+) draft/chathistory-targets$").group(1)
    names = []
    while True:
        m = c.expect(rf"^:yard BATCH -{ref}$|^@batch={ref} :yard CHATHISTORY TARGETS (\S+) "
                     r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        if m.group(0).startswith(":yard BATCH"):
            return names
        names.append(m.group(1))


@pytest.mark.models(extra=["fork-pair"])
def test_chathistory(chat, model):
    srv, data = chat(model)
    ana = login_pass(srv.port, "ana", "pw-ana")
    bo = login_sasl(srv.port, "bo", "pw-bo", caps=CAPS)
    cy = login_sasl(srv.port, "cy", "pw-cy", caps=CAPS)
    for c, nick in ((ana, "ana"), (bo, "bo")):
        c.send("JOIN #h")
        c.expect(rf" 366 {nick} #h ")
    ana.send(*[f"PRIVMSG #h :m{k} ✨" for k in range(20)], "PRIVMSG bo :dm to bo",
             "PING sent")
    ana.expect(r" PONG yard :sent$")
    bo.send("PRIVMSG ana :dm to ana 🙂", "PING sent")
    bo.expect(r" PONG yard :sent$")

    texts, ids = history(bo, "bo", "LATEST", "#H", "*", 5)  # any spelling of the channel
    assert texts == [f"m{k} ✨" for k in range(15, 20)]
    assert ids == sorted(ids)
    texts, ids = history(bo, "bo", "LATEST", "#h", "*", 20)
    msgid = dict(zip(texts, ids))
    m5, m10, m17 = (msgid[f"m{k} ✨"] for k in (5, 10, 17))
    assert history(bo, "bo", "BEFORE", "#h", f"msgid={m10}", 3)[0] == ["m7 ✨", "m8 ✨", "m9 ✨"]
    assert history(bo, "bo", "AFTER", "#h", f"msgid={m10}", 3)[0] == ["m11 ✨", "m12 ✨",
                                                                       "m13 ✨"]
    assert history(bo, "bo", "AROUND", "#h", f"msgid={m10}", 4)[0] == [
        "m9 ✨", "m10 ✨", "m11 ✨", "m12 ✨"]
    between = [f"m{k} ✨" for k in range(6, 10)]
    assert history(bo, "bo", "BETWEEN", "#h", f"msgid={m5}", f"msgid={m10}", 100)[0] == between
    assert history(bo, "bo", "BETWEEN", "#h", f"msgid={m10}", f"msgid={m5}", 100)[0] == between
    assert history(bo, "bo", "LATEST", "#h", f"msgid={m17}", 10)[0] == ["m18 ✨", "m19 ✨"]
    assert history(bo, "bo", "LATEST", "#h", "timestamp=2000-01-01T00:00:00.000Z", 2)[0] == [
        "m18 ✨", "m19 ✨"]
    assert history(bo, "bo", "BEFORE", "#h", "timestamp=2100-01-01T00:00:00Z", 2)[0] == [
        "m18 ✨", "m19 ✨"]
    assert history(bo, "bo", "AFTER", "#h", "timestamp=2100-01-01T00:00:00Z", 5)[0] == []
    # A private conversation: both directions, for its two ends only.
    assert history(bo, "bo", "LATEST", "ana", "*", 10)[0] == ["dm to bo", "dm to ana 🙂"]
    assert history(cy, "cy", "LATEST", "ana", "*", 10)[0] == []
    # TARGETS: the conversations whose latest message is in a window, each once, oldest
    # of the latest first, the first `limit` of that listing; channels only if one is in
    # them.
    assert targets(bo, "timestamp=2000-01-01T00:00:00Z", "timestamp=2100-01-01T00:00:00Z",
                   10) == ["#h", "ana"]
    assert targets(bo, "timestamp=2100-01-01T00:00:00Z", "timestamp=2000-01-01T00:00:00Z",
                   1) == ["#h"]
    assert targets(cy, "timestamp=2000-01-01T00:00:00Z", "timestamp=2100-01-01T00:00:00Z",
                   10) == []
    assert targets(bo, "timestamp=2000-01-01T00:00:00Z", "timestamp=2001-01-01T00:00:00Z",
                   10) == []
    # Members only; the errors.
    cy.send("CHATHISTORY LATEST #h * 10")
    cy.expect(r"^:yard FAIL CHATHISTORY INVALID_TARGET LATEST #h :")
    for bad in ("LATEST #h * 0", "LATEST #h * x", "BEFORE #h * 5", "AFTER #h msgid=abc 5",
                "BEFORE #h timestamp=yesterday 5", "BETWEEN #h msgid=1 5", "LATEST #h",
                "TARGETS msgid=1 msgid=5 5", "TARGETS timestamp=2000-01-01T00:00:00Z 5"):
        bo.send(f"CHATHISTORY {bad}")
        bo.expect(rf"^:yard FAIL CHATHISTORY INVALID_PARAMS {bad.split()[0]} :")
    bo.send("CHATHISTORY SOMETIME #h * 5")
    bo.expect(r"^:yard FAIL CHATHISTORY UNKNOWN_COMMAND SOMETIME :")
    assert len(history(bo, "bo", "LATEST", "#h", "*", 5000)[0]) == 20  # over 1000: capped
    # Without batch the lines come alone.
    ana.send("CHATHISTORY LATEST #h * 2")
    ana.expect(r"^:ana!ana@yard PRIVMSG #h :m18 ✨$")
    ana.expect(r"^:ana!ana@yard PRIVMSG #h :m19 ✨$")
    assert not any("BATCH" in ln for ln in ana.lines)
    for c in (ana, bo, cy):
        c.close()
    # The log, and its index, after a restart.
    srv.close()
    srv2, _ = chat(model, data=data)
    bo = login_sasl(srv2.port, "bo", "pw-bo", caps=CAPS)
    bo.send("JOIN #h")
    bo.expect(r" 366 bo #h ")
    assert history(bo, "bo", "BEFORE", "#h", f"msgid={m10}", 2)[0] == ["m8 ✨", "m9 ✨"]
    bo.close()


@pytest.mark.models(extra=["fork-pair"])
def test_a_long_history_is_read_at_the_clients_rate(chat, model):
    """A lookup is read in pieces of 4,096 log records (issue 44), each paid as it ends (a
    token per 1,000 records), and the next piece waits for the client's next token. At 20
    tokens a second and 5 at once, a TARGETS over 30,000 messages (8 pieces, 30 tokens)
    answers no sooner than 1.28 s after it is asked, where it was one job, answered at
    once; a PING sent right behind it waits for it, and the answer is whole."""
    first, data = chat(model)  # the accounts, copied into a data directory
    first.close()
    r = subprocess.run([CHAT, "log", "generate", "--data", str(data), "--messages", "30000",
                        "--target", "#g", "--text-bytes", "40"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    srv, _ = chat(model, "--flood-rate", "20", "--flood-burst", "5", data=data)
    c = login_sasl(srv.port, "ana", "pw-ana", caps=CAPS)
    c.send("JOIN #g")
    c.expect(r" 366 ana #g ")
    t0 = time.monotonic()
    c.send("CHATHISTORY TARGETS timestamp=2000-01-01T00:00:00.000Z "
           "timestamp=2100-01-01T00:00:00.000Z 10", "PING :after")
    ref = c.expect(r"^:yard BATCH \+(\S+) draft/chathistory-targets$", timeout=30).group(1)
    took = time.monotonic() - t0
    c.expect(rf"^@batch={ref} :yard CHATHISTORY TARGETS #g ")
    c.expect(rf"^:yard BATCH -{ref}$")
    c.expect(r"PONG yard :after$", timeout=30)  # after the answer: lines are matched in order
    assert took >= 1.0, f"30,000 records read in {took:.2f} s at 20 tokens a second"
    c.close()


def test_log_generate_builds_a_history(chat, tmp_path):
    """yard-chat log generate: N messages straight into the log, which a server then
    serves (CHATHISTORY) and verify accepts; usage errors exit 2."""
    first, data = chat("epoll")  # the accounts, copied into a data directory
    first.close()  # generate writes the log of a server that is not running
    r = subprocess.run([CHAT, "log", "generate", "--data", str(data), "--messages", "5000",
                        "--target", "#g", "--senders", "3", "--text-bytes", "80"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "generated 5000 messages to #g, ids 1..5000"
    v = subprocess.run([CHAT, "log", "verify", "--data", str(data)], capture_output=True,
                       text=True, timeout=60)
    assert v.returncode == 0 and "5000 records" in v.stdout, v.stdout + v.stderr
    for bad in (["--messages", "0"], ["--messages", "-3"], ["--messages", "10", "--senders", "0"],
                ["--messages", "10", "--text-bytes", "6000"], ["--messages", "10", "--from", "3"]):
        b = subprocess.run([CHAT, "log", "generate", "--data", str(data), *bad],
                           capture_output=True, text=True, timeout=30)
        assert b.returncode == 2 and "yard-chat log" in b.stderr, (bad, b.stderr)
    srv, _ = chat("epoll", data=data)
    c = login_sasl(srv.port, "ana", "pw-ana", caps=CAPS)
    c.send("JOIN #g")
    c.expect(r" 366 ana #g ")
    texts, ids = history(c, "ana", "LATEST", "#g", "*", 10)
    assert ids == list(range(4991, 5001))
    assert all(t.startswith(f"generated message {i - 1} ") and len(t) == 80
               for t, i in zip(texts, ids))
    c.close()


def batch_lines(c, target):
    """The lines of the next chathistory batch for target, without their tags."""
    ref = c.expect(rf"^:yard BATCH \+(\S+) chathistory {re.escape(target)}$").group(1)
    out = []
    while True:
        m = c.expect(rf"^(?:@(\S+) )?(:.*)$")
        if m.group(2) == f":yard BATCH -{ref}":
            return out
        assert f"batch={ref}" in (m.group(1) or "").split(";"), m.group(0)
        out.append(m.group(2))


@pytest.mark.models(extra=["fork-pair"])
def test_event_playback(chat, model):
    """draft/event-playback: the channel's JOIN, TOPIC, MODE, KICK, PART and QUIT (made
    by connections in other processes, through the log) come back from CHATHISTORY in the
    log's order; without the capability only the message does."""
    srv, _ = chat(model)
    ana = login_sasl(srv.port, "ana", "pw-ana", caps=CAPS + " draft/event-playback")
    plain = login_sasl(srv.port, "ana", "pw-ana", caps=CAPS)  # ana again, without it
    bo = login_pass(srv.port, "bo", "pw-bo")
    cy = login_pass(srv.port, "cy", "pw-cy")
    ana.send("JOIN #ev")
    ana.expect(r" 366 ana #ev ")
    plain.send("JOIN #ev")
    plain.expect(r" 366 ana #ev ")
    bo.send("JOIN #ev")
    bo.expect(r" 366 bo #ev ")
    ana.expect(r":bo!bo@yard JOIN #ev$")
    ana.send("TOPIC #ev :plans")
    ana.expect(r":ana!ana@yard TOPIC #ev :plans$")
    ana.send("MODE #ev +v bo")
    bo.expect(r":ana!ana@yard MODE #ev \+v bo$")
    bo.send("PRIVMSG #ev :hi")
    ana.expect(r":bo!bo@yard PRIVMSG #ev :hi$")
    ana.send("KICK #ev bo :enough")
    bo.expect(r":ana!ana@yard KICK #ev bo :enough$")
    cy.send("JOIN #ev")
    cy.expect(r" 366 cy #ev ")
    cy.send("PART #ev :later")
    ana.expect(r":cy!cy@yard PART #ev :later$")
    ana.send("CHATHISTORY LATEST #ev * 20")
    assert batch_lines(ana, "#ev") == [
        ":ana!ana@yard JOIN #ev", ":bo!bo@yard JOIN #ev", ":ana!ana@yard TOPIC #ev :plans",
        ":ana!ana@yard MODE #ev +v bo", ":bo!bo@yard PRIVMSG #ev :hi",
        ":ana!ana@yard KICK #ev bo :enough", ":cy!cy@yard JOIN #ev",
        ":cy!cy@yard PART #ev :later"]
    plain.send("CHATHISTORY LATEST #ev * 20")
    assert batch_lines(plain, "#ev") == [":bo!bo@yard PRIVMSG #ev :hi"]
    for c in (ana, plain, bo, cy):
        c.close()
