"""Stop signals — Ctrl-C's SIGINT, a CI cancellation's SIGTERM — recorded when they
arrive and raised where the program checks for them.

A Python signal handler runs between any two bytecodes of the main thread,
inside a finalizer the garbage collector happens to run too (an aiohttp
connection's ``__del__``), and an exception raised there is printed as
``Exception ignored in …`` and dropped: the signal was lost and the run went on
to exit 0 or 3. Raised in the middle of the event loop's own code it left
futures half-resolved (``InvalidStateError``, "coroutine … was never awaited",
a shutdown that never ended). So the command line's handler only records the
signal — from the program's first line (:func:`record_from_now`), then inside
:func:`deferring` — and the program acts on it in three places:

* the event loop of a network phase (:func:`stoppable`): the loop's own signal
  handler (``loop.add_signal_handler``, which uvloop has too) records the
  signal and cancels the phase's task; the cancellation runs every cleanup
  (cases cancelled, the checkpoint's batch written, connections closed) and
  the task ends with the stop exception;
* :func:`check`, called between the finishing stages and for every chunk a
  reader reads or a writer writes: it raises :class:`Terminated` (SIGTERM) or
  ``KeyboardInterrupt`` (SIGINT) there, once;
* the command's last step (:func:`unraised`): a signal no check met still
  decides the exit code (143 / 130), and one that comes after it ends the
  process with its line at once (``deferring(final=…)``).

Without :func:`deferring` (a library caller, a worker thread) nothing is
recorded and every function here is a no-op: the library installs no handler.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:  # imported where a loop runs: the process's first lines stay light
    import asyncio

T = TypeVar("T")

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)

SHUTDOWN_NUDGE_S: Final = 2.0
"""After a stop signal, how long a network phase's cleanup may await before it is
cancelled again (and again, this often): a close that waits on a peer cannot
hold the exit up."""


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: the program stops exactly as on Ctrl-C, then exits 143."""


class _Stops:
    # A plain class: dataclasses would import inspect, the slowest import of the
    # process's first lines (record_from_now runs before anything else).
    def __init__(self) -> None:
        self.deferring = False
        self.received: int | None = None  # the first stop signal, while deferring
        self.raised = False  # whether a check has raised it


_STOPS: Final = _Stops()


def stop_exception(signum: int) -> KeyboardInterrupt:
    """The exception a stop signal becomes: :class:`Terminated` for SIGTERM."""
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _record(signum: int, frame: FrameType | None = None) -> None:
    """The handler: remembers the first stop signal, nothing else (it may run
    inside any finalizer, so it must not raise)."""
    if _STOPS.received is None:
        _STOPS.received = signum


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def record_from_now() -> None:
    """The process's command line, from its very first line: SIGINT and SIGTERM are
    recorded from here on (a signal during the imports is then kept for the first
    check, not a ``KeyboardInterrupt`` traceback from inside an import, or an end
    without the command's line). Only the entry points call it."""
    if _main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, _record)
        _STOPS.deferring = True


@contextlib.contextmanager
def deferring(*, final: Callable[[int], object] | None = None) -> Iterator[None]:
    """Inside: SIGINT and SIGTERM are recorded, and raised by :func:`check`.

    Only the main thread can install a handler; elsewhere (the command line
    called from a worker thread) both keep their handling. A signal recorded
    since :func:`record_from_now` is kept. On the way out the earlier handlers
    come back, unless ``final`` is given (the process's own command line, its
    exit code decided): then a stop signal from there on — or one that came
    after the last :func:`unraised` — is handed to ``final`` (which prints the
    command's line and ends the process) instead of meeting the interpreter's
    shutdown.
    """
    if not _main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _record) for signum in STOP_SIGNALS}
    if not _STOPS.deferring:
        _STOPS.received, _STOPS.raised = None, False
    _STOPS.deferring = True
    try:
        yield
    finally:
        if final is not None:
            ending = final

            def too_late(signum: int, frame: FrameType | None = None) -> None:
                for each in STOP_SIGNALS:  # one line, however many signals follow
                    signal.signal(each, signal.SIG_IGN)
                ending(signum)

            for signum in STOP_SIGNALS:
                signal.signal(signum, too_late)
            late = unraised()
            if late is not None:
                too_late(late)
        else:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            _STOPS.deferring = False


def check() -> None:
    """Raise the stop signal that arrived, if one did and no check raised it yet.

    Called where stopping is safe: between stages, per chunk read or written.
    A no-op outside :func:`deferring` and off the main thread."""
    if _STOPS.received is not None and not _STOPS.raised and _main_thread():
        _STOPS.raised = True
        raise stop_exception(_STOPS.received)


def unraised() -> int | None:
    """A stop signal that arrived but that no check raised (the command's last
    look: its exit code is then the signal's); None otherwise. After this call
    the signal counts as raised."""
    if _STOPS.received is None or _STOPS.raised:
        return None
    _STOPS.raised = True
    return _STOPS.received


def consume() -> int | None:
    """Forget a stop signal that arrived (a command for which it is the normal way
    to end, such as ``serve``); returns it."""
    received, _STOPS.received, _STOPS.raised = _STOPS.received, None, False
    return received


async def stoppable(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` in the current task so that a stop signal cancels it.

    While deferring (the command line, on the main thread), the running loop's
    own handlers (``loop.add_signal_handler``: asyncio's and uvloop's loops both
    have it) record SIGINT and SIGTERM and cancel this task; the cancellation
    unwinds every ``finally`` and ``async with`` of the phase, nudged again every
    :data:`SHUTDOWN_NUDGE_S` seconds while a cleanup still awaits, and the task
    then ends with :func:`stop_exception`. Otherwise it is a plain ``await``.
    """
    if not (_STOPS.deferring and _main_thread()):
        return await awaitable
    import asyncio

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None  # awaited inside a task, as every coroutine is
    nudges: list[asyncio.TimerHandle] = []

    def nudge() -> None:
        if not task.done():
            task.cancel()
            nudges.append(loop.call_later(SHUTDOWN_NUDGE_S, nudge))

    def arrived(signum: int) -> None:
        _record(signum)
        nudge()

    installed = _install(loop, arrived)
    try:
        try:
            check()  # one that arrived before the loop's handlers were in place
        except KeyboardInterrupt:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()  # never started: no "never awaited" warning
            raise
        result = await awaitable
    except BaseException:
        # The cancellation, or whatever a cleanup it cut short raised instead:
        # either way the run stops for the signal.
        if _STOPS.received is None or _STOPS.raised:
            raise
        _STOPS.raised = True
        raise stop_exception(_STOPS.received) from None
    finally:
        for handle in nudges:
            handle.cancel()
        _uninstall(loop, installed)
    check()  # a cancellation the phase swallowed
    return result


def _install(loop: asyncio.AbstractEventLoop, arrived: Callable[[int], None]) -> list[int]:
    installed: list[int] = []
    for signum in STOP_SIGNALS:
        try:
            loop.add_signal_handler(signum, arrived, signum)
        except (RuntimeError, ValueError):
            # A loop without signal support raises a RuntimeError subclass (asyncio's
            # Windows loops), a thread other than the main one ValueError: the
            # recording handler stays.
            continue
        installed.append(signum)
    return installed


def _uninstall(loop: asyncio.AbstractEventLoop, installed: list[int]) -> None:
    """Give the signals back to :func:`_record`. ``remove_signal_handler`` resets a
    signal to its default action on the way, so both are blocked meanwhile: a
    SIGTERM in between would otherwise end the process without its line."""
    if not installed:
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, installed)
    try:
        for signum in installed:
            loop.remove_signal_handler(signum)
            signal.signal(signum, _record)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, installed)


def checked(chunks: Iterator[Any]) -> Iterator[Any]:
    """``chunks``, with a :func:`check` before each one is handed on."""
    for chunk in chunks:
        check()
        yield chunk
