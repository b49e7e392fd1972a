"""Checkpoints of an unfinished run, and ``run … --resume`` continuing one.

A run with a store keeps its finished cases' lane outputs under
``<store>/.partial/context=<ctx>/<checkpoint id>/`` as they finish:

    manifest.json          what the run is (:class:`Manifest`): its fingerprint, the
                           first session's corpus bracket, how many sessions sent cases
    lock                   held (``flock``) by the one process writing the checkpoint
                           (:mod:`.lock`); it holds that process's pid
    batch-000001.msgpack   the lane outputs of up to :data:`DEFAULT_BATCH` cases, with
                           their digest (:mod:`.batches`)
    finished               written just before the run enters the store: its run id

Every file is written whole through a temp file and a rename, so a batch a kill
cut short is never read (its temp name does not match), and the directory is
made at the first batch only: a run that fails before any case finished leaves
nothing. The store's readers look for ``context=*/run=*``, so the dot
directory is never taken for a run. Storing the run retires its checkpoint:
marked ``finished`` before the store's rename, removed after it, so a crash in
between leaves a checkpoint ``--resume`` refuses, never a run stored twice.

``--resume`` takes the newest unfinished checkpoint of the context and its lock
(exit 2, one line, when another process holds it), refuses unless its
fingerprint equals this run's, reads every batch back as untrusted input (one
that does not conform is dropped with a warning naming it, and its cases are
sent again), replays the finished outputs through the same path fresh ones take
and sends only the other cases. A checkpoint that cannot be written is one
warning, and the run goes on without.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Final
from urllib.parse import quote

import msgspec

from taguru_eval._base.filebytes import ReadCap, file_bytes
from taguru_eval._base.files import file_sha256, write_bytes_atomic
from taguru_eval._base.ids import new_run_id
from taguru_eval.contract import VERSION
from taguru_eval.errors import (
    InputError,
    StoreWriteWarning,
    os_error_text,
    warn,
)
from taguru_eval.inputs.prepare import PreparedRun
from taguru_eval.options import RUN_FLAGS
from taguru_eval.resume.batches import NonConforming, decode_batch, encode_batch
from taguru_eval.resume.lock import CheckpointLock, Held
from taguru_eval.run.preflight import ContextEntry, Preflight
from taguru_eval.tables.shapes import LaneOutput

PARTIAL_DIR: Final = ".partial"
MANIFEST_NAME: Final = "manifest.json"
FINISHED_NAME: Final = "finished"
CHECKPOINT_STAMP: Final = 2
"""2: batches carry their digest (:mod:`.batches`); a stamp-1 checkpoint is not read."""
BATCH_CAP: Final = ReadCap(1 << 30, "a checkpoint batch")
"""The largest batch file read back (a default batch is a few MB)."""
MANIFEST_CAP: Final = ReadCap(1 << 20, "a checkpoint's manifest")
FINISHED_CAP: Final = ReadCap(4096, "a checkpoint's finished mark")
DEFAULT_BATCH: Final = 500
BATCH_ENV: Final = "TAGURU_EVAL_CHECKPOINT_BATCH"
"""Cases per batch file (tests use a small one; a batch costs one fsync)."""

_BATCH_NAME: Final = re.compile(r"batch-(?P<n>[0-9]{6})\.msgpack")


class Fingerprint(msgspec.Struct, frozen=True, kw_only=True):
    """Everything that decides what a run sends or what its artifact records,
    besides the corpus: two sessions with equal fingerprints make the same
    artifact. ``out`` and ``concurrency`` are here because ``inputs`` records
    them; the store, the reports (``--junit``, ``--summary``) and the token are
    not (they change no case and no ``inputs`` value)."""

    writer: str
    eval_path: str
    eval_sha256: str
    context: str
    url: str
    out: str
    mode: str
    max_items: int | None
    max_bytes: int | None
    max_tokens: int | None
    rerank: str | None
    concurrency: int
    must_refuse: str | None
    must_refuse_sha256: str | None
    refusal_rule: str | None
    thresholds: str | None
    thresholds_sha256: str | None
    # Later additions default to None, so an unfinished run of an older version
    # still reads (and, without --answers, still matches).
    answers: str | None = None
    answers_sha256: str | None = None
    answer_match: str | None = None


_FLAGS: Final = {
    "writer": "the taguru_eval version",
    "mode": RUN_FLAGS["assembly"].name,  # inputs.mode is what --assembly decides
    **{name: RUN_FLAGS[name].name for name in Fingerprint.__struct_fields__ if name in RUN_FLAGS},
}
"""The flag a differing fingerprint field names."""
_FILES: Final = {
    "eval_sha256": "the eval set",
    "must_refuse_sha256": "the must-refuse file",
    "thresholds_sha256": "the thresholds file",
    "answers_sha256": "the answers file",
}


class Bracket(msgspec.Struct, frozen=True):
    """The first session's context read before its cases (``corpus.*_before``)."""

    revision: dict[str, int]
    last_write_epoch: int


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    taguru_eval_checkpoint: int = CHECKPOINT_STAMP
    fingerprint: Fingerprint
    before: Bracket
    started_at: str
    sessions: int
    pid: int
    cases: int


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def fingerprint(prepared: PreparedRun) -> Fingerprint | None:
    """This run's fingerprint; None when the eval file cannot be read again
    (a pipe or a device: its bytes cannot be checked, so no checkpoint is kept)."""
    options = prepared.options
    if not _regular(options.eval_path):
        return None
    try:
        eval_sha256 = file_sha256(options.eval_path)
    except OSError:
        return None
    must_refuse = prepared.must_refuse
    thresholds = prepared.thresholds
    # The options a fingerprint keeps as given are those its fields are named after;
    # the others are kept as the run resolved them.
    resolved = {
        "writer": VERSION,
        "eval_sha256": eval_sha256,
        "url": prepared.masked_url,
        "mode": options.mode,
        "must_refuse_sha256": None if must_refuse is None else must_refuse.sha256,
        "refusal_rule": None if must_refuse is None else options.resolved_refusal_rule,
        "thresholds_sha256": None if thresholds is None else thresholds.sha256,
        "answers_sha256": None if prepared.answers is None else prepared.answers.sha256,
        "answer_match": None if prepared.answers is None else options.resolved_answer_match,
    }
    given = {name: getattr(options, name) for name in _FLAGS if name in RUN_FLAGS}
    return Fingerprint(**{**given, **resolved})


def difference(old: Fingerprint, new: Fingerprint) -> str | None:
    """What differs between an unfinished run and this one, as one phrase."""
    for name in old.__struct_fields__:
        was, now = getattr(old, name), getattr(new, name)
        if was == now:
            continue
        if name in _FILES:
            return (
                f"{_FILES[name]} differs from the unfinished run's "
                f"(sha256 {_short(was)}, now {_short(now)})"
            )
        return (
            f"{_FLAGS[name]} differs from the unfinished run's ({_shown(was)}, now {_shown(now)})"
        )
    return None


def _short(digest: str | None) -> str:
    return "none" if digest is None else f"{digest[:12]}…"


def _shown(value: object) -> str:
    return "none" if value is None else repr(value)


def partial_dir(store_dir: str | Path, context: str) -> Path:
    """``<store>/.partial/context=<percent-encoded ctx>``: the context's checkpoints."""
    return Path(store_dir) / PARTIAL_DIR / f"context={quote(context, safe='')}"


def batch_size(env: Mapping[str, str] = os.environ) -> int:
    """Cases per batch file: :data:`BATCH_ENV` when it is a positive integer."""
    text = env.get(BATCH_ENV, "")
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_BATCH


@dataclass
class Found:
    """A checkpoint read back: its directory, manifest and finished outputs, and
    the lock this process holds on it."""

    directory: Path
    manifest: Manifest
    done: list[LaneOutput]
    next_batch: int
    lock: CheckpointLock


def _manifest(directory: Path) -> Manifest | None:
    try:
        data = file_bytes(directory / MANIFEST_NAME, MANIFEST_CAP)
        manifest = msgspec.json.decode(data, type=Manifest)
    except (OSError, msgspec.DecodeError):
        return None
    return manifest if manifest.taguru_eval_checkpoint == CHECKPOINT_STAMP else None


def finished_as(directory: Path) -> str | None:
    """The run id a checkpoint's run was stored as, when it is marked finished (``?``
    for a mark that does not read as one: marked all the same)."""
    mark = directory / FINISHED_NAME
    if not mark.exists():
        return None
    try:
        text = file_bytes(mark, FINISHED_CAP).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return "?"
    return text or "?"


def checkpoints(store_dir: str | Path, context: str) -> list[tuple[Path, Manifest]]:
    """The checkpoints of ``context`` with a readable manifest, newest first."""
    root = partial_dir(store_dir, context)
    try:
        candidates = sorted((path for path in root.iterdir() if path.is_dir()), reverse=True)
    except OSError:
        return []
    found = [(directory, _manifest(directory)) for directory in candidates]
    return [(directory, manifest) for directory, manifest in found if manifest is not None]


def _unreached(output: LaneOutput) -> bool:
    """A case with a call that reached no server (a lost server): sent again."""
    return any(call["http_status"] is None and call["error"] for call in output["calls"])


def load_checkpoint(
    directory: Path, manifest: Manifest, prepared: PreparedRun, lock: CheckpointLock
) -> Found:
    """The finished outputs of a checkpoint whose lock this process holds, one per
    case. A batch that does not conform (:func:`~.batches.decode_batch`) is
    removed with one warning naming it and what is wrong: its cases are sent again."""
    done: dict[int, LaneOutput] = {}
    last = 0
    cases = prepared.eval_set.cases
    for path in sorted(directory.iterdir()):
        match = _BATCH_NAME.fullmatch(path.name)
        if match is None:
            continue  # the manifest, the lock, or a temp file a kill left
        last = max(last, int(match.group("n")))
        try:
            outputs = decode_batch(file_bytes(path, BATCH_CAP), cases)
        except (OSError, NonConforming) as exc:
            with contextlib.suppress(OSError):
                path.unlink()
            warn(
                StoreWriteWarning(
                    f"--resume: discarding {path}: {_reason(exc)}; its cases are sent again"
                )
            )
            continue
        for output in outputs:
            # A later batch wins: a case sent again after a lost server.
            done[output["case_index"]] = output
    kept = [done[index] for index in sorted(done) if not _unreached(done[index])]
    return Found(directory=directory, manifest=manifest, done=kept, next_batch=last + 1, lock=lock)


def _reason(exc: Exception) -> str:
    return os_error_text(exc) if isinstance(exc, OSError) else str(exc)


def find_resumable(prepared: PreparedRun, store_dir: Path | None) -> Found:
    """The checkpoint ``--resume`` continues, locked for this process; anything else
    is exit 2, one line — no unfinished run, one another process is writing, one
    that differs from this run (each naming an older checkpoint that matches) — and
    a hint saying how to go on (continue it as it was, or start afresh)."""
    context = prepared.options.context
    if store_dir is None:  # RunOptions refuses --resume with --no-store first
        raise InputError("--resume needs the run store")
    mine = fingerprint(prepared)
    if mine is None:
        raise InputError(
            f"--resume: {prepared.options.eval_path} is not a regular file, "
            "so it cannot be checked against an unfinished run",
            hint=AFRESH,
        )
    every = checkpoints(store_dir, context)
    unfinished = [(path, manifest) for path, manifest in every if finished_as(path) is None]
    if not unfinished:
        note = "" if not every else _finished_note(every[0][0])
        raise InputError(
            f"--resume: no unfinished run of context '{context}' in {store_dir}{note}",
            hint="there is nothing to continue: run the same command without --resume",
        )
    (directory, manifest), older = unfinished[0], unfinished[1:]
    lock = CheckpointLock(directory)
    try:
        lock.take()
    except Held as held:
        by = "another process" if held.pid is None else f"pid {held.pid}"
        raise InputError(
            f"--resume: the unfinished run {directory} is being written by {by}"
            + _older_match(older, mine, directory),
            hint=f"let it finish (or stop {by}, then --resume it); {AFRESH}",
        ) from None
    except OSError as exc:
        raise InputError(f"--resume: {directory}: {os_error_text(exc)}") from None
    try:
        if finished_as(directory) is not None:  # finished while this process looked
            raise InputError(
                f"--resume: no unfinished run of context '{context}' in {store_dir}"
                + _finished_note(directory),
                hint="there is nothing to continue: run the same command without --resume",
            )
        what = difference(manifest.fingerprint, mine)
        if what is not None:
            raise InputError(
                f"--resume: {what}" + _older_match(older, mine, directory),
                hint=(
                    "to continue it, give the unfinished run's inputs and options again; "
                    f"{AFRESH} (the unfinished run stays in {directory}: delete it to discard it)"
                ),
            )
        return load_checkpoint(directory, manifest, prepared, lock)
    except BaseException:
        lock.release()
        raise


def _finished_note(directory: Path) -> str:
    return f" (the newest, {directory}, finished as run {finished_as(directory)})"


def _older_match(older: Sequence[tuple[Path, Manifest]], mine: Fingerprint, newest: Path) -> str:
    """The refusal's note naming an older unfinished run this one would continue."""
    for directory, manifest in older:
        if difference(manifest.fingerprint, mine) is None:
            return (
                f"; an older unfinished run, {directory}, matches this one "
                f"(remove {newest} to resume it)"
            )
    return ""


AFRESH = "to start afresh, run the same command without --resume"


class Session:
    """This session's part of a checkpoint: it replays the finished outputs,
    records the new ones in batches, and knows the corpus bracket's first read.

    The network phase calls :meth:`bracket` after its preflight, :meth:`record`
    for every finished case (a replayed one is skipped) and :meth:`flush` when
    the case phase ends, however it ends. The pipeline calls :meth:`retire` just
    before the run's rename into the store, :meth:`finish` after it, and
    :meth:`release` however the run ends. From its first batch (a fresh run) or
    from the start (a resumed one) the session holds the checkpoint's lock."""

    def __init__(
        self,
        store_dir: Path,
        prepared: PreparedRun,
        mine: Fingerprint,
        found: Found | None = None,
        size: int | None = None,
    ) -> None:
        self._prepared = prepared
        self._fingerprint = mine
        self._size = batch_size() if size is None else size
        self._pending: list[LaneOutput] = []
        self._broken = False
        self._written_manifest = False
        self._found = found
        self._retired = False
        self.done: Sequence[LaneOutput] = () if found is None else found.done
        self._replayed = frozenset(output["case_index"] for output in self.done)
        if found is None:
            started = datetime.now(UTC)
            self._directory = partial_dir(store_dir, prepared.options.context) / new_run_id(started)
            self._started_at = f"{started:%Y-%m-%dT%H:%M:%SZ}"
            self._before: Bracket | None = None
            self._previous_sessions = 0
            self._next_batch = 1
            self._lock = CheckpointLock(self._directory)
        else:
            self._directory = found.directory
            self._started_at = found.manifest.started_at
            self._before = found.manifest.before
            self._previous_sessions = found.manifest.sessions
            self._next_batch = found.next_batch
            self._lock = found.lock

    @property
    def sessions(self) -> int:
        """The sessions that make this run's cases, this one included."""
        return self._previous_sessions + 1

    def bracket(self, checked: Preflight) -> Preflight:
        """A fresh run remembers its first read; a resumed one reports the first
        session's, so ``revision_before`` and ``stable`` span every session."""
        if self._before is None:
            before = checked.before
            self._before = Bracket(dict(before.revision), before.last_write_epoch)
            return checked
        first = ContextEntry(dict(self._before.revision), self._before.last_write_epoch)
        return replace(checked, before=first)

    def record(self, output: LaneOutput) -> None:
        """One finished case; every :meth:`batch_size` cases make one batch file."""
        if self._broken or output["case_index"] in self._replayed:
            return
        self._pending.append(output)
        if len(self._pending) >= self._size:
            self.flush()

    def after(self, first: Callable[[LaneOutput], None]) -> Callable[[LaneOutput], None]:
        """``first``, then :meth:`record`, for every finished case."""

        def both(output: LaneOutput) -> None:
            first(output)
            self.record(output)

        return both

    def flush(self) -> None:
        """The pending outputs as one batch file (nothing when none are pending)."""
        if self._broken or not self._pending:
            return
        batch = self._pending
        self._pending = []
        try:
            if not self._written_manifest:
                self._directory.mkdir(parents=True, exist_ok=True)
                self._lock.take()  # a fresh run's checkpoint: made here, held from here
                write_bytes_atomic(self._directory / MANIFEST_NAME, self._manifest())
                self._written_manifest = True
            name = f"batch-{self._next_batch:06d}.msgpack"
            write_bytes_atomic(self._directory / name, encode_batch(batch))
            self._next_batch += 1
        except (OSError, Held) as exc:
            self._broken = True
            why = "another process holds its lock" if isinstance(exc, Held) else os_error_text(exc)
            warn(
                StoreWriteWarning(
                    f"keeping the unfinished run in {self._directory}: {why}; "
                    "the run goes on, but cannot be resumed"
                )
            )

    def _manifest(self) -> bytes:
        assert self._before is not None  # bracket() runs before any case finishes
        manifest = Manifest(
            fingerprint=self._fingerprint,
            before=self._before,
            started_at=self._started_at,
            sessions=self.sessions,
            pid=os.getpid(),
            cases=len(self._prepared.eval_set.cases),
        )
        return msgspec.json.encode(manifest)

    def retire(self, run_id: str) -> None:
        """The run is about to enter the store as ``run_id``: its checkpoint is marked
        finished first, so a crash between the store's rename and :meth:`finish`
        leaves a checkpoint ``--resume`` refuses, never a second copy of the run.
        A mark that cannot be written removes the checkpoint instead."""
        self._pending = []
        self._retired = True
        if not self._lock.held or not self._directory.exists():
            return  # no batch was written: nothing to resume
        try:
            write_bytes_atomic(self._directory / FINISHED_NAME, f"{run_id}\n".encode())
        except OSError:
            shutil.rmtree(self._directory, ignore_errors=True)

    def finish(self) -> None:
        """The run's artifact is written (and the run stored, when it could be): its
        checkpoint goes (best effort) and its lock with it. Only the lock's holder
        removes anything: what another process holds is never touched."""
        self._pending = []
        if self._lock.held:
            shutil.rmtree(self._directory, ignore_errors=True)
        _sweep_finished(self._directory.parent)
        for directory in (self._directory, self._directory.parent, self._directory.parent.parent):
            with contextlib.suppress(OSError):
                directory.rmdir()  # only when empty: another run's checkpoint stays
        self.release()

    def release(self) -> None:
        """Let the checkpoint's lock go (the run ended, however; idempotent)."""
        self._lock.release()


def _sweep_finished(context_dir: Path) -> None:
    """Remove the checkpoints of ``context_dir`` marked finished whose lock no one
    holds: a run killed between the store's rename and its checkpoint's removal
    left them (best effort)."""
    try:
        directories = [path for path in context_dir.iterdir() if path.is_dir()]
    except OSError:
        return
    for directory in directories:
        if finished_as(directory) is None:
            continue
        lock = CheckpointLock(directory)
        try:
            lock.take()
        except (Held, OSError):
            continue
        shutil.rmtree(directory, ignore_errors=True)
        lock.release()


def open_session(prepared: PreparedRun, store_dir: Path | None) -> Session | None:
    """This run's checkpoint session: ``--resume`` continues the newest
    unfinished one (exit 2 when there is none or it differs); otherwise a fresh
    one, made at the first batch. None without a store, and for a run with
    ``--repeat``: a checkpoint holds each case's first repetition only, and a
    plain run continuing it would take the case for stable (RunOptions refuses
    ``--resume --repeat`` before this is reached); nor for a selection, whose
    cases are indexed within the selection, not the file."""
    if store_dir is None or prepared.options.repeat > 1 or prepared.options.selects:
        return None
    if prepared.options.resume:
        found = find_resumable(prepared, store_dir)
        return Session(store_dir, prepared, found.manifest.fingerprint, found)
    mine = fingerprint(prepared)
    return None if mine is None else Session(store_dir, prepared, mine)
