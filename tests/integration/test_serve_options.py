"""yard-serve's flags come from tables that each app and model declares
(issue 14, point 4): --help, the --list-*-json listings and the usage errors
must all agree with what each app and model accepts."""

import json
import re
import signal
import subprocess

import pytest

from conftest import BIN
from variants import selected

SERVE = BIN / "yard-serve"
SECTION = re.compile(r"^--(app|model) (\w+):$")
FLAG_LINE = re.compile(r"^  (?:-\w, )?(--[\w-]+)(?: (\S+))?(?:  |$)")


def run(*args, timeout=10):
    return subprocess.run([SERVE, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def listing(what: str) -> dict:
    r = run(f"--list-{what}", "--json")
    assert r.returncode == 0, r.stderr
    return {x["name"]: x for x in json.loads(r.stdout)}


def help_sections() -> dict:
    """{("engine", ""): {flag: form}, ("app", "rest"): {...}, ("model", "fork"): {...}}"""
    r = run("--help")
    assert r.returncode == 0
    sections, current = {}, ("engine", "")
    sections[current] = {}
    for line in r.stdout.splitlines():
        m = SECTION.match(line)
        if m:
            current = (m.group(1), m.group(2))
            sections[current] = {}
            continue
        m = FLAG_LINE.match(line)
        if m:
            sections[current][m.group(1)] = m.group(2)
    return sections


APPS = listing("apps")
MODELS = listing("models")
SECTIONS = help_sections()
APP_FLAGS = [(app, o) for app, a in APPS.items() for o in a["options"]]
MODEL_FLAGS = [(model, o) for model, m in MODELS.items() for o in m["options"]]
# The flags that start a server under their model run where $YARD_MODELS selects
# that model (tests/variants.py); the usage errors start none and check every model.
SERVED_MODEL_FLAGS = [(model, o) for model, o in MODEL_FLAGS if selected(model)]


def sample_value(opt: dict, tmp_path) -> list[str]:
    """The flag with a value it must accept: its default, else one that
    fits its form."""
    if opt["type"] == "switch":
        return [opt["flag"]]
    if opt["default"] is not None:
        return [opt["flag"], opt["default"]]
    return [opt["flag"], {"N": "2", "DIR": str(tmp_path), "NAME": "chat.example.org"}[opt["value"]]]


def base_args(app: str, model: str, tmp_path) -> list[str]:
    args = ["--app", app, "--model", model, "--listen", "127.0.0.1:0"]
    if app == "chat":
        args += ["--data", str(tmp_path)]
    return args


def serves(start_server, argv) -> None:
    """The server starts with these flags and stops cleanly."""
    server = start_server([SERVE, *argv])
    assert server.stop(signal.SIGTERM, timeout=10) == 0, server.stderr()


# --- help and listings agree ---------------------------------------------

def test_help_has_a_section_per_app_and_model_listing_its_flags():
    for kind, table in (("app", APPS), ("model", MODELS)):
        for name, entry in table.items():
            listed = {o["flag"]: o["value"] for o in entry["options"]}
            assert SECTIONS[(kind, name)] == listed, (kind, name)


def test_help_shows_each_default():
    out = run("--help").stdout
    for (kind, name), flags in SECTIONS.items():
        if kind == "engine":
            continue
        table = APPS if kind == "app" else MODELS
        for opt in table[name]["options"]:
            block = out[out.index(f"--{kind} {name}:"):]
            block = block[block.index("  " + opt["flag"]):]
            block = block[:block.find("\n  --") if "\n  --" in block else len(block)]
            if opt["default"] is not None:
                assert f"(default {opt['default']})" in " ".join(block.split()), opt


def test_list_apps_json_lists_each_apps_options_with_defaults():
    rest = {o["flag"]: o for o in APPS["rest"]["options"]}
    assert {f: o["default"] for f, o in rest.items()} == {
        "--longpoll-ms": "5000", "--request-timeout-ms": "10000", "--bcrypt-cost": "10",
        "--store-entries": "65536"}
    assert rest["--bcrypt-cost"]["type"] == "integer"
    assert (rest["--bcrypt-cost"]["min"], rest["--bcrypt-cost"]["max"]) == (4, 31)
    counter = {o["flag"]: o for o in APPS["counter"]["options"]}
    assert counter["--counter-sync"]["default"] == "atomic"
    assert counter["--counter-sync"]["choices"] == ["atomic", "perms"]
    chat = {o["flag"]: o for o in APPS["chat"]["options"]}
    assert chat["--data"]["required"] is True and chat["--data"]["default"] is None
    assert chat["--login-failures-per-addr"]["default"] == "30/10m"
    assert chat["--fsync"]["choices"] == ["always", "interval", "never"]
    assert APPS["echo"]["options"] == [] and APPS["sink"]["options"] == []
    for app in APPS.values():
        for opt in app["options"]:
            assert opt["help"], opt
            assert {"flag", "value", "type", "default", "help"} <= set(opt)


def test_list_models_json_keeps_its_old_keys():
    """The harness (python/yard) reads name, summary, flags and traits."""
    expected_flags = {"fork": (False, False), "thread": (False, False),
                      "epoll": (False, False), "reactors": (True, True), "coro": (True, False),
                      "uring": (True, False)}
    for name, (workers, procs) in expected_flags.items():
        m = MODELS[name]
        assert m["flags"] == {"workers": workers, "procs": procs}, name
        assert isinstance(m["summary"], str) and m["summary"]
        assert set(m["traits"]) == {"multi_threaded", "multi_process", "lightweight_threads",
                                    "event_based", "completion_based", "explicit_concurrency",
                                    "shared_state", "ipc",
                                    "error_isolation"}
    assert [o["flag"] for o in MODELS["reactors"]["options"]] == [
        "--workers", "--procs", "--offload-threads", "--poller"]
    poller = MODELS["epoll"]["options"][-1]
    assert (poller["flag"], poller["default"], poller["choices"]) == (
        "--poller", "epoll", ["epoll", "poll"])
    assert [o["flag"] for o in MODELS["fork"]["options"]] == ["--pair"]
    assert MODELS["thread"]["options"] == []


def test_list_apps_json_keeps_its_old_keys():
    for app in APPS.values():
        assert {"name", "summary", "uses_out"} <= set(app)
    assert APPS["sink"]["uses_out"] is True and APPS["echo"]["uses_out"] is False


# --- every declared flag is accepted where it belongs ----------------------

@pytest.mark.parametrize("app,opt", APP_FLAGS, ids=[f"{a}{o['flag']}" for a, o in APP_FLAGS])
def test_every_app_flag_is_accepted_by_its_app(start_server, tmp_path, app, opt):
    assert opt["flag"] in SECTIONS[("app", app)]
    argv = base_args(app, "epoll", tmp_path)
    if opt["flag"] != "--data":
        argv += sample_value(opt, tmp_path)
    if opt["flag"] == "--server-password-required":  # it needs the password set
        subprocess.run([BIN / "yard-chat", "server-password", "set", "--data", tmp_path,
                        "--cost", "4"], input=b"pw\n", check=True, timeout=30)
    serves(start_server, argv)


@pytest.mark.parametrize("model,opt", SERVED_MODEL_FLAGS,
                         ids=[f"{m}{o['flag']}" for m, o in SERVED_MODEL_FLAGS])
def test_every_model_flag_is_accepted_by_its_model(start_server, tmp_path, model, opt):
    assert opt["flag"] in SECTIONS[("model", model)]
    app = "chat" if opt["flag"] == "--pair" else "echo"  # the pair relays news
    serves(start_server, base_args(app, model, tmp_path) + sample_value(opt, tmp_path))


@pytest.mark.parametrize("flag,value", [
    ("--max-conns", "10"), ("--idle-timeout", "30s"), ("--backlog", "64"),
    ("--max-sendq", "64K"), ("--log-level", "warn"), ("--log-level", "info"),
])
def test_engine_flags_apply_to_any_app_and_model(start_server, tmp_path, flag, value):
    assert flag in SECTIONS[("engine", "")]
    serves(start_server, base_args("counter", "thread", tmp_path) + [flag, value])


# --- and refused elsewhere ---------------------------------------------------

@pytest.mark.parametrize("app,opt", APP_FLAGS, ids=[f"{a}{o['flag']}" for a, o in APP_FLAGS])
def test_a_flag_of_another_app_is_a_usage_error(tmp_path, app, opt):
    other = "echo" if app != "echo" else "counter"
    r = run(*base_args(other, "epoll", tmp_path), *sample_value(opt, tmp_path))
    assert r.returncode == 2, r
    assert f"{opt['flag']} applies to --app {app}, not --app {other}" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("model,opt", MODEL_FLAGS,
                         ids=[f"{m}{o['flag']}" for m, o in MODEL_FLAGS])
def test_a_flag_of_another_model_is_a_usage_error(tmp_path, model, opt):
    owners = [m for m, e in MODELS.items() if any(o["flag"] == opt["flag"] for o in e["options"])]
    other = next(m for m in MODELS if m not in owners)
    r = run(*base_args("chat", other, tmp_path), *sample_value(opt, tmp_path))
    assert r.returncode == 2, r
    err = r.stderr
    if opt["flag"] == "--pair":
        assert "--pair is papayaChat's process pair: it needs --model fork" in err
    else:
        assert f"{opt['flag']} has no meaning for --model {other}" in err, err
        assert f"it is a flag of --model {', '.join(owners)}" in err, err


def test_offload_threads_is_refused_by_the_blocking_models():
    """fork and thread run jobs inline: --offload-threads meant nothing to
    them and was silently ignored; now it says so."""
    for model in ("fork", "thread"):
        r = run("--app", "rest", "--model", model, "--offload-threads", "4")
        assert r.returncode == 2
        assert ("--offload-threads has no meaning for --model " + model) in r.stderr


# --- bad values name the flag and the accepted form --------------------------

@pytest.mark.parametrize("args, message", [
    (["--app", "rest", "--model", "epoll", "--bcrypt-cost", "x"],
     "--bcrypt-cost: expected a whole number from 4 to 31, got 'x'"),
    (["--app", "rest", "--model", "epoll", "--bcrypt-cost", "32"],
     "--bcrypt-cost: expected a whole number from 4 to 31, got '32'"),
    (["--app", "rest", "--model", "epoll", "--longpoll-ms", "-1"],
     "--longpoll-ms: expected a whole number of milliseconds from 0 to 86400000, got '-1'"),
    (["--app", "counter", "--model", "epoll", "--counter-sync", "locks"],
     "--counter-sync: expected 'atomic' or 'perms', got 'locks'"),
    (["--app", "chat", "--model", "epoll", "--data", "/nonexistent", "--fsync", "sometimes"],
     "--fsync: expected 'always', 'interval' or 'never', got 'sometimes'"),
    (["--app", "chat", "--model", "epoll", "--data", "/nonexistent", "--retain", "forever"],
     "--retain: expected a duration such as 30d"),
    (["--app", "chat", "--model", "epoll", "--data", "/nonexistent",
      "--login-failures-per-addr", "5"],
     "--login-failures-per-addr: expected N/DURATION such as 10/10m"),
    (["--app", "echo", "--model", "coro", "--workers", "0"],
     "--workers: expected a whole number from 1 to 1024, got '0'"),
    (["--app", "echo", "--model", "epoll", "--offload-threads", "many"],
     "--offload-threads: expected a whole number from 0 to 256, got 'many'"),
    (["--app", "echo", "--model", "epoll", "--max-sendq", "1K"],
     "--max-sendq: expected a whole number of bytes from 4096 to 17179869184"),
    (["--app", "echo", "--model", "epoll", "--log-level", "loud"],
     "--log-level: expected 'error', 'warning', 'info' or 'debug', got 'loud'"),
    (["--app", "echo", "--model", "epoll", "--backlog"], "--backlog needs a value (N)"),
    (["--app", "echo", "--model", "epoll", "--procs=yes"], "--procs takes no value"),
    (["--app", "chat", "--model", "epoll"],
     "--app chat needs --data DIR (accounts, the message log, read positions)"),
])
def test_a_bad_value_names_the_flag_and_the_form(args, message):
    r = run(*args)
    assert r.returncode == 2, r
    assert message in r.stderr, r.stderr
    assert r.stdout == ""


def test_a_flag_nobody_declares_is_unknown():
    r = run("--app", "echo", "--model", "epoll", "--no-such-flag", "1")
    assert r.returncode == 2
    assert "unknown option '--no-such-flag'" in r.stderr
