"""Structural checks of the shipped demo contexts (data/sake, data/handbook).

No server is needed: the corpus folder format (PLAN / README) is read here the
way the refserver loader reads it, and the refserver's own algorithms
(paragraph split, BM25, resolve) predict what each lane will return, so a
change to the data that silently breaks the demo's intended outcomes — a
citation whose section or quote no longer holds, an association pointing past
the end of a source, a position that stops being ambiguous — fails here.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import math
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from support.paths import DATA
from support.run import run_args

from taguru_eval._base.normalize import normalize_entry
from taguru_eval.catalog import CATALOG_KEYS
from taguru_eval.corpus.paragraphs import heading_sections, split_paragraphs
from taguru_eval.inputs.dataset import ABSENT, EvalCase, EvalSet, load_eval, validate_limits
from taguru_eval.inputs.thresholds import load_thresholds
from taguru_refserver.app import create_app
from taguru_refserver.bm25 import PassageIndex
from taguru_refserver.corpus import load_corpus_dir
from taguru_refserver.resolve import EntryIndex
from taguru_refserver.serve import running_server
from taguru_refserver.state import ServerState

CONTEXTS = ("sake", "handbook")

# What each demo deliberately gets wrong; everything else must come out right.
KNOWN_SOURCE_MISSES = {"sake": {("known-miss-012", "corpus/brewery.md")}, "handbook": set()}
AMBIGUOUS_POSITIONS = {
    "sake": {("shipping-ambiguous-006", "object", "京都")},
    "handbook": {("manager-ambiguous-h07", "subject", "Manager")},
}
NOT_FOUND_POSITIONS = {
    "sake": {("award-not-found-007", "object", "全国燗酒コンテスト")},
    "handbook": set(),
}

MIN_COUNTS = {
    # paragraphs, concepts, associations, cases
    "sake": (40, 30, 40, 12),
    "handbook": (15, 10, 10, 6),
}


@dataclass(frozen=True)
class Source:
    """One markdown source as the corpus loader sees it."""

    paragraphs: list[str]
    sections: list[tuple[int, str]]
    tags: list[str]
    date: int | None

    def section_for(self, paragraph: int) -> str | None:
        label = None
        for index, name in self.sections:
            if index <= paragraph:
                label = name
        return label


def _parse_date(value: str) -> int:
    if value.isdigit():
        return int(value)
    day = datetime.date.fromisoformat(value)
    return int(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC).timestamp())


def read_source(path: Path) -> Source:
    """Front matter (`---` … `---`, key: value lines), then paragraphs and ATX sections."""
    text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
    meta: dict[str, str] = {}
    lines = text.split("\n")
    if lines and lines[0].rstrip("\r") == "---":
        end = next(i for i in range(1, len(lines)) if lines[i].rstrip("\r") == "---")
        for line in lines[1:end]:
            key, _, value = line.partition(":")
            meta[key.strip()] = value.strip()
        text = "\n".join(lines[end + 1 :])
    paragraphs = split_paragraphs(text)
    markers = dict(heading_sections(paragraphs))
    if "section" in meta:
        markers.setdefault(0, meta["section"])
    tags = [tag.strip() for tag in meta.get("tags", "").split(",") if tag.strip()]
    date = _parse_date(meta["date"]) if "date" in meta else None
    return Source(paragraphs, sorted(markers.items()), tags, date)


@dataclass(frozen=True)
class Context:
    root: Path
    sources: dict[str, Source]
    associations: list[dict[str, object]]
    concept_aliases: dict[str, str]
    label_aliases: dict[str, str]
    eval_set: EvalSet

    @property
    def concepts(self) -> set[str]:
        return {str(a[k]) for a in self.associations for k in ("subject", "object")}

    @property
    def labels(self) -> set[str]:
        return {str(a["label"]) for a in self.associations}


def load_context(name: str) -> Context:
    root = DATA / name
    sources = {
        path.relative_to(root).as_posix(): read_source(path)
        for path in sorted(root.rglob("*.md"))
        if path.relative_to(root).as_posix() != "README.md"
    }
    associations = [
        json.loads(line)
        for line in (root / "associations.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    aliases = json.loads((root / "aliases.json").read_text(encoding="utf-8"))
    eval_set = load_eval(root / "eval.jsonl")
    return Context(root, sources, associations, aliases["concepts"], aliases["labels"], eval_set)


@pytest.fixture(scope="module", params=CONTEXTS)
def ctx(request: pytest.FixtureRequest) -> Context:
    return load_context(request.param)


def _cases(ctx: Context) -> list[EvalCase]:
    return ctx.eval_set.cases


# ----------------------------------------------------------------- eval.jsonl


def test_eval_header_and_case_ids(ctx: Context) -> None:
    lines = [ln for ln in (ctx.root / "eval.jsonl").read_text("utf-8").splitlines() if ln.strip()]
    header = json.loads(lines[0])
    assert header["taguru_eval"] == 1
    assert isinstance(header["name"], str) and header["name"]
    for line in lines[1:]:
        json.loads(line)
    ids = ctx.eval_set.case_ids
    assert len(ids) == len(set(ids)) == len(lines) - 1
    validate_limits(ctx.eval_set)


def test_minimum_counts(ctx: Context) -> None:
    min_paragraphs, min_concepts, min_associations, min_cases = MIN_COUNTS[ctx.root.name]
    body = [
        p
        for source in ctx.sources.values()
        for i, p in enumerate(source.paragraphs)
        if i not in dict(heading_sections(source.paragraphs))
    ]
    assert len(body) >= min_paragraphs
    assert len(ctx.concepts) >= min_concepts
    assert len(ctx.associations) >= min_associations
    assert len(_cases(ctx)) >= min_cases


def test_expected_sources_and_citations_exist(ctx: Context) -> None:
    for case in _cases(ctx):
        for expected in case.expected_sources:
            assert (ctx.root / expected.source).is_file(), (case.case_id, expected.source)
            count = len(ctx.sources[expected.source].paragraphs)
            assert all(p < count for p in expected.paragraphs), (case.case_id, expected)
        for citation in case.expected_citations:
            assert (ctx.root / citation.source).is_file(), (case.case_id, citation.source)


def test_every_citation_is_a_valid_locator(ctx: Context) -> None:
    """Section and quote expectations hold against the text the server will serve."""
    for case in _cases(ctx):
        for citation in case.expected_citations:
            source = ctx.sources[citation.source]
            assert citation.paragraph < len(source.paragraphs), (case.case_id, citation)
            text = source.paragraphs[citation.paragraph]
            if citation.section is not ABSENT:
                assert source.section_for(citation.paragraph) == citation.section, (
                    case.case_id,
                    citation,
                )
            if citation.quote is not None:
                assert normalize_entry(citation.quote) in normalize_entry(text), (
                    case.case_id,
                    citation.quote,
                )


# ------------------------------------------------------- associations, aliases


def test_associations_point_at_existing_paragraphs(ctx: Context) -> None:
    spellings: dict[str, set[str]] = {}
    for alias, canonical in ctx.concept_aliases.items():
        spellings.setdefault(canonical, set()).add(alias)
    for item in ctx.associations:
        assert set(item) <= {"subject", "label", "object", "weight", "source", "paragraph"}
        weight = item["weight"]
        assert isinstance(weight, int | float) and math.isfinite(weight) and abs(weight) <= 1e6
        source, paragraph = item["source"], item["paragraph"]
        assert isinstance(source, str) and isinstance(paragraph, int)
        assert source in ctx.sources, item
        assert 0 <= paragraph < len(ctx.sources[source].paragraphs), item
        # the attributed paragraph must actually talk about the subject or object
        text = normalize_entry(ctx.sources[source].paragraphs[paragraph])
        names = {str(item["subject"]), str(item["object"])}
        names |= {alias for name in list(names) for alias in spellings.get(name, ())}
        assert any(normalize_entry(n) in text for n in names), item


def test_aliases_bind_to_known_names(ctx: Context) -> None:
    for alias, canonical in ctx.concept_aliases.items():
        assert canonical in ctx.concepts and alias not in ctx.concepts, alias
    for alias, canonical in ctx.label_aliases.items():
        assert canonical in ctx.labels and alias not in ctx.labels, alias


# --------------------------------------------------- predicted lane outcomes


def _entry_indexes(ctx: Context) -> tuple[EntryIndex, EntryIndex]:
    concepts, labels = EntryIndex(), EntryIndex()
    for item in ctx.associations:
        concepts.add(str(item["subject"]))
        concepts.add(str(item["object"]))
        labels.add(str(item["label"]))
    for alias, canonical in sorted(ctx.concept_aliases.items()):
        concepts.add_alias(alias, canonical)
    for alias, canonical in sorted(ctx.label_aliases.items()):
        labels.add_alias(alias, canonical)
    return concepts, labels


def test_association_positions_pin_except_the_deliberate_ones(ctx: Context) -> None:
    concepts, labels = _entry_indexes(ctx)
    triples = {(str(a["subject"]), str(a["label"]), str(a["object"])) for a in ctx.associations}
    ambiguous, not_found = set(), set()
    for case in _cases(ctx):
        for probe in case.expected_associations:
            names = []
            for position, cue, index in (
                ("subject", probe.subject, concepts),
                ("label", probe.label, labels),
                ("object", probe.object, concepts),
            ):
                found = [c.name for c in index.resolve(cue, 5, 0.3)]
                if not found:
                    not_found.add((case.case_id, position, cue))
                elif len(found) > 1:
                    ambiguous.add((case.case_id, position, cue))
                names.append(found[0] if len(found) == 1 else None)
            if None not in names:
                assert tuple(names) in triples, (case.case_id, probe)
    assert ambiguous == AMBIGUOUS_POSITIONS[ctx.root.name]
    assert not_found == NOT_FOUND_POSITIONS[ctx.root.name]


def test_expected_concepts_and_labels_resolve(ctx: Context) -> None:
    concepts, labels = _entry_indexes(ctx)
    for case in _cases(ctx):
        cues = list(case.cues) or [case.query]
        for expected, index in (
            (case.expected_concepts, concepts),
            (case.expected_labels, labels),
        ):
            if not expected:
                continue
            names = {normalize_entry(c.name) for cue in cues for c in index.resolve(cue, 5, 0.3)}
            missing = [e for e in expected if normalize_entry(e) not in names]
            assert not missing, (case.case_id, missing)


def _eligible(ctx: Context, case: EvalCase, now: int) -> set[str]:
    options, eligible = case.options, set()
    for name, source in ctx.sources.items():
        if options.tags and not set(options.tags) & set(source.tags):
            continue
        stamp = source.date if source.date is not None else now
        if options.since is not None and stamp < options.since:
            continue
        if options.until is not None and stamp >= options.until:
            continue
        eligible.add(name)
    return eligible


def test_passage_lane_finds_every_source_but_the_known_misses(ctx: Context) -> None:
    index = PassageIndex()
    for name, source in ctx.sources.items():
        index.put_source(name, source.paragraphs)
    now = int(time.time())
    misses = set()
    for case in _cases(ctx):
        allowed = _eligible(ctx, case, now)
        hits = [
            (h.source, h.paragraph)
            for h in index.search(case.query, case.effective_limit, allowed.__contains__)
        ]
        for expected in case.expected_sources:
            if expected.relevance == 0:
                continue
            if not any(
                s == expected.source and (not expected.paragraphs or p in expected.paragraphs)
                for s, p in hits
            ):
                misses.add((case.case_id, expected.source))
        if case.declares_source_expectation:
            # the best judged item is the first hit or close to it
            best = max(case.expected_sources, key=lambda e: e.relevance)
            first = next(
                r
                for r, (s, p) in enumerate(hits)
                if s == best.source and (not best.paragraphs or p in best.paragraphs)
            )
            assert first <= 1, (case.case_id, hits[:3])
    assert misses == KNOWN_SOURCE_MISSES[ctx.root.name]


def test_filters_change_what_is_searched(ctx: Context) -> None:
    """Every filtering case would have ranked something else without its filter."""
    index = PassageIndex()
    for name, source in ctx.sources.items():
        index.put_source(name, source.paragraphs)
    now = int(time.time())
    filtered = [c for c in _cases(ctx) if c.options.tags or c.options.since is not None]
    assert filtered
    for case in filtered:
        allowed = _eligible(ctx, case, now)
        unfiltered = index.search(case.query, case.effective_limit, None)
        assert any(h.source not in allowed for h in unfiltered), case.case_id


# ------------------------------------------------------------ lane coverage


def test_sake_eval_exercises_every_lane() -> None:
    cases = load_context("sake").eval_set.cases
    assert any(len({e.relevance for e in c.expected_sources if e.relevance}) >= 3 for c in cases)
    assert any(e.relevance == 0 for c in cases for e in c.expected_sources)
    assert any(e.paragraphs for c in cases for e in c.expected_sources)
    assert any(not e.paragraphs for c in cases for e in c.expected_sources)
    assert any(len(e.paragraphs) > 1 for c in cases for e in c.expected_sources)
    assert any(c.expected_concepts for c in cases)
    assert any(c.expected_labels for c in cases)
    assert any(c.expected_associations for c in cases)
    sections = [e.section for c in cases for e in c.expected_citations]
    assert any(isinstance(s, str) for s in sections)
    assert any(s is None for s in sections)
    assert any(s is ABSENT for s in sections)
    assert any(e.quote for c in cases for e in c.expected_citations)
    assert any(c.options.limit is not None for c in cases)
    assert any(c.options.tags for c in cases)
    assert any(c.options.since is not None and c.options.until is not None for c in cases)


def test_brewery_paragraph_zero_is_the_seed_example() -> None:
    brewery = load_context("sake").sources["corpus/brewery.md"]
    first = brewery.paragraphs[0]
    assert "1897年に創業" in first
    assert "青嶺" in first and "青嶺酒造" in first
    assert brewery.section_for(0) == "沿革"


# ----------------------------------------------------------------- thresholds


def test_thresholds_file_loads(ctx: Context) -> None:
    thresholds = load_thresholds(ctx.root / "thresholds.json", CATALOG_KEYS, ctx.eval_set.case_ids)
    assert len(thresholds.sha256) == 64
    raw = json.loads((ctx.root / "thresholds.json").read_text("utf-8"))
    assert raw["aggregate"] and raw["cases"]["default"] and raw["cases"]["overrides"]


# ------------------------------------------ through the reference server itself


async def _serve_and_probe(name: str) -> dict[str, object]:
    """Load data/ with the refserver's corpus loader and replay each case's lane calls."""
    state = ServerState()
    assert name in load_corpus_dir(state, DATA)
    transport = httpx.ASGITransport(app=create_app(state))
    misses: set[tuple[str, str]] = set()
    positions: dict[str, set[tuple[str, str, str]]] = {"ambiguous": set(), "not_found": set()}
    invalid: list[tuple[str, str, int]] = []
    unmatched: list[tuple[str, str]] = []
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:

        async def call(route: str, body: dict[str, object]) -> object:
            response = await client.post(f"/contexts/{name}/{route}", json=body)
            assert response.status_code == 200, (route, body, response.text)
            return response.json()["result"]

        for case in load_eval(DATA / name / "eval.jsonl").cases:
            options = case.options
            page = await call(
                "sources/search",
                {
                    "query": case.query,
                    "limit": case.effective_limit,
                    "semantic_floor": None,
                    "tags": list(options.tags),
                    "since": options.since,
                    "until": options.until,
                },
            )
            assert isinstance(page, dict)
            hits = [(h["source"], h["paragraph"]) for h in page["hits"]]
            for expected in case.expected_sources:
                if expected.relevance and not any(
                    s == expected.source and (not expected.paragraphs or p in expected.paragraphs)
                    for s, p in hits
                ):
                    misses.add((case.case_id, expected.source))
            for probe in case.expected_associations:
                pinned: list[str] = []
                for position, route, cue in (
                    ("subject", "resolve", probe.subject),
                    ("label", "resolve_label", probe.label),
                    ("object", "resolve", probe.object),
                ):
                    found = await call(route, {"cue": cue, "limit": 5})
                    assert isinstance(found, list)
                    names = [c["name"] for c in found if c["tier"] == "lexical"]
                    if len(names) == 1:
                        pinned.append(names[0])
                    else:
                        kind = "not_found" if not names else "ambiguous"
                        positions[kind].add((case.case_id, position, cue))
                if len(pinned) == 3:
                    subject, label, obj = pinned
                    body = {"subject": subject, "label": label, "object": obj, "limit": 1}
                    matches = await call("query", body)
                    assert isinstance(matches, dict)
                    if matches["total"] < 1:
                        unmatched.append((case.case_id, f"{subject}/{label}/{obj}"))
            for citation in case.expected_citations:
                cited = await call(
                    "citations", {"source": citation.source, "paragraph": citation.paragraph}
                )
                assert isinstance(cited, dict)
                section_ok = citation.section is ABSENT or cited["section"] == citation.section
                quote_ok = citation.quote is None or normalize_entry(
                    citation.quote
                ) in normalize_entry(cited["text"])
                if not (section_ok and quote_ok):
                    invalid.append((case.case_id, citation.source, citation.paragraph))
    return {
        "misses": misses,
        "ambiguous": positions["ambiguous"],
        "not_found": positions["not_found"],
        "invalid": invalid,
        "unmatched": unmatched,
    }


@pytest.mark.parametrize("name", CONTEXTS)
def test_reference_server_serves_the_intended_outcomes(name: str) -> None:
    outcome = asyncio.run(_serve_and_probe(name))
    assert outcome == {
        "misses": KNOWN_SOURCE_MISSES[name],
        "ambiguous": AMBIGUOUS_POSITIONS[name],
        "not_found": NOT_FOUND_POSITIONS[name],
        "invalid": [],
        "unmatched": [],
    }


# ------------------------------------------------ the gate, end to end (CLI)


def _evaluate(corpus_dir: Path, name: str, out: Path) -> subprocess.CompletedProcess[str]:
    """Serve ``corpus_dir`` on loopback and run the CLI's gated run mode against it."""
    with running_server(corpus_dir) as url:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "taguru_eval",
                *run_args(DATA / name / "eval.jsonl", name, url),
                "--thresholds",
                str(DATA / name / "thresholds.json"),
                "--out",
                str(out),
                "--no-store",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.mark.parametrize("name", CONTEXTS)
def test_demo_context_passes_its_thresholds(name: str, tmp_path: Path) -> None:
    run = _evaluate(DATA, name, tmp_path / "evaluation.json")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "thresholds: PASS" in run.stdout
    artifact = json.loads((tmp_path / "evaluation.json").read_text("utf-8"))
    assert artifact["thresholds"]["passed"] is True


def test_removing_a_source_paragraph_fails_the_sake_gate(tmp_path: Path) -> None:
    corpus = tmp_path / "data"
    shutil.copytree(DATA / "sake", corpus / "sake")
    brewery = corpus / "sake" / "corpus" / "brewery.md"
    text = brewery.read_text("utf-8")
    first, second = text.index("青嶺酒造は1897年"), text.index("大正期")
    brewery.write_text(text[:first] + text[second:], "utf-8")
    run = _evaluate(corpus, "sake", tmp_path / "evaluation.json")
    assert run.returncode == 3, run.stdout + run.stderr
    assert "[case brand-origin-001] citations.locator_validity" in run.stdout
