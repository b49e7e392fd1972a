"""``run --repeat N`` end to end over loopback HTTP, against a reference server
given ``--jitter``: four sources share one paragraph word for word, so their BM25
scores tie and, with a window of one hit, each repetition of a case may be served
another source. Such a case is ``unstable``; comparing two such runs calls it
``unstable``, never regressed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.run import run_args, strip_latency, write_eval, write_files

import taguru_eval
from taguru_eval.cli.main import main
from taguru_eval.compare import compare
from taguru_refserver.serve import running_server

TWIN = "The harbour lighthouse keeper lights the lamp at dusk."
TIED = ("a.md", "b.md", "c.md", "d.md")
CORPUS = {
    "tied/context.json": json.dumps({"description": "tied scores"}),
    **{f"tied/{source}": f"{TWIN}\n\nAbout {source[0]}.\n" for source in TIED},
    "tied/orchard.md": "Quiet orchard apples ripen slowly in late autumn.\n",
}
TIED_CASES = [f"lamp-{index}" for index in range(6)]
CASES = [
    *(
        {
            "case_id": case_id,
            "query": "lighthouse keeper lamp dusk",
            "expected_sources": [{"source": "a.md", "paragraphs": [0], "relevance": 3}],
            "options": {"limit": 1},
        }
        for case_id in TIED_CASES
    ),
    {
        "case_id": "orchard",
        "query": "orchard apples autumn",
        "expected_sources": [{"source": "orchard.md", "paragraphs": [0], "relevance": 3}],
        "options": {"limit": 1},
    },
]
REPEAT = "4"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repeat")
    write_files(root / "data", CORPUS)
    write_eval(root / "eval.jsonl", CASES, name="tied")
    (root / "gate.json").write_text(
        json.dumps(
            {
                "taguru_evaluate_thresholds": 1,
                "aggregate": {"stability.unstable_rate": {"max": 0.0}},
            }
        ),
        encoding="utf-8",
    )
    return root


@pytest.fixture(scope="module")
def jittery(work: Path) -> Iterator[str]:
    with running_server(work / "data", jitter=1) as url:
        yield url


@pytest.fixture(scope="module")
def steady(work: Path) -> Iterator[str]:
    with running_server(work / "data") as url:
        yield url


def _run(work: Path, url: str, *more: str) -> int:
    # Sequential, so the server's draws (and with them every verdict) are the same
    # on every test run.
    return main(["run", *run_args(work / "eval.jsonl", "tied", url, "--concurrency", "1", *more)])


def _cli(capsys: pytest.CaptureFixture[str], work: Path, url: str, *more: str) -> tuple[int, str]:
    code = _run(work, url, *more)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _doc(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture(scope="module")
def repeated_runs(work: Path, jittery: str) -> tuple[Path, Path]:
    """Two stored runs of the eval set, each case sent four times."""
    for name in ("base", "head"):
        code = _run(
            work,
            jittery,
            "--repeat",
            REPEAT,
            "--out",
            str(work / f"{name}.json"),
            "--store",
            str(work / "runs"),
            "--quiet",
        )
        assert code == 0
    stored = sorted((work / "runs" / "context=tied").glob("run=*"))
    assert len(stored) == 2
    return stored[0], stored[1]


def test_a_case_served_another_window_in_some_repetition_is_unstable(
    work: Path, repeated_runs: tuple[Path, Path]
) -> None:
    doc = _doc(work / "base.json")
    assert doc["inputs"]["repeat"] == 4
    assert list(doc["inputs"])[-2:] == ["concurrency", "repeat"]
    blocks = {case["case_id"]: case["stability"] for case in doc["cases"]}
    assert all(list(case)[-1] == "stability" for case in doc["cases"])
    assert all(block["repeats"] == 4 for block in blocks.values())
    unstable = [case_id for case_id, block in blocks.items() if block["unstable"]]
    assert unstable and set(unstable) <= set(TIED_CASES)
    for case_id in unstable:
        assert blocks[case_id]["differs"] == ["recall.recall_at_k", "recall.mrr", "recall.ndcg"]
    assert blocks["orchard"] == {"repeats": 4, "unstable": False, "differs": []}
    assert doc["metrics"]["stability.unstable_rate"] == {
        "value": len(unstable) / len(CASES),
        "n": len(CASES),
        "numerator": len(unstable),
    }
    assert doc["definitions"]["stability.unstable_rate"]["statistic"] == "ratio"


def test_every_repetition_is_called_and_the_case_keeps_its_first(
    work: Path, repeated_runs: tuple[Path, Path]
) -> None:
    stored, _ = repeated_runs
    calls = pl.read_parquet(stored / "calls.parquet")
    assert calls.height == 4 * len(CASES)
    assert calls.get_column("repeat").to_list() == [0, 1, 2, 3] * len(CASES)
    assert calls.get_column("case_index").to_list() == [
        i for i in range(len(CASES)) for _ in range(4)
    ]
    assert set(calls.get_column("seq").to_list()) == {0}
    # Only the first repetition's window is kept, and the case's values are its.
    hits = pl.read_parquet(stored / "hits.parquet")
    assert hits.height == len(CASES)
    cases = pl.read_parquet(stored / "cases.parquet")
    first = hits.join(cases, on="case_index").select("case_id", "source", "mrr")
    for case_id, source, mrr in first.iter_rows():
        if case_id in TIED_CASES:
            assert mrr == (1.0 if source == "a.md" else 0.0)
    assert cases.columns[-3:] == ["stability_repeats", "stability_unstable", "stability_differs"]
    doc = _doc(work / "base.json")
    assert cases.get_column("stability_unstable").to_list() == [
        case["stability"]["unstable"] for case in doc["cases"]
    ]


def test_two_repeated_runs_compare_unstable_never_regressed(
    work: Path, repeated_runs: tuple[Path, Path]
) -> None:
    comparison = compare(work / "base.json", work / "head.json")
    text = comparison.changes_jsonl("2026-07-29T00:00:00Z")
    header, *records = (json.loads(line) for line in text.splitlines())
    kinds = [record["kind"] for record in records]
    assert "unstable" in kinds
    assert "regressed" not in kinds and "improved" not in kinds
    block = header["stability"]
    assert block["unstable"] == kinds.count("unstable")
    assert block["base"]["repeats"] == block["head"]["repeats"] == 4
    counts = header["counts"]
    assert counts["improved"] + counts["regressed"] + counts["unchanged"] + block["unstable"] == (
        len(CASES)
    )
    # The stored runs give the same file, read through their tables.
    base_dir, head_dir = repeated_runs
    from_store = compare(
        base_dir, head_dir, base_label=str(work / "base.json"), head_label=str(work / "head.json")
    ).changes_jsonl("2026-07-29T00:00:00Z")
    assert from_store == text


def test_a_gate_can_bound_the_unstable_rate_only_with_repeat(
    work: Path, jittery: str, repeated_runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    gate = str(work / "gate.json")
    out = str(work / "gated.json")
    code, output = _cli(
        capsys, work, jittery, "--repeat", REPEAT, "--thresholds", gate, "--out", out, "--no-store"
    )
    assert code == 3, output
    assert "stability over 4 repetition(s):" in output
    code, output = _cli(capsys, work, jittery, "--thresholds", gate, "--out", out, "--no-store")
    assert code == 2
    assert "metric name 'stability.unstable_rate' is measured only with --repeat" in output


def test_repeat_one_writes_exactly_what_a_plain_run_writes(work: Path, steady: str) -> None:
    out = work / "plain.json"
    documents = []
    for more in ((), ("--repeat", "1")):
        code = _run(work, steady, "--out", str(out), "--no-store", "--quiet", *more)
        assert code == 0
        doc = _doc(out)
        doc.pop("generated_at")
        documents.append(strip_latency(doc))
    plain, once = documents
    assert once == plain
    assert "repeat" not in plain["inputs"]
    assert all("stability" not in case for case in plain["cases"])
    assert "stability.unstable_rate" not in plain["metrics"]
    assert "stability.unstable_rate" not in plain["definitions"]


def test_the_library_repeats_too(work: Path, steady: str) -> None:
    run = taguru_eval.run(
        work / "eval.jsonl",
        "tied",
        url=steady,
        out=work / "library.json",
        no_store=True,
        repeat=2,
        concurrency=1,
    )
    # A steady server answers every repetition alike.
    assert run.cases.get_column("stability_unstable").to_list() == [False] * len(CASES)
    assert run.cases.get_column("stability_repeats").to_list() == [2] * len(CASES)
    assert run.tables.calls.get_column("repeat").to_list() == [0, 1] * len(CASES)
    assert run.metric_values["stability.unstable_rate"]["value"] == 0.0
    plain = taguru_eval.run(
        work / "eval.jsonl", "tied", url=steady, out=work / "library.json", no_store=True
    )
    assert "stability_unstable" not in plain.cases.columns
    assert plain.tables.calls.get_column("repeat").to_list() == [0] * len(CASES)
