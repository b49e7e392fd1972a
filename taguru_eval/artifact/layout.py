"""The case block's layout (EVALUATE.md §6.6): which value goes where, and in which order.

A case block mixes values the lanes recorded (the passage and structural
blocks, the citation checks, the evidence and budget blocks) with values the
scorer computed (one ``cases`` row). The layout lists both in the block's key
order: a :class:`~taguru_eval.catalog.CaseField` takes its value from the
``cases`` row, a :class:`FromLane` from the lane output. Per-case metrics come
from the catalog, so a metric the catalog adds is written at its path (after
the listed keys of its block, or as a new block at the end) without an edit
here; the reader (:mod:`.read`) walks the same layout backwards.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Final

import msgspec
import polars as pl

from taguru_eval._base.text import encode_json_each
from taguru_eval.artifact.blocks import (
    budget_block,
    citation_check_block,
    evidence_block,
    passage_block,
    structural_block,
)
from taguru_eval.catalog import (
    ANSWERS_BLOCK,
    ANSWERS_METRICS,
    CATALOG,
    STABILITY_BLOCK,
    STABILITY_DIFFERS,
    STABILITY_METRICS,
    STABILITY_UNSTABLE,
    CaseField,
    Catalog,
)
from taguru_eval.errors import temporary_write_error


@dataclass(frozen=True)
class FromLane:
    """A case-block value copied from the lane output; ``None`` from ``render`` omits it.

    ``block`` names the ``cases`` column whose non-null value means the
    enclosing block is written (the citation checks live in ``citations``).
    """

    path: tuple[str, ...]
    render: Callable[[Mapping[str, Any]], Any]
    block: str | None = None
    # The same value with its binary32 values as placeholders, collected into the
    # list (LaneBlocks: spelled with the batch, no F32 object each).
    slotted: Callable[[Mapping[str, Any], list[float]], Any] | None = None


Slot = CaseField | FromLane

_RECALL: Final = "recall_expected_total"
_CITATIONS: Final = "citations_expected_total"
_LANE_CROSS: Final = "lane_cross_structural_hit"


def _optional(key: str, render: Callable[[Any], Any]) -> Callable[[Mapping[str, Any]], Any]:
    def rendered(output: Mapping[str, Any]) -> Any:
        value = output.get(key)
        return None if value is None else render(value)

    return rendered


def _count(column: str, path: tuple[str, ...], block: str) -> CaseField:
    return CaseField(column, path, pl.Int64(), block=block)


def _coverage(name: str, catalog: Catalog) -> tuple[Slot, ...]:
    block = f"coverage_{name}_expected"
    return (
        _count(block, ("coverage", name, "expected"), block),
        _count(f"coverage_{name}_matched", ("coverage", name, "matched"), block),
        catalog.per_case[f"coverage.{name}"],
    )


def _answers(catalog: Catalog) -> tuple[Slot, ...]:
    """A run given --answers: its three values, then its counts (the checks, which
    name the answers file's text, are written beside them by the pipeline)."""
    if not set(ANSWERS_METRICS) <= set(catalog):
        return ()
    metric = catalog.per_case
    return (
        metric["answers.hit_at_k"],
        metric["answers.mrr"],
        metric["answers.coverage"],
        _count(ANSWERS_BLOCK, ("answers", "declared"), ANSWERS_BLOCK),
        _count("answers_found", ("answers", "found"), ANSWERS_BLOCK),
        _count("answers_first_rank", ("answers", "first_rank"), ANSWERS_BLOCK),
    )


def _stability(catalog: Catalog) -> tuple[Slot, ...]:
    """A run given --repeat N (N > 1): ``{"repeats": N, "unstable": …, "differs": […]}``."""
    if not set(STABILITY_METRICS) <= set(catalog):
        return ()
    return (
        _count(STABILITY_BLOCK, ("stability", "repeats"), STABILITY_BLOCK),
        CaseField(
            STABILITY_UNSTABLE, ("stability", "unstable"), pl.Boolean(), block=STABILITY_BLOCK
        ),
        CaseField(
            STABILITY_DIFFERS,
            ("stability", "differs"),
            pl.List(pl.String),
            block=STABILITY_BLOCK,
        ),
    )


def case_layout(catalog: Catalog = CATALOG) -> tuple[Slot, ...]:
    """Every value of a case block, in the block's key order (EVALUATE.md §6.6)."""
    metric = catalog.per_case
    listed: tuple[Slot, ...] = (
        FromLane(("case_id",), lambda output: output["case_id"]),
        FromLane(("query",), lambda output: output["query"]),
        FromLane(("cues",), lambda output: list(output.get("cues") or []) or None),
        FromLane(("limit",), lambda output: output["limit"]),
        FromLane(
            ("passage",),
            lambda output: passage_block(output["passage"]),
            slotted=lambda output, binary32: passage_block(output["passage"], binary32),
        ),
        CaseField("passage_outcome", ("passage", "outcome"), pl.String(), lane=True),
        metric["latency.passage_ms"],
        FromLane(("structural",), _optional("structural", structural_block)),
        metric["recall.recall_at_k"],
        metric["recall.mrr"],
        metric["recall.ndcg"],
        _count(_RECALL, ("recall", "expected_total"), _RECALL),
        _count("recall_matched", ("recall", "matched"), _RECALL),
        *_coverage("concepts", catalog),
        *_coverage("labels", catalog),
        *_coverage("associations", catalog),
        CaseField(_LANE_CROSS, ("lane_cross", "structural_hit"), pl.Boolean(), block=_LANE_CROSS),
        CaseField(
            "lane_cross_passage_hit", ("lane_cross", "passage_hit"), pl.Boolean(), block=_LANE_CROSS
        ),
        _count(_CITATIONS, ("citations", "recall", "expected_total"), _CITATIONS),
        _count("citations_matched", ("citations", "recall", "matched"), _CITATIONS),
        metric["citations.recall"],
        _count(_CITATIONS, ("citations", "validity", "expected_total"), _CITATIONS),
        _count("citations_valid", ("citations", "validity", "valid"), _CITATIONS),
        metric["citations.locator_validity"],
        FromLane(
            ("citations", "checks"),
            lambda output: [citation_check_block(check) for check in output.get("checks") or []],
            block=_CITATIONS,
        ),
        CaseField("missed", ("missed",), pl.List(pl.String)),
        CaseField("missed_truncated", ("missed_truncated",), pl.Int64()),
        FromLane(("evidence",), _optional("evidence", evidence_block)),
        metric["latency.evidence_ms"],
        FromLane(("budget",), _optional("budget", budget_block)),
        metric["budget.items_used"],
        metric["budget.bytes_used"],
        metric["budget.tokens_used"],
        CaseField("budget_omitted_total", ("budget", "omitted_total"), pl.Int64(), lane=True),
        metric["diversity.sources"],
        *_answers(catalog),
    )
    placed = {slot.column for slot in listed if isinstance(slot, CaseField)}
    added = tuple(field for field in metric.values() if field.column not in placed)
    # Last, after any metric a catalog adds: a block taguru's reader never meets.
    return (*listed, *added, *_stability(catalog))


CASE_LAYOUT: Final = case_layout()


Step = tuple[
    str | None,
    Callable[[Mapping[str, Any]], Any] | None,
    str,
    tuple[str, ...],
    str,
    tuple[str, ...],
]
"""One value of a case block: (the column gating its block, the lane renderer or
``None`` for a ``cases`` column, that column, the enclosing keys, the last key,
the whole path)."""


def case_steps(layout: tuple[Slot, ...] = CASE_LAYOUT) -> tuple[Step, ...]:
    """``layout`` as :func:`build_case_block` walks it (made once per artifact: a
    100,000-case artifact walks it 100,000 times)."""
    steps: list[Step] = []
    for slot in layout:
        if isinstance(slot, FromLane):
            steps.append((slot.block, slot.render, "", slot.path[:-1], slot.path[-1], slot.path))
        elif not slot.lane:  # values the lanes recorded in their own blocks are there already
            steps.append((slot.block, None, slot.column, slot.path[:-1], slot.path[-1], ()))
    return tuple(steps)


Rendered = Mapping[tuple[str, ...], Any]
"""A case's lane values as its block writes them, by path (:class:`LaneBlocks`:
encoded, as ``msgspec.Raw``)."""

_LANE_RENDERS: Final = tuple(
    (slot.path, slot.render) for slot in CASE_LAYOUT if isinstance(slot, FromLane)
)
_LANE_VALUES: Final = tuple(
    (slot.render, slot.slotted) for slot in CASE_LAYOUT if isinstance(slot, FromLane)
)


def lane_values(lane_output: Mapping[str, Any]) -> list[Any]:
    """One case's lane values as its block writes them, in :data:`CASE_LAYOUT`'s
    order (``None`` where the case has none)."""
    return [render(lane_output) for _, render in _LANE_RENDERS]


class LaneBlocks:
    """Each case's lane values, encoded as its block writes them the moment the case
    finishes, and kept on disk (the pipeline hands :meth:`add` to the network phase).

    Encoding a case's hits, probes and checks is most of building a case block
    and needs nothing the scorer computes, so it runs while the other cases
    wait on the network. Kept as Python objects, a 100,000-case run's values
    would take gigabytes; encoded, they go in batches to an unnamed temporary
    file (gone when closed, or when the process dies) and only each case's
    offsets stay in memory. :meth:`values` reads one case back as
    ``msgspec.Raw`` values that the artifact's encoder copies as they are.
    The catalog adds no lane value (only ``cases`` columns), so every
    layout's lane values are these.
    """

    BATCH: Final = 256
    """Cases encoded together: the binary32 spelling pass costs one Polars call
    per batch (:func:`~taguru_eval._base.text.encode_json_each`)."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._directory = directory
        self._file: IO[bytes] | None = None
        self._size = 0
        self._pending: list[tuple[int, list[Any], list[list[float] | None]]] = []
        # Per case, at its row: the start of its values in the file, then each
        # value's length (-1: the case has no such value).
        self._spans = array("q")
        self._row: dict[int, int] = {}

    def add(self, lane_output: Mapping[str, Any]) -> None:
        """Renders one finished case's lane values (encoded with the next batch)."""
        values: list[Any] = []
        binary32: list[list[float] | None] = []
        for render, slotted in _LANE_VALUES:
            if slotted is None:
                values.append(render(lane_output))
                binary32.append(None)
            else:
                held: list[float] = []
                values.append(slotted(lane_output, held))
                binary32.append(held)
        self._pending.append((lane_output["case_index"], values, binary32))
        if len(self._pending) >= self.BATCH:
            self.flush()

    def flush(self) -> None:
        """Encodes the pending cases and appends them to the file."""
        if not self._pending:
            return
        present: list[Any] = []
        held: list[list[float] | None] = []
        for _, values, binary32 in self._pending:
            for value, floats in zip(values, binary32, strict=True):
                if value is not None:
                    present.append(value)
                    held.append(floats)
        encoded = iter(encode_json_each(present, binary32=held))
        chunks: list[bytes] = []
        for case_index, values, _ in self._pending:
            self._row[case_index] = len(self._spans)
            self._spans.append(self._size)
            for value in values:
                if value is None:
                    self._spans.append(-1)
                    continue
                data = next(encoded)
                chunks.append(data)
                self._spans.append(len(data))
                self._size += len(data)
        self._pending = []
        try:
            if self._file is None:
                # Held open until close(): the file is the values' one home.
                self._file = tempfile.TemporaryFile(dir=self._directory)  # noqa: SIM115
            self._file.seek(0, os.SEEK_END)
            self._file.write(b"".join(chunks))
            self._file.flush()
        except OSError as exc:
            # A full or read-only temporary directory, a file-size limit: one line,
            # exit 1 (the run's finished cases stay in its checkpoint).
            where = os.fspath(self._directory or tempfile.gettempdir())
            raise temporary_write_error(where, exc) from None

    def __len__(self) -> int:
        return len(self._row) + len(self._pending)

    def values(self, case_index: int) -> Rendered | None:
        """The encoded lane values of case ``case_index`` by path (``None`` where the
        case has none), if it was added."""
        return self.values_of([case_index])[0]

    def values_of(self, case_indexes: Sequence[int]) -> list[Rendered | None]:
        """:meth:`values` of each case, read from the file together.

        The cases were encoded in the order they finished, near enough case
        order that a batch of cases in order lies in one stretch of the file:
        that stretch is read with one call (20,000 reads of a case each cost a
        search-only run 0.2 s), unless it is mostly other cases' values."""
        self.flush()
        width = len(_LANE_RENDERS)
        spans: list[tuple[int, array[int]] | None] = []
        for case_index in case_indexes:
            row = self._row.get(case_index)
            if row is None or self._file is None:
                spans.append(None)
                continue
            spans.append((self._spans[row], self._spans[row + 1 : row + 1 + width]))
        present = [span for span in spans if span is not None]
        if not present:
            return [None] * len(spans)
        needed = sum(max(0, n) for _, lengths in present for n in lengths)
        first = min(start for start, _ in present)
        end = max(start + sum(max(0, n) for n in lengths) for start, lengths in present)
        assert self._file is not None
        fd = self._file.fileno()
        stretch = os.pread(fd, end - first, first) if end - first <= 2 * needed else None
        rendered: list[Rendered | None] = []
        for span in spans:
            if span is None:
                rendered.append(None)
                continue
            start, lengths = span
            size = sum(max(0, n) for n in lengths)
            if stretch is None:
                data = os.pread(fd, size, start)
            else:
                data = stretch[start - first : start - first + size]
            rendered.append(_by_path(data, lengths))
        return rendered

    def close(self) -> None:
        """Removes the file (also done when the object is collected)."""
        if self._file is not None:
            self._file.close()
            self._file = None


def _by_path(data: bytes, lengths: Sequence[int]) -> Rendered:
    """One case's encoded values (``data``, ``lengths`` of each; -1: none) by path."""
    rendered: dict[tuple[str, ...], Any] = {}
    offset = 0
    for (path, _), length in zip(_LANE_RENDERS, lengths, strict=True):
        if length < 0:
            rendered[path] = None
            continue
        rendered[path] = msgspec.Raw(data[offset : offset + length])
        offset += length
    return rendered


def case_block(
    lane_output: Mapping[str, Any],
    row: Mapping[str, Any],
    layout: tuple[Slot, ...] = CASE_LAYOUT,
) -> dict[str, Any]:
    """One ``cases[]`` entry (§6.6) from a lane output and its row of the cases frame.

    A value is written when its block exists (its ``block`` column is not
    null) and, for a lane value, when the lane recorded it; values the lanes
    recorded inside their own blocks (``lane=True``) are already there.
    """
    return build_case_block(case_steps(layout), lane_output, row)


def build_case_block(
    steps: tuple[Step, ...],
    lane_output: Mapping[str, Any],
    row: Mapping[str, Any],
    rendered: Rendered | None = None,
) -> dict[str, Any]:
    """:func:`case_block` over the layout's :func:`case_steps`, taking the lane
    values from ``rendered`` when the case's were rendered as it finished."""
    block: dict[str, Any] = {}
    for gate, render, column, enclosing, key, path in steps:
        if gate is not None and row.get(gate) is None:
            continue
        if render is None:
            value = row.get(column)
        else:
            # A value rendered as the case finished, else (a layout's lane value
            # LaneBlocks does not know, a case it never saw) rendered here.
            value = (
                rendered[path] if rendered is not None and path in rendered else render(lane_output)
            )
        if value is None:
            continue
        target = block
        for name in enclosing:
            target = target.setdefault(name, {})
        target[key] = list(value) if isinstance(value, list) else value
    return block


def get_path(block: Any, *path: str) -> Any:
    """``block[path[0]]…[path[-1]]``, or None where a link is missing or not an object."""
    for key in path:
        if not isinstance(block, Mapping):
            return None
        block = block.get(key)
    return block


def column_paths(layout: tuple[Slot, ...] = CASE_LAYOUT) -> dict[str, tuple[str, ...]]:
    """``cases`` column -> the case-block path it is read back from (the first
    place it is written, e.g. ``citations.recall.expected_total``)."""
    paths: dict[str, tuple[str, ...]] = {}
    for slot in layout:
        if isinstance(slot, CaseField):
            paths.setdefault(slot.column, slot.path)
    return paths
