"""Subsets of an eval set for quick feedback: ``--failing``, ``--filter``, ``--tag``, ``--sample``.

A selection is made on the loaded eval set, before any lane runs (the flow stays
one way: dataset → lanes): :func:`select_cases` returns the eval set of the
selected cases, in file order and re-indexed, and the ``inputs.selection`` block
the artifact records. The whole file is still loaded and checked first, as a
full run checks it, so a file that a full run refuses is refused whatever is
selected.

The flags narrow one after another, in this order, and a case runs when it
passes every flag given:

1. ``--failing RUN``: the cases RUN says failed — a per-case bound violated
   (``thresholds.violations``, scope ``case``) or a lane failed (passage or
   evidence ``failed``, an association query ``errored``, a citation check
   ``unresolved``; the lanes ERRATA row 20 lists) — when RUN is an
   evaluation.json or a stored run directory; the cases it calls ``regressed``
   when RUN is a compare ``changes.jsonl``. RUN is untrusted input: a file that
   is none of these is one line naming it (exit 2).
2. ``--filter PATTERN`` (repeatable, any of them): a glob over the whole
   case_id, ``*`` any run of characters and ``?`` one, every other character
   literal and case-sensitive. Not a regex: ids hold ``.`` and ``+`` as plain
   characters, and a regex that matches part of an id would run more than asked.
3. ``--tag T`` (repeatable, any of them): a case whose ``options.tags`` holds T.
4. ``--sample N``: N of the cases left, drawn without replacement, stratified
   over the cases' tag sets (each distinct ``options.tags`` set, untagged cases
   one more stratum): each stratum gets its share of N by the largest-remainder
   rule, and within a stratum the cases with the smallest draws are taken. A
   case's draw is a BLAKE2b hash of the seed and its case_id, so the sample
   depends on the seed and the ids only — never on a library's random stream or
   hash, which may change between versions — and a case added to the file does
   not reshuffle the others.

A step that leaves no case is an :class:`~taguru_eval.errors.InputError` (exit 2)
naming the flag and what to do: a run never passes on nothing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import msgspec
import polars as pl

from taguru_eval._base.filebytes import file_bytes
from taguru_eval._base.structs import validation_detail
from taguru_eval.contract import ARTIFACT_CAP
from taguru_eval.errors import InputError, os_error_text
from taguru_eval.inputs.answers import AnswerSet
from taguru_eval.inputs.evalcase import EvalSet
from taguru_eval.options import RunOptions
from taguru_eval.store_artifact import (
    artifact_bytes,
    not_a_run_hint,
    stamp_problem,
    stored_artifact,
)

SAMPLE_DRAW_BYTES: Final = 8
"""The draw of a case: the first 8 bytes of BLAKE2b(seed, case_id), an unsigned integer."""

LISTED: Final = 5
"""How many case ids or tags an empty-selection hint names."""

FAILED: Final = "failed"
REGRESSED: Final = "regressed"

_HEADER_PEEK: Final = 4096
"""How far into RUN the changes.jsonl header's stamp is looked for."""
_STRATUM_SEPARATOR: Final = "\x1f"


@dataclass(frozen=True)
class Selected:
    """The eval set of the selected cases and the ``inputs.selection`` block."""

    eval_set: EvalSet
    block: dict[str, Any]


# ------------------------------------------------------------------ --failing RUN


class _Outcome(msgspec.Struct):
    outcome: Any = None


class _Association(msgspec.Struct):
    query: _Outcome | None = None


class _Structural(msgspec.Struct):
    associations: list[_Association] = msgspec.field(default_factory=list)


class _Citations(msgspec.Struct):
    checks: list[_Outcome] = msgspec.field(default_factory=list)


class _Case(msgspec.Struct):
    case_id: str
    passage: _Outcome | None = None
    evidence: _Outcome | None = None
    structural: _Structural | None = None
    citations: _Citations | None = None

    @property
    def failed(self) -> bool:
        """A lane of the case failed (the lanes the run's summary lists as failed)."""
        lanes = (self.passage, self.evidence)
        if any(lane is not None and lane.outcome == "failed" for lane in lanes):
            return True
        associations = () if self.structural is None else self.structural.associations
        if any(a.query is not None and a.query.outcome == "errored" for a in associations):
            return True
        checks = () if self.citations is None else self.citations.checks
        return any(check.outcome == "unresolved" for check in checks)


class _Violation(msgspec.Struct):
    scope: str
    case_id: str | None = None


class _Gate(msgspec.Struct):
    violations: list[_Violation] = msgspec.field(default_factory=list)


class _Artifact(msgspec.Struct):
    taguru_evaluation: int
    cases: list[_Case]
    thresholds: _Gate | None = None


class _ChangesHeader(msgspec.Struct):
    kind: str
    taguru_evaluation_changes: int


class _Change(msgspec.Struct):
    kind: str
    case_id: str


_ARTIFACT: Final = msgspec.json.Decoder(_Artifact)
_CHANGES_HEADER: Final = msgspec.json.Decoder(_ChangesHeader)
_CHANGE: Final = msgspec.json.Decoder(_Change)

_WHAT: Final = "not an evaluation.json, a stored run directory or a compare changes.jsonl"


@dataclass(frozen=True)
class FailingCases:
    """What ``--failing RUN`` read: the case ids and whether they ``failed`` or ``regressed``."""

    path: str
    kind: str
    case_ids: frozenset[str]


def _damaged(shown: str, detail: str) -> InputError:
    return InputError(f"--failing {shown}: {_WHAT}: {detail}", path=shown)


def read_failing(given: str) -> FailingCases:
    """The cases ``--failing`` names in ``given`` (module docstring); a file or
    directory that is not a run is an :class:`InputError` (exit 2) naming it."""
    path = Path(given)
    shown = given
    try:
        if path.is_dir():
            path = stored_artifact(path)
            shown = os.path.join(given, path.name)
            data = artifact_bytes(path)
        else:
            data = file_bytes(path, ARTIFACT_CAP)
    except OSError as exc:
        raise InputError(
            f"--failing {shown}: {os_error_text(exc)}", path=shown, hint=not_a_run_hint(given)
        ) from None
    # A changes.jsonl names its stamp near the start of its header line; looking
    # there only keeps a multi-gigabyte artifact from being copied to be searched.
    end = data.find(b"\n", 0, _HEADER_PEEK)
    if b"taguru_evaluation_changes" in data[: _HEADER_PEEK if end < 0 else end]:
        return FailingCases(given, REGRESSED, _regressed(data, shown))
    return FailingCases(given, FAILED, _failed(data, shown))


def _failed(data: bytes, shown: str) -> frozenset[str]:
    try:
        run = _ARTIFACT.decode(data)
    except msgspec.ValidationError as exc:
        raise _damaged(shown, validation_detail(exc)) from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _damaged(shown, str(exc) or "nested too deeply") from None
    problem = stamp_problem(run.taguru_evaluation)
    if problem is not None:
        raise _damaged(shown, problem)
    violated = () if run.thresholds is None else run.thresholds.violations
    return frozenset(
        [v.case_id for v in violated if v.scope == "case" and v.case_id is not None]
        + [case.case_id for case in run.cases if case.failed]
    )


def _regressed(data: bytes, shown: str) -> frozenset[str]:
    lines = data.split(b"\n")
    regressed: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            if number == 1:
                header = _CHANGES_HEADER.decode(line)
                if header.kind != "header":
                    raise _damaged(shown, "line 1: the header's kind is not 'header'")
                continue
            change = _CHANGE.decode(line)
        except msgspec.ValidationError as exc:
            raise _damaged(shown, f"line {number}: {validation_detail(exc)}") from None
        except (msgspec.DecodeError, RecursionError) as exc:
            raise _damaged(shown, f"line {number}: {exc or 'nested too deeply'}") from None
        if change.kind == REGRESSED:
            regressed.append(change.case_id)
    return frozenset(regressed)


# ------------------------------------------------------------------ the selection


def glob_regex(pattern: str) -> str:
    """``pattern`` (``*``, ``?``, the rest literal) as a regex over the whole text,
    in the syntax Polars' (Rust's) regex engine reads: every other character is
    written as its ``\\x{…}`` escape, so no character of an id is special."""
    parts = [
        ".*" if char == "*" else "." if char == "?" else f"\\x{{{ord(char):x}}}" for char in pattern
    ]
    return f"(?s)^{''.join(parts)}$"


def sample_draws(case_ids: Sequence[str], seed: int) -> list[int]:
    """Each case's draw for ``--sample`` (module docstring): stable across versions."""
    salt = seed.to_bytes(8, "little")
    return [
        int.from_bytes(
            hashlib.blake2b(
                case_id.encode("utf-8", "surrogatepass"), digest_size=SAMPLE_DRAW_BYTES, salt=salt
            ).digest(),
            "little",
        )
        for case_id in case_ids
    ]


def _quoted(values: Iterable[str]) -> str:
    return ", ".join(f"'{value}'" for value in values)


def _frame(eval_set: EvalSet) -> pl.DataFrame:
    """``case_index``, ``case_id``, ``tags`` (a list, empty when untagged) of every case.

    The tags are built from one flat pair of columns: a list column made from
    Python lists costs a Series per case."""
    cases = eval_set.cases
    tagged = pl.DataFrame(
        {
            "case_index": [i for i, case in enumerate(cases) for _ in case.options.tags],
            "tag": [tag for case in cases for tag in case.options.tags],
        },
        schema={"case_index": pl.Int32, "tag": pl.String},
    )
    tags = tagged.group_by("case_index").agg(pl.col("tag").alias("tags"))
    return (
        pl.DataFrame(
            {"case_index": range(len(cases)), "case_id": eval_set.case_ids},
            schema={"case_index": pl.Int32, "case_id": pl.String},
        )
        .join(tags, on="case_index", how="left", maintain_order="left")
        .with_columns(pl.col("tags").fill_null(pl.lit([], dtype=pl.List(pl.String))))
    )


def _narrow(
    frame: pl.DataFrame, keep: pl.Expr, flag: str, eval_label: str, total: int, hint: str | None
) -> pl.DataFrame:
    kept = frame.filter(keep)
    if kept.height == 0:
        among = (
            f"of {eval_label} ({total} case(s))"
            if frame.height == total
            else f"among the {frame.height} case(s) the flags before it selected"
        )
        raise InputError(
            f"{flag} matched no case {among}: nothing would run",
            path=eval_label,
            hint=hint,
        )
    return kept


def _glob_hint(pattern: str) -> str:
    """How to write a glob, in the words of the user's own pattern."""
    word = pattern.strip("*") or "word"
    return (
        f"a pattern is a glob over the whole case_id: '{word}*' matches the ids starting "
        f"with {word}, '*{word}*' the ids holding it"
    )


def _tag_hint(frame: pl.DataFrame) -> str:
    counts = (
        frame.select(pl.col("tags").explode().drop_nulls().alias("tag"))
        .group_by("tag")
        .len()
        .sort(["len", "tag"], descending=[True, False])
    )
    if counts.height == 0:
        return "no case there has options.tags; select with --filter instead"
    listed = _quoted(counts.get_column("tag").head(LISTED).to_list())
    return f"--tag matches options.tags exactly; the most used tags there: {listed}"


def _stratum() -> pl.Expr:
    """A case's stratum: its distinct tags, sorted and joined (untagged: ``""``)."""
    return pl.col("tags").list.unique().list.sort().list.join(_STRATUM_SEPARATOR).alias("stratum")


def _sample(frame: pl.DataFrame, size: int, seed: int) -> tuple[pl.DataFrame, int]:
    """``size`` cases of ``frame``, stratified (module docstring); the number of strata."""
    drawn = frame.with_columns(
        _stratum(),
        pl.Series("draw", sample_draws(frame.get_column("case_id").to_list(), seed), pl.UInt64),
    )
    sizes = drawn.group_by("stratum", maintain_order=True).len("size")
    strata = sizes.height
    if size >= frame.height:
        return frame, strata
    total = frame.height
    # Largest remainder, in integers: floor(size * n / total) each, then one more
    # to the largest remainders (first stratum in file order on a tie).
    quotas = sizes.with_row_index("order").with_columns(
        (pl.col("size") * size // total).alias("floor"),
        (pl.col("size") * size % total).alias("remainder"),
    )
    left = size - int(quotas.get_column("floor").sum())
    quotas = (
        quotas.sort(["remainder", "order"], descending=[True, False])
        .with_row_index("rank")
        .with_columns((pl.col("floor") + (pl.col("rank") < left).cast(pl.Int64)).alias("quota"))
        .select("stratum", "quota")
    )
    chosen = (
        drawn.join(quotas, on="stratum", how="left", maintain_order="left")
        .filter(pl.col("draw").rank("ordinal").over("stratum") <= pl.col("quota"))
        .select(frame.columns)
    )
    return chosen, strata


def select_cases(eval_set: EvalSet, options: RunOptions) -> Selected:
    """The selected cases of ``eval_set`` and the ``inputs.selection`` block
    (the flags given, the cases kept, the cases in the file)."""
    frame = _frame(eval_set)
    total = frame.height
    label = eval_set.label
    block: dict[str, Any] = {}
    if options.failing is not None:
        failing = read_failing(options.failing)
        block["failing"] = {
            "path": failing.path,
            "kind": failing.kind,
            "cases": len(failing.case_ids),
        }
        if not failing.case_ids:
            raise InputError(
                f"--failing {failing.path}: no case {failing.kind} there: nothing to run again",
                path=failing.path,
                hint="drop --failing to run the whole set",
            )
        frame = _narrow(
            frame,
            pl.col("case_id").is_in(sorted(failing.case_ids)),
            f"--failing {failing.path} ({len(failing.case_ids)} {failing.kind} case(s))",
            label,
            total,
            f"its cases are not in {label}: was it made from another eval set?",
        )
    if options.filters:
        patterns = list(dict.fromkeys(options.filters))
        block["filter"] = patterns
        first = _quoted(frame.get_column("case_id").head(LISTED).to_list())
        frame = _narrow(
            frame,
            pl.any_horizontal([pl.col("case_id").str.contains(glob_regex(p)) for p in patterns]),
            f"--filter {_quoted(patterns)}",
            label,
            total,
            f"{_glob_hint(patterns[0])}; the first case ids there: {first}",
        )
    if options.tags:
        tags = list(dict.fromkeys(options.tags))
        block["tag"] = tags
        hint = _tag_hint(frame)
        frame = _narrow(
            frame,
            pl.col("tags").list.eval(pl.element().is_in(tags)).list.any(),
            f"--tag {_quoted(tags)}",
            label,
            total,
            hint,
        )
    if options.sample is not None:
        seed = options.resolved_seed
        frame, strata = _sample(frame, options.sample, seed)
        block["sample"] = {"size": options.sample, "seed": seed, "strata": strata}
    kept = frame.get_column("case_index").sort()
    selection = {"cases": kept.len(), "eval_cases": total, **block}
    return Selected(_subset(eval_set, kept), selection)


def _subset(eval_set: EvalSet, kept: pl.Series) -> EvalSet:
    """``eval_set`` holding only the cases at ``kept`` (0-based, ascending),
    re-indexed from 0 in file order, with their ``expected`` rows."""
    positions = pl.DataFrame(
        {"case_index": kept, "selected_index": range(kept.len())},
        schema={"case_index": pl.Int32, "selected_index": pl.Int32},
    )
    expected = eval_set.expected
    rows = (
        expected.join(positions, on="case_index", how="inner", maintain_order="left")
        .with_columns(pl.col("selected_index").alias("case_index"))
        .select(expected.columns)
    )
    cases = [eval_set.cases[index] for index in kept.to_list()]
    return replace(eval_set, cases=cases, expected=rows)


def selected_answers(answers: AnswerSet | None, eval_set: EvalSet) -> AnswerSet | None:
    """The answers of the selected cases only (``inputs.answers.cases`` counts what runs)."""
    if answers is None:
        return None
    ids = set(eval_set.case_ids)
    return replace(
        answers, by_case={key: value for key, value in answers.by_case.items() if key in ids}
    )
