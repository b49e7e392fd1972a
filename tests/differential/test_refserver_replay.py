"""The reference server answers this package's requests as taguru 0.9.7 does (issue 41).

Every distinct request ``python -m taguru_eval`` makes in the modes of
``support.differential`` (with this package's own flags; recorded through a proxy
in front of a reference server) is sent again, in the order first seen, to a fresh real taguru and a
fresh reference server holding the same corpora (``populate``, the same write
requests to both). Each pair of answers must agree in status, in every value
(numbers as spelled) and in the key order of every object; only the keys
``support.replay.MASKED`` names are blanked first — the clocks, and taguru's
estimate of its own memory. The write answers of the load are compared the same
way, and so are a few requests the evaluator never makes but a client of the
server does (``EXTRA_REQUESTS``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from support.differential import CONTEXTS, MODES, TOKEN
from support.loopback import Exchange, RecordingProxy
from support.paths import DATA
from support.replay import Answer, Recording, Sent, difference, record_runs, replay
from support.taguru import RealTaguru, populate, require_taguru

from taguru_refserver.serve import running_server

LONG_CUE = "青" * 342  # 1026 UTF-8 bytes: over taguru's 1024-byte resolve cap


def _post(path: str, body: object) -> Sent:
    return Sent("POST", path, "application/json", json.dumps(body, ensure_ascii=False).encode())


WARN_SCHEMA = {
    "schema": 1,
    "mode": "warn",
    "closed_labels": False,
    "types": {"Person": {"is_a": ["Agent"]}, "Agent": {}, "Brewery": {}},
    "relations": {"杜氏": {"domain": ["Brewery"], "range": ["Person"]}},
}

STRICT_SCHEMA = {**WARN_SCHEMA, "mode": "strict"}
ASSOCIATION = {"subject": "s", "label": "l", "object": "o", "weight": 1.0}

EXTRA_REQUESTS: tuple[Sent, ...] = (
    # the directory and contract routes a client reads
    Sent("GET", "/version", None, b""),
    Sent("GET", "/contexts", None, b""),
    Sent("GET", "/contexts?limit=1&after=handbook", None, b""),
    Sent("GET", "/contexts/sake/labels?limit=3", None, b""),
    Sent("GET", "/contexts/sake/aliases?limit=3", None, b""),
    # the cue cap is checked before the context lookup; other refusals
    _post("/contexts/no-such-context/resolve", {"cue": LONG_CUE}),
    _post("/contexts/sake/resolve_label", {"cue": "a" * 1025, "limit": 5}),
    _post("/contexts/sake/query", {}),
    # refusals of what a user's eval file or corpus can carry (nothing is written)
    _post("/contexts/sake/citations", {"source": "s" * 1025, "paragraph": 0}),
    _post("/contexts/sake/citations", {"source": "", "paragraph": 0}),
    _post("/contexts/sake/sources/search", {"query": "蔵", "tags": ["", "t" * 129]}),
    _post("/contexts/sake/sources/search", {"query": "蔵", "tags": ["t" * 129]}),
    _post("/contexts/sake/sources/search", {"query": "蔵", "tags": [f"t{n}" for n in range(33)]}),
    _post("/contexts/no-such-context/sources/search", {"query": "蔵", "tags": ["t"] * 1001}),
    _post("/contexts/no-such-context/sources/search", {"query": "蔵", "since": 5, "until": 5}),
    Sent("GET", "/contexts/sake/sources?limit=2&after=" + "a" * 1033, None, b""),
    _post("/contexts/sake/associations", [ASSOCIATION, {**ASSOCIATION, "weight": 2e6}]),
    _post("/contexts/sake/associations", [{**ASSOCIATION, "weight": 2000000, "source": ""}]),
    _post("/contexts/sake/associations", [{**ASSOCIATION, "subject": "", "label": ""}] * 12),
    _post("/contexts/sake/sources", {"passages": {"": "x", "a.md": "y"}, "tags": {"a.md": [""]}}),
    _post("/contexts/sake/aliases", {"concepts": {"": "青嶺酒造"}}),
    _post("/contexts/sake/aliases", {"labels": {"とうじ": "l" * 1025}}),
    Sent("PUT", "/contexts/" + "c" * 65, None, b""),
    Sent("DELETE", "/contexts/sake/sources", None, b""),
    Sent("PUT", "/health", None, b""),
    Sent("GET", "/contexts/sake/nothing-here?x=1", None, b""),
    Sent(
        "PUT", "/contexts/described", "application/json", b'{"description": "' + b"d" * 4097 + b'"}'
    ),
    # the graph reads taguru's own clients make
    _post("/contexts/sake/activate", {"origins": ["青嶺酒造"], "limit": 3}),
    _post("/contexts/sake/explore", {"origins": ["高瀬"], "limit": 3, "max_depth": 1}),
    _post("/contexts/sake/describe", {"concept": "高瀬"}),
    _post("/contexts/sake/recall", {"cue": "高瀬", "limit": 2}),
    _post("/contexts/sake/sources/lookup", {"sources": ["corpus/water.md", "nope.md"]}),
    _post("/query", {"contexts": ["sake", "handbook"], "subject": "高瀬", "limit": 2}),
    # last, as they write: a schema in warn mode, a write it warns about, typed reads
    Sent("PUT", "/contexts/typed", None, b""),
    Sent("PUT", "/contexts/typed/schema", "application/json", json.dumps(WARN_SCHEMA).encode()),
    _post(
        "/contexts/typed/associations",
        [
            {"subject": "高瀬", "label": "schema:type", "object": "Person", "weight": 1.0},
            {"subject": "高瀬", "label": "杜氏", "object": "個人A", "weight": 1.0},
        ],
    ),
    _post("/contexts/typed/resolve", {"cue": "高瀬"}),
    Sent("PUT", "/contexts/strict", None, b""),
    Sent("PUT", "/contexts/strict/schema", "application/json", json.dumps(STRICT_SCHEMA).encode()),
    _post(
        "/contexts/strict/associations",
        [
            {"subject": "高瀬", "label": "schema:type", "object": "Person", "weight": 1.0},
            {"subject": "高瀬", "label": "杜氏", "object": "個人A", "weight": 1.0},
        ],
    ),
    _post("/contexts/typed/describe", {"concept": "高瀬"}),
    Sent("GET", "/contexts/typed", None, b""),
    Sent("GET", "/contexts/typed/schema", None, b""),
)
"""Requests the evaluator does not make but the claim covers: the directory and
contract routes, refusals of what an eval file or a corpus folder can carry (the
messages taguru 0.9.7 words), the reads taguru's own clients make, and a
schema's answers (the success envelope's ``issues``, resolve's ``types``, a
strict refusal)."""

ROUTES_THE_EVALUATOR_CALLS = (
    ("GET", "/health"),
    ("GET", "/contexts/{name}"),
    ("GET", "/contexts/{name}/embeddings"),
    ("GET", "/contexts/{name}/sources"),
    ("POST", "/contexts/{name}/sources/search"),
    ("POST", "/contexts/{name}/evidence"),
    ("POST", "/contexts/{name}/resolve"),
    ("POST", "/contexts/{name}/resolve_label"),
    ("POST", "/contexts/{name}/query"),
    ("POST", "/contexts/{name}/citations"),
)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory, mode_inputs: Path) -> Recording:
    """The distinct requests of every mode, made against a reference server."""
    require_taguru()  # without the oracle the recording has no use
    with running_server(None) as url:
        for context in CONTEXTS:
            populate(url, DATA / context)
        return record_runs(url, MODES, mode_inputs, tmp_path_factory.mktemp("replay"))


@dataclass(frozen=True)
class LoadedPair:
    """A real taguru and a reference server loaded with the same corpora, and the
    exchanges of each load (in the same order on both)."""

    taguru: str
    reference: str
    taguru_load: list[Exchange]
    reference_load: list[Exchange]


def _load(url: str) -> list[Exchange]:
    proxy = RecordingProxy(url)
    with proxy as proxied:
        for context in CONTEXTS:
            populate(proxied, DATA / context)
    return proxy.exchanges


@contextmanager
def loaded_pair(start_taguru: Callable[..., RealTaguru]) -> Iterator[LoadedPair]:
    taguru = start_taguru()
    with running_server(None) as reference:
        yield LoadedPair(taguru.url, reference, _load(taguru.url), _load(reference))


def _route(target: str) -> tuple[str, ...]:
    path = target.split("?", 1)[0].strip("/").split("/")
    return tuple(
        "{name}" if index == 1 and path[0] == "contexts" else part
        for index, part in enumerate(path)
    )


def _route_of(sent: Sent) -> tuple[str, str]:
    return sent.method, "/" + "/".join(_route(sent.target))


def _differences(
    requests: Sequence[Sent],
    ours: Sequence[Answer],
    theirs: Sequence[Answer],
    why: Callable[[Sent], str],
) -> list[str]:
    found = []
    for sent, mine, its in zip(requests, ours, theirs, strict=True):
        differs = difference(mine, its)
        if differs is not None:
            found.append(f"{sent.label()} ({why(sent)}): {differs}")
    return found


def _report(found: list[str], total: int) -> str:
    shown = "\n".join(found[:15])
    return f"{len(found)} of {total} answers differ from taguru's:\n{shown}"


def test_the_recording_covers_every_mode_and_route(recording: Recording) -> None:
    assert set(recording.exit_codes) == {mode.name for mode in MODES}
    for name, code in recording.exit_codes.items():
        assert code in (0, 2, 3), (name, code, recording.stderr[name])
        assert "Traceback" not in recording.stderr[name], recording.stderr[name]
    sent_by = {mode for senders in recording.sent.values() for mode in senders}
    # a mode refused before any network call (a usage or input error) is exit 2
    silent = {name for name, code in recording.exit_codes.items() if name not in sent_by}
    assert all(recording.exit_codes[name] == 2 for name in silent), silent
    assert len(sent_by) > len(silent)
    routes = {_route_of(sent) for sent in recording.sent}
    assert set(ROUTES_THE_EVALUATOR_CALLS) <= routes
    assert any(LONG_CUE.encode() in sent.body for sent in recording.sent)


def test_the_load_answers_as_taguru_does(real_taguru: Callable[..., RealTaguru]) -> None:
    with loaded_pair(real_taguru) as pair:
        pass
    ours = [Answer(e.status, e.answer) for e in pair.reference_load]
    theirs = [Answer(e.status, e.answer) for e in pair.taguru_load]
    requests = [Sent.of(e) for e in pair.reference_load]
    assert requests == [Sent.of(e) for e in pair.taguru_load]
    # load looks at each context first and reads it back once written.
    assert {_route_of(sent) for sent in requests} == {
        ("GET", "/contexts/{name}"),
        ("GET", "/contexts/{name}/sources"),
        ("PUT", "/contexts/{name}"),
        ("POST", "/contexts/{name}/sources"),
        ("POST", "/contexts/{name}/associations"),
        ("POST", "/contexts/{name}/aliases"),
    }
    found = _differences(requests, ours, theirs, lambda sent: "load")
    assert not found, _report(found, len(requests))


def test_every_recorded_request_answers_as_taguru_does(
    real_taguru: Callable[..., RealTaguru], recording: Recording
) -> None:
    requests = [*recording.sent, *EXTRA_REQUESTS]
    with loaded_pair(real_taguru) as pair:
        theirs = replay(pair.taguru, requests)
        ours = replay(pair.reference, requests)
    modes = {sent: ", ".join(senders) for sent, senders in recording.sent.items()}

    def why(sent: Sent) -> str:
        return modes.get(sent, "extra request")

    found = _differences(requests, ours, theirs, why)
    assert not found, _report(found, len(requests))
    statuses = {answer.status for answer in theirs}
    assert {200, 400, 404} <= statuses  # answers and refusals were both compared


def test_a_token_server_refuses_as_taguru_does(real_taguru: Callable[..., RealTaguru]) -> None:
    """Behind a token, a missing, wrong or non-bearer credential gets taguru's 401."""
    refusals = {
        "no credential": {},
        "a wrong token": {"Authorization": "Bearer not-the-token"},
        "not a bearer": {"Authorization": "Basic dXNlcjpwYXNz"},
    }
    taguru = real_taguru(token=TOKEN)
    with running_server(None, token=TOKEN) as reference:
        found = []
        for why, headers in refusals.items():
            theirs = httpx.get(f"{taguru.url}/contexts/sake", headers=headers)
            ours = httpx.get(f"{reference}/contexts/sake", headers=headers)
            answers = [Answer(got.status_code, got.content) for got in (ours, theirs)]
            differs = difference(*answers)
            if differs is not None:
                found.append(f"{why}: {differs}")
            assert theirs.status_code == 401, why
            assert ours.headers["www-authenticate"] == theirs.headers["www-authenticate"]
    assert not found, found
