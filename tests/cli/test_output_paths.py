"""No command writes over what it reads, or one output over another; run mode finds a
missing output directory before its first request (``taguru_eval.inputs.outputs``)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest
from support.hints import without_hints
from support.layouts import stored_bytes
from support.paths import DATA, TEST_DATA

import taguru_eval
from taguru_eval.cli.main import main
from taguru_eval.errors import UsageError
from taguru_eval.inputs.prepare import prepare_run
from taguru_eval.options import RunOptions
from taguru_refserver.serve import running_server

PREFIX = "taguru: evaluate: "
EVAL = DATA / "sake" / "eval.jsonl"
ARTIFACT = TEST_DATA / "golden" / "baseline_sake.evaluation.json"
NOWHERE = "http://127.0.0.1:9"  # nothing listens: a check after the first request would say so


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copy(EVAL, tmp_path / "eval.jsonl")
    shutil.copy(ARTIFACT, tmp_path / "base.json")
    shutil.copy(DATA / "sake" / "must_refuse.jsonl", tmp_path / "refuse.jsonl")
    return tmp_path


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


RUN = ["--eval", "eval.jsonl", "--context", "sake", "--url", NOWHERE, "--no-store"]
BANDS = ["refusal-bands", "--eval", "eval.jsonl", "--must-refuse", "refuse.jsonl", "--context", "c"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*RUN, "--out", "eval.jsonl"], "--out 'eval.jsonl' is the same file as --eval"),
        ([*RUN, "--out", "./sub/../eval.jsonl"], "is the same file as --eval"),
        (
            [*RUN, "--junit", "evaluation.json"],
            "--junit 'evaluation.json' is the same file as --out",
        ),
        (
            [*RUN, "--must-refuse", "refuse.jsonl", "--summary", "refuse.jsonl"],
            "--summary 'refuse.jsonl' is the same file as --must-refuse",
        ),
        (
            [*RUN, "--summary-base", "base.json", "--junit", "base.json"],
            "--junit 'base.json' is the same file as --summary-base",
        ),
        ([*RUN, "--out", ""], "--out needs a file path, not an empty one"),
        (["--eval", "eval.jsonl", "--context", "sake", "--store", ""], "--store needs a directory"),
        (["compare", "base.json", "base.json", "--out", "base.json"], "is the same file as BASE"),
        (["report", "base.json", "-o", "base.json"], "-o 'base.json' is the same file as RUN"),
        (["report", "base.json", "-o", ""], "-o needs a file path, not an empty one"),
        (
            ["export", "base.json", "--trec", ".", "--eval", "qrels.trec"],
            "qrels.trec './qrels.trec' is the same file as --eval",
        ),
        (["export", "base.json", "--trec", ""], "--trec needs a directory, not an empty one"),
        (["ingest", "base.json", "--store", ""], "--store needs a directory, not an empty one"),
        (
            [*BANDS, "--out", "refuse.jsonl"],
            "--out 'refuse.jsonl' is the same file as --must-refuse",
        ),
    ],
)
def test_an_output_over_an_input_or_another_output_is_exit_2_and_writes_nothing(
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(work)
    (work / "sub").mkdir()
    before = {path.name: path.read_bytes() for path in work.iterdir() if path.is_file()}
    code, err = run_cli(argv, capsys)
    assert code == 2, err
    (line,) = without_hints(err).splitlines()
    assert line.startswith(PREFIX) and message in line, line
    after = {path.name: path.read_bytes() for path in work.iterdir() if path.is_file()}
    assert after == before


def test_a_stored_run_given_as_base_is_its_evaluation_json(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(work)
    (work / "run").mkdir()
    shutil.copy(ARTIFACT, work / "run" / "evaluation.json")
    code, err = run_cli(["compare", "run", "base.json", "--out", "run/evaluation.json"], capsys)
    assert code == 2
    assert "--out 'run/evaluation.json' is the same file as BASE" in err


def test_out_may_replace_the_summary_base_it_read_first(work: Path) -> None:
    # The last run's artifact as the next run's base, then replaced: read before the run.
    options = RunOptions(
        eval_path=str(work / "eval.jsonl"),
        context="sake",
        url=NOWHERE,
        out=str(work / "base.json"),
        summary_base=str(work / "base.json"),
        no_store=True,
    )
    assert prepare_run(options, {}).options.out == str(work / "base.json")


@pytest.mark.parametrize("flag", ["--out", "--junit", "--summary"])
def test_a_missing_output_directory_ends_the_run_before_its_first_request(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    monkeypatch.chdir(work)
    code, err = run_cli([*RUN, flag, "missing/report"], capsys)
    assert code == 1
    assert err.splitlines()[-1] == (
        f"{PREFIX}writing missing/report: No such file or directory (os error 2)"
    )
    assert "not reachable" not in err
    (work / "sub").mkdir()
    code, err = run_cli([*RUN, flag, "sub"], capsys)
    assert code == 1
    assert err.splitlines()[-1] == f"{PREFIX}writing sub: Is a directory (os error 21)"


def test_out_to_a_fifo_streams_the_artifact_and_stores_the_same_bytes(
    tmp_path: Path,
) -> None:
    # As --out /dev/stdout in a pipe: the run writes into the FIFO, and the stored copy
    # is the artifact, not what reading the FIFO back would give (nothing).
    fifo = tmp_path / "artifact.fifo"
    os.mkfifo(fifo)
    received = bytearray()

    def drain() -> None:
        with fifo.open("rb") as reader:
            received.extend(reader.read())

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        with running_server(DATA) as url:
            run = taguru_eval.run(EVAL, "sake", url=url, out=fifo, store=tmp_path / "runs", env={})
    finally:
        reader.join(timeout=60)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert run.path is not None
    assert received and stored_bytes(run.path) == bytes(received)


@pytest.mark.parametrize("field", ["eval_path", "out", "junit"])
def test_a_path_with_a_nul_byte_is_a_usage_error_not_a_value_error(work: Path, field: str) -> None:
    # Only the library can be given one; the OS calls would raise ValueError.
    options = RunOptions(
        eval_path=str(work / "eval.jsonl"), context="sake", url=NOWHERE, no_store=True
    )
    options = dataclasses.replace(options, **{field: str(work / "a\0b")})
    with pytest.raises(UsageError, match="file name contained an unexpected NUL byte"):
        prepare_run(options, {})
