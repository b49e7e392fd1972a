"""The reference server's state and its write path (HTTP.md §7, §9.5).

One ``ServerState`` holds every context. Each write operation takes the JSON
body exactly as a client would send it, validates it with taguru's rules
(``passage_writes`` / ``graph_writes``), applies it, and moves the revision
and usage counters of HTTP.md §7.6 / §6.3. The HTTP routes and the corpus
loader call these same methods, so a corpus loaded from disk has real
revisions.

All mutation and all reads go through ``ServerState.lock``: the ASGI app runs
handlers on one event loop, but tests and the demo may also touch the state
from another thread while uvicorn serves it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from taguru_refserver import graph_writes, passage_writes
from taguru_refserver.envelope import ApiError, Issue
from taguru_refserver.model import (
    MAX_CONTEXT_NAME_BYTES,
    MAX_DESCRIPTION_BYTES,
    MAX_NAME_BYTES,
    ContextMeta,
    ContextState,
    refusal,
    refuse_empty,
    refuse_oversized,
)
from taguru_refserver.routes_bodies import Fields, clamp_unit
from taguru_refserver.schema import decode_schema
from taguru_refserver.schema_judge import judge_associations
from taguru_refserver.vectors import PassageVectors


class ServerState:
    """Every context of one reference server, plus the write path.

    ``vector_lane`` gives every context created from now on the toy vector
    lane (``vectors.py``); ``reranker`` configures the toy evidence reranker
    (``rerank.py``). Both are off by default, as taguru's provider-backed
    counterparts are. ``jitter`` (``serve --jitter SEED``) seeds the generator
    every passage search draws the order of its tied hits from
    (``passage_search.py``); None keeps the deterministic order.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        vector_lane: bool = False,
        reranker: bool = False,
        jitter: int | None = None,
    ) -> None:
        self.lock = threading.RLock()
        self.contexts: dict[str, ContextState] = {}
        self.vector_lane = vector_lane
        self.reranker = reranker
        # Drawn from under ``lock`` only, so concurrent searches take turns.
        self.jitter = None if jitter is None else random.Random(jitter)
        self._clock = clock

    def now(self) -> int:
        return int(self._clock())

    # -- lookup and counters -------------------------------------------------

    def context(self, name: str) -> ContextState:
        found = self.contexts.get(name)
        if found is None:
            raise ApiError("no_context", f"context '{name}' not found")
        return found

    def count_read(self, context: ContextState, *, empty: bool) -> None:
        context.usage.reads += 1
        if empty:
            context.usage.empty_reads += 1
        context.usage.last_read_epoch = self.now()

    def _count_write(self, context: ContextState) -> None:
        context.usage.writes += 1
        context.usage.last_write_epoch = self.now()

    # -- contexts ------------------------------------------------------------

    def create_context(self, name: str, body: object | None) -> bool:
        """``PUT /contexts/{name}`` with an already-parsed body (None = empty body)."""
        meta = ContextMeta()
        if body is not None:
            fields = Fields(body, what="struct CreateContextRequest")
            meta.description = fields.opt_str("description") or ""
            meta.pinned = bool(fields.opt_bool("pinned"))
            dice = fields.opt_float("dice_floor")
            semantic = fields.opt_float("semantic_floor", "f32")
            meta.dice_floor = None if dice is None else clamp_unit(dice)
            meta.semantic_floor = None if semantic is None else clamp_unit(semantic)
        self._check_context_name(name)
        refuse_oversized("the description", meta.description, MAX_DESCRIPTION_BYTES)
        with self.lock:
            if name in self.contexts:
                raise ApiError("already_exists", f"context '{name}' already exists")
            self.contexts[name] = ContextState(name, meta)
            if self.vector_lane:
                self.enable_vector_lane(name)
        return True

    def enable_vector_lane(self, name: str) -> None:
        """Give ``name`` the toy vector lane, embedding what it already stores."""
        with self.lock:
            context = self.context(name)
            if context.vectors is not None:
                return
            context.vectors = PassageVectors()
            for source, record in context.passages.items():
                context.vectors.put_source(source, record.paragraphs, record.questions)

    @staticmethod
    def _check_context_name(name: str) -> None:
        refuse_oversized("the context name", name, MAX_CONTEXT_NAME_BYTES)
        if not name:
            raise ApiError("invalid_argument", "the context name must not be empty")

    def patch_context(self, name: str, body: object) -> dict[str, object]:
        """``PATCH /contexts/{name}``: ``config`` +1 only when something changed."""
        fields = Fields(body, what="struct PatchContextRequest")
        description = fields.opt_str("description")
        pinned = fields.opt_bool("pinned")
        dice = fields.opt_float("dice_floor")
        semantic = fields.opt_float("semantic_floor", "f32")
        if description is not None:
            refuse_oversized("the description", description, MAX_DESCRIPTION_BYTES)
        with self.lock:
            context = self.context(name)
            meta = context.meta
            before = (meta.description, meta.pinned, meta.dice_floor, meta.semantic_floor)
            if description is not None:
                meta.description = description
            if pinned is not None:
                meta.pinned = pinned
            if dice is not None:
                meta.dice_floor = clamp_unit(dice)
            if semantic is not None:
                meta.semantic_floor = clamp_unit(semantic)
            after = (meta.description, meta.pinned, meta.dice_floor, meta.semantic_floor)
            if after != before:
                context.revision.config += 1
                self._count_write(context)
            return meta.to_wire()

    # -- passages ------------------------------------------------------------

    def store_passages(self, name: str, body: object) -> dict[str, int]:
        """``POST /contexts/{name}/sources`` (HTTP.md §7.2): ``passages`` += sources stored."""
        items = passage_writes.decode_store_request(body)
        with self.lock:
            context = self.context(name)
            counts = dict.fromkeys(passage_writes.STORE_COUNTERS, 0)
            counts["stored"] = len(items)
            stamp = self.now()
            for item in items:
                record = passage_writes.build_record(item, stamp, counts)
                context.passages[item.source] = record
                context.passage_index.put_source(
                    item.source, record.paragraphs, extra_terms_by_paragraph=record.questions
                )
                if context.vectors is not None:
                    context.vectors.put_source(item.source, record.paragraphs, record.questions)
            context.revision.passages += len(items)
            self._count_write(context)  # even an empty store is a successful write
            return counts

    # -- associations --------------------------------------------------------

    def add_associations(self, name: str, body: object) -> tuple[int, list[Issue]]:
        """``POST /contexts/{name}/associations`` (HTTP.md §7.3): ``graph`` += items applied.

        Returns the applied count and, under a ``warn`` schema, the violations
        the batch raised anyway; a ``strict`` schema refuses such a batch whole.
        """
        items = graph_writes.decode_associations(body)
        with self.lock:
            context = self.context(name)
            violations = []
            if context.schema is not None:
                violations = judge_associations(context, context.schema, items)
                if violations and context.schema.mode == "strict":
                    raise refusal("associations batch", violations)
            for item in items:
                graph_writes.assert_association(context, item)
            context.revision.graph += len(items)
            if items:
                self._count_write(context)
            return len(items), violations

    # -- schema --------------------------------------------------------------

    def put_schema(self, name: str, body: object) -> dict[str, object]:
        """``PUT /contexts/{name}/schema``: install wholesale; ``config`` +1 when it changed.

        Not a data write: ``usage.writes`` stays, as in taguru (measured on 0.9.7).
        """
        installed = decode_schema(body)
        with self.lock:
            context = self.context(name)
            previous = context.schema
            if previous is None or previous.to_wire() != installed.to_wire():
                context.revision.config += 1
            context.schema = installed
            return installed.to_wire()

    def get_schema(self, name: str) -> dict[str, object]:
        with self.lock:
            context = self.context(name)
            if context.schema is None:
                raise ApiError("no_schema", f"context '{name}' has no schema document")
            return context.schema.to_wire()

    # -- aliases -------------------------------------------------------------

    def register_aliases(self, name: str, body: object) -> int:
        """``POST /contexts/{name}/aliases`` (HTTP.md §7.4): ``graph`` += bindings applied.

        Bindings apply in order and stop at the first failure; the ones before
        it stay applied and counted, and the 409 says how many there were.
        """
        plan = graph_writes.decode_alias_registration(body)
        with self.lock:
            context = self.context(name)
            applied = 0
            failure: ApiError | None = None
            for which, alias, canonical in plan:
                space = context.namespace(which)
                failure = graph_writes.bind_alias(space, which, alias, canonical)
                if failure is not None:
                    break
                applied += 1
            context.revision.graph += applied
            if applied:
                self._count_write(context)
            if failure is not None:
                failure.message = f"applied {applied} of {len(plan)} aliases, then: " + (
                    failure.message
                )
                raise failure
            return applied

    def remove_aliases(self, name: str, body: object) -> int:
        """``DELETE /contexts/{name}/aliases``: ``graph`` += aliases removed."""
        plan = graph_writes.decode_alias_removal(body)
        with self.lock:
            context = self.context(name)
            removed = graph_writes.remove_aliases(context, plan)
            context.revision.graph += removed
            self._count_write(context)
            return removed

    # -- retraction ----------------------------------------------------------

    def retract_source(
        self, name: str, body: object, *, dry_run: bool = False
    ) -> dict[str, object]:
        """``POST /contexts/{name}/sources/retract`` (HTTP.md §7.5).

        ``graph`` +1 when any association ever named the source, ``passages``
        +1 when a stored passage was removed; ``dry_run`` only reports.
        """
        fields = Fields(body, what="struct RetractSourceRequest")
        source = fields.req_str("source")
        refuse_empty("source", source)
        refuse_oversized("source", source, MAX_NAME_BYTES)
        with self.lock:
            context = self.context(name)
            touched = len(graph_writes.live_edges_of_source(context, source))
            has_passage = source in context.passages
            result: dict[str, object] = {
                "associations_touched": touched,
                "passage_removed": has_passage,
            }
            if dry_run:
                return result
            graph_writes.withdraw_source(context, source)
            if has_passage:
                del context.passages[source]
                context.passage_index.remove_source(source)
                if context.vectors is not None:
                    context.vectors.remove_source(source)
                context.revision.passages += 1
            if source in context.graph_sources:
                context.revision.graph += 1
            self._count_write(context)
            return result

    def retract_association(self, name: str, body: object) -> dict[str, object]:
        """``POST /contexts/{name}/associations/retract``: ``graph`` +1 when a live edge died."""
        fields = Fields(body, what="struct RetractAssociationRequest")
        subject = fields.req_str("subject")
        label = fields.req_str("label")
        obj = fields.req_str("object")
        with self.lock:
            context = self.context(name)
            s, lab, o = (
                context.concepts.lookup(subject),
                context.labels.lookup(label),
                context.concepts.lookup(obj),
            )
            edge = None if s is None or lab is None or o is None else context.edges.get((s, lab, o))
            if edge is None or not edge.live:
                return {"retracted": False, "attributions_removed": 0}
            removed = graph_writes.retract_edge(context, edge)
            context.revision.graph += 1
            self._count_write(context)
            return {"retracted": True, "attributions_removed": removed}
