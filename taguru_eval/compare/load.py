"""Reading one side of ``compare``: an evaluation.json into a :class:`RunView`.

GATE_AND_COMPARE.md §6.2 says which fields compare reads, their types and the
default each takes when an older or foreign writer (taguru itself) left it
out; every other key is ignored. The decoding is done by ``msgspec`` against
typed structs: it checks exactly the fields read (the reference's serde view
does the same) and skips the rest without building Python objects, which is
what keeps a 100,000-case file well inside the time budget — ``json.loads``
alone needs about ten seconds for such a file.

Metric values are kept as raw JSON and decoded only through their side's
``definitions[name].statistic`` (§6.6): a value's shape is never guessed from
its keys.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Final

import msgspec
import polars as pl

from taguru_eval.catalog import COMPARISON_METRICS
from taguru_eval.contract import ARTIFACT_NAME, ARTIFACT_STAMP
from taguru_eval.errors import InputError, os_error_text

U64_MAX: Final = 2**64 - 1

_U64 = Annotated[int, msgspec.Meta(ge=0)]


# ------------------------------------------------------------------ the §6.2 view


class _Revision(msgspec.Struct):
    graph: _U64 = 0
    passages: _U64 = 0
    config: _U64 = 0


class _Budget(msgspec.Struct):
    # All three are required once the object is present (§6.2).
    max_items: _U64
    max_bytes: _U64
    max_tokens: _U64


class _Inputs(msgspec.Struct):
    context: str = ""
    budget: _Budget | None = None


class _Corpus(msgspec.Struct):
    revision_after: _Revision = msgspec.field(default_factory=_Revision)
    # A file without ``stable`` is treated as unstable, so it warns (§8.12 #83).
    stable: bool = False


class _Thresholds(msgspec.Struct):
    sha256: str = ""


class _Definition(msgspec.Struct):
    statistic: str = ""


class _Recall(msgspec.Struct):
    recall_at_k: float | None = None
    mrr: float | None = None
    ndcg: float | None = None


class _Valued(msgspec.Struct):
    value: float | None = None


class _Coverage(msgspec.Struct):
    concepts: _Valued | None = None
    labels: _Valued | None = None
    associations: _Valued | None = None


class _Citations(msgspec.Struct):
    # Not nullable inside a present ``citations`` block (§6.2).
    recall: _Valued = msgspec.field(default_factory=_Valued)
    validity: _Valued = msgspec.field(default_factory=_Valued)


class _Case(msgspec.Struct):
    case_id: str = ""
    recall: _Recall | None = None
    coverage: _Coverage | None = None
    citations: _Citations | None = None
    diversity_sources: float | None = None


class _View(msgspec.Struct):
    taguru_evaluation: _U64 = 0
    generated_at: str = ""
    inputs: _Inputs = msgspec.field(default_factory=_Inputs)
    corpus: _Corpus = msgspec.field(default_factory=_Corpus)
    thresholds: _Thresholds | None = None
    # Raw so a bad entry can be reported by its metric name (msgspec would
    # only say ``definitions[...]``); each is decoded by _statistics().
    definitions: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)
    metrics: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)
    cases: list[_Case] = msgspec.field(default_factory=list)


_VIEW_DECODER: Final = msgspec.json.Decoder(_View)
_DEFINITION_DECODER: Final = msgspec.json.Decoder(_Definition)


# ------------------------------------------------------------------ metric shapes


class _Distribution(msgspec.Struct):
    n: _U64 = 0
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    mean: float | None = None
    sum: float | None = None


class _Ratio(msgspec.Struct):
    value: float | None = None
    n: _U64 = 0
    numerator: _U64 | None = None


class _Count(msgspec.Struct):
    value: float | None = None
    n: _U64 = 0


_SHAPE_DECODERS: Final[Mapping[str, msgspec.json.Decoder[_Distribution | _Ratio | _Count]]] = {
    "distribution": msgspec.json.Decoder(_Distribution),
    "ratio": msgspec.json.Decoder(_Ratio),
    "count": msgspec.json.Decoder(_Count),
}


class MetricDecodeError(ValueError):
    """A metric value that does not decode as its declared statistic."""


def metric_scalar(statistic: str, raw: bytes) -> float | None:
    """The scalar of one metric value (§2.3): Distribution ``mean``, Ratio and
    Count ``value``; ``None`` when that field is null or absent.

    ``statistic`` must be one of ``distribution``/``ratio``/``count`` (callers
    warn about any other name first); a value of the wrong shape raises
    :class:`MetricDecodeError` with the decoder's detail.
    """
    decoder = _SHAPE_DECODERS[statistic]
    try:
        shape = decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise MetricDecodeError(_validation_detail(exc)) from None
    except (msgspec.DecodeError, RecursionError) as exc:  # pragma: no cover - parsed before
        raise MetricDecodeError(str(exc) or "recursion limit exceeded") from None
    counters = [("n", shape.n)]
    if isinstance(shape, _Ratio) and shape.numerator is not None:
        counters.append(("numerator", shape.numerator))
    for name, value in counters:
        if value > U64_MAX:
            raise MetricDecodeError(f"{name}: invalid value: integer `{value}`, expected u64")
    if isinstance(shape, _Distribution):
        return shape.mean
    return shape.value


# ------------------------------------------------------------------ the loaded side


Budget = tuple[int, int, int]
"""``(max_items, max_bytes, max_tokens)`` of ``inputs.budget``."""

Revision = tuple[int, int, int]
"""``(graph, passages, config)`` of ``corpus.revision_after``."""


@dataclass(frozen=True)
class RunView:
    """What compare knows about one evaluation.json (§6.2), already defaulted.

    ``cases`` holds one row per distinct ``case_id`` (the last occurrence
    wins) with one nullable Float64 column per comparison metric, in
    ``COMPARISON_METRICS`` order; ``duplicate_case_ids`` lists one entry per
    repeat, in file order, for the §6.3 warnings.
    """

    path: str
    stamp: int
    generated_at: str
    context: str
    budget: Budget | None
    revision_after: Revision
    stable: bool
    thresholds_sha256: str | None
    statistics: Mapping[str, str]
    metrics: Mapping[str, bytes]
    cases: pl.DataFrame
    duplicate_case_ids: tuple[str, ...]

    @property
    def case_count(self) -> int:
        """Distinct case_ids (``cases_base`` / ``cases_head``)."""
        return self.cases.height

    def identity(self) -> dict[str, object]:
        """The header's ``base``/``head`` block (§6.9), keys in order."""
        graph, passages, config = self.revision_after
        return {
            "path": self.path,
            "context": self.context,
            "taguru_evaluation": self.stamp,
            "generated_at": self.generated_at,
            "corpus_revision_after": {"graph": graph, "passages": passages, "config": config},
            "corpus_stable": self.stable,
            "thresholds_sha256": self.thresholds_sha256,
        }


# ------------------------------------------------------------------ entry points


def read_view(source: str | os.PathLike[str], *, label: str | None = None) -> RunView:
    """Load one evaluation.json (or a stored run directory holding one).

    Raises :class:`InputError` with the §6.2 message (``reading <path>: …``,
    ``<path>: malformed evaluation.json: …`` or the stamp-range message);
    ``label`` is the path recorded in the view (default: ``source`` as given).
    """
    given = os.fspath(source)
    file_path = Path(given)
    shown = given
    if file_path.is_dir():
        file_path = file_path / ARTIFACT_NAME
        shown = os.path.join(given, ARTIFACT_NAME)
    try:
        data = file_path.read_bytes()
    except OSError as exc:
        raise InputError(f"reading {shown}: {os_error_text(exc)}", path=shown) from None
    if not is_utf8(data):
        raise InputError(f"reading {shown}: stream did not contain valid UTF-8", path=shown)
    return decode_view(data, shown, label=given if label is None else label)


def view_from_document(
    document: Mapping[str, object], label: str, *, check_stamp: bool = True
) -> RunView:
    """Build a view from an already-parsed evaluation.json object.

    The document goes through the same typed decoder as a file, so an
    in-memory run obeys the same rules. ``check_stamp=False`` skips only the
    range check (the reference's tests build such views directly).
    """
    try:
        data = json.dumps(document, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise InputError(f"{label}: malformed evaluation.json: {exc}", path=label) from None
    return decode_view(data, label, label=label, check_stamp=check_stamp)


def decode_view(data: bytes, shown: str, *, label: str, check_stamp: bool = True) -> RunView:
    """Decode evaluation.json bytes; ``shown`` names the file in messages."""
    view = _decode(data, shown, check_stamp=check_stamp)
    cases, duplicates = _case_frame(view.cases)
    return _run_view(
        view,
        shown,
        label=label,
        cases=cases,
        duplicates=duplicates,
        metrics={name: bytes(raw) for name, raw in view.metrics.items()},
    )


def decode_header(
    data: bytes,
    shown: str,
    *,
    label: str,
    cases: pl.DataFrame,
    duplicates: tuple[str, ...],
    metrics: Mapping[str, bytes],
) -> RunView:
    """A view whose run-level facts come from ``data`` — an evaluation.json
    object without its ``cases`` (and possibly ``metrics``) — and whose cases
    and aggregate values were read elsewhere (the run store's tables).

    ``data`` goes through the same typed decoder, checks and messages as a
    whole file; ``cases`` must have :func:`decode_view`'s frame layout.
    """
    view = _decode(data, shown, check_stamp=True)
    return _run_view(view, shown, label=label, cases=cases, duplicates=duplicates, metrics=metrics)


def _decode(data: bytes, shown: str, *, check_stamp: bool) -> _View:
    try:
        view = _VIEW_DECODER.decode(data)
    except msgspec.ValidationError as exc:
        path, _message = _validation_parts(exc)
        raise _malformed(shown, _validation_detail(exc), path or None) from None
    except msgspec.DecodeError as exc:
        raise _malformed(shown, _syntax_detail(exc, data)) from None
    except RecursionError:
        raise _malformed(shown, "recursion limit exceeded") from None
    _check_u64(view, shown)
    if check_stamp and not 1 <= view.taguru_evaluation <= ARTIFACT_STAMP:
        raise InputError(
            f"{shown}: taguru_evaluation must be within 1..={ARTIFACT_STAMP}, "
            f"got {view.taguru_evaluation}",
            path=shown,
            field="taguru_evaluation",
        )
    return view


def _run_view(
    view: _View,
    shown: str,
    *,
    label: str,
    cases: pl.DataFrame,
    duplicates: tuple[str, ...],
    metrics: Mapping[str, bytes],
) -> RunView:
    budget = view.inputs.budget
    revision = view.corpus.revision_after
    return RunView(
        path=label,
        stamp=view.taguru_evaluation,
        generated_at=view.generated_at,
        context=view.inputs.context,
        budget=None if budget is None else (budget.max_items, budget.max_bytes, budget.max_tokens),
        revision_after=(revision.graph, revision.passages, revision.config),
        stable=view.corpus.stable,
        thresholds_sha256=None if view.thresholds is None else view.thresholds.sha256,
        statistics=_statistics(view.definitions, shown),
        metrics=metrics,
        cases=cases,
        duplicate_case_ids=duplicates,
    )


# ------------------------------------------------------------------ helpers


def is_utf8(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8 (without copying a large file into a ``str``)."""
    if data.isascii():  # the common case, checked word-at-a-time in C
        return True
    # Incremental so a large file is not copied into one more huge ``str``.
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    view = memoryview(data)
    chunk = 1 << 24
    try:
        for start in range(0, len(data), chunk):
            decoder.decode(view[start : start + chunk])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _malformed(shown: str, detail: str, field: str | None = None) -> InputError:
    return InputError(f"{shown}: malformed evaluation.json: {detail}", path=shown, field=field)


_AT_PATH = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_AT_BYTE = re.compile(r"\(byte (?P<offset>\d+)\)$")


def _validation_parts(exc: msgspec.ValidationError) -> tuple[str, str]:
    """``Expected `int`, got `float` - at `$.cases[0].recall``` ->
    ``("cases[0].recall", "expected `int`, got `float`")``."""
    text = str(exc)
    match = _AT_PATH.search(text)
    if match is None:
        return "", _lower_first(text)
    return match.group("path").removeprefix("."), _lower_first(text[: match.start()])


def _validation_detail(exc: msgspec.ValidationError) -> str:
    path, message = _validation_parts(exc)
    return f"{path}: {message}" if path else message


def _syntax_detail(exc: msgspec.DecodeError, data: bytes) -> str:
    text = str(exc)
    match = _AT_BYTE.search(text)
    if match is None:
        return text
    offset = int(match.group("offset"))
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"{text[: match.start()].rstrip()} at line {line} column {column}"


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _statistics(definitions: Mapping[str, msgspec.Raw], shown: str) -> dict[str, str]:
    statistics: dict[str, str] = {}
    for name, raw in definitions.items():
        try:
            statistics[name] = _DEFINITION_DECODER.decode(raw).statistic
        except msgspec.ValidationError as exc:
            path, message = _validation_parts(exc)
            where = f"definitions.{name}.{path}" if path else f"definitions.{name}"
            raise _malformed(shown, f"{where}: {message}", where) from None
    return statistics


def _check_u64(view: _View, shown: str) -> None:
    # msgspec reads integers beyond u64 exactly; serde does not (§1.2).
    counters: list[tuple[str, int]] = [
        ("taguru_evaluation", view.taguru_evaluation),
        ("corpus.revision_after.graph", view.corpus.revision_after.graph),
        ("corpus.revision_after.passages", view.corpus.revision_after.passages),
        ("corpus.revision_after.config", view.corpus.revision_after.config),
    ]
    budget = view.inputs.budget
    if budget is not None:
        counters += [
            ("inputs.budget.max_items", budget.max_items),
            ("inputs.budget.max_bytes", budget.max_bytes),
            ("inputs.budget.max_tokens", budget.max_tokens),
        ]
    for field, value in counters:
        if value > U64_MAX:
            raise _malformed(
                shown, f"{field}: invalid value: integer `{value}`, expected u64", field
            )


# The reader-side path of every comparison metric inside a case block (§3).
# A metric added to COMPARISON_METRICS without a path here fails at import.
_CASE_PATHS: Final[Mapping[str, str]] = {
    "recall.recall_at_k": "recall.recall_at_k",
    "recall.mrr": "recall.mrr",
    "recall.ndcg": "recall.ndcg",
    "coverage.concepts": "coverage.concepts.value",
    "coverage.labels": "coverage.labels.value",
    "coverage.associations": "coverage.associations.value",
    "citations.recall": "citations.recall.value",
    "citations.locator_validity": "citations.validity.value",
    "diversity.sources": "diversity_sources",
}
if set(_CASE_PATHS) != set(COMPARISON_METRICS):  # pragma: no cover - an edit-time guard
    raise RuntimeError("compare_load._CASE_PATHS must cover exactly COMPARISON_METRICS")


def _case_frame(cases: list[_Case]) -> tuple[pl.DataFrame, tuple[str, ...]]:
    """One row per distinct case_id (last occurrence wins), metric columns in
    ``COMPARISON_METRICS`` order, plus the repeated ids in file order."""
    ids: list[str] = []
    rk: list[float | None] = []
    mrr: list[float | None] = []
    ndcg: list[float | None] = []
    concepts: list[float | None] = []
    labels: list[float | None] = []
    associations: list[float | None] = []
    cit_recall: list[float | None] = []
    validity: list[float | None] = []
    diversity: list[float | None] = []
    seen: set[str] = set()
    duplicates: list[str] = []
    # One pass with plain attribute reads: this loop is the per-case cost of a
    # 100,000-case compare, so it stays free of per-metric function calls.
    for case in cases:
        case_id = case.case_id
        if case_id in seen:
            duplicates.append(case_id)
        else:
            seen.add(case_id)
        ids.append(case_id)
        recall = case.recall
        if recall is None:
            rk.append(None)
            mrr.append(None)
            ndcg.append(None)
        else:
            rk.append(recall.recall_at_k)
            mrr.append(recall.mrr)
            ndcg.append(recall.ndcg)
        coverage = case.coverage
        if coverage is None:
            concepts.append(None)
            labels.append(None)
            associations.append(None)
        else:
            concepts.append(None if coverage.concepts is None else coverage.concepts.value)
            labels.append(None if coverage.labels is None else coverage.labels.value)
            associations.append(
                None if coverage.associations is None else coverage.associations.value
            )
        citations = case.citations
        if citations is None:
            cit_recall.append(None)
            validity.append(None)
        else:
            cit_recall.append(citations.recall.value)
            validity.append(citations.validity.value)
        diversity.append(case.diversity_sources)
    by_path: dict[str, list[float | None]] = {
        "recall.recall_at_k": rk,
        "recall.mrr": mrr,
        "recall.ndcg": ndcg,
        "coverage.concepts.value": concepts,
        "coverage.labels.value": labels,
        "coverage.associations.value": associations,
        "citations.recall.value": cit_recall,
        "citations.validity.value": validity,
        "diversity_sources": diversity,
    }
    data: dict[str, list[str] | list[float | None]] = {"case_id": ids}
    schema: dict[str, pl.DataType] = {"case_id": pl.String()}
    for name in COMPARISON_METRICS:
        data[name] = by_path[_CASE_PATHS[name]]
        schema[name] = pl.Float64()
    frame = pl.DataFrame(data, schema=schema)
    if duplicates:
        frame = frame.unique(subset="case_id", keep="last", maintain_order=True)
    return frame, tuple(duplicates)
