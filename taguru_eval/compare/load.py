"""Reading one side of ``compare``: an evaluation.json into a :class:`RunView`.

GATE_AND_COMPARE.md §6.2 says which fields compare reads, their types and the
default each takes when an older or foreign writer (taguru itself) left it
out; every other key is ignored. The decoding is done by ``msgspec`` against
typed structs: it checks exactly the fields read (the reference's serde view
does the same) and skips the rest without building Python objects, which is
what keeps a 100,000-case file well inside the time budget
(``benchmarks/compare_bench.py``): ``json.loads`` alone would take longer.

Metric values are kept as raw JSON and decoded only through their side's
``definitions[name].statistic`` (§6.6): a value's shape is never guessed from
its keys. A key given twice inside an object the view reads is refused as
serde refuses it (§1.2, :mod:`.repeats`); msgspec alone would keep the last.
"""

from __future__ import annotations

import functools
import json
import operator
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Annotated, Any, Final, cast

import msgspec
import polars as pl

from taguru_eval._base.serde_numbers import NumberOutOfRange, read_number, read_numbers
from taguru_eval._base.structs import validation_detail as _validation_detail
from taguru_eval._base.structs import validation_parts as _validation_parts
from taguru_eval._base.text import to_f32
from taguru_eval.artifact import codec
from taguru_eval.catalog import CATALOG, SCALAR_FIELD, Catalog, repetitions_of
from taguru_eval.compare.abstention import SIDE_SCHEMA, AbstentionSide
from taguru_eval.compare.repeats import find_repeat, first_repeat, shape_of
from taguru_eval.compare.stability import StabilitySide, side_from_blocks
from taguru_eval.errors import InputError

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


class _MustRefuseInputs(msgspec.Struct):
    # ABSTENTION.md §3.8 ``inputs.must_refuse``; only what compare warns about.
    sha256: str | None = None
    refusal_rule: str | None = None


class _AnswersInputs(msgspec.Struct):
    # ``inputs.answers`` of a run given --answers; read as any JSON (shown only).
    match: Any = None
    cases: Any = None


class _Inputs(msgspec.Struct):
    context: str = ""
    budget: _Budget | None = None
    # Shown beside the budget, never compared: read as any JSON so a foreign
    # value cannot make a file compare refuses (§6.2 does not read it).
    mode: Any = None
    must_refuse: _MustRefuseInputs | None = None
    answers: _AnswersInputs | None = None
    # ``inputs.repeat`` of a run given --repeat: any JSON, so a foreign value
    # cannot make a file compare refuses (read through ``repetitions_of``).
    repeat: Any = None
    # ``inputs.selection`` of a run given --sample/--filter/--tag/--failing: any
    # JSON (a foreign value cannot make a file compare refuses); a side with an
    # object there ran only some cases.
    selection: Any = None


class _Corpus(msgspec.Struct):
    revision_after: _Revision = msgspec.field(default_factory=_Revision)
    # A file without ``stable`` is treated as unstable, so it warns (§8.12 #83).
    stable: bool = False


class _Thresholds(msgspec.Struct):
    sha256: str = ""
    # Read for display only (the gate verdict of a side); any type is accepted,
    # so compare's validation is unchanged.
    passed: object = None


class _Definition(msgspec.Struct):
    statistic: str = ""


class _AbstentionVector(msgspec.Struct):
    effective_floors: list[float] = msgspec.field(default_factory=list)


class _AbstentionCase(msgspec.Struct):
    case_id: str = ""
    kind: str = "unspecified"
    verdict: str | None = None


class _Abstention(msgspec.Struct):
    # ABSTENTION.md §3.8's top-level block: what compare's §3.10 block reads.
    rule: str | None = None
    vector: _AbstentionVector = msgspec.field(default_factory=_AbstentionVector)
    cases: list[_AbstentionCase] = msgspec.field(default_factory=list)


class _View(msgspec.Struct):
    # UNSET rather than 0, so a reader that requires the stamp can say it is
    # missing; compare reads it as 0 (§6.2), see :attr:`stamp`.
    taguru_evaluation: _U64 | msgspec.UnsetType = msgspec.UNSET
    generated_at: str = ""
    inputs: _Inputs = msgspec.field(default_factory=_Inputs)
    corpus: _Corpus = msgspec.field(default_factory=_Corpus)
    thresholds: _Thresholds | None = None
    # Raw so a bad entry can be reported by its metric name (msgspec would
    # only say ``definitions[...]``); each is decoded by _statistics().
    definitions: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)
    metrics: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)
    # After ``cases`` in the file: absent from a stored run's head, whose
    # must-refuse verdicts come from its tables instead (:mod:`.parquet`).
    abstention: _Abstention | None = None

    @property
    def stamp(self) -> int:
        """``taguru_evaluation``, 0 when the file has none (§6.2's default)."""
        stamp = self.taguru_evaluation
        return 0 if isinstance(stamp, msgspec.UnsetType) else stamp


_HEAD_DECODER: Final = msgspec.json.Decoder(_View)
_DEFINITION_DECODER: Final = msgspec.json.Decoder(_Definition)


# ------------------------------------------------------------------ case blocks

_NOT_NULLABLE: Final = frozenset({("citations", "recall"), ("citations", "validity")})
"""Links of a case block that may be absent but never ``null`` (§6.2): taguru's
reader types ``citations.recall`` and ``citations.validity`` as plain objects."""

_Tree = dict[str, "_Tree"]


_NULL: Final = msgspec.Raw(b"null")


def _case_type(paths: tuple[tuple[str, ...], ...], *, raw: bool) -> type[msgspec.Struct]:
    """A typed view of a case block reading exactly ``paths``: every link an
    optional object, every leaf a nullable float (integers accepted) — or, with
    ``raw``, the leaf's JSON text, read as taguru reads it by :func:`_case_frame`."""
    tree: _Tree = {}
    for path in paths:
        node = tree
        for key in path:
            node = node.setdefault(key, {})

    def struct(name: str, node: _Tree, at: tuple[str, ...]) -> type[msgspec.Struct]:
        fields: list[tuple[str, Any, Any]] = []
        for key, child in node.items():
            where = (*at, key)
            if not child:
                fields.append((key, msgspec.Raw, _NULL) if raw else (key, float | None, None))
                continue
            inner = struct(f"{name}_{key}", child, where)
            if raw:
                # An absent block is one shared empty block, so a path is followed
                # by ``operator.attrgetter`` in C; only an explicit ``null`` is None.
                kind = inner if where in _NOT_NULLABLE else inner | None
                fields.append((key, kind, inner()))
            elif where in _NOT_NULLABLE:
                fields.append((key, inner, msgspec.field(default_factory=inner)))
            else:
                fields.append((key, inner | None, None))
        return msgspec.defstruct(name, fields, frozen=raw)

    top = struct("_RawCaseBlock" if raw else "_CaseBlock", tree, ())
    # ``stability`` (run --repeat) as any JSON: read leniently by side_from_blocks.
    return msgspec.defstruct(
        "_Case", [("case_id", str, ""), ("stability", Any, None)], bases=(top,)
    )


@functools.cache
def _view_decoder(
    paths: tuple[tuple[str, ...], ...], *, raw: bool = False
) -> msgspec.json.Decoder[Any]:
    """The whole view; with ``raw`` the compared values come as their JSON text
    (the decoding that runs), without it as checked floats (the decoding that
    words a problem, and the shape the repeated-key check walks)."""
    cases: Any = list[_case_type(paths, raw=raw)]  # type: ignore[misc]
    whole = msgspec.defstruct(
        "_WholeView", [("cases", cases, msgspec.field(default_factory=list))], bases=(_View,)
    )
    return msgspec.json.Decoder(whole)


def _compared_paths(catalog: Catalog) -> tuple[tuple[str, ...], ...]:
    return tuple(catalog.per_case[name].path for name in catalog.compared)


def _follow(block: object, path: tuple[str, ...]) -> msgspec.Raw:
    """The JSON text at ``path`` of a raw case block (``null`` where a link is absent)."""
    for key in path:
        block = getattr(block, key)
        if block is None:
            return _NULL
    return cast(msgspec.Raw, block)


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
    field = SCALAR_FIELD[statistic]
    if getattr(shape, field) is None:
        return None
    # The checked value is the nearest double; taguru reads the text (ERRATA row 24).
    text = bytes(getattr(_SCALAR_TEXT_DECODERS[field].decode(raw), field)).decode()
    try:
        return read_number(text)
    except NumberOutOfRange:
        raise MetricDecodeError(f"{field}: number out of range") from None


class _MeanText(msgspec.Struct):
    mean: msgspec.Raw = _NULL


class _ValueText(msgspec.Struct):
    value: msgspec.Raw = _NULL


_SCALAR_TEXT_DECODERS: Final[Mapping[str, msgspec.json.Decoder[Any]]] = {
    "mean": msgspec.json.Decoder(_MeanText),
    "value": msgspec.json.Decoder(_ValueText),
}


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
    gate_passed: bool | None = None
    mode: str | None = None
    """``inputs.mode`` when it is a string (shown, never compared)."""
    """The side's recorded gate verdict (``thresholds.passed``); None when report-only."""
    abstention: AbstentionSide | None = None
    must_refuse_rule: str | None = None
    must_refuse_sha256: str | None = None
    answers: Mapping[str, object] | None = None
    """``inputs.answers`` (``match``, ``cases``) of a run given --answers; else None."""
    repeat: int | None = None
    """``inputs.repeat`` when an integer above 1 (a run given --repeat); else None."""
    stability: StabilitySide | None = None
    """The per-case stability verdicts of a run given --repeat N > 1; else None."""
    selection: Mapping[str, object] | None = None
    """``inputs.selection`` of a run that ran only some cases of its file; else None."""

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


def read_view(
    source: str | os.PathLike[str],
    *,
    label: str | None = None,
    catalog: Catalog = CATALOG,
    stamp_required: bool = False,
) -> RunView:
    """Load one evaluation.json (or a stored run directory holding one).

    Raises :class:`InputError` with the §6.2 message (``reading <path>: …``,
    ``<path>: malformed evaluation.json: …`` or the stamp-range message);
    ``label`` is the path recorded in the view (default: ``source`` as given).
    A file without ``taguru_evaluation`` reads as stamp 0 and fails the range
    check with ``got 0``, as §6.2 pins for compare; with ``stamp_required``
    (the readers that are not compare) it is ``<path>: not an
    evaluation.json: missing integer 'taguru_evaluation'``, export's words.
    """
    data, shown = codec.read_bytes(source)
    return decode_view(
        data,
        shown,
        label=os.fspath(source) if label is None else label,
        catalog=catalog,
        stamp_required=stamp_required,
    )


def view_from_document(
    document: Mapping[str, object],
    label: str,
    *,
    check_stamp: bool = True,
    catalog: Catalog = CATALOG,
    stamp_required: bool = False,
) -> RunView:
    """Build a view from an already-parsed evaluation.json object.

    The document goes through the same typed decoder as a file, so an
    in-memory run obeys the same rules. ``check_stamp=False`` skips only the
    range check (the reference's tests build such views directly);
    ``stamp_required`` is :func:`read_view`'s.
    """
    try:
        data = json.dumps(document, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise InputError(f"{label}: malformed evaluation.json: {exc}", path=label) from None
    # Serialised from a mapping, the bytes cannot repeat a key.
    return decode_view(
        data,
        label,
        label=label,
        check_stamp=check_stamp,
        check_repeats=False,
        catalog=catalog,
        stamp_required=stamp_required,
    )


def decode_view(
    data: bytes,
    shown: str,
    *,
    label: str,
    check_stamp: bool = True,
    check_repeats: bool = True,
    catalog: Catalog = CATALOG,
    stamp_required: bool = False,
) -> RunView:
    """Decode evaluation.json bytes; ``shown`` names the file in messages.

    The case blocks are read at the paths of ``catalog``'s comparison metrics.
    ``check_repeats=False`` skips the repeated-key check (bytes serialised
    from a mapping cannot hold one); ``stamp_required`` is :func:`read_view`'s.
    """
    paths = _compared_paths(catalog)
    checked = _view_decoder(paths)
    try:
        view = _view_decoder(paths, raw=True).decode(data)
        cases, duplicates = _case_frame(view.cases, catalog)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, _NotANumber):
        # The checked decoding refuses the same bytes and words the first problem
        # in file order, as it always has.
        _decode(data, shown, decoder=checked)
        raise _malformed(shown, "a compared value is not a number") from None
    except _OutOfRange as exc:
        _decode(data, shown, decoder=checked)  # msgspec's words where it refuses it too
        field = f"cases[{exc.case}].{'.'.join(exc.path)}"
        raise _malformed(shown, f"{field}: number out of range", field) from None
    _check(
        data,
        view,
        shown,
        checked,
        check_stamp=check_stamp,
        check_repeats=check_repeats,
        stamp_required=stamp_required,
    )
    stability = side_from_blocks(
        [(case.case_id, case.stability) for case in view.cases], view.inputs.repeat
    )
    return replace(
        _run_view(
            view,
            shown,
            label=label,
            cases=cases,
            duplicates=duplicates,
            metrics={name: bytes(raw) for name, raw in view.metrics.items()},
        ),
        stability=stability,
    )


def decode_header(
    data: bytes,
    shown: str,
    *,
    label: str,
    cases: pl.DataFrame,
    duplicates: tuple[str, ...],
    metrics: Mapping[str, bytes],
    stamp_required: bool = False,
) -> RunView:
    """A view whose run-level facts come from ``data`` — an evaluation.json
    object without its ``cases`` (and possibly ``metrics``) — and whose cases
    and aggregate values were read elsewhere (the run store's tables).

    ``data`` goes through the same typed decoder, checks and messages as a
    whole file; ``cases`` must have :func:`decode_view`'s frame layout.
    """
    view = _decode(data, shown, decoder=_HEAD_DECODER)
    _check(
        data,
        view,
        shown,
        _HEAD_DECODER,
        check_stamp=True,
        check_repeats=True,
        stamp_required=stamp_required,
    )
    return _run_view(view, shown, label=label, cases=cases, duplicates=duplicates, metrics=metrics)


def _decode(data: bytes, shown: str, *, decoder: msgspec.json.Decoder[Any]) -> Any:
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        path, _message = _validation_parts(exc)
        raise _malformed(shown, _validation_detail(exc), path or None) from None
    except msgspec.DecodeError as exc:
        raise _malformed(shown, _syntax_detail(exc, data)) from None
    except RecursionError:
        raise _malformed(shown, "recursion limit exceeded") from None


def _check(
    data: bytes,
    view: Any,
    shown: str,
    decoder: msgspec.json.Decoder[Any],
    *,
    check_stamp: bool,
    check_repeats: bool,
    stamp_required: bool,
) -> None:
    """The checks after a successful decoding: repeated keys (in the objects
    ``decoder``'s type reads), u64 counters, the stamp."""
    if check_repeats:
        _check_repeats(data, view, shown, decoder)
    _check_u64(view, shown)
    if check_stamp:
        stamp = view.taguru_evaluation
        codec.check_stamp(
            None if isinstance(stamp, msgspec.UnsetType) else stamp, shown, required=stamp_required
        )


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
    must_refuse = view.inputs.must_refuse
    return RunView(
        path=label,
        stamp=view.stamp,
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
        gate_passed=_gate_passed(view.thresholds),
        mode=view.inputs.mode if isinstance(view.inputs.mode, str) else None,
        abstention=_abstention_side(view.abstention, must_refuse),
        must_refuse_rule=None if must_refuse is None else must_refuse.refusal_rule,
        must_refuse_sha256=None if must_refuse is None else must_refuse.sha256,
        answers=(
            None
            if view.inputs.answers is None
            else {"match": view.inputs.answers.match, "cases": view.inputs.answers.cases}
        ),
        repeat=repetitions_of(view.inputs.repeat),
        selection=view.inputs.selection if isinstance(view.inputs.selection, dict) else None,
    )


def _abstention_side(
    block: _Abstention | None, inputs: _MustRefuseInputs | None
) -> AbstentionSide | None:
    if block is None:
        return None
    cases = pl.DataFrame(
        [(case.case_id, case.kind, case.verdict) for case in block.cases],
        schema=SIDE_SCHEMA,
        orient="row",
    )
    return AbstentionSide(
        rule=block.rule,
        # Binary32 values, as a stored run's tables hold them.
        floors=tuple(to_f32(value) for value in block.vector.effective_floors),
        sha256=None if inputs is None else inputs.sha256,
        cases=cases,
    )


def _gate_passed(thresholds: _Thresholds | None) -> bool | None:
    passed = None if thresholds is None else thresholds.passed
    return passed if isinstance(passed, bool) else None


# ------------------------------------------------------------------ helpers


def _malformed(shown: str, detail: str, field: str | None = None) -> InputError:
    return InputError(f"{shown}: malformed evaluation.json: {detail}", path=shown, field=field)


_AT_BYTE = re.compile(r"\(byte (?P<offset>\d+)\)$")


def _syntax_detail(exc: msgspec.DecodeError, data: bytes) -> str:
    text = str(exc)
    match = _AT_BYTE.search(text)
    if match is None:
        return text
    offset = int(match.group("offset"))
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"{text[: match.start()].rstrip()} at line {line} column {column}"


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


def _check_repeats(
    data: bytes, view: _View, shown: str, decoder: msgspec.json.Decoder[Any]
) -> None:
    """§1.2: a key repeated inside an object the view reads (each definition
    included) is a malformed file; one of a free-keyed map is not."""
    repeat = find_repeat(data, shape_of(cast(type, decoder.type)))
    if repeat is not None:
        raise _malformed(shown, repeat.detail, repeat.path or None)
    for name, raw in view.definitions.items():
        repeat = first_repeat(bytes(raw), shape_of(_Definition))
        if repeat is not None:
            where = f"definitions.{name}"
            raise _malformed(shown, f"{where}: duplicate field `{repeat.key}`", where)


def _check_u64(view: _View, shown: str) -> None:
    # msgspec reads integers beyond u64 exactly; serde does not (§1.2).
    counters: list[tuple[str, int]] = [
        ("taguru_evaluation", view.stamp),
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


class _NotANumber(Exception):
    """A compared value that is neither a number nor null: the checked decoding words it."""


class _OutOfRange(Exception):
    """A compared number taguru refuses as out of range (msgspec may read it)."""

    def __init__(self, case: int, path: tuple[str, ...]) -> None:
        super().__init__(case, path)
        self.case = case
        self.path = path


_TOKEN_SEPARATOR: Final = b"\x00"
"""Between two values' JSON texts: a raw NUL never occurs in JSON text."""

_NUMBER_OR_NULL_START: Final = ("-", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "n")
"""How a JSON number or ``null`` starts (no other JSON value starts so)."""


def _case_frame(cases: list[Any], catalog: Catalog) -> tuple[pl.DataFrame, tuple[str, ...]]:
    """One row per distinct case_id (last occurrence wins), one Float64 column per
    comparison metric in the catalog's order, plus the repeated ids in file order.

    Each value is read from its JSON text as taguru reads it (ERRATA row 24,
    :func:`~taguru_eval._base.serde_numbers.read_numbers`), a column at a time:
    the texts of one metric are joined and split in Polars."""
    ids = [case.case_id for case in cases]
    columns: list[pl.Series] = [pl.Series("case_id", ids, dtype=pl.String)]
    for name in catalog.compared:
        path = catalog.per_case[name].path
        try:
            leaves = list(map(operator.attrgetter(".".join(path)), cases))
        except AttributeError:  # a block written as null
            leaves = [_follow(case, path) for case in cases]
        texts = (
            pl.Series([_TOKEN_SEPARATOR.join(leaves)])
            .cast(pl.String)
            .str.split(_TOKEN_SEPARATOR.decode())
            .explode()
            if cases
            else pl.Series([], dtype=pl.String)
        )
        if not texts.str.slice(0, 1).is_in(_NUMBER_OR_NULL_START).all():
            raise _NotANumber
        values = read_numbers(texts).alias(name)
        if values.is_infinite().any():
            raise _OutOfRange(int(values.is_infinite().arg_max() or 0), path)
        columns.append(values)
    frame = pl.DataFrame(columns)
    repeated = frame.filter(~pl.col("case_id").is_first_distinct())
    duplicates = tuple(repeated.get_column("case_id").to_list())
    if duplicates:
        frame = frame.unique(subset="case_id", keep="last", maintain_order=True)
    return frame, duplicates
