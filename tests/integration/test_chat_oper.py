"""Server operators in the chat service (issue 40): `yard-chat oper add|list|del` keeps
them in DIR/opers (bcrypt, 0600, the password never on the command line); OPER checks
against that file like a login (464 wrong password, 491 no such operator, both after a
failed login's delay); an operator has +o ('*' in WHO, 313 in WHOIS), KILLs a
connection (the account's other devices stay) and sends WALLOPS to those with +w.
Under every model: KILL and WALLOPS cross processes through the log."""

import contextlib
import os
import signal
import stat
import subprocess
import threading

import pytest

from chatlib import CHAT, accounts_fixture, chat_fixture, login_device, login_pass
from conftest import child_pids, wait_for

pytestmark = pytest.mark.usefixtures("yard_chat_built")

accounts = accounts_fixture("ana", "bo", "cy")
chat = chat_fixture()


def oper(*args, password=None):
    return subprocess.run([CHAT, "oper", *map(str, args)], input=password, capture_output=True,
                          text=True, timeout=30)


def add_oper(data, name, password):
    r = oper("add", name, "--data", data, "--cost", 4, password=password + "\n")
    assert r.returncode == 0, r.stderr


def test_oper_add_list_del(tmp_path):
    data = tmp_path / "data"
    add_oper(data, "root", "s3cret")
    add_oper(data, "admin", "pw")
    r = oper("list", "--data", data)
    assert r.returncode == 0 and r.stdout.split() == ["root", "admin"]
    assert stat.S_IMODE(os.stat(data / "opers").st_mode) == 0o600
    text = (data / "opers").read_text()
    assert "s3cret" not in text and text.startswith("root:$2b$04$")
    assert not (data / "accounts").exists()      # operators are not accounts
    r = oper("add", "ROOT", "--data", data, "--cost", 4, password="x\n")
    assert r.returncode == 1 and "operator 'ROOT' exists" in r.stderr
    r = oper("del", "nobody", "--data", data)
    assert r.returncode == 1 and "no operator 'nobody'" in r.stderr
    r = oper("add", "9lives", "--data", data, password="x\n")
    assert r.returncode == 2 and "not a valid operator name" in r.stderr
    r = oper("add", "dave", "--data", data, password="")
    assert r.returncode == 1 and "expected the password on the first line of stdin" in r.stderr
    assert oper("del", "root", "--data", data).returncode == 0
    assert oper("list", "--data", data).stdout.split() == ["admin"]
    assert oper("list", "--data", tmp_path / "none").stdout == ""


def become_oper(c, nick, name="root", password="pw-root"):
    c.send(f"OPER {name} {password}")
    c.expect(rf"^:{nick}!{nick}@yard MODE {nick} :\+o$")
    c.expect(rf" 381 {nick} :You are now an IRC operator$")


@pytest.mark.models(extra=["fork-pair"])
def test_oper_kill_and_wallops(chat, model):
    srv, data = chat(model)
    add_oper(data, "root", "pw-root")   # read at each OPER: no restart needed
    ana = login_pass(srv.port, "ana", "pw-ana")
    cy = login_pass(srv.port, "cy", "pw-cy")
    laptop = login_device(srv.port, "bo", "laptop")
    phone = login_device(srv.port, "bo", "phone")
    # Not an operator yet: 481; a wrong password 464, an unknown operator 491, and the
    # connection stays.
    ana.send("KILL bo :out", "WALLOPS :hi")
    ana.expect(r" 481 ana :Permission Denied- You're not an IRC operator$")
    ana.expect(r" 481 ana :Permission Denied- You're not an IRC operator$")
    ana.send("OPER root wrong")
    ana.expect(r" 464 ana :Password incorrect$")
    ana.send("OPER nobody pw-root")
    ana.expect(r" 491 ana :No O-lines for your host$")
    become_oper(ana, "ana")
    cy.send("WHO ana", "WHOIS ana")
    cy.expect(r" 352 cy \* ana yard yard ana H\* :0 ana$")
    cy.expect(r" 313 cy ana :is an IRC operator$")
    for c, nick in ((ana, "ana"), (cy, "cy"), (laptop, "bo"), (phone, "bo")):
        c.send("JOIN #k")
        c.expect(rf" 366 {nick} #k ")
    # WALLOPS reaches those with +w only.
    cy.send("MODE cy +w")
    cy.expect(r"^:cy!cy@yard MODE cy :\+w$")
    ana.send("WALLOPS :maintenance at noon")
    cy.expect(r"^:ana!ana@yard WALLOPS :maintenance at noon$")
    # KILL closes bo's newest connection; the laptop stays, so nobody hears a quit.
    ana.send("KILL bo :spam")
    phone.expect(r"^ERROR :Closing Link: Killed \(ana \(spam\)\)$")
    assert phone.wait_closed()
    laptop.send("PRIVMSG #k :still here")
    cy.expect(r"^:bo!bo@yard PRIVMSG #k :still here$")
    ana.send("KILL bo :again")
    laptop.expect(r"^ERROR :Closing Link: Killed \(ana \(again\)\)$")
    assert laptop.wait_closed()
    cy.expect(r"^:bo!bo@yard QUIT :Killed \(ana \(again\)\)$")
    assert not any("WALLOPS" in ln for ln in ana.lines + laptop.lines)
    assert not any("QUIT" in ln for ln in cy.lines[:cy.pos - 1])
    for c in (ana, cy):
        c.close()


def test_a_killed_pair_leaves_before_its_client_sees_the_end(chat):
    """fork --pair: a KILL is relayed in the SEND process, but the client leaves the
    server's tables in RECV (app->close). Its client must not see the end before that:
    under load, test_oper_kill_and_wallops's second device was told as the account's last
    (its QUIT carried the first kill's reason) when the first device's RECV came late.
    Here the RECV process is held stopped while the KILL is relayed, and let go 0.3 s later."""
    srv, data = chat("fork-pair")
    add_oper(data, "root", "pw-root")
    ana = login_pass(srv.port, "ana", "pw-ana")
    become_oper(ana, "ana")
    before = set(child_pids(srv.proc.pid))
    phone = login_device(srv.port, "bo", "phone")
    wait_for(lambda: len(set(child_pids(srv.proc.pid)) - before) == 2,
             what="the phone's RECV and SEND processes")
    halves = set(child_pids(srv.proc.pid)) - before
    # SEND waits for its wake-ups in rt_sigtimedwait; RECV reads the socket.
    wait_for(lambda: sum("sigtimedwait" in wchan(p) for p in halves) == 1,
             what="the SEND process waiting for news")
    recv = next(p for p in halves if "sigtimedwait" not in wchan(p))
    ana.send("LUSERS")
    ana.expect(r" 251 ana :There are 2 users ")
    os.kill(recv, signal.SIGSTOP)
    resume = threading.Timer(0.3, os.kill, (recv, signal.SIGCONT))
    resume.start()
    try:
        ana.send("KILL bo :spam")
        phone.expect(r"^ERROR :Closing Link: Killed \(ana \(spam\)\)$")
        assert phone.wait_closed()
        ana.send("LUSERS")
        ana.expect(r" 251 ana :There are 1 users ")
    finally:
        resume.cancel()
        with contextlib.suppress(ProcessLookupError):   # gone: it did its part
            os.kill(recv, signal.SIGCONT)


def wchan(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return f.read()
    except FileNotFoundError:
        return ""


@pytest.mark.models(names=["epoll", "fork", "reactors"])
def test_oper_survives_a_restart(chat, model):
    srv, data = chat(model)
    add_oper(data, "root", "pw-root")
    ana = login_pass(srv.port, "ana", "pw-ana")
    become_oper(ana, "ana")
    ana.close()
    srv.close()
    srv2, _ = chat(model, data=data)
    cy = login_pass(srv2.port, "cy", "pw-cy")
    become_oper(cy, "cy")
    assert oper("del", "root", "--data", data).returncode == 0
    cy.send("OPER root pw-root")
    cy.expect(r" 491 cy :No O-lines for your host$")
    cy.close()
