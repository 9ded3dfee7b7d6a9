"""The report's feature table has a row for each reference peer a run compared
(issue 25: the Elixir peer's row), and none for peers it did not."""

import harness_paths  # noqa: F401
from yard.report import _feature_table, peer_rows


def test_peer_rows_follow_the_experiments():
    rows = peer_rows([{"alternatives": ["epoll", "go", "node-cluster"]},
                      {"alternatives": ["elixir", "erlang"]}])
    assert [r["name"] for r in rows] == ["go", "node", "erlang", "elixir"]
    assert peer_rows([{"alternatives": ["epoll", "coro"]}]) == []
    elixir = next(r for r in rows if r["name"] == "elixir")
    assert elixir["traits"]["lightweight_threads"] is True
    assert "ETS" in elixir["traits"]["shared_state"]
    assert "supervisor" in elixir["traits"]["supervision"].lower()
    html = _feature_table([{"name": "epoll", "summary": "one loop",
                            "traits": {"event_based": True}}] + rows)
    assert "<b>elixir</b>" in html and "preemptive scheduler" in html


def test_rust_runtimes_are_rows_of_their_own():
    """The Rust peer's two runtimes are different paradigms (coro's and uring's):
    each has its row, shown only when a run compared it."""
    rows = peer_rows([{"alternatives": ["coro", "rust-tokio"]}])
    assert [r["name"] for r in rows] == ["rust-tokio"]
    rows = peer_rows([{"alternatives": ["uring", "rust-monoio", "rust-tokio", "go"]}])
    assert [r["name"] for r in rows] == ["go", "rust-tokio", "rust-monoio"]
    monoio = rows[2]["traits"]
    assert monoio["completion_based"] is True and rows[1]["traits"]["completion_based"] is False


def test_an_extra_that_needs_an_unavailable_model_is_skipped_with_its_reason():
    """rust-monoio says needs = "uring": where yard-serve reports uring unavailable
    (io_uring refused), it is taken out with that reason, like uring itself."""
    from pathlib import Path
    from yard.cli import skip_unavailable
    from yard.experiment import load_experiment
    repo = Path(__file__).resolve().parents[2]
    e = load_experiment(repo / "experiments" / "eve_echo.toml", ["epoll", "uring"])
    assert next(a for a in e.alternatives if a.label == "rust-monoio").needs == "uring"
    said = []
    skipped = skip_unavailable([e], [{"name": "epoll", "available": True},
                                     {"name": "uring", "available": False,
                                      "unavailable_reason": "io_uring_setup: EPERM"}],
                               said.append)
    labels = [a.label for a in e.alternatives]
    assert "uring" not in labels and "rust-monoio" not in labels and "rust-tokio" in labels
    assert {s["alternative"] for s in skipped} == {"uring", "rust-monoio"}
    assert any("rust-monoio" in m and "io_uring_setup: EPERM" in m for m in said)
