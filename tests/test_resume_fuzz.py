"""A checkpoint is untrusted input (issue 44, failure 1): seeded mutations of its
batch files, each read back the way ``--resume`` reads it.

Before, a batch that still decoded after a key was deleted or a value retyped
crashed every later ``--resume`` (724 tracebacks of 118 kinds in 1,500
mutations) or, worse, exited 0 with a different artifact and no word. Here every
mutated batch is either dropped with one warning naming it — its cases are
sent again, so the resumed artifact is the uninterrupted one — or read as the
run wrote it. A mutation whose digest was redone (a user who knows the format)
must still never crash the run: the strict decoding is all that stands there.

``TAGURU_EVAL_FUZZ_BATCHES`` (default 2,000) sets how many batches are mutated;
every one is decoded; the whole resume (the real command line against the
reference server over loopback) runs for every
``TAGURU_EVAL_FUZZ_RESUME_CHANGED_EVERY``-th accepted batch whose outputs differ
from what the run wrote (its digest was redone; default 4, the benchmark 1) and
every ``TAGURU_EVAL_FUZZ_RESUME_EVERY``-th other one (default 50).
``TAGURU_EVAL_FUZZ_REPORT`` names a JSON file the counts are written to
(``benchmarks/checkpoint_fuzz.py``).
"""

from __future__ import annotations

import collections
import json
import os
import random
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.mutate import mutate, split
from support.paths import DATA
from support.run import run_args, strip_latency

import taguru_eval
from taguru_eval.cli.main import main
from taguru_eval.errors import TaguruEvalWarning
from taguru_eval.inputs.dataset import load_eval
from taguru_eval.resume import BATCH_ENV, partial_dir
from taguru_eval.resume.batches import NonConforming, decode_batch
from taguru_refserver.serve import running_server

PREFIX = "taguru: evaluate: "
SAKE = DATA / "sake" / "eval.jsonl"
BATCHES = int(os.environ.get("TAGURU_EVAL_FUZZ_BATCHES", "2000"))
RESUME_EVERY = int(os.environ.get("TAGURU_EVAL_FUZZ_RESUME_EVERY", "50"))
RESUME_CHANGED_EVERY = int(os.environ.get("TAGURU_EVAL_FUZZ_RESUME_CHANGED_EVERY", "4"))
SEED = int(os.environ.get("TAGURU_EVAL_FUZZ_SEED", "44"))


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server(DATA) as url:
        yield url


class FailingAfterRead(httpx.AsyncBaseTransport):
    """Fails the context read after the cases: the run stops with every case in
    its checkpoint (exit 1), as a server lost at the very end would."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.reads = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/contexts/sake":
            self.reads += 1
            if self.reads == 2:
                return httpx.Response(503, json={"error": "gone"})
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture(scope="module")
def original(server: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory holding the sake eval set and an unfinished run of it:
    16 cases in four batches of four."""
    root = tmp_path_factory.mktemp("checkpoint")
    (root / "eval.jsonl").write_bytes(SAKE.read_bytes())
    cwd = Path.cwd()
    os.environ[BATCH_ENV] = "4"
    try:
        os.chdir(root)
        with pytest.raises(taguru_eval.errors.RunError):
            taguru_eval.run(
                "eval.jsonl",
                "sake",
                url=server,
                store="runs",
                transport=FailingAfterRead(),
            )
    finally:
        os.chdir(cwd)
        del os.environ[BATCH_ENV]
    (checkpoint,) = partial_dir(root / "runs", "sake").iterdir()
    assert len(list(checkpoint.glob("batch-*.msgpack"))) == 4
    return root


def resumed(
    server: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Any, list[str]]:
    """``--resume`` by the command line in ``workdir``: the artifact's cases and
    top level (latency, the time stamp and the resumed count left out) and stderr."""
    cwd = Path.cwd()
    os.chdir(workdir)
    try:
        capsys.readouterr()
        code = main(["run", *run_args("eval.jsonl", "sake", server), "--store", "runs",
                     "--resume", "--quiet"])  # fmt: skip
        err = capsys.readouterr().err.splitlines()
    finally:
        os.chdir(cwd)
    assert code == 0, err
    doc = json.loads((workdir / "evaluation.json").read_text(encoding="utf-8"))
    doc.pop("generated_at")
    doc["inputs"].pop("resumed", None)
    return strip_latency(doc), err


def test_every_mutated_batch_is_dropped_with_a_warning_or_read_as_written(
    server: str, original: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = load_eval(str(original / "eval.jsonl")).cases
    (checkpoint,) = partial_dir(original / "runs", "sake").iterdir()
    batch_files = sorted(checkpoint.glob("batch-*.msgpack"))
    intact = {path.name: path.read_bytes() for path in batch_files}
    as_written = {name: decode_batch(data, cases) for name, data in intact.items()}
    baseline_dir = tmp_path / "baseline"
    shutil.copytree(original, baseline_dir)
    expected, err = resumed(server, baseline_dir, capsys)
    assert not [line for line in err if "warning" in line]

    counts: collections.Counter[str] = collections.Counter()
    rng = random.Random(SEED)
    for number in range(BATCHES):
        name = rng.choice(sorted(intact))
        mutation = mutate(intact[name], random.Random(rng.getrandbits(64)))
        counts[f"kind {mutation.kind}{' resigned' if mutation.resigned else ''}"] += 1
        different = False
        try:
            outputs = decode_batch(mutation.data, cases)
        except NonConforming as refused:
            counts["dropped"] += 1
            assert str(refused)
            accepted = False
        else:
            accepted = True
            different = outputs != as_written[name]
            counts[
                "accepted, read as written" if not different else "accepted, values changed"
            ] += 1
            # Read back changed only when its digest was redone: a damage the digest
            # sees is never taken.
            assert not different or mutation.resigned, mutation.kind
        if number % (RESUME_CHANGED_EVERY if different else RESUME_EVERY):
            continue
        # The whole --resume: never a traceback; dropped -> one warning naming the
        # batch and the uninterrupted artifact; read as written -> no warning, and
        # the same artifact unless a redone digest let a changed value through.
        workdir = tmp_path / f"m{number}"
        shutil.copytree(original, workdir)
        (mutated,) = partial_dir(workdir / "runs", "sake").glob(f"*/{name}")
        mutated.write_bytes(mutation.data)
        doc, err = resumed(server, workdir, capsys)
        counts["resumed"] += 1
        warned = [line for line in err if line.startswith(f"{PREFIX}warning:")]
        if accepted:
            assert warned == [], err
            assert doc == expected or different
            counts["resumed, same artifact" if doc == expected else "resumed, other values"] += 1
        else:
            assert len(warned) == 1, err
            assert name in warned[0] and "its cases are sent again" in warned[0]
            assert doc == expected
            counts["resumed, dropped and sent again"] += 1
        shutil.rmtree(workdir)
    report = os.environ.get("TAGURU_EVAL_FUZZ_REPORT")
    if report:
        Path(report).write_text(json.dumps({"batches": BATCHES, **counts}), encoding="utf-8")
    assert counts["dropped"] > BATCHES // 2
    assert counts["resumed"] >= BATCHES // RESUME_EVERY


def test_a_dropped_batch_is_named_once_and_removed(
    server: str, original: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader's own words: one warning naming the batch and why, the file gone
    (a later resume does not repeat it), the other batches' cases kept."""
    from taguru_eval.inputs.prepare import prepare_run
    from taguru_eval.options import RunOptions
    from taguru_eval.resume import find_resumable

    workdir = tmp_path / "w"
    shutil.copytree(original, workdir)
    (checkpoint,) = partial_dir(workdir / "runs", "sake").iterdir()
    second = checkpoint / "batch-000002.msgpack"
    lost = {output["case_index"] for output in split(second.read_bytes())[1]}
    data = bytearray(second.read_bytes())
    data[-3] ^= 0x01  # one flipped bit inside the outputs
    second.write_bytes(bytes(data))
    monkeypatch.chdir(workdir)
    options = RunOptions(eval_path="eval.jsonl", context="sake", url=server, store_dir="runs",
                         resume=True)  # fmt: skip
    prepared = prepare_run(options, {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = find_resumable(prepared, Path("runs"))
    second = Path("runs") / second.relative_to(workdir / "runs")
    found.lock.release()
    messages = [str(w.message) for w in caught if issubclass(w.category, TaguruEvalWarning)]
    assert messages == [
        f"--resume: discarding {second}: its content does not match its sha256 (changed since "
        "it was written); its cases are sent again"
    ]
    assert not second.exists()
    assert len(lost) == 4
    assert {output["case_index"] for output in found.done} == set(range(16)) - lost
