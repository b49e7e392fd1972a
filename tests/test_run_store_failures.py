"""A store failure never masks the gate; a killed run leaves nothing a later
run does not remove; SIGTERM is handled as Ctrl-C (issue 12, item 5).

The runs are the real CLI against the reference server on loopback. A
read-only directory is made with ``chmod``; as root, whom mode bits do not
stop, the child CLI runs with ``CAP_DAC_OVERRIDE`` dropped (``setpriv``), so
the kernel refuses the write as it would for any CI user.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.loopback import Request, Response, ScriptedServer, context_entry, envelope
from support.paths import DATA, PROJECT_ROOT
from support.run import run_args

from taguru_eval._base.files import PROCESS_STARTED
from taguru_eval.cli.main import main
from taguru_refserver.serve import running_server

PREFIX = "taguru: evaluate: "
EVAL = DATA / "sake" / "eval.jsonl"
PASSING = DATA / "sake" / "thresholds.json"
FAILING = '{"taguru_evaluate_thresholds": 1, "aggregate": {"citations.recall": {"min": 1.0}}}'
NOT_STORED = "the run is not stored (evaluation.json is written and the exit code is the gate's)"
NOT_RESUMABLE = "the run goes on, but cannot be resumed"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server(DATA) as url:
        yield url


def child_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(PROJECT_ROOT)}


def unprivileged(command: list[str]) -> list[str]:
    """``command`` run so that a directory's mode bits bind it (root included)."""
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: mode bits cannot make a read-only directory")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search", *command]


def test_a_read_only_store_keeps_a_failing_gate_exit_3(server: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    store = work / "runs"
    store.mkdir(parents=True)
    thresholds = work / "failing.json"
    thresholds.write_text(FAILING, encoding="utf-8")
    out = work / "evaluation.json"
    store.chmod(0o555)
    try:
        child = subprocess.run(
            unprivileged(
                [sys.executable, "-m", "taguru_eval", "run", *run_args(EVAL, "sake", server),
                 "--out", str(out), "--thresholds", str(thresholds), "--store", str(store),
                 "--quiet"]
            ),
            capture_output=True, text=True, timeout=120, env=child_env(), cwd=work,
        )  # fmt: skip
    finally:
        store.chmod(0o755)
    assert child.returncode == 3, child.stderr
    warnings = [line for line in child.stderr.splitlines() if "warning:" in line]
    # The checkpoint (resume) fails first, as the cases end; then the store.
    assert len(warnings) == 2, child.stderr
    checkpoint, warning = warnings
    assert checkpoint.startswith(
        f"{PREFIX}warning: keeping the unfinished run in {store}/.partial/"
    )
    assert checkpoint.endswith(f": Permission denied (os error 13); {NOT_RESUMABLE}")
    assert warning.startswith(f"{PREFIX}warning: writing the run store {store}/context=sake/run=")
    assert warning.endswith(f": Permission denied (os error 13); {NOT_STORED}")
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["thresholds"]["passed"] is False
    assert "FAIL" in child.stdout
    assert list(store.iterdir()) == []
    left = sorted(path.name for path in work.iterdir())
    assert left == ["evaluation.json", "failing.json", "runs"]


def test_runs_being_a_file_keeps_a_passing_gate_exit_0(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("runs").write_text("not a directory", encoding="utf-8")
    code = main(
        ["run", *run_args(EVAL, "sake", server),
         "--thresholds", str(PASSING), "--quiet"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    checkpoint, warning = [line for line in err.splitlines() if "warning:" in line]
    assert checkpoint.startswith(f"{PREFIX}warning: keeping the unfinished run in runs/.partial/")
    assert checkpoint.endswith(f": Not a directory (os error 20); {NOT_RESUMABLE}")
    assert warning.startswith(f"{PREFIX}warning: writing the run store runs/context=sake/run=")
    assert warning.endswith(f": Not a directory (os error 20); {NOT_STORED}")
    assert "run stored in" not in err
    assert json.loads(Path("evaluation.json").read_text(encoding="utf-8"))["thresholds"]["passed"]
    assert Path("runs").read_text(encoding="utf-8") == "not a directory"


# ---------------------------------------------------------------------------- SIGTERM


def slow_server(delay_s: float) -> ScriptedServer:
    """Preflight answered at once; every search takes ``delay_s``."""

    async def answer(request: Request) -> Response:
        if request.path == "/health":
            return Response.of_json(200, {"status": "ok", "version": "0.9.3"})
        if request.path.endswith("/sources"):
            return envelope({"total": 1, "sources": [] if "after" in request.query else ["a.md"]})
        if request.path.endswith("/embeddings"):
            return envelope({"provider_model": None})
        if request.path.endswith("/search"):
            await asyncio.sleep(delay_s)
            return envelope({"hits": []})
        return envelope(context_entry("ctx"))

    return ScriptedServer(answer)


def test_sigterm_mid_run_exits_143_leaving_nothing(tmp_path: Path) -> None:
    eval_path = tmp_path / "eval.jsonl"
    lines = ['{"taguru_eval": 1}'] + [
        json.dumps({"case_id": f"c{n}", "query": "q"}) for n in range(200)
    ]
    eval_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    server = slow_server(0.5)
    with server as url:
        child = subprocess.Popen(
            [sys.executable, "-m", "taguru_eval", "run",
             *run_args(eval_path, "ctx", url), "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
            cwd=tmp_path,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not any(r.path.endswith("/search") for r in server.requests):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the run never reached its cases"
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        _out, err = child.communicate(timeout=30)
    assert child.returncode == 143, err
    assert err.splitlines()[-1] == f"{PREFIX}terminated"
    assert "Traceback" not in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["eval.jsonl"]


# ------------------------------------------------------------------ debris of killed runs


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    probe = subprocess.Popen(["true"])
    probe.wait()
    return probe.pid


def aged(path: Path, content: bytes | None = None) -> Path:
    """Make ``path`` (a file with ``content``, else a directory) last modified an
    hour before this test process started."""
    if content is None:
        path.mkdir(parents=True)
    else:
        path.write_bytes(content)
    then = PROCESS_STARTED - 3600
    os.utime(path, (then, then))
    return path


def test_the_next_run_removes_debris_of_killed_runs_and_keeps_a_live_ones(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    staging = tmp_path / "runs" / ".staging"
    staging.mkdir(parents=True)
    dead = dead_pid()
    concurrent = subprocess.Popen(["sleep", "60"])
    try:
        # A killed writer's temp file and staging directory: removed.
        killed_temp = aged(tmp_path / f".evaluation.json.{dead}.k2j3h4g5.tmp", b'{"taguru_ev')
        killed_stage = aged(staging / f"20260101T000000.000000Z-abc123.{dead}.0badc0de")
        (killed_stage / "cases.parquet").write_bytes(b"PAR1")
        os.utime(killed_stage, (PROCESS_STARTED - 3600, PROCESS_STARTED - 3600))
        # A concurrent run's (its writer is alive): kept, however old.
        live_temp = aged(tmp_path / f".evaluation.json.{concurrent.pid}.a1b2c3d4.tmp", b"{")
        live_stage = aged(staging / f"20260101T000000.000000Z-abc124.{concurrent.pid}.0badc0df")
        # Newer than this process: kept, even though its writer is gone.
        fresh_temp = tmp_path / f".evaluation.json.{dead}.zzzzzzzz.tmp"
        fresh_temp.write_bytes(b"{")
        # Another file's temp file, and a staging directory without a pid: kept.
        other_file = aged(tmp_path / f".summary.md.{dead}.q1w2e3r4.tmp", b"#")
        legacy_stage = aged(staging / "20260101T000000.000000Z-abc125-0badc0e0")
        code = main(["run", *run_args(EVAL, "sake", server), "--quiet"])
        assert code == 0, capsys.readouterr().err
        assert not killed_temp.exists()
        assert not killed_stage.exists()
        assert live_temp.exists() and fresh_temp.exists() and other_file.exists()
        assert live_stage.exists() and legacy_stage.exists()
        assert json.loads(Path("evaluation.json").read_text(encoding="utf-8"))["cases"]
    finally:
        concurrent.kill()
        concurrent.wait()


# ------------------------------------------------------- the store staged beside the artifact


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError], ids=["ctrl-c", "disk"])
def test_an_artifact_that_is_not_written_leaves_no_staged_run(
    server: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    failure: type[BaseException],
) -> None:
    """The store's tables are staged while evaluation.json is written; when it is not
    (an interrupt, a failed write), the staged tables go and nothing is stored."""
    from taguru_eval import store
    from taguru_eval.pipeline import finish as pipeline

    monkeypatch.chdir(tmp_path)
    staged: list[Path] = []
    original = store.StagedRun.__init__

    def remember(self: store.StagedRun, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        staged.append(self._staging)

    def refuse(path: object, chunks: object) -> None:
        if failure is OSError:
            from taguru_eval.errors import RunError

            raise RunError(f"writing {path}: No space left on device (os error 28)")
        raise KeyboardInterrupt

    monkeypatch.setattr(store.StagedRun, "__init__", remember)
    monkeypatch.setattr(pipeline, "write_artifact", refuse)
    code = main(["run", *run_args(EVAL, "sake", server), "--thresholds", str(PASSING), "--quiet"])
    err = capsys.readouterr().err
    assert code == (130 if failure is KeyboardInterrupt else 1), err
    assert len(staged) == 1
    assert not staged[0].exists()
    assert not Path("evaluation.json").exists()
    assert not Path("runs").exists() or not any(Path("runs").rglob("*.parquet"))
    assert not (Path("runs") / ".staging").exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_during_the_write_stops_it_and_stores_nothing(
    server: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signum: signal.Signals,
) -> None:
    """A real signal while evaluation.json is being written (not an exception
    raised by hand): the handler only records it, the writer's next check raises
    it, the write stops there, nothing is stored, and the exit code is the
    interrupt's. (Inside the event loop asyncio had made Ctrl-C a pending
    cancellation: the run was written and stored whole, then exited 130.)"""
    from taguru_eval.pipeline import finish as pipeline

    monkeypatch.chdir(tmp_path)
    original_write = pipeline.write_artifact
    stopped: list[object] = []

    def write(path: object, chunks: object) -> None:
        os.kill(os.getpid(), signum)
        try:
            original_write(path, chunks)  # type: ignore[arg-type]
        except KeyboardInterrupt:
            stopped.append(path)
            raise

    monkeypatch.setattr(pipeline, "write_artifact", write)
    code = main(["run", *run_args(EVAL, "sake", server), "--thresholds", str(PASSING), "--quiet"])
    err = capsys.readouterr().err
    assert code == (130 if signum == signal.SIGINT else 143), err
    word = "interrupted" if signum == signal.SIGINT else "terminated"
    assert err.splitlines()[-1] == PREFIX + word
    assert stopped == [Path("evaluation.json")]
    assert not Path("evaluation.json").exists()
    assert not any(Path(".").glob(".evaluation.json.*"))
    assert not Path("runs").exists() or not any(Path("runs").glob("context=*/run=*"))
    assert not (Path("runs") / ".staging").exists() or not any(
        (Path("runs") / ".staging").iterdir()
    )
    # The cases that finished stay for --resume.
    assert any(Path("runs").glob(".partial/context=sake/*/batch-*.msgpack"))


def test_the_tables_are_staged_while_the_artifact_is_built(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By the time evaluation.json is written, the store's tables are (being) written."""
    from taguru_eval import store
    from taguru_eval.pipeline import finish as pipeline

    monkeypatch.chdir(tmp_path)
    seen_while_writing: list[list[str]] = []
    original_write = pipeline.write_artifact
    staged: list[store.StagedRun] = []
    original_init = store.StagedRun.__init__

    def remember(self: store.StagedRun, *args: object, **kwargs: object) -> None:
        original_init(self, *args, **kwargs)  # type: ignore[arg-type]
        staged.append(self)

    def write(path: object, chunks: object) -> None:
        staged[0]._writer.join()  # the tables' writer ran beside the artifact's build
        seen_while_writing.append(sorted(p.name for p in staged[0]._staging.iterdir()))
        original_write(path, chunks)  # type: ignore[arg-type]

    monkeypatch.setattr(store.StagedRun, "__init__", remember)
    monkeypatch.setattr(pipeline, "write_artifact", write)
    code = main(["run", *run_args(EVAL, "sake", server), "--thresholds", str(PASSING), "--quiet"])
    assert code == 0
    [names] = seen_while_writing
    assert "cases.parquet" in names and "evaluation.json.zst" not in names
    [stored] = list(Path("runs").glob("context=sake/run=*"))
    assert sorted(p.name for p in stored.iterdir()) == sorted(
        [*names, "evaluation.json.zst", "run.json"]
    )
