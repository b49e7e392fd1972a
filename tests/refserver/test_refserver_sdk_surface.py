"""Every public method of taguru's Python SDK (PyPI ``taguru`` 0.9.7) against the reference server.

The method list comes from introspecting the SDK's four sync classes
(``Taguru``, ``Contexts``, ``Groups``, ``Context``), so the count cannot drift
from the SDK: a method added by a new release fails
``test_every_public_method_has_a_call`` until it gets a call here. Each call
goes over real loopback HTTP (``running_server``) through the SDK's own
client and decoder, with plausible arguments against a populated context;
the outcome is ``decoded``, ``local`` (the method sends no request:
``Taguru.context``, ``Taguru.close``) or the error it raised. Methods whose
routes this server leaves out on purpose are listed in ``LEFT_OUT`` with the
reason (docs/refserver.md "Clients" repeats the list); they must still fail, so the
list cannot go stale silently.

Run with ``-s`` to see the table of outcomes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import httpx
import pytest
from taguru import Context, Contexts, Groups, Taguru, TaguruError

from taguru_refserver.serve import running_server

NAME = "sake"
KURA = "docs/kura.md"
KURA_TEXT = (
    "青嶺酒造は雲居県霧沢町の蔵元である。杜氏は高瀬である。\n\n仕込み水は霧沢の伏流水である。"
)
SCHEMA = {
    "schema": 1,
    "mode": "warn",
    "closed_labels": False,
    "types": {"Brewery": {}, "Person": {}},
    "relations": {"杜氏": {"domain": ["Brewery"], "range": ["Person"]}},
}
GROUP = "breweries"
# Far above any directory this test builds: a listing walk that never stops
# is cut here and then fails its termination check instead of hanging.
WALK_BOUND = 1000
DECODED_BEFORE = 31  # the same driver before issue 29 (docs/refserver.md "Clients")

SYNC_CLASSES: tuple[type, ...] = (Taguru, Contexts, Groups, Context)

LEFT_OUT: dict[str, str] = {
    "Taguru.import_batches": "NDJSON batch import: taguru's import format (batches, groups, "
    "schema records, durable-prefix refusals) is a loader of its own; this server seeds "
    "from a corpus directory or the write routes",
    "Taguru.import_file": "same route as import_batches (POST /import)",
    "Taguru.search_passages": "cross-context search (POST /sources/search): rank interleaving "
    "across contexts is not built",
    "Groups.list": "groups are not modelled (GET /groups); evaluate never addresses a group",
    "Groups.iter": "groups are not modelled",
    "Groups.get": "groups are not modelled",
    "Groups.exists": "groups are not modelled",
    "Groups.create": "groups are not modelled",
    "Groups.update": "groups are not modelled",
    "Groups.delete": "groups are not modelled",
    "Groups.rename": "groups are not modelled",
    "Groups.export": "groups are not modelled",
    "Context.explain_resolve": "resolve diagnostics (tier-by-tier explanation) are not built",
    "Context.explain_resolve_label": "resolve diagnostics are not built",
    "Context.paths": "simple-path enumeration with taguru's enumeration budget is not built",
    "Context.changes": "the change feed (cursors, 410 stale_cursor) is not built",
    "Context.audit_schema": "schema audits over the live graph are not built",
    "Context.validate_schema": "schema audits over a proposed document are not built",
    "Context.search_communities": "community artifacts need an LLM-summarised build",
    "Context.analyze_communities": "community detection is not built",
    "Context.explain_search_passages": "search diagnostics (per-lane explanation) are not built",
    "Context.audit_vocabulary": "vocabulary fork audit is not built",
    "Context.audit_drift": "graph-vs-archive drift audit is not built",
    "Context.audit_consolidation": "consolidation audits (merge/contradiction/staleness) "
    "are not built",
    "Context.refresh_embeddings": "the toy vector lane embeds on write; there is no provider "
    "to refresh from",
    "Context.compact": "nothing here is persisted, so there is no image to compact",
    "Context.promote": "scratch-to-established promotion rides on the import format",
    "Context.export": "the NDJSON batch export format is not built (see import_batches)",
    "Context.export_stream": "same route as export",
    "Context.export_to_file": "same route as export",
}
# Methods that send no request at all: they pass, but say nothing about the wire.
LOCAL = {"Taguru.context", "Taguru.close"}


def public_methods() -> list[str]:
    """``Class.method`` for every public function the SDK's sync classes define."""
    return sorted(
        f"{cls.__name__}.{name}"
        for cls in SYNC_CLASSES
        for name, member in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(member)
    )


@dataclass
class Env:
    url: str
    client: Taguru
    ctx: Context  # the populated context
    typed: Context  # a context for the schema calls
    tmp: Path


def _walk(items: Iterator[object]) -> list[object]:
    """A whole listing walk; one that reaches ``WALK_BOUND`` never stops (issue 29)."""
    walked = list(islice(items, WALK_BOUND))
    _expect(len(walked) < WALK_BOUND, f"the walk did not stop within {WALK_BOUND} items")
    return walked


def _expect(ok: bool, what: str) -> None:
    """A call that returned but answered wrongly (e.g. a swallowed 404) is not decoded."""
    if not ok:
        raise AssertionError(what)


def _seed(client: Taguru) -> Context:
    client.contexts.create(NAME, description="sdk surface")
    ctx = client.context(NAME)
    ctx.store_passages(
        {KURA: KURA_TEXT, "docs/other.md": "梅雨明けの空に入道雲が広がった。"},
        sections={KURA: [{"paragraph": 1, "section": "水"}]},
        locators={KURA: [{"paragraph": 0, "locator": {"kind": "page", "value": "1"}}]},
    )
    ctx.add_associations(
        [
            {
                "subject": "青嶺酒造",
                "label": "杜氏",
                "object": "高瀬",
                "weight": 1.0,
                "source": KURA,
                "paragraph": 0,
            },
            {"subject": "高瀬", "label": "出身", "object": "南部", "weight": 2.0},
            {"subject": "梅雨", "label": "後", "object": "入道雲", "weight": 1.0},
        ]
    )
    for name in ("alpha", "beta", "gamma"):
        client.contexts.create(name)
    return ctx


Call = Callable[[Env], object]


def _retrieve(e: Env) -> object:
    result = e.ctx.retrieve("青嶺酒造")
    _expect(bool(result.activations) and bool(result.citations), "retrieve lost its graph lane")
    return result


def _describe(e: Env) -> object:
    outline = e.ctx.describe("青嶺酒造")
    _expect(outline is not None and outline.as_subject[0].label == "杜氏", "describe")
    return outline


def _lookup(e: Env) -> object:
    found = e.ctx.lookup_passages([KURA, "docs/none.md"])
    _expect(found.passages == {KURA: KURA_TEXT} and found.missing == ["docs/none.md"], "lookup")
    return found


def _delete(e: Env) -> object:
    e.client.contexts.create("scratch-delete")
    deleted = e.client.contexts.delete("scratch-delete")
    _expect(deleted is True and not e.client.contexts.exists("scratch-delete"), "delete")
    return deleted


def _rename(e: Env) -> object:
    e.client.contexts.create("scratch-rename")
    renamed = e.client.contexts.rename("scratch-rename", "scratch-renamed")
    _expect(e.client.contexts.exists("scratch-renamed"), "rename")
    return renamed


def _import_file(e: Env) -> object:
    path = e.tmp / "batch.ndjson"
    path.write_text('{"source": "docs/imported.md", "associations": []}\n', encoding="utf-8")
    return e.client.import_file(path)


def _close(e: Env) -> object:
    Taguru(e.url, retries=0).close()
    return None


# Insertion order is call order: reads first, then the calls that change state.
CALLS: dict[str, Call] = {
    "Taguru.health": lambda e: e.client.health(),
    "Taguru.live": lambda e: e.client.live(),
    "Taguru.metrics": lambda e: e.client.metrics(),
    "Taguru.protocol": lambda e: e.client.protocol(),
    "Taguru.wait_until_ready": lambda e: e.client.wait_until_ready(timeout=5.0),
    "Taguru.context": lambda e: e.client.context(NAME),
    "Taguru.recall": lambda e: _expect(
        e.client.recall("高瀬", contexts=[NAME, "alpha"]).total == 2, "cross recall"
    ),
    "Taguru.query": lambda e: _expect(
        e.client.query(contexts=["alpha", NAME], subject="青嶺酒造").matches[0].context == NAME,
        "cross query",
    ),
    "Taguru.search_passages": lambda e: e.client.search_passages("霧沢", contexts=[NAME]),
    "Contexts.list": lambda e: e.client.contexts.list(limit=2),
    "Contexts.iter": lambda e: _walk(e.client.contexts.iter(limit=2)),
    "Contexts.get": lambda e: e.client.contexts.get(NAME),
    "Contexts.exists": lambda e: _expect(e.client.contexts.exists(NAME), "exists"),
    "Context.resolve": lambda e: e.ctx.resolve("青嶺", limit=5),
    "Context.resolve_label": lambda e: e.ctx.resolve_label("杜氏"),
    "Context.explain_resolve": lambda e: e.ctx.explain_resolve("青嶺", "青嶺酒造"),
    "Context.explain_resolve_label": lambda e: e.ctx.explain_resolve_label("杜", "杜氏"),
    "Context.recall": lambda e: e.ctx.recall("高瀬", limit=1),
    "Context.query": lambda e: e.ctx.query(subject="青嶺酒造", label="杜氏"),
    "Context.describe": _describe,
    "Context.explore": lambda e: e.ctx.explore("青嶺酒造", max_depth=2),
    "Context.paths": lambda e: e.ctx.paths("青嶺酒造", "南部"),
    "Context.activate": lambda e: e.ctx.activate(["青嶺酒造"], limit=20),
    "Context.unreachable_from": lambda e: e.ctx.unreachable_from("青嶺酒造"),
    "Context.changes": lambda e: e.ctx.changes(),
    "Context.list_labels": lambda e: e.ctx.list_labels(limit=1),
    "Context.iter_labels": lambda e: _walk(e.ctx.iter_labels(limit=1)),
    "Context.lookup_passages": _lookup,
    "Context.search_passages": lambda e: e.ctx.search_passages("霧沢の伏流水", limit=3),
    "Context.search_communities": lambda e: e.ctx.search_communities("酒造"),
    "Context.analyze_communities": lambda e: e.ctx.analyze_communities(),
    "Context.explain_search_passages": lambda e: e.ctx.explain_search_passages("霧沢", KURA),
    "Context.list_sources": lambda e: e.ctx.list_sources(limit=1),
    "Context.iter_sources": lambda e: _walk(e.ctx.iter_sources(limit=1)),
    "Context.cite_passage": lambda e: e.ctx.cite_passage(KURA, 0),
    "Context.get_aliases": lambda e: e.ctx.get_aliases(),
    "Context.iter_aliases": lambda e: _walk(e.ctx.iter_aliases()),
    "Context.audit_vocabulary": lambda e: e.ctx.audit_vocabulary(),
    "Context.audit_drift": lambda e: e.ctx.audit_drift(),
    "Context.audit_consolidation": lambda e: e.ctx.audit_consolidation(["merge"]),
    "Context.embeddings_status": lambda e: e.ctx.embeddings_status(),
    "Context.assemble_evidence": lambda e: e.ctx.assemble_evidence("青嶺酒造"),
    "Context.retrieve": _retrieve,
    "Context.export": lambda e: e.ctx.export(),
    "Context.export_stream": lambda e: b"".join(e.ctx.export_stream()),
    "Context.export_to_file": lambda e: e.ctx.export_to_file(e.tmp / "export.ndjson"),
    # -- writes ---------------------------------------------------------------
    "Taguru.flush": lambda e: e.client.flush(),
    "Taguru.import_batches": lambda e: e.client.import_batches(
        '{"source": "docs/imported.md", "associations": []}\n'
    ),
    "Taguru.import_file": _import_file,
    "Contexts.create": lambda e: e.client.contexts.create("scratch-create"),
    "Contexts.update": lambda e: e.client.contexts.update("scratch-create", pinned=True),
    "Contexts.delete": _delete,
    "Contexts.rename": _rename,
    "Groups.create": lambda e: e.client.groups.create(GROUP, contexts=[NAME, "alpha"]),
    "Groups.list": lambda e: e.client.groups.list(),
    "Groups.iter": lambda e: _walk(e.client.groups.iter()),
    "Groups.get": lambda e: e.client.groups.get(GROUP),
    "Groups.exists": lambda e: _expect(e.client.groups.exists(GROUP), "group exists"),
    "Groups.update": lambda e: e.client.groups.update(GROUP, remove_contexts=["alpha"]),
    "Groups.export": lambda e: e.client.groups.export(GROUP),
    "Groups.rename": lambda e: e.client.groups.rename(GROUP, "kura"),
    "Groups.delete": lambda e: e.client.groups.delete("kura"),
    "Context.put_schema": lambda e: e.typed.put_schema(SCHEMA),
    "Context.get_schema": lambda e: e.typed.get_schema(),
    "Context.audit_schema": lambda e: e.typed.audit_schema(),
    "Context.validate_schema": lambda e: e.typed.validate_schema(SCHEMA),
    "Context.add_associations": lambda e: e.ctx.add_associations(
        [{"subject": "x", "label": "r", "object": "y", "weight": 1.0}]
    ),
    "Context.add_associations_batched": lambda e: e.ctx.add_associations_batched(
        [{"subject": "x", "label": "r2", "object": "z", "weight": 1.0}], chunk_size=1
    ),
    "Context.retract_association": lambda e: e.ctx.retract_association("x", "r", "y"),
    "Context.store_passages": lambda e: e.ctx.store_passages({"docs/scratch.md": "一時の文。"}),
    "Context.retract_source": lambda e: e.ctx.retract_source("docs/scratch.md", dry_run=True),
    "Context.add_aliases": lambda e: e.ctx.add_aliases(concepts={"セイレイ": "青嶺酒造"}),
    "Context.remove_aliases": lambda e: e.ctx.remove_aliases(concepts=["セイレイ"]),
    "Context.refresh_embeddings": lambda e: e.ctx.refresh_embeddings(),
    "Context.promote": lambda e: e.ctx.promote("alpha", ["docs/other.md"], dry_run=True),
    "Context.compact": lambda e: e.ctx.compact(),
    "Taguru.close": _close,
}


def drive(url: str, tmp: Path) -> dict[str, str]:
    """Every call of ``CALLS`` against the server at ``url``: method -> outcome."""
    outcomes: dict[str, str] = {}
    with Taguru(url, retries=0, timeout=10.0) as client:
        env = Env(url, client, _seed(client), client.context("typed"), tmp)
        client.contexts.create("typed")
        for method, call in CALLS.items():
            try:
                call(env)
            except (TaguruError, AssertionError) as error:
                outcomes[method] = f"{type(error).__name__}: {str(error)[:90]}"
            else:
                outcomes[method] = "local" if method in LOCAL else "decoded"
    return outcomes


def decoded(outcomes: dict[str, str]) -> list[str]:
    return [method for method, outcome in outcomes.items() if outcome == "decoded"]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    with running_server(None, vector_lane=True, reranker=True) as url:
        found = drive(url, tmp_path_factory.mktemp("sdk"))
    width = max(len(method) for method in found)
    print(f"\ntaguru SDK 0.9.7: {len(decoded(found))} of {len(found)} public methods decode")
    for method in public_methods():
        print(f"  {method:<{width}}  {found[method]}")
    return found


def test_every_public_method_has_a_call() -> None:
    methods = set(public_methods())
    assert set(CALLS) == methods
    assert set(LEFT_OUT) <= methods
    assert not set(LEFT_OUT) & LOCAL


def test_more_methods_decode_than_before(outcomes: dict[str, str]) -> None:
    assert len(decoded(outcomes)) > 43 > DECODED_BEFORE


def test_every_method_not_left_out_decodes(outcomes: dict[str, str]) -> None:
    broken = {
        method: outcome
        for method, outcome in outcomes.items()
        if method not in LEFT_OUT and outcome not in ("decoded", "local")
    }
    assert broken == {}


def test_methods_left_out_still_fail(outcomes: dict[str, str]) -> None:
    # One that starts decoding belongs out of LEFT_OUT (and out of docs/refserver.md's list).
    assert [m for m in LEFT_OUT if outcomes[m] in ("decoded", "local")] == []


def test_issue_29_calls_decode(outcomes: dict[str, str]) -> None:
    for method in ("Contexts.iter", "Context.lookup_passages", "Contexts.delete"):
        assert outcomes[method] == "decoded", method
    assert outcomes["Context.activate"] == "decoded"


def test_contexts_iter_terminates_and_pages() -> None:
    with running_server(None) as url, Taguru(url, retries=0) as client:
        names = [f"ctx-{index:02d}" for index in range(7)]
        for name in reversed(names):
            client.contexts.create(name, pinned=name.endswith(("1", "3")))
        walked = list(islice(client.contexts.iter(limit=3), WALK_BOUND))
        assert [entry.name for entry in walked] == names
        page = client.contexts.list(limit=2, after="ctx-04")
        assert (page.total, [e.name for e in page.contexts]) == (7, ["ctx-05", "ctx-06"])
        pinned = client.contexts.list(pinned=True)
        assert (pinned.total, [e.name for e in pinned.contexts]) == (2, ["ctx-01", "ctx-03"])
        assert client.contexts.list(limit=0).contexts == []


def test_activate_decodes_with_paths_and_total() -> None:
    with running_server(None) as url, Taguru(url, retries=0) as client:
        ctx = _seed(client)
        page = ctx.activate("青嶺酒造", decay=0.5, limit=1)
        assert page.total == 2  # 杜氏 and, one hop on, 出身
        (top,) = page.matches
        assert (top.association.label, top.path, top.strength) == ("杜氏", ["青嶺酒造"], 0.5)
        far = ctx.activate("青嶺酒造").matches[1]
        assert (far.association.label, far.path) == ("出身", ["青嶺酒造", "高瀬"])
        assert ctx.activate("存在しない").total == 0


def test_contexts_listing_refuses_bad_query_values() -> None:
    with running_server(None) as url, httpx.Client(base_url=url) as http:
        for query, text in (
            ("limit=abc", "limit: invalid digit found in string"),
            ("limit=-1", "limit: invalid digit found in string"),
            ("pinned=yes", "pinned: provided string was not `true` or `false`"),
        ):
            answer = http.get(f"/contexts?{query}")
            assert answer.status_code == 400, query
            assert text in answer.json()["error"]
        assert http.get("/contexts?limit=5000").json()["result"] == {"contexts": [], "total": 0}
