"""The test variants' table (tests/variants.py): every row's flags start a
yard-serve that serves, its traits agree with what yard-serve says about its
model and with what the running server shows, and $YARD_MODELS selects by
the rule the sanitizer runs rely on."""

from __future__ import annotations

import json
import os
import subprocess
from functools import lru_cache

import pytest

from conftest import BIN, child_pids, recv_exactly, wait_for
from variants import ALL_MODELS, BY_NAME, TRAITS, VARIANTS, models, selected

# The Makefile's sanitizer runs.
ASAN = "fork,epoll,coro,uring"
TSAN = "thread,reactors,coro,uring"


def listed_models() -> dict[str, dict]:
    r = subprocess.run([BIN / "yard-serve", "--list-models", "--json"], capture_output=True,
                       text=True, timeout=10, check=True)
    return {m["name"]: m for m in json.loads(r.stdout)}


def threads_of(pid: int) -> int:
    """The threads of a process, leaving out the kernel's io_uring workers
    (iou-wrk, iou-sqp), which come and go as the kernel sees fit."""
    n = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
        except OSError:  # ended meanwhile
            continue
        n += not comm.startswith("iou-")
    return n


@lru_cache(maxsize=None)
def tsan_build() -> bool:
    """Whether yard-serve is built with ThreadSanitizer, whose runtime starts
    a thread of its own in every process."""
    return b"__tsan_" in (BIN / "yard-serve").read_bytes()


# --- every row runs -----------------------------------------------------------

@pytest.mark.models(names=list(BY_NAME))
def test_every_variant_serves_and_shows_its_traits(serve, tmp_path, model):
    """The row's flags are accepted and the server answers. While a client is
    connected, a multi_process variant has child processes and the others
    none; a threads variant runs several threads, the others one (with
    echo: chat's log has threads of its own; and not under TSan)."""
    v = BY_NAME[model]
    if "chat_only" in v.traits:
        srv = serve("chat", model, "--data", tmp_path, "--server-name", "yard")
        msg, want = b"PING :variant\r\n", b":yard PONG yard :variant\r\n"
    else:
        srv = serve("echo", model)
        msg, want = b"variant \xe2\x9c\x93", b"variant \xe2\x9c\x93"
    with srv.connect() as s:
        s.sendall(msg)
        assert recv_exactly(s, len(want)) == want
        if "multi_process" in v.traits:
            wait_for(lambda: child_pids(srv.proc.pid), what="the server's child processes")
        else:
            assert child_pids(srv.proc.pid) == []
        if "chat_only" not in v.traits and not tsan_build():
            assert (threads_of(srv.proc.pid) > 1) == ("threads" in v.traits), \
                threads_of(srv.proc.pid)
    assert srv.stop() == 0, srv.stderr()


# --- the traits say what yard-serve says ---------------------------------------

def test_every_model_has_its_plain_variant_in_the_default_sweep():
    """A model added to yard-serve is tested once it has its row."""
    assert models("plain", yard_models=None) == list(listed_models())
    for v in VARIANTS:
        assert ("plain" in v.traits) == (v.name == v.model), v.name
        assert v.default or "plain" not in v.traits, v.name
        assert v.model in listed_models(), v.name


def test_traits_agree_with_the_models_declarations():
    """The traits that come from the model follow yard-serve --list-models
    --json; those that come from a flag follow the flag."""
    listed = listed_models()
    for v in VARIANTS:
        m, t = listed[v.model], v.traits
        declared = m["traits"]
        options = {o["flag"] for o in m["options"]}
        assert ("loop" in t) == declared["event_based"], v.name
        assert ("completion" in t) == declared["completion_based"], v.name
        assert ("readiness" in t) == (declared["event_based"]
                                      and not declared["completion_based"]), v.name
        assert ("coroutine" in t) == declared["lightweight_threads"], v.name
        assert ("blocking" in t) == (not declared["event_based"]
                                     and not declared["lightweight_threads"]), v.name
        assert ("multi_process" in t) == (declared["multi_process"]
                                          or "--procs" in v.flags), v.name
        assert ("offload" in t) == ("--offload-threads" in options), v.name
        assert ("poll" in t) == ("poll" in v.flags and "--poller" in options), v.name
        assert ("chat_only" in t) == ("--pair" in v.flags), v.name
        # A multi-threaded model's, unless the flags leave each process one
        # thread: --procs, or uring's one ring on the main thread.
        one_thread = "--procs" in v.flags or (v.model, v.flags) == ("uring", ("--workers", "1"))
        assert ("threads" in t) == (declared["multi_threaded"] and not one_thread), v.name
        assert t <= set(TRAITS), v.name


def test_traits_select_what_they_say():
    sel = {trait: models(trait, yard_models=None) for trait in TRAITS}
    assert sel["blocking"] == ["fork", "thread"]
    assert sel["loop"] == ["epoll", "epoll-poll", "reactors", "reactors-procs", "uring"]
    assert sel["readiness"] == ["epoll", "epoll-poll", "reactors", "reactors-procs"]
    assert sel["completion"] == ["uring"]
    assert sel["coroutine"] == ["coro"]
    assert sel["multi_process"] == ["fork", "reactors-procs"]
    assert sel["poll"] == ["epoll-poll"]
    assert sel["plain"] == ["fork", "thread", "epoll", "reactors", "coro", "uring"]
    # The TSan run's models are the ones with threads.
    assert ",".join(sel["threads"]) == TSAN
    assert sel["chat_only"] == []  # fork-pair is an extra: asked for by name
    assert models("multi_process", extra=["fork-pair"], yard_models=None) == [
        "fork", "fork-pair", "reactors-procs"]
    # Several traits: every one; exclude: a trait or a name.
    assert models("loop", "threads", yard_models=None) == ["reactors", "uring"]
    assert models("plain", "offload", yard_models=None) == ["epoll", "reactors", "coro", "uring"]
    assert models(exclude=["multi_process", "poll"], extra=["coro-1", "uring-1"],
                  yard_models=None) == ["thread", "epoll", "reactors", "coro", "coro-1", "uring",
                                        "uring-1"]
    assert models(exclude=["epoll-poll", "blocking"], yard_models=None) == [
        "epoll", "reactors", "reactors-procs", "coro", "uring"]
    # names: default or extra variants, in the table's order.
    assert models(names=["uring-1", "epoll", "fork-pair"], yard_models=None) == [
        "fork-pair", "epoll", "uring-1"]


@pytest.mark.parametrize("traits, kwargs, error", [
    (["loops"], {}, "unknown trait 'loops'"),
    ([], {"exclude": ["epol"]}, "unknown trait or variant 'epol'"),
    ([], {"names": ["epoll-pol"]}, "no test variant 'epoll-pol'"),
    ([], {"extra": ["epoll-poll"]}, "epoll-poll is in the default sweep already"),
    ([], {"names": ["epoll"], "extra": ["coro-1"]}, "extra= adds nothing"),
], ids=["trait", "exclude", "names", "extra", "names-and-extra"])
def test_a_misspelt_selection_is_an_error(traits, kwargs, error):
    """Not an empty or a full selection that would pass unnoticed."""
    with pytest.raises((ValueError, KeyError), match=error):
        models(*traits, **kwargs, yard_models=None)


# --- $YARD_MODELS ---------------------------------------------------------------

def test_yard_models_unset_selects_the_default_sweep():
    assert models(yard_models=None) == ALL_MODELS == [
        "fork", "thread", "epoll", "epoll-poll", "reactors", "reactors-procs", "coro", "uring"]
    assert models(extra=["fork-pair", "reactors-poll", "coro-1", "uring-1"],
                  yard_models=None) == [v.name for v in VARIANTS]
    assert models(yard_models="") == []


def test_yard_models_selects_a_default_variant_by_its_name():
    assert models(yard_models=ASAN) == ["fork", "epoll", "coro", "uring"]
    assert models(yard_models=TSAN) == ["thread", "reactors", "coro", "uring"]
    assert models(yard_models="epoll-poll, reactors-procs") == ["epoll-poll", "reactors-procs"]
    for v in VARIANTS:
        if v.default:
            assert selected(v.name, v.name)
            others = ",".join(m for m in ALL_MODELS if m != v.name)
            assert not selected(v.name, others), v.name


def test_yard_models_selects_an_extra_variant_by_its_model():
    for v in VARIANTS:
        if not v.default:
            assert selected(v.name, v.model), v.name
            assert not selected(v.name, ",".join(m for m in ALL_MODELS if m != v.model))
    assert models(extra=["fork-pair"], yard_models=ASAN) == ["fork", "fork-pair", "epoll",
                                                              "coro", "uring"]
    assert models(extra=["fork-pair"], yard_models=TSAN) == ["thread", "reactors", "coro", "uring"]
    assert models("poll", extra=["reactors-poll"], yard_models=TSAN) == ["reactors-poll"]
    assert models(names=["coro-1", "uring-1"], yard_models="coro") == ["coro-1"]


def test_by_model_selects_every_variant_by_its_model():
    """As the poll tests do: epoll-poll where epoll is tested (the ASan run)."""
    poll = {"extra": ["reactors-poll"], "by_model": True}
    assert models("poll", **poll, yard_models=ASAN) == ["epoll-poll"]
    assert models("poll", **poll, yard_models=TSAN) == ["reactors-poll"]
    assert models("poll", **poll, yard_models=None) == ["epoll-poll", "reactors-poll"]
    assert models("poll", **poll, yard_models="epoll-poll") == []


@pytest.mark.parametrize("value, error", [
    ("fork,epol", "unknown model 'epol'"),
    ("uring-1", "uring-1 is an extra variant"),
], ids=["unknown", "extra"])
def test_a_yard_models_name_outside_the_default_sweep_is_an_error(value, error):
    """A typo would drop its model's tests without a word."""
    with pytest.raises(ValueError, match=error):
        models(yard_models=value)


# --- the marker ---------------------------------------------------------------

@pytest.mark.models("completion", extra=["uring-1"])
def test_the_marker_parametrizes_model(request, model):
    """The marker's selection, as models() makes it, names the test ids."""
    assert model in models("completion", extra=["uring-1"])
    assert request.node.name == f"test_the_marker_parametrizes_model[{model}]"
