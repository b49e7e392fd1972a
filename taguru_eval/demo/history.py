"""A realistic run history: change the served corpus between demo runs.

``python -m taguru_eval demo --runs N`` evaluates N times and, between runs,
calls :func:`mutate_corpus` with the step number (1, 2, …). Each step goes
through the server's HTTP write API only — the same routes a taguru user
writes with — so revision counters move for real and the next run's metrics
move because the corpus did, not because anything was faked:

* step 1, 5, 9, … **add**: a mirror of one source (its paragraphs in reverse
  order, sections kept) is stored as ``history/step-NNN.md``, and some of the
  source's associations are re-asserted with the mirror as their source —
  the mirror competes with the original in passage ranking;
* step 2, 6, … **edit**: one source is re-stored with an editorial note as a
  new first paragraph, shifting every paragraph index by one (tags, date and
  section markers are kept, shifted) — expected locators now point at the
  wrong paragraph;
* step 3, 7, … **remove**: the newest mirror is retracted (passage and its
  graph contributions) and one association is retracted;
* step 4, 8, … **repair**: every edited source gets its original paragraphs
  back, and a new association is asserted.

The choice of source and association depends only on the step number and the
server's current (sorted) state, so the same starting corpus and the same
steps give the same history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import httpx

from taguru_eval._base.files import write_bytes_atomic
from taguru_eval.api import Run
from taguru_eval.api import run as evaluate
from taguru_eval.demo.data import demo_data_dir
from taguru_eval.errors import RunError

HISTORY_PREFIX: Final = "history/"
EDIT_NOTE: Final = "[taguru_eval history] editorial note, step"
_TIMEOUT: Final = 35.0
_MAX_PARAGRAPHS: Final = 10_000
_PAGE: Final = 1000


class _Corpus:
    """Thin synchronous access to one context over HTTP (reads and writes)."""

    def __init__(self, client: httpx.Client, context: str) -> None:
        self.client = client
        self.base = f"/contexts/{quote(context, safe='')}"

    def _call(self, method: str, path: str, body: object | None = None) -> Any:
        try:
            response = self.client.request(method, self.base + path, json=body)
        except httpx.HTTPError as exc:
            raise RunError(f"history: {method} {path}: {exc}") from None
        if response.status_code >= 400:
            raise RunError(
                f"history: {method} {path}: HTTP {response.status_code}: {response.text[:200]}"
            )
        payload = response.json()
        return payload.get("result") if isinstance(payload, Mapping) else payload

    def sources(self) -> list[dict[str, Any]]:
        """Every stored source's entry (``name``, ``tags``?, ``date``?), ascending."""
        entries: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            query = f"?limit={_PAGE}" + (f"&after={quote(after, safe='')}" if after else "")
            page = self._call("GET", "/sources" + query)
            batch = page.get("entries") or []
            if not batch:
                return entries
            entries.extend(batch)
            after = str(batch[-1]["name"])

    def paragraphs(self, source: str) -> list[tuple[str, str | None]]:
        """``(text, section)`` of every paragraph, read through the citations route."""
        out: list[tuple[str, str | None]] = []
        for paragraph in range(_MAX_PARAGRAPHS):
            response = self.client.post(
                self.base + "/citations", json={"source": source, "paragraph": paragraph}
            )
            if response.status_code == 404:
                break
            if response.status_code >= 400:
                raise RunError(f"history: citations {source}#{paragraph}: {response.status_code}")
            result = response.json()["result"]
            out.append((str(result["text"]), result.get("section")))
        return out

    def associations(self) -> list[dict[str, Any]]:
        """Every live association (subject, label, object, attributions), in server order."""
        labels = self._call("GET", f"/labels?limit={_PAGE}").get("labels") or []
        if not labels:
            return []
        page = self._call("POST", "/query", {"label": labels, "limit": _PAGE})
        return list(page.get("matches") or [])

    def store(
        self, source: str, paragraphs: list[tuple[str, str | None]], entry: Mapping[str, Any]
    ) -> None:
        """Store ``source`` wholesale: text, section markers, and the entry's tags/date."""
        request: dict[str, Any] = {"passages": {source: "\n\n".join(t for t, _ in paragraphs)}}
        markers = section_markers(paragraphs)
        if markers:
            request["sections"] = {source: markers}
        if entry.get("tags"):
            request["tags"] = {source: list(entry["tags"])}
        if entry.get("date") is not None:
            request["dates"] = {source: entry["date"]}
        self._call("POST", "/sources", request)

    def add_associations(self, items: list[dict[str, Any]]) -> None:
        if items:
            self._call("POST", "/associations", items)

    def retract_source(self, source: str) -> None:
        self._call("POST", "/sources/retract", {"source": source})

    def retract_association(self, subject: str, label: str, obj: str) -> None:
        self._call(
            "POST", "/associations/retract", {"subject": subject, "label": label, "object": obj}
        )


def section_markers(paragraphs: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
    """Markers that reproduce each paragraph's section (one where the label changes)."""
    markers: list[dict[str, Any]] = []
    current: str | None = None
    for index, (_, section) in enumerate(paragraphs):
        if section is not None and section != current:
            markers.append({"paragraph": index, "section": section})
        current = section
    return markers


def _originals(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if not str(e["name"]).startswith(HISTORY_PREFIX)]


def _add_mirror(corpus: _Corpus, step: int) -> None:
    originals = _originals(corpus.sources())
    if not originals:
        return
    target = originals[(step // 4 * 3) % len(originals)]
    name = str(target["name"])
    paragraphs = corpus.paragraphs(name)
    mirror = f"{HISTORY_PREFIX}step-{step:03d}.md"
    reversed_paragraphs = list(reversed(paragraphs))
    corpus.store(mirror, reversed_paragraphs, target)
    last = len(paragraphs) - 1
    copied: list[dict[str, Any]] = []
    for match in corpus.associations():
        for attribution in match.get("attributions") or []:
            if attribution.get("source") != name:
                continue
            item: dict[str, Any] = {
                "subject": match["subject"],
                "label": match["label"],
                "object": match["object"],
                "weight": 1.0,
                "source": mirror,
            }
            if isinstance(attribution.get("paragraph"), int):
                item["paragraph"] = last - attribution["paragraph"]
            copied.append(item)
    copied = copied[:3]
    copied.append(
        {
            "subject": f"history step {step}",
            "label": "mirrors",
            "object": name,
            "weight": 1.0,
            "source": mirror,
        }
    )
    corpus.add_associations(copied)


def _edit(corpus: _Corpus, step: int) -> None:
    originals = [
        e for e in _originals(corpus.sources()) if not _is_edited(corpus.paragraphs(e["name"]))
    ]
    if not originals:
        return
    target = originals[(step // 4 * 5 + 1) % len(originals)]
    paragraphs = corpus.paragraphs(str(target["name"]))
    note = (f"{EDIT_NOTE} {step}: this document is being revised.", None)
    corpus.store(str(target["name"]), [note, *paragraphs], target)


def _is_edited(paragraphs: list[tuple[str, str | None]]) -> bool:
    return bool(paragraphs) and paragraphs[0][0].startswith(EDIT_NOTE)


def _remove(corpus: _Corpus, step: int) -> None:
    mirrors = [e["name"] for e in corpus.sources() if str(e["name"]).startswith(HISTORY_PREFIX)]
    if mirrors:
        corpus.retract_source(str(mirrors[-1]))
    live = sorted(
        (str(m["subject"]), str(m["label"]), str(m["object"]))
        for m in corpus.associations()
        if not str(m["subject"]).startswith("history step")
    )
    if live:
        subject, label, obj = live[(step * 7) % len(live)]
        corpus.retract_association(subject, label, obj)


def _repair(corpus: _Corpus, step: int) -> None:
    for entry in _originals(corpus.sources()):
        paragraphs = corpus.paragraphs(str(entry["name"]))
        if _is_edited(paragraphs):
            corpus.store(str(entry["name"]), paragraphs[1:], entry)
    corpus.add_associations(
        [
            {
                "subject": f"history step {step}",
                "label": "repaired",
                "object": "corpus",
                "weight": 1.0,
            }
        ]
    )


_OPERATIONS: Final = (_add_mirror, _edit, _remove, _repair)
OPERATION_NAMES: Final = ("add", "edit", "remove", "repair")


def operation_for(step: int) -> str:
    """Which change step ``step`` makes (``add``, ``edit``, ``remove``, ``repair``)."""
    return OPERATION_NAMES[(step - 1) % len(OPERATION_NAMES)]


def mutate_corpus(base_url: str, context: str, step: int, *, token: str | None = None) -> None:
    """Change ``context`` on the server at ``base_url`` for history step ``step`` (≥ 1).

    Uses only the HTTP API (reads to find what to change, writes to change
    it). ``token`` is sent as a bearer token when the server requires one.
    Raises :class:`RunError` when a call fails; ``ValueError`` for step < 1.
    """
    if step < 1:
        raise ValueError(f"history steps start at 1 (got {step})")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=_TIMEOUT) as client:
        _OPERATIONS[(step - 1) % len(_OPERATIONS)](_Corpus(client, context), step)


def demo_history(
    out_dir: str | Path,
    runs: int,
    *,
    data_dir: str | Path | None = None,
    context: str = "sake",
    on_run: Callable[[int, Run], None] | None = None,
) -> Path:
    """Serve the demo corpus, evaluate it ``runs`` times, mutating it between runs.

    Every run is kept in ``<out_dir>/runs`` (the run store, returned) and its
    evaluation.json is written to ``<out_dir>/evaluation-<i>.json``; the last
    run also to ``<out_dir>/evaluation.json``. ``on_run(i, run)`` is called
    after each run (1-based ``i``), e.g. to print progress. The gate runs with
    the context's thresholds.json when it has one.
    """
    from taguru_refserver.serve import running_server  # the demo's server, started here only

    if runs < 1:
        raise ValueError(f"--runs needs at least one run (got {runs})")
    data = Path(data_dir) if data_dir is not None else demo_data_dir()
    folder = data / context
    thresholds = folder / "thresholds.json"
    target = Path(out_dir)
    store = target / "runs"
    target.mkdir(parents=True, exist_ok=True)
    with running_server(data) as url:
        for index in range(1, runs + 1):
            if index > 1:
                mutate_corpus(url, context, index - 1)
            result = evaluate(
                folder / "eval.jsonl",
                context,
                url=url,
                out=target / f"evaluation-{index}.json",
                thresholds=thresholds if thresholds.is_file() else None,
                store=store,
                env={},
            )
            if on_run is not None:
                on_run(index, result)
    last = target / f"evaluation-{runs}.json"
    write_bytes_atomic(target / "evaluation.json", last.read_bytes())
    return store
