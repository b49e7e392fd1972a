"""``run … --resume`` (issue 30): a run killed halfway continues where it stopped.

Every run is the real CLI or library against the reference server on loopback.
The killed run is a child process sent SIGKILL once its first batch is on disk;
the requests a resumed session sends are counted by a transport wrapped around
httpx's own (the bytes still cross a real socket).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from support.hints import hints, without_hints
from support.paths import DATA, PROJECT_ROOT
from support.run import run_args, strip_latency

import taguru_eval
from taguru_eval.cli.main import main
from taguru_eval.errors import InputError
from taguru_eval.resume import BATCH_ENV, MANIFEST_NAME, partial_dir
from taguru_eval.resume.batches import encode_batch
from taguru_refserver.serve import running_server

PREFIX = "taguru: evaluate: "
SAKE = DATA / "sake" / "eval.jsonl"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server(DATA) as url:
        yield url


class Counting(httpx.AsyncBaseTransport):
    """httpx's transport, counting the calls of eval cases sent (every request
    under the context but its preflight reads), and failing the context read
    after the cases when ``fail_after_read`` is set."""

    def __init__(self, *, fail_after_read: bool = False) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.case_calls = 0
        self.context_reads = 0
        self.fail_after_read = fail_after_read

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.startswith("/contexts/sake/") and not path.endswith(("/embeddings", "/sources")):
            self.case_calls += 1
        if path == "/contexts/sake":
            self.context_reads += 1
            if self.fail_after_read and self.context_reads == 2:
                return httpx.Response(503, json={"error": "gone"})
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def big_eval(path: Path, count: int) -> Path:
    """``count`` cases cycling through the sake demo's, each under its own id."""
    header, *lines = SAKE.read_text(encoding="utf-8").splitlines()
    cases = [json.loads(line) for line in lines]
    out = [header]
    for n in range(count):
        case = dict(cases[n % len(cases)])
        case["case_id"] = f"{case['case_id']}-{n}"
        out.append(json.dumps(case, ensure_ascii=False))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def cases_of(path: Path) -> Any:
    return strip_latency(json.loads(path.read_text(encoding="utf-8"))["cases"])


def checkpoints(store: Path) -> list[Path]:
    root = partial_dir(store, "sake")
    return sorted(root.iterdir()) if root.exists() else []


def batches(checkpoint: Path) -> list[Path]:
    return sorted(checkpoint.glob("batch-*.msgpack"))


def uninterrupted(url: str, eval_path: Path, out: Path) -> Any:
    code = main(["run", *run_args(eval_path, "sake", url), "--out", str(out), "--no-store",
                 "--quiet"])  # fmt: skip
    assert code == 0
    return cases_of(out)


def test_a_killed_run_resumes_to_the_cases_of_an_uninterrupted_one(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    count = 600
    big_eval(tmp_path / "big.jsonl", count)
    expected = uninterrupted(server, Path("big.jsonl"), tmp_path / "plain.json")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(PROJECT_ROOT),
           BATCH_ENV: "40"}  # fmt: skip
    child = subprocess.Popen(
        [sys.executable, "-m", "taguru_eval", "run", *run_args("big.jsonl", "sake", server),
         "--out", "evaluation.json", "--store", "runs", "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not any(batches(path) for path in checkpoints(Path("runs"))):
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the run never wrote a batch"
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert not Path("evaluation.json").exists()
    (checkpoint,) = checkpoints(Path("runs"))
    kept = {output["case_index"] for path in batches(checkpoint) for output in decoded(path)}
    assert 0 < len(kept) < count

    monkeypatch.setenv(BATCH_ENV, "40")
    counting = Counting()
    run = taguru_eval.run(
        "big.jsonl", "sake", url=server, out="evaluation.json", store="runs", resume=True,
        transport=counting,
    )  # fmt: skip
    assert run.exit_code == 0
    # Only the cases the killed run did not finish were sent.
    assert counting.case_calls == sent_calls(run, kept)
    assert cases_of(tmp_path / "evaluation.json") == expected
    doc = json.loads(Path("evaluation.json").read_text(encoding="utf-8"))
    plain = json.loads((tmp_path / "plain.json").read_text(encoding="utf-8"))
    assert doc["inputs"].pop("resumed") == 2
    plain["inputs"]["out"] = "evaluation.json"
    assert doc["inputs"] == plain["inputs"]
    assert doc["corpus"] == plain["corpus"]
    assert run.cases.height == count
    # The finished run's checkpoint is gone, and so is .partial: nothing to resume.
    assert not (tmp_path / "runs" / ".partial").exists()
    assert main(["run", *run_args("big.jsonl", "sake", server), "--out", "evaluation.json",
                 "--store", "runs", "--resume", "--quiet"]) == 2  # fmt: skip


def decoded(path: Path) -> list[Any]:
    """A batch file's lane outputs (past its digest, unchecked: a test's view)."""
    batch = msgspec.msgpack.decode(path.read_bytes())
    values = msgspec.msgpack.decode(batch["outputs"])
    assert isinstance(values, list)
    return values


def sent_calls(run: taguru_eval.Run, replayed: set[int]) -> int:
    """The calls of the run's cases that were not replayed from the checkpoint."""
    calls = run.tables.calls
    return calls.filter(~calls["case_index"].is_in(sorted(replayed))).height


@pytest.fixture
def unfinished(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A sake run whose context read after the cases failed (exit 1): every case
    (16) is in its checkpoint, in batches of 5 (the last one holds 1)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(BATCH_ENV, "5")
    (tmp_path / "eval.jsonl").write_bytes(SAKE.read_bytes())
    with pytest.raises(taguru_eval.errors.RunError):
        taguru_eval.run(
            "eval.jsonl", "sake", url=server, store="runs",
            transport=Counting(fail_after_read=True),
        )  # fmt: skip
    assert not (tmp_path / "evaluation.json").exists()
    (checkpoint,) = checkpoints(Path("runs"))
    assert [path.name for path in batches(checkpoint)][-1] == "batch-000004.msgpack"
    return checkpoint


def resume_cli(
    url: str, capsys: pytest.CaptureFixture[str], *more: str, eval_path: str = "eval.jsonl"
) -> tuple[int, list[str]]:
    """The exit code and taguru's stderr lines (the fix that follows them is
    :func:`resume_hints`'s)."""
    global LAST_HINTS
    code = main(["run", *run_args(eval_path, "sake", url), "--store", "runs", "--resume",
                 "--quiet", *more])  # fmt: skip
    err = capsys.readouterr().err
    LAST_HINTS = hints(err)
    return code, without_hints(err).splitlines()


LAST_HINTS: list[str] = []
"""The hint lines of the last :func:`resume_cli` call."""


def test_a_torn_batch_is_ignored_and_a_missing_one_resent(
    server: str, unfinished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = uninterrupted(server, SAKE, tmp_path / "plain.json")
    capsys.readouterr()
    # A kill mid-write leaves a temp file: never read. A lost batch: resent.
    (unfinished / f".batch-000005.msgpack.{os.getpid()}.abcdefgh.tmp").write_bytes(b"\x93\x01")
    lost = {output["case_index"] for output in decoded(unfinished / "batch-000002.msgpack")}
    (unfinished / "batch-000002.msgpack").unlink()
    counting = Counting()
    run = taguru_eval.run("eval.jsonl", "sake", url=server, store="runs", resume=True,
                          transport=counting)  # fmt: skip
    assert run.exit_code == 0
    assert len(lost) == 5
    assert counting.case_calls == sent_calls(run, set(range(16)) - lost) > 0
    assert cases_of(tmp_path / "evaluation.json") == expected


def test_a_different_eval_set_or_option_is_refused_with_what_differs(
    server: str, unfinished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code, err = resume_cli(server, capsys, "--concurrency", "3")
    assert code == 2
    assert err == [f"{PREFIX}--resume: --concurrency differs from the unfinished run's (8, now 3)"]
    # The refusal ends with what to do: continue it as it was, or start afresh.
    assert [
        "to continue it, give the unfinished run's inputs and options again; to start "
        "afresh, run the same command without --resume (the unfinished run stays in "
        f"{Path('runs') / '.partial' / 'context=sake' / unfinished.name}: delete it to "
        "discard it)"
    ] == LAST_HINTS
    code, err = resume_cli(server, capsys, "--max-items", "3")
    assert err == [f"{PREFIX}--resume: --max-items differs from the unfinished run's (none, now 3)"]
    code, err = resume_cli(server, capsys, "--out", "other.json")
    assert err == [
        f"{PREFIX}--resume: --out differs from the unfinished run's ('evaluation.json', now "
        "'other.json')"
    ]
    edited = (tmp_path / "eval.jsonl").read_text(encoding="utf-8").replace("青嶺酒造は", "青嶺は")
    (tmp_path / "eval.jsonl").write_text(edited, encoding="utf-8")
    code, err = resume_cli(server, capsys)
    assert code == 2
    assert len(err) == 1
    assert err[0].startswith(
        f"{PREFIX}--resume: the eval set differs from the unfinished run's (sha256 "
    )
    # A refused resume changes nothing: the checkpoint is still there to resume.
    assert (unfinished / MANIFEST_NAME).exists()
    with pytest.raises(InputError, match="the eval set differs"):
        taguru_eval.run("eval.jsonl", "sake", url=server, store="runs", resume=True)


def test_resume_without_a_store_or_a_checkpoint_is_refused(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["run", *run_args(SAKE, "sake", server), "--resume", "--no-store"])
    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert err == [
        f"{PREFIX}--resume needs the run store (not --no-store) — try 'taguru evaluate --help'",
        "  hint: see python -m taguru_eval --help",
    ]
    code, err = resume_cli(server, capsys, eval_path=str(SAKE))
    assert code == 2
    assert err == [f"{PREFIX}--resume: no unfinished run of context 'sake' in runs"]
    assert LAST_HINTS == ["there is nothing to continue: run the same command without --resume"]
    assert not Path("evaluation.json").exists()


def test_the_store_ignores_checkpoints_and_a_fresh_run_starts_afresh(
    server: str, unfinished: Path, tmp_path: Path
) -> None:
    counting = Counting()
    run = taguru_eval.run("eval.jsonl", "sake", url=server, store="runs", transport=counting)
    assert counting.case_calls == run.tables.calls.height  # without --resume, every case
    assert run.path is not None
    # The older unfinished run is left alone; the store's readers never see it.
    assert checkpoints(Path("runs")) == [unfinished]
    runs = taguru_eval.scan_runs("runs", "cases").select("run").unique().collect()
    assert runs["run"].to_list() == [run.run_id]
    assert taguru_eval.load_run(run.path).cases.height == run.cases.height == 16


def test_a_case_that_reached_no_server_is_sent_again(
    server: str, unfinished: Path, tmp_path: Path
) -> None:
    first = unfinished / "batch-000001.msgpack"
    outputs = decoded(first)
    outputs[0]["calls"][0].update(http_status=None, error="connection refused (os error 111)")
    first.write_bytes(encode_batch(outputs))  # as the run writes one
    counting = Counting()
    run = taguru_eval.run("eval.jsonl", "sake", url=server, store="runs", resume=True,
                          transport=counting)  # fmt: skip
    resent = outputs[0]["case_index"]
    assert counting.case_calls == sent_calls(run, set(range(16)) - {resent}) > 0
    (call,) = [c for c in run.tables.calls.filter(case_index=resent).to_dicts() if c["seq"] == 0]
    assert call["http_status"] is not None
