"""One writer per checkpoint, and a finished run cannot be resumed (issue 44,
failures 2 and 7).

Before, two ``--resume`` of one checkpoint both ran (its remaining cases sent
twice, two stored runs), a resume of a run still going was accepted whenever
that run had not written for a while, and a run killed between entering the
store and removing its checkpoint could be resumed into a second stored copy.
Now a run and every resume of it hold an OS lock on the checkpoint until the run
is stored, and the checkpoint is marked finished before the store's rename.

Every process is the real command line against a loopback server that holds
the searches it is told to hold, so a run can be caught mid-way without a sleep.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.hints import hints, without_hints
from support.loopback import Request, Response, ScriptedServer, context_entry, envelope
from support.paths import PROJECT_ROOT
from support.run import run_args

from taguru_eval.cli.main import main
from taguru_eval.resume import BATCH_ENV, FINISHED_NAME, partial_dir
from taguru_eval.resume.lock import LOCK_NAME

PREFIX = "taguru: evaluate: "
CASES = 12


class Gate:
    """How many searches the server answers; the others wait until it opens."""

    def __init__(self, allowed: int) -> None:
        self.allowed = allowed
        self.answered = 0
        self.lock = threading.Lock()

    async def __call__(self, request: Request) -> Response:
        if request.path == "/health":
            return Response.of_json(200, {"status": "ok", "version": "0.9.7"})
        if request.path.endswith("/sources"):
            return envelope({"total": 1, "sources": [] if "after" in request.query else ["a.md"]})
        if request.path.endswith("/embeddings"):
            return envelope({"provider_model": None})
        if request.path.endswith("/search"):
            while True:
                with self.lock:
                    if self.answered < self.allowed:
                        self.answered += 1
                        break
                await asyncio.sleep(0.01)
            return envelope({"hits": []})
        return envelope(context_entry("ctx"))

    def open(self) -> None:
        with self.lock:
            self.allowed = 10**9


@pytest.fixture
def gated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Gate, ScriptedServer]]:
    monkeypatch.chdir(tmp_path)
    lines = ['{"taguru_eval": 1}'] + [
        json.dumps({"case_id": f"c{n}", "query": f"q{n}"}) for n in range(CASES)
    ]
    Path("eval.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setenv(BATCH_ENV, "2")
    gate = Gate(allowed=4)
    server = ScriptedServer(gate)
    with server as url:
        yield url, gate, server


def args(url: str, *more: str) -> list[str]:
    return ["run", *run_args("eval.jsonl", "ctx", url), "--store", "runs", "--concurrency", "1",
            "--quiet", *more]  # fmt: skip


def child(url: str, *more: str) -> subprocess.Popen[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(PROJECT_ROOT),
           BATCH_ENV: "2"}  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "taguru_eval", *args(url, *more)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def wait_for(condition: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the child never got there"
        time.sleep(0.01)


def searches(server: ScriptedServer) -> int:
    return sum(request.path.endswith("/search") for request in server.requests)


def checkpoint() -> Path:
    (directory,) = partial_dir("runs", "ctx").iterdir()
    return directory


def stored_runs() -> list[Path]:
    return sorted(Path("runs").glob("context=ctx/run=*"))


def resume(capsys: pytest.CaptureFixture[str], url: str) -> tuple[int, list[str]]:
    """The exit code and taguru's stderr lines; the hint lines are in :data:`last_hints`."""
    global last_hints
    capsys.readouterr()
    code = main(args(url, "--resume"))
    err = capsys.readouterr().err
    last_hints = hints(err)
    return code, without_hints(err).splitlines()


last_hints: list[str] = []
"""The hint lines of the last :func:`resume` call."""


def test_a_resume_of_a_live_run_is_refused_and_of_a_killed_one_accepted_at_once(
    gated: tuple[str, Gate, ScriptedServer], capsys: pytest.CaptureFixture[str]
) -> None:
    url, gate, server = gated
    run = child(url)
    try:
        # Four cases answered (two batches), the fifth held: the run is alive and
        # has written nothing for as long as the gate stays shut.
        wait_for(lambda: searches(server) == 5 and partial_dir("runs", "ctx").exists()
                 and len(list(checkpoint().glob("batch-*"))) == 2, run)  # fmt: skip
        code, err = resume(capsys, url)
        assert code == 2
        assert err == [f"{PREFIX}--resume: the unfinished run {checkpoint()} is being written "
                       f"by pid {run.pid}"]  # fmt: skip
        assert last_hints == [f"let it finish (or stop pid {run.pid}, then --resume it); to start "
                              "afresh, run the same command without --resume"]  # fmt: skip
        assert (checkpoint() / LOCK_NAME).read_text(encoding="ascii") == f"{run.pid}\n"
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=30)
    # The lock died with the process: the checkpoint is resumable at once.
    gate.open()
    before = searches(server)
    code, err = resume(capsys, url)
    assert code == 0, err
    assert searches(server) - before == CASES - 4  # only the cases it had not finished
    doc = json.loads(Path("evaluation.json").read_text(encoding="utf-8"))
    assert [case["case_id"] for case in doc["cases"]] == [f"c{n}" for n in range(CASES)]
    assert doc["inputs"]["resumed"] == 2
    assert len(stored_runs()) == 1


def test_two_resumes_of_one_checkpoint_one_runs_the_other_is_refused(
    gated: tuple[str, Gate, ScriptedServer], capsys: pytest.CaptureFixture[str]
) -> None:
    url, gate, server = gated
    killed = child(url)
    wait_for(lambda: searches(server) == 5, killed)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=30)
    first = child(url, "--resume")
    try:
        # The first resume holds the lock and waits on its first search.
        wait_for(lambda: searches(server) == 6, first)
        assert (checkpoint() / LOCK_NAME).read_text(encoding="ascii") == f"{first.pid}\n"
        code, err = resume(capsys, url)
        assert code == 2
        assert err == [f"{PREFIX}--resume: the unfinished run {checkpoint()} is being written "
                       f"by pid {first.pid}"]  # fmt: skip
        gate.open()
        _out, first_err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 0, first_err
    # Each remaining case sent once, one stored run, nothing left to resume.
    assert searches(server) == 4 + 1 + (CASES - 4)
    assert len(stored_runs()) == 1
    assert not Path("runs/.partial").exists()
    code, err = resume(capsys, url)
    assert (code, err) == (2, [f"{PREFIX}--resume: no unfinished run of context 'ctx' in runs"])


CRASH_AFTER_STORE = """
import os, signal, sys
from taguru_eval.resume import Session
# The process dies the moment the run is in the store, before its checkpoint goes.
Session.finish = lambda self: os.kill(os.getpid(), signal.SIGKILL)
from taguru_eval.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_run_killed_between_the_store_and_its_checkpoint_cannot_be_resumed(
    gated: tuple[str, Gate, ScriptedServer], capsys: pytest.CaptureFixture[str]
) -> None:
    url, gate, server = gated
    killed = child(url)
    wait_for(lambda: searches(server) == 5, killed)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=30)
    gate.open()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(PROJECT_ROOT)}
    crashed = subprocess.run(
        [sys.executable, "-c", CRASH_AFTER_STORE, *args(url, "--resume")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    (stored,) = stored_runs()
    run_id = stored.name.removeprefix("run=")
    assert (checkpoint() / FINISHED_NAME).read_text(encoding="utf-8") == f"{run_id}\n"
    code, err = resume(capsys, url)
    assert code == 2
    assert err == [
        f"{PREFIX}--resume: no unfinished run of context 'ctx' in runs (the newest, "
        f"{checkpoint()}, finished as run {run_id})"
    ]
    assert last_hints == ["there is nothing to continue: run the same command without --resume"]
    assert stored_runs() == [stored]
    # The next run of the context sweeps the finished checkpoint away.
    capsys.readouterr()
    assert main(args(url)) == 0
    assert not Path("runs/.partial").exists()
    assert len(stored_runs()) == 2
