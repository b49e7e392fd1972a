"""``load``: put context folders into a taguru-compatible server over its public write routes.

Four steps, each finished before the next starts:

1. **Read.** FOLDER is one context folder, or — like ``serve DIR`` — a root whose
   sub-folders are the contexts (:func:`read_folders` tells them apart). Every
   file is read and cut into write requests under taguru's caps (1,000 sources,
   10,000 associations, 10,000 alias pairs and the body cap a request) before
   any request: a bad file is exit 2 with nothing sent.
2. **Look.** Each context is read (``GET /contexts/{name}`` and a one-item source
   listing) before anything is written: an absent one is created; one that
   exists but holds nothing is filled (``context.json``'s settings sent with
   ``PATCH``); one that holds sources or a graph is refused (exit 2) unless
   ``replace``, which deletes it (an admin route) and creates it afresh.
3. **Write.** Create, then the batches in order. A 413 halves the body budget
   and splits the request and everything after it.
4. **Settle.** The context is read back until two reads agree on its revision;
   the revision must have moved by exactly what the writes applied and the
   listing must hold every source. Only then is the next context loaded, and
   ``load`` returns: nothing it wrote can land inside a later run's bracket.

Every failure is one :class:`~taguru_eval.errors.TaguruEvalError` line naming
the fix: exit 1 when the server could not be reached or refused a write (the
file and line of a refused item when the refusal names it), exit 2 for input
and usage errors, a context that already holds data among them.
"""

from __future__ import annotations

import dataclasses
import io
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import polars as pl

from taguru_eval._base.text import parse_decimal, trim
from taguru_eval.contract import (
    ADD_ASSOCIATIONS,
    CREATE_CONTEXT,
    DEFAULT_MAX_BODY_BYTES,
    DELETE_CONTEXT,
    MAX_ALIAS_PAIRS_PER_REQUEST,
    MAX_ASSOCIATIONS_PER_REQUEST,
    MAX_SOURCES_PER_REQUEST,
    PATCH_CONTEXT,
    REGISTER_ALIASES,
    STORE_SOURCES,
)
from taguru_eval.corpus.folder import (
    ContextFolder,
    context_folders,
    holds_a_context,
    read_context_folder,
)
from taguru_eval.corpus.writes import Caps, Location, Write, fill_writes, split_write
from taguru_eval.errors import (
    InputError,
    RunError,
    TaguruEvalError,
    UnsentSettingWarning,
    UsageError,
    warn,
)
from taguru_eval.inputs.config import (
    TOKEN_ENV,
    TOKENS_ENV,
    effective_env,
    mask_url,
    resolve_base_url,
    resolve_secrets,
    resolve_token,
)
from taguru_eval.inputs.proxy import proxy_config
from taguru_eval.options import strip_trailing_slashes
from taguru_eval.populate.client import REQUEST_TIMEOUT_S, Refused, Unreachable, WriteClient
from taguru_eval.run.console import CaseProgress, Console, Progress

BODY_BYTES_ENV: Final = "TAGURU_MAX_BODY_BYTES"
SETTLE_TIMEOUT_S: Final = 30.0
"""How long a context's revision may keep moving after the last write (a server
refreshing embeddings in the background) before ``load`` gives up."""
SETTLE_POLL_S: Final = 0.2

ROUTE_OF: Final = {
    "sources": STORE_SOURCES,
    "associations": ADD_ASSOCIATIONS,
    "aliases": REGISTER_ALIASES,
}
"""The route template each kind of write is sent to."""

WRITES_SCHEMA: Final = {
    "context": pl.String,
    "route": pl.String,
    "items": pl.Int64,
    "bytes": pl.Int64,
    "applied": pl.Int64,
}
"""``Loaded.writes``: one row per request; ``applied`` is what the server said it
stored or applied (``None`` for the context's own create, patch or delete)."""

REVISION_KEYS: Final = ("graph", "passages", "config")


@dataclass(frozen=True)
class LoadedContext:
    """One context as loaded: how (``created``, ``filled`` — it existed, empty —
    or ``replaced``), what went in, and its revision once settled."""

    name: str
    folder: Path
    action: str
    sources: int
    associations: int
    aliases: int
    revision: Mapping[str, int]


@dataclass(frozen=True)
class Loaded:
    """What ``load`` wrote: the server (masked URL), each context, each request.

    ``writes`` has one row per request (:data:`WRITES_SCHEMA`); ``output``
    holds the lines a library call did not print.
    """

    url: str
    contexts: tuple[LoadedContext, ...]
    writes: pl.DataFrame
    output: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        names = ", ".join(f"{c.name!r} ({c.action}, {c.sources} sources)" for c in self.contexts)
        return f"Loaded({self.url}: {names or 'nothing'}; {self.writes.height} request(s))"


@dataclass
class _Plan:
    """One context to load: its folder, what the server holds now, its writes."""

    folder: ContextFolder
    writes: list[Write]
    exists: bool = False
    holds: str | None = None  # what it already holds, in words (None: empty or absent)
    revision: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REVISION_KEYS, 0))


@dataclass
class _Tally:
    """What has been written to one context so far (for the result and for a
    failure's partial-load note)."""

    sources: int = 0
    associations: int = 0
    aliases: int = 0
    passages_applied: int = 0
    graph_applied: int = 0


def load(
    folder: str | os.PathLike[str],
    *,
    url: str | None = None,
    context: str | None = None,
    replace: bool = False,
    config: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    progress: bool | Progress = False,
    verbose: bool = False,
    transport: httpx.BaseTransport | None = None,
) -> Loaded:
    """Put ``folder`` (one context folder, or a root of them) into the server at ``url``.

    ``url`` defaults as run mode's does (``TAGURU_ADDR``, after ``config``, the
    ``--config`` env-file); the token is ``TAGURU_API_TOKEN`` (else the first of
    ``TAGURU_API_TOKENS``) from ``env`` (default ``os.environ``). ``context``
    names the one context of a single folder (default: the folder's name).
    ``replace`` deletes a context that already holds data and loads it afresh
    (the delete needs an admin key); without it such a context is an
    ``InputError``. ``progress`` is off by default: ``True`` shows the command
    line's display on stderr, or pass any ``(done, total)`` callable (items:
    sources, associations and alias pairs). ``verbose`` prints the summary lines;
    otherwise they are in ``Loaded.output``. Returns once every context reads
    back what was written. A server that cannot be reached or refuses a write is
    a ``RunError``; a bad file, flag or URL an ``InputError`` or ``UsageError``.
    """
    captured = io.StringIO()
    console = Console() if verbose else Console(stdout=captured, stderr=captured)
    display: Progress | None = (
        CaseProgress(sys.stderr, unit="item") if progress is True else progress or None
    )
    try:
        result = load_folders(
            Path(folder),
            url=url,
            context=context,
            replace=replace,
            config=None if config is None else os.fspath(config),
            env=os.environ if env is None else env,
            console=console,
            progress=display,
            transport=transport,
        )
    finally:
        if isinstance(display, CaseProgress):
            display.close()
    return dataclasses.replace(result, output=captured.getvalue().splitlines())


def load_folders(
    path: Path,
    *,
    url: str | None,
    context: str | None,
    replace: bool,
    config: str | None,
    env: Mapping[str, str],
    console: Console,
    progress: Progress | None = None,
    transport: httpx.BaseTransport | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Loaded:
    """:func:`load` with its console, progress display and clock given (the command line's)."""
    if context is not None and not context:
        raise UsageError("--context needs a name, not an empty one")
    folders = read_folders(path, context)
    resolved = effective_env(config, env, console.err)
    base_url = resolve_base_url(None if url is None else strip_trailing_slashes(url), resolved)
    token = resolve_token(resolved)
    caps = Caps(
        sources=MAX_SOURCES_PER_REQUEST,
        associations=MAX_ASSOCIATIONS_PER_REQUEST,
        alias_pairs=MAX_ALIAS_PAIRS_PER_REQUEST,
        body_bytes=body_cap(resolved),
    )
    plans = [_Plan(folder, fill_writes(folder, caps)) for folder in folders]
    masked = mask_url(base_url)
    console.err(f"load → {masked}")
    session = _Session(
        client=WriteClient(
            base_url,
            token,
            secrets=resolve_secrets(resolved),
            proxies=proxy_config(resolved),
            transport=transport,
        ),
        masked_url=masked,
        token_variable=_token_variable(resolved, token),
        caps=caps,
        progress=progress,
        total=sum(write.items for plan in plans for write in plan.writes),
        clock=clock,
        sleep=sleep,
    )
    with session.client:
        for plan in plans:
            session.look(plan)
        refused = [plan for plan in plans if plan.holds is not None and not replace]
        if refused:
            raise _holds_data(refused, masked, single=holds_a_context(path))
        loaded = [session.load(plan) for plan in plans]
    for done in loaded:
        console.out(
            f"  {done.name}: {done.action} from {done.folder} — {done.sources} source(s), "
            f"{done.associations} association(s), {done.aliases} alias(es); revision "
            + ", ".join(f"{key} {done.revision[key]}" for key in REVISION_KEYS)
        )
    return Loaded(masked, tuple(loaded), pl.DataFrame(session.rows, schema=WRITES_SCHEMA))


def read_folders(path: Path, context: str | None = None) -> list[ContextFolder]:
    """FOLDER as ``load`` reads it: itself when it holds a context (a
    ``context.json``, ``associations.jsonl``, ``aliases.json`` or a ``*.md`` of its
    own), else each of its sub-folders, named after them, as ``serve DIR`` reads
    DIR. ``context`` renames a single folder's context; with a root it is an error."""
    if not path.is_dir():
        raise InputError(f"{path}: not a directory (give a context folder or a root of them)")
    if holds_a_context(path):
        return [read_context_folder(path, context)]
    folders = context_folders(path)
    if not folders:
        raise InputError(
            f"{path}: neither a context folder (no context.json, associations.jsonl, "
            "aliases.json or *.md of its own) nor a root of them (no sub-folder)"
        )
    if context is not None:
        names = ", ".join(folder.name for folder in folders[:3])
        more = ", …" if len(folders) > 3 else ""
        raise UsageError(
            f"--context renames one context folder, but {path} is a root of {len(folders)} "
            f"({names}{more}): give one of them, e.g. {folders[0]}, or drop --context"
        )
    return [read_context_folder(folder) for folder in folders]


def body_cap(env: Mapping[str, str]) -> int:
    """The body budget: the environment's ``TAGURU_MAX_BODY_BYTES`` read as taguru
    reads it (a positive number of bytes; anything else means its default, 8 MiB),
    so a config file shared with the server sets both."""
    text = trim(env.get(BODY_BYTES_ENV, ""))
    value = parse_decimal(text, 2**64 - 1) if text.isascii() and text.isdigit() else None
    return value if value else DEFAULT_MAX_BODY_BYTES


def _token_variable(env: Mapping[str, str], token: str | None) -> str | None:
    """The variable the token sent comes from (``None``: no token is sent)."""
    if token is None:
        return None
    return TOKEN_ENV if trim(env.get(TOKEN_ENV, "")) else TOKENS_ENV


def _holds_data(plans: Sequence[_Plan], masked_url: str, *, single: bool) -> InputError:
    """Nothing was written: the first context that holds data, and how many more do."""
    first = plans[0]
    more = f" (and {len(plans) - 1} more context(s) of the folder)" if len(plans) > 1 else ""
    elsewhere = ", or load it under another name with --context" if single else ""
    return InputError(
        f"context '{first.folder.name}' on {masked_url} already holds {first.holds}{more}: "
        "load does not merge into it — pass --replace to delete it and load "
        f"{first.folder.folder} afresh (the delete needs an admin key){elsewhere}"
    )


def _route(template: str, name: str) -> str:
    return template.replace("{name}", name)


@dataclass
class _Session:
    """One load's connection, budget, progress and the requests it made."""

    client: WriteClient
    masked_url: str
    token_variable: str | None
    caps: Caps
    progress: Progress | None
    total: int
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    done: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)

    # -- requests ---------------------------------------------------------------------

    def _call(
        self,
        method: str,
        segments: Sequence[str],
        body: object = None,
        query: Sequence[tuple[str, str]] = (),
    ) -> tuple[object, int]:
        try:
            return self.client.call(method, segments, body, query=query)
        except Unreachable as failure:
            raise RunError(self._unreachable(failure)) from None

    def _unreachable(self, failure: Unreachable) -> str:
        if failure.timed_out:
            return (
                f"{self.masked_url} did not answer within {REQUEST_TIMEOUT_S:g} s ({failure}): "
                "is the server overloaded? try again when it is idle"
            )
        return (
            f"{self.masked_url} cannot be reached ({failure}): start the server, "
            "or point --url (or TAGURU_ADDR) at it"
        )

    def _read(self, name: str, suffix: str = "", query: Sequence[tuple[str, str]] = ()) -> object:
        segments = ["contexts", name, *([suffix] if suffix else [])]
        route = f"GET /contexts/{name}" + (f"/{suffix}" if suffix else "")
        try:
            result, _sent = self._call("GET", segments, query=query)
        except Refused as refused:
            raise RunError(
                f"{route} answered {refused.status_text()}: {self._hint(refused)}"
            ) from None
        return result

    def _hint(self, refused: Refused, role: str = "write") -> str:
        """The server's reason, then what to do about an authentication refusal."""
        detail = refused.detail()
        if refused.status == 401:
            if self.token_variable is None:
                return (
                    f"{detail} — the server needs a bearer token: set {TOKEN_ENV} "
                    f"to a key with the {role} role"
                )
            return (
                f"{detail} — the server does not accept the token in {self.token_variable}: "
                "set it to one of the server's keys"
            )
        if refused.status == 403:
            return (
                f"{detail} — give load a key with the {role} role on the context "
                "(the server's TAGURU_KEY_SCOPES)"
            )
        return detail

    def _row(self, name: str, template: str, items: int, sent: int, applied: int | None) -> None:
        route = _route(template, name)
        self.rows.append(
            {"context": name, "route": route, "items": items, "bytes": sent, "applied": applied}
        )

    # -- look -------------------------------------------------------------------------

    def look(self, plan: _Plan) -> None:
        """What the server holds of ``plan``'s context now."""
        name = plan.folder.name
        try:
            result, _sent = self._call("GET", ["contexts", name])
        except Refused as refused:
            if refused.status == 404 and refused.code == "no_context":
                return
            raise RunError(
                f"GET /contexts/{name} answered {refused.status_text()}: {self._hint(refused)}"
            ) from None
        entry = result if isinstance(result, dict) else {}
        plan.exists = True
        plan.revision = _revision(entry)
        stats = entry.get("stats")
        counts = stats if isinstance(stats, dict) else {}
        sources = _sources_total(self._read(name, "sources", [("limit", "1")]))
        held = [
            f"{count} {what}"
            for count, what in (
                (sources, "source(s)"),
                (_int(counts.get("concepts")), "concept(s)"),
                (_int(counts.get("associations")), "association(s)"),
            )
            if count
        ]
        plan.holds = ", ".join(held) if held else None

    # -- write ------------------------------------------------------------------------

    def load(self, plan: _Plan) -> LoadedContext:
        """Create (or empty) the context, send its writes, wait until it reads back."""
        action, start = self._open(plan)
        tally = self._fill(plan)
        return LoadedContext(
            name=plan.folder.name,
            folder=plan.folder.folder,
            action=action,
            sources=tally.sources,
            associations=tally.associations,
            aliases=tally.aliases,
            revision=self._settle(plan, start, tally),
        )

    def _open(self, plan: _Plan) -> tuple[str, dict[str, int]]:
        """Make the context exist and be empty: how (created, filled or replaced), and
        its revision then."""
        folder = plan.folder
        if folder.vector_lane:
            warn(
                UnsentSettingWarning(
                    f"{folder.settings_file}: vector_lane is the reference server's own key; "
                    "no route sends it (a server's vector lane is its embedding provider)"
                )
            )
        if plan.exists and plan.holds is None:
            if folder.settings not in (None, {}):
                self._context_write("PATCH", PATCH_CONTEXT, plan, folder.settings)
            return "filled", plan.revision
        action = "created"
        if plan.exists:
            self._delete(plan)
            action = "replaced"
        self._context_write("PUT", CREATE_CONTEXT, plan, folder.settings)
        return action, dict.fromkeys(REVISION_KEYS, 0)

    def _fill(self, plan: _Plan) -> _Tally:
        """Send the context's writes in order; a 413 re-cuts them under a smaller budget."""
        tally = _Tally()
        queue: deque[Write] = deque(plan.writes)
        while queue:
            write = queue.popleft()
            try:
                result, sent = self.client.call(
                    "POST", ["contexts", plan.folder.name, write.kind], write.body()
                )
            except Unreachable as failure:
                partial = _partial(plan.folder, tally)
                raise RunError(f"{self._unreachable(failure)}; {partial}") from None
            except Refused as refused:
                if refused.status == 413 and (smaller := self._split(write, refused, queue)):
                    queue.extendleft(reversed(smaller))
                    continue
                raise self._refused_write(plan, write, refused, tally) from None
            applied = self._count(write, result, tally)
            self._row(plan.folder.name, ROUTE_OF[write.kind], write.items, sent, applied)
            self.done += write.items
            if self.progress is not None and self.total:
                self.progress(self.done, self.total)
        return tally

    def _delete(self, plan: _Plan) -> None:
        name = plan.folder.name
        try:
            _result, sent = self._call("DELETE", ["contexts", name])
        except Refused as refused:
            raise RunError(
                f"--replace deletes context '{name}' first, and "
                f"{_route(DELETE_CONTEXT, name)} answered {refused.status_text()}: "
                f"{self._hint(refused, role='admin')}; the context was left as it was"
            ) from None
        self._row(name, DELETE_CONTEXT, 0, sent, None)

    def _context_write(self, method: str, template: str, plan: _Plan, body: object) -> None:
        name = plan.folder.name
        where = plan.folder.settings_file if plan.folder.settings_file.is_file() else None
        try:
            _result, sent = self._call(method, ["contexts", name], body)
        except Refused as refused:
            route = _route(template, name)
            prefix = f"{where}: " if where is not None and refused.status not in (401, 403) else ""
            raise RunError(
                f"{prefix}{route} answered {refused.status_text()}: {self._hint(refused)}"
            ) from None
        self._row(name, template, 0, sent, None)

    def _split(self, write: Write, refused: Refused, queue: deque[Write]) -> list[Write] | None:
        """After a 413: halve the body budget, re-cut what is queued under it, and
        return ``write`` cut so (``None`` when it cannot be cut further)."""
        budget = max(1, refused.body_bytes // 2)
        if self.caps.body_bytes is None or budget < self.caps.body_bytes:
            self.caps = dataclasses.replace(self.caps, body_bytes=budget)
        smaller = split_write(write, self.caps)
        if len(smaller) < 2:
            return None
        rest = [part for queued in queue for part in split_write(queued, self.caps)]
        queue.clear()
        queue.extend(rest)
        return smaller

    @staticmethod
    def _count(write: Write, result: object, tally: _Tally) -> int:
        """Record what the server says it took; returns the count for the writes table."""
        if write.kind == "sources":
            stored = _int(result.get("stored")) if isinstance(result, dict) else write.items
            tally.sources += write.items
            tally.passages_applied += stored
            return stored
        applied = _int(result)
        tally.graph_applied += applied
        if write.kind == "associations":
            tally.associations += write.items
        else:
            tally.aliases += write.items
        return applied

    def _refused_write(
        self, plan: _Plan, write: Write, refused: Refused, tally: _Tally
    ) -> TaguruEvalError:
        name = plan.folder.name
        route = _route(ROUTE_OF[write.kind], name)
        held = _partial(plan.folder, tally)
        if refused.status in (401, 403):
            return RunError(f"{route} answered {refused.status_text()}: {self._hint(refused)}")
        where: Location = write.where(refused.first_issue_path(), refused.error)
        if refused.status == 413:
            return RunError(
                f"{where}: {route} answered {refused.status_text()} to a "
                f"{refused.body_bytes}-byte body holding this one item: raise the server's "
                f"{BODY_BYTES_ENV} or make the item smaller; {held}"
            )
        return RunError(
            f"{where}: {route} answered {refused.status_text()}: {refused.detail()}; {held}"
        )

    # -- settle -----------------------------------------------------------------------

    def _settle(self, plan: _Plan, start: Mapping[str, int], tally: _Tally) -> dict[str, int]:
        """Read the context back until two reads agree on its revision; check that
        it moved by what was applied and that every source is listed."""
        name = plan.folder.name
        deadline = self.clock() + SETTLE_TIMEOUT_S
        first = _revision(self._read(name))
        while True:
            listed = _sources_total(self._read(name, "sources", [("limit", "1")]))
            second = _revision(self._read(name))
            if second == first:
                break
            if self.clock() >= deadline:
                raise RunError(
                    f"context '{name}' still changes {SETTLE_TIMEOUT_S:g} s after the load "
                    f"(revision {_shown(first)} → {_shown(second)}): the server is still "
                    "writing to it (an embedding refresh?) — wait for it before a run"
                )
            self.sleep(SETTLE_POLL_S)
            first = second
        expected = {
            "graph": start["graph"] + tally.graph_applied,
            "passages": start["passages"] + tally.passages_applied,
        }
        moved = {key: second[key] for key in expected}
        if moved != expected or listed != len(plan.folder.sources):
            raise RunError(
                f"context '{name}' reads back {listed} source(s) and revision "
                f"{_shown(second)}, but load wrote {len(plan.folder.sources)} source(s) and "
                f"expected graph {expected['graph']}, passages {expected['passages']}: another "
                "client wrote to it meanwhile — load again with --replace"
            )
        return second


def _partial(folder: ContextFolder, tally: _Tally) -> str:
    """What a failed load left in the context, and what to do next."""
    if not (tally.sources or tally.associations or tally.aliases):
        return f"context '{folder.name}' holds nothing of the folder yet — fix it and load again"
    return (
        f"context '{folder.name}' holds part of the folder ({tally.sources} of "
        f"{len(folder.sources)} source(s), {tally.associations} of {len(folder.associations)} "
        "association(s) and "
        f"{tally.aliases} alias pair(s) written before the refused request) — fix it and "
        "load again with --replace"
    )


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _revision(entry: object) -> dict[str, int]:
    revision = entry.get("revision") if isinstance(entry, dict) else None
    counters = revision if isinstance(revision, dict) else {}
    return {key: _int(counters.get(key)) for key in REVISION_KEYS}


def _sources_total(listing: object) -> int:
    return _int(listing.get("total")) if isinstance(listing, dict) else 0


def _shown(revision: Mapping[str, int]) -> str:
    return ", ".join(f"{key} {revision[key]}" for key in REVISION_KEYS)
