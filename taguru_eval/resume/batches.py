"""A checkpoint's batch file, written and read back as untrusted input.

A batch is one msgpack map, ``{"sha256": <32 bytes>, "outputs": <bytes>}``:
``outputs`` is the msgpack array of the batch's lane outputs and ``sha256`` its
digest. Reading one back (:func:`decode_batch`) believes nothing of it:

1. the digest must match the outputs' bytes — a batch edited, bit-flipped or
   cut short since it was written is refused before anything is decoded;
2. the outputs are decoded strictly into the run's own declaration
   (:func:`taguru_eval.tables.derive.decoding_type` of
   :class:`~taguru_eval.tables.shapes.LaneOutput`): every required key, every
   type, every 32-bit column's range;
3. each output must be a case of this eval set at its own index, restate that
   case as the eval file declares it (query, cues, limit, tags), appear once,
   and own its calls (their case index and id are its own, numbered 0…n-1);
4. each output's lane values must render as a fresh case's do
   (:func:`~taguru_eval.artifact.layout.lane_values`: an outcome carries the
   members it names), and the batch must convert into the tables' nested rows.

Anything else is :class:`NonConforming`, whose text says what: the caller
drops the batch with one warning naming it, and its cases are sent again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final, cast

import msgspec

from taguru_eval.artifact.layout import lane_values
from taguru_eval.inputs.dataset import EvalCase
from taguru_eval.tables import derive
from taguru_eval.tables.flatten import nested_rows_problem
from taguru_eval.tables.shapes import LaneOutput


class NonConforming(Exception):
    """A batch file that is not what this run writes; the message says why."""


class _Batch(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    sha256: bytes
    outputs: bytes


_FILE: Final = msgspec.msgpack.Decoder(_Batch)
_OUTPUTS: Final = msgspec.msgpack.Decoder(list[derive.decoding_type(LaneOutput)])  # type: ignore[misc]


def encode_batch(outputs: Sequence[LaneOutput]) -> bytes:
    """The batch file's bytes for ``outputs``."""
    body = msgspec.msgpack.encode(outputs)
    return msgspec.msgpack.encode(_Batch(sha256=hashlib.sha256(body).digest(), outputs=body))


def decode_batch(data: bytes, cases: Sequence[EvalCase]) -> list[LaneOutput]:
    """The lane outputs a batch file holds, each checked against ``cases`` (the
    run's eval set); :class:`NonConforming` when anything is off."""
    try:
        batch = _FILE.decode(data)
    except msgspec.DecodeError as exc:
        raise NonConforming(f"not a checkpoint batch ({exc})") from None
    if hashlib.sha256(batch.outputs).digest() != batch.sha256:
        raise NonConforming("its content does not match its sha256 (changed since it was written)")
    try:
        outputs = cast(list[LaneOutput], _OUTPUTS.decode(batch.outputs))
    except msgspec.DecodeError as exc:
        raise NonConforming(f"not the lane outputs this run writes ({exc})") from None
    seen: set[int] = set()
    for position, output in enumerate(outputs):
        problem = _case_problem(output, cases, seen)
        if problem is not None:
            raise NonConforming(f"output {position}: {problem}")
    problem = nested_rows_problem(outputs)
    if problem is not None:
        raise NonConforming(f"its outputs do not make the run's tables ({problem})")
    return outputs


def _case_problem(output: LaneOutput, cases: Sequence[EvalCase], seen: set[int]) -> str | None:
    index, case_id = output["case_index"], output["case_id"]
    if not 0 <= index < len(cases) or cases[index].case_id != case_id:
        return f"case {case_id!r} at index {index} is not this eval set's"
    if index in seen:
        return f"case {case_id!r} is in the batch twice"
    seen.add(index)
    case = cases[index]
    declared = (case.query, list(case.cues), case.effective_limit, list(case.options.tags))
    restated = (output["query"], output["cues"], output["limit"], output.get("tags", []))
    if restated != declared:
        return f"case {case_id!r} does not restate the eval file's query, cues, limit and tags"
    for seq, call in enumerate(output["calls"]):
        if (call["case_index"], call["case_id"], call["seq"]) != (index, case_id, seq):
            return f"case {case_id!r}: call {seq} is not the case's call {seq}"
    try:
        lane_values(output)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # The renderers read what each outcome names: one that lacks it is not a
        # case this run could have written.
        return f"case {case_id!r}: its lane values do not render ({type(exc).__name__}: {exc})"
    return None
