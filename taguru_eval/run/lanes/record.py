"""One case's call records: the ``calls`` table's rows, in call order (EVALUATE.md §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from taguru_eval._base.text import truncate_utf8
from taguru_eval.run.http import CallFailure
from taguru_eval.tables.shapes import CallRecord

Lane = Literal["passage", "evidence", "coverage", "association", "citation", "structural"]
"""A call's lane; ``structural`` is a must-refuse cue probe (:mod:`.probes`)."""


@dataclass
class CallRecorder:
    """Collects one case's call records in call order (the must-refuse probes
    record theirs the same way)."""

    case_index: int
    case_id: str
    calls: list[CallRecord] = field(default_factory=list)

    def add(
        self,
        *,
        lane: Lane,
        endpoint: str,
        outcome: str,
        latency_ms: int,
        http_status: int | None,
        item_index: int | None = None,
        position: str | None = None,
        error: str | None = None,
    ) -> None:
        self.calls.append(
            CallRecord(
                case_index=self.case_index,
                case_id=self.case_id,
                seq=len(self.calls),
                lane=lane,
                endpoint=endpoint,
                item_index=item_index,
                position=position,
                outcome=outcome,
                http_status=http_status,
                latency_ms=latency_ms,
                error=None if error is None else truncate_utf8(error),
            )
        )

    def failed(
        self,
        failure: CallFailure,
        lane: Literal["coverage", "association", "structural"],
        endpoint: str,
        item_index: int,
        position: str | None = None,
    ) -> str:
        """Record a failed resolve call as ``errored``; returns its truncated message."""
        message = truncate_utf8(failure.message)
        self.add(
            lane=lane,
            endpoint=endpoint,
            item_index=item_index,
            position=position,
            outcome="errored",
            latency_ms=failure.latency_ms,
            http_status=failure.status,
            error=message,
        )
        return message
