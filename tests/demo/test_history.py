"""history.mutate_corpus: real writes over HTTP, one kind of change per step, deterministic."""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest
from support.paths import PROJECT_ROOT

from taguru_eval.demo import history
from taguru_refserver.serve import running_server

DATA = PROJECT_ROOT / "data"


def _state(url: str) -> dict[str, Any]:
    """What the steps change: revision, source list, edited sources, live associations."""
    with httpx.Client(base_url=url, timeout=30) as client:
        entry = client.get("/contexts/sake").json()["result"]
        sources = client.get("/contexts/sake/sources?limit=1000").json()["result"]["sources"]
        edited = []
        for source in sources:
            first = client.post(
                "/contexts/sake/citations", json={"source": source, "paragraph": 0}
            ).json()["result"]["text"]
            if first.startswith(history.EDIT_NOTE):
                edited.append(source)
        labels = client.get("/contexts/sake/labels?limit=1000").json()["result"]["labels"]
        matches = client.post("/contexts/sake/query", json={"label": labels, "limit": 1000}).json()[
            "result"
        ]["total"]
    return {
        "revision": entry["revision"],
        "sources": sources,
        "edited": edited,
        "associations": matches,
    }


def _walk(steps: int) -> list[dict[str, Any]]:
    with running_server(DATA) as url:
        states = [_state(url)]
        for step in range(1, steps + 1):
            history.mutate_corpus(url, "sake", step)
            states.append(_state(url))
    return states


def test_each_step_changes_the_corpus_the_way_it_says() -> None:
    start, added, edited, removed, repaired = _walk(4)
    assert [history.operation_for(s) for s in range(1, 6)] == [
        "add",
        "edit",
        "remove",
        "repair",
        "add",
    ]
    # add: a mirror source appears, passages and graph revisions move.
    assert set(added["sources"]) - set(start["sources"]) == {"history/step-001.md"}
    assert added["revision"]["passages"] == start["revision"]["passages"] + 1
    assert added["revision"]["graph"] > start["revision"]["graph"]
    assert added["associations"] == start["associations"] + 1  # one new triple; copies accumulate
    # edit: exactly one original source now starts with the editorial note.
    assert len(edited["edited"]) == 1
    assert not edited["edited"][0].startswith(history.HISTORY_PREFIX)
    assert edited["revision"]["passages"] == added["revision"]["passages"] + 1
    # remove: the mirror is retracted and one association with it.
    assert "history/step-001.md" not in removed["sources"]
    assert removed["associations"] < edited["associations"]
    # repair: the edit is undone.
    assert repaired["edited"] == []
    assert repaired["sources"] == start["sources"]
    revisions = [s["revision"] for s in (start, added, edited, removed, repaired)]
    assert all(a != b for a, b in itertools.pairwise(revisions))


def test_same_steps_from_the_same_corpus_give_the_same_history() -> None:
    assert _walk(3) == _walk(3)


def test_steps_start_at_one() -> None:
    with pytest.raises(ValueError, match="start at 1"):
        history.mutate_corpus("http://127.0.0.1:9", "sake", 0)
