"""The toy evidence reranker: deterministic, honestly named, off unless configured.

taguru reranks evidence through an external provider; this server has none,
so ``ServerState(reranker=True)`` (``serve --reranker``) configures a toy in
its place, model ``refserver-toy-rerank-v1``. Its rule: each surviving
candidate's text (a passage's text; ``subject label object`` for an
association) scores the number of distinct query terms (the passage
tokenizer, HTTP.md §9.4) it contains; candidates are stably sorted by that
count, descending, so ties keep their fused order.

The plan follows the reference's decisions in order: not configured →
``not_configured``; a requested ``model`` other than the toy's →
``model_mismatch``; fewer than two candidates → ``empty_pool``; otherwise it
runs. A requested model named ``refserver-toy-rerank-fail:<reason>`` (reason
one of ``invalid_permutation``, ``circuit_open``, ``timeout``,
``provider_error``) makes the configured toy fail with that reason instead of
running, so a client can be tested against every degraded rerank. A degraded
rerank leaves the deterministic order untouched and never fails the call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from taguru_refserver.tokenize import passage_term_keys

MODEL = "refserver-toy-rerank-v1"
FAILURE_PROBE_PREFIX = "refserver-toy-rerank-fail:"
PROBE_FAILURES = ("invalid_permutation", "circuit_open", "timeout", "provider_error")


def not_requested(configured: bool) -> dict[str, object]:
    """``plan.reranker`` when the request carried no ``rerank``."""
    return {"configured": configured, "ran": False}


@dataclass(frozen=True)
class RerankOutcome:
    """The order to apply (None = keep the fused order) and the ``plan.reranker`` object."""

    order: list[int] | None
    plan: dict[str, object]


def _degraded(configured: bool, reason: str) -> RerankOutcome:
    return RerankOutcome(None, {"configured": configured, "ran": False, "reason": reason})


def rerank(
    configured: bool, requested_model: str | None, query: str, texts: Sequence[str]
) -> RerankOutcome:
    """Run one requested rerank over the survivors' ``texts`` (in fused order)."""
    if not configured:
        return _degraded(False, "not_configured")
    failure: str | None = None
    if requested_model is not None and requested_model != MODEL:
        failure = requested_model.removeprefix(FAILURE_PROBE_PREFIX)
        if not requested_model.startswith(FAILURE_PROBE_PREFIX) or failure not in PROBE_FAILURES:
            return _degraded(True, "model_mismatch")
    if len(texts) < 2:
        return _degraded(True, "empty_pool")
    if failure is not None:
        return _degraded(True, failure)
    wanted = set(passage_term_keys(query))
    overlap = [len(wanted.intersection(passage_term_keys(text))) for text in texts]
    order = sorted(range(len(texts)), key=lambda index: -overlap[index])
    return RerankOutcome(order, {"configured": True, "ran": True, "model": MODEL})
