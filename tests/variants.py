"""The test variants: every way the integration tests run `yard-serve`, in one
table, and the one way a test says which of them it runs.

A variant is a concurrency model with the flags that make it a case worth
testing on its own: `epoll-poll` is the epoll model over poll(2), `coro-1`
the coroutine model on a single worker. Its name is the test id
(`test_x[epoll-poll]`). The default sweep is what a test "under every model"
runs; the extra variants run only where a test asks for them, since they
repeat most of a default variant's code.

A test picks its variants with the marker (implemented in tests/conftest.py),
which parametrizes its `model` argument:

    @pytest.mark.models()                            # the default sweep
    @pytest.mark.models("loop")                      # the event loops among it
    @pytest.mark.models(extra=["fork-pair"])         # ... plus papayaChat's pair
    @pytest.mark.models(names=["epoll", "thread"])   # these two
    @pytest.mark.models(exclude=["multi_process"])   # all but the forking ones

or, where the names are combined with other parameters, with models() and the
same arguments. Either way $YARD_MODELS applies (see selected()), so the
sanitizer runs, which set it, restrict every test alike.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable
from dataclasses import dataclass

# What a trait says about a variant; models("trait") selects by it.
TRAITS: dict[str, str] = {
    "plain": "the model as it is, no flag that changes its code path: one variant per model",
    "blocking": "blocking I/O, one thread of control per connection (fork, thread)",
    "loop": "a non-blocking event loop, readiness (epoll, reactors) or completion (uring)",
    "readiness": "an event loop that waits for readiness (epoll(7) or poll(2))",
    "poll": "the readiness loop over poll(2) instead of epoll (--poller poll)",
    "completion": "a completion-based event loop (io_uring)",
    "coroutine": "coroutines on worker threads (coro)",
    "threads": "the server process runs several threads (what TSan checks)",
    "multi_process": "connections are served by more than one process",
    "offload": "CPU-heavy and disk jobs run off the loop, on an offload pool (--offload-threads)",
    "chat_only": "needs an app that relays news: only --app chat runs it",
}


@dataclass(frozen=True)
class Variant:
    """One row of the table: name (the test id), the --model it runs and the
    flags that follow, its traits, and whether the default sweep runs it."""

    name: str
    model: str
    flags: tuple[str, ...]
    traits: frozenset[str]
    default: bool = True

    @property
    def args(self) -> list[str]:
        """The yard-serve arguments: --model and its flags."""
        return ["--model", self.model, *self.flags]


def _v(name: str, model: str, flags: Iterable[str], traits: Iterable[str],
       default: bool = True) -> Variant:
    return Variant(name, model, tuple(flags), frozenset(traits), default)


# The table. Several workers (--workers 2) wherever a model takes them, so that
# what is shared between workers is tested on a 1- or 2-core machine too.
VARIANTS: tuple[Variant, ...] = (
    _v("fork", "fork", [], ["plain", "blocking", "multi_process"]),
    # papayaChat's RECV and SEND process per client, woken by signals.
    _v("fork-pair", "fork", ["--pair"], ["blocking", "multi_process", "chat_only"],
       default=False),
    _v("thread", "thread", [], ["plain", "blocking", "threads"]),
    _v("epoll", "epoll", [], ["plain", "loop", "readiness", "offload"]),
    # The same loop over poll(2), so that every test of the loop runs both pollers.
    _v("epoll-poll", "epoll", ["--poller", "poll"], ["loop", "readiness", "poll", "offload"]),
    _v("reactors", "reactors", ["--workers", "2"],
       ["plain", "loop", "readiness", "threads", "offload"]),
    _v("reactors-procs", "reactors", ["--procs", "--workers", "2"],
       ["loop", "readiness", "multi_process", "offload"]),
    _v("reactors-poll", "reactors", ["--workers", "2", "--poller", "poll"],
       ["loop", "readiness", "poll", "threads", "offload"], default=False),
    _v("coro", "coro", ["--workers", "2"], ["plain", "coroutine", "threads", "offload"]),
    # One worker thread: one accepting loop (the descriptor-shedding test's case).
    _v("coro-1", "coro", ["--workers", "1"], ["coroutine", "threads", "offload"],
       default=False),
    _v("uring", "uring", ["--workers", "2"], ["plain", "loop", "completion", "threads", "offload"]),
    # One ring, on the main thread: one accepting loop, as coro-1.
    _v("uring-1", "uring", ["--workers", "1"], ["loop", "completion", "offload"], default=False),
)

BY_NAME: dict[str, Variant] = {v.name: v for v in VARIANTS}
# The default sweep: what "every model" means in a test id.
ALL_MODELS: list[str] = [v.name for v in VARIANTS if v.default]


class _Env(enum.Enum):
    """The default of a yard_models parameter: read $YARD_MODELS."""

    READ = "read"


def variant(name: str) -> Variant:
    """The variant of this name; a KeyError that lists the names otherwise."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no test variant {name!r} in tests/variants.py "
                       f"(there are {', '.join(BY_NAME)})") from None


def wanted(yard_models: str | None | _Env = _Env.READ) -> frozenset[str] | None:
    """The names $YARD_MODELS lists (comma-separated), or None when it is
    unset: every variant. An empty value selects none. A name must be one of
    the default sweep's: a mistyped name would otherwise drop its tests
    without a word, and an extra variant runs with its model, not alone."""
    if yard_models is _Env.READ:
        yard_models = os.environ.get("YARD_MODELS")
    if yard_models is None:
        return None
    names = frozenset(m.strip() for m in yard_models.split(",") if m.strip())
    for m in sorted(names - set(ALL_MODELS)):
        if m in BY_NAME:
            raise ValueError(f"YARD_MODELS: {m} is an extra variant: it runs where a test "
                             f"asks for it, when its model {BY_NAME[m].model} is selected")
        raise ValueError(f"YARD_MODELS: unknown model {m!r} (known: {', '.join(ALL_MODELS)})")
    return names


def selected(name: str, yard_models: str | None | _Env = _Env.READ,
             by_model: bool = False) -> bool:
    """Whether $YARD_MODELS lets this variant run: a variant of the default
    sweep when its own name is listed, an extra variant when its model is
    (YARD_MODELS=fork,epoll runs fork-pair where a test asks for it, and not
    reactors-poll). by_model: every variant when its model is listed."""
    v = variant(name)
    names = wanted(yard_models)
    return names is None or (v.model if by_model or not v.default else v.name) in names


def _check_words(words: Iterable[str], what: str, allow_names: bool) -> None:
    """A misspelt trait or name would select nothing, or everything, silently."""
    for w in words:
        if w not in TRAITS and not (allow_names and w in BY_NAME):
            known = list(TRAITS) + (list(BY_NAME) if allow_names else [])
            raise ValueError(f"{what}: unknown {'trait or variant' if allow_names else 'trait'} "
                             f"{w!r} (known: {', '.join(known)})")


def models(*traits: str, names: Iterable[str] | None = None, extra: Iterable[str] = (),
           exclude: Iterable[str] = (), by_model: bool = False,
           yard_models: str | None | _Env = _Env.READ) -> list[str]:
    """The variant names a test runs, in table order, as selected() allows.

    traits: a variant must have every one.
    names: these variants (default or extra) instead of the default sweep;
        where a test wants particular models for a reason no trait says.
    extra: extra variants run besides the default sweep (fork-pair in the chat
        tests, coro-1 and uring-1 where one worker is a case of its own).
    exclude: variant names or traits that take a variant out.
    by_model: $YARD_MODELS selects the variants by their model, as it does the
        extra ones, for a test of what a variant adds to its model: the poll
        tests run epoll-poll wherever epoll is tested (the ASan run's only
        test of the poll backend).
    yard_models: the value of $YARD_MODELS to filter by (None: unset);
        by default the environment's.
    """
    named, extras, dropped = list(names or []), list(extra), set(exclude)
    _check_words(traits, "models()", allow_names=False)
    _check_words(dropped, "models(exclude=)", allow_names=True)
    for n in named + extras:
        variant(n)
    for n in extras:
        if BY_NAME[n].default:
            raise ValueError(f"models(extra=): {n} is in the default sweep already")
    if names is not None and extras:
        raise ValueError("models(): names= already says which variants; extra= adds nothing")
    pool = set(named) if names is not None else set(ALL_MODELS) | set(extras)
    return [v.name for v in VARIANTS
            if v.name in pool and v.traits >= set(traits)
            and v.name not in dropped and not v.traits & dropped
            and selected(v.name, yard_models, by_model)]
