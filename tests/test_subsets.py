"""The selection flags end to end, against the reference server over loopback.

The scale test is the issue's own: ``--sample 100`` on a 20,000-case set runs
exactly 100 cases, and compare against the full run calls the other 19,900
``not_comparable`` while its significance tests pair the 100 both ran. The full
run is built the way the artifact benchmarks build one (``benchmarks/synthetic.py``:
one real run of the demo against the reference server, its lane outputs repeated
under the 20,000 ids through the pipeline's own tables, scorer, gate and writer),
because sending 20,000 cases takes minutes; the sampled run is a real one.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.run import strip_latency

from taguru_eval.artifact.build import dumps
from taguru_eval.cli.main import main
from taguru_eval.compare.model import NOT_COMPARABLE
from taguru_eval.errors import HINT_PREFIX, PREFIX
from taguru_eval.store_artifact import stored_artifact
from taguru_refserver.serve import running_server

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
SAKE_EVAL = DATA / "sake" / "eval.jsonl"
SCALE = 20_000
SAMPLE = 100


def _synthetic() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "benchmarks_synthetic", ROOT / "benchmarks" / "synthetic.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server(DATA) as url:
        yield url


class Ran:
    def __init__(self, code: int, out: str, err: str, path: Path) -> None:
        self.code, self.out, self.err, self.path = code, out, err, path
        self.doc: dict[str, Any] = (
            json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        )

    @property
    def case_ids(self) -> list[str]:
        return [case["case_id"] for case in self.doc["cases"]]


def run(
    capsys: pytest.CaptureFixture[str], url: str, eval_path: Path, out: Path, *flags: str
) -> Ran:
    store = [] if "--store" in flags else ["--no-store"]
    argv = ["--eval", str(eval_path), "--context", "sake", "--url", url, "--out", str(out)]
    code = main([*argv, "--quiet", "--no-step-summary", *store, *flags])
    captured = capsys.readouterr()
    return Ran(code, captured.out, captured.err, out)


def compare(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def changes(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return lines[0], lines[1:]


# ------------------------------------------------------------------ the scale test


@pytest.fixture(scope="module")
def scale(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The 20,000-case eval set and its full run's evaluation.json."""
    work = tmp_path_factory.mktemp("scale")
    synthetic = _synthetic()
    eval_path = synthetic.write_eval(work / "big.eval.jsonl", SCALE)
    full = work / "full.json"
    full.write_text(dumps(synthetic.artifact_document(SCALE)), encoding="utf-8")
    return eval_path, full


def test_a_sample_of_100_runs_100_cases_and_compare_marks_the_rest_not_comparable(
    server: str, scale: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_path, full = scale
    ran = run(capsys, server, eval_path, tmp_path / "sample.json", "--sample", str(SAMPLE))
    assert ran.code == 0, ran.err
    assert len(ran.case_ids) == SAMPLE == ran.doc["inputs"]["eval"]["cases"]
    assert ran.doc["inputs"]["selection"] == {
        "cases": SAMPLE,
        "eval_cases": SCALE,
        "sample": {"size": SAMPLE, "seed": 0, "strata": 3},
    }
    # Stratified: the set's two tagged templates hold 1,250 cases each (6.25 of
    # 100), the untagged rest 17,500 (87.5, which takes the leftover case).
    templates = {
        json.loads(line)["case_id"]: json.loads(line).get("options", {}).get("tags", [])
        for line in SAKE_EVAL.read_text(encoding="utf-8").splitlines()[1:]
        if line.strip()
    }
    strata = Counter(
        ",".join(templates[case_id.rsplit("-", 1)[0]]) or "(none)" for case_id in ran.case_ids
    )
    assert strata == {"製法": 6, "商品": 6, "(none)": 88}
    assert f"  selection: {SAMPLE} of {SCALE} case(s) ran (--sample {SAMPLE} (seed 0" in ran.out
    # The same command draws the same cases.
    again = run(capsys, server, eval_path, tmp_path / "again.json", "--sample", str(SAMPLE))
    assert again.case_ids == ran.case_ids

    out = tmp_path / "changes.jsonl"
    code, stdout, stderr = compare(
        capsys, str(full), str(ran.path), "--out", str(out), "--significance"
    )
    assert code == 0, stderr
    header, records = changes(out)
    counts = header["counts"]
    assert counts["cases_base"] == SCALE and counts["cases_head"] == SAMPLE
    assert counts["removed"] == 0 and counts["added"] == 0
    assert counts["improved"] + counts["regressed"] + counts["unchanged"] == SAMPLE
    assert header["selection"] == {
        NOT_COMPARABLE: SCALE - SAMPLE,
        "base": None,
        "head": ran.doc["inputs"]["selection"],
    }
    # Only the cases both ran can have a line; none says removed or not_comparable.
    assert {record["kind"] for record in records} <= {"improved", "regressed"}
    assert {record["case_id"] for record in records} <= set(ran.case_ids)
    # The significance tests pair the 100 cases both ran, never the 19,900 others.
    tested = header["significance"]["metrics"]
    assert max(entry["n"] for entry in tested) == SAMPLE
    recall = next(e for e in tested if e["metric"] == "recall.recall_at_k")
    assert 0 < recall["n"] <= SAMPLE
    assert f"selection: {SCALE - SAMPLE} case(s) not comparable" in stdout
    assert f"HEAD ran {SAMPLE} of {SCALE} case(s)" in stdout

    # The other way round, the sampled run is BASE: its unrun cases are not "added".
    code, stdout, stderr = compare(capsys, str(ran.path), str(full), "--out", str(out))
    assert code == 0, stderr
    header, _records = changes(out)
    assert header["counts"]["added"] == 0
    assert header["selection"][NOT_COMPARABLE] == SCALE - SAMPLE
    assert header["selection"]["head"] is None


# ------------------------------------------------------------------ small sets


def test_a_selection_of_every_case_is_the_full_run_plus_its_record(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = run(capsys, server, SAKE_EVAL, tmp_path / "plain.json")
    every = run(capsys, server, SAKE_EVAL, tmp_path / "every.json", "--filter", "*")
    assert plain.code == every.code == 0
    assert "selection" not in plain.doc["inputs"]
    assert every.doc["inputs"].pop("selection") == {
        "cases": 16,
        "eval_cases": 16,
        "filter": ["*"],
    }

    def settled(doc: dict[str, Any]) -> Any:
        settled = strip_latency(doc)
        settled.pop("generated_at")
        settled["inputs"].pop("out")
        return settled

    assert settled(every.doc) == settled(plain.doc)
    extra = [line for line in every.out.splitlines() if line not in plain.out.splitlines()]
    assert extra[0].startswith("  selection: 16 of 16 case(s) ran (--filter *)")


def test_filter_and_tag_run_only_their_cases(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tagged = run(capsys, server, SAKE_EVAL, tmp_path / "tag.json", "--tag", "製法", "--tag", "商品")
    assert tagged.code == 0, tagged.err
    assert [c["case_id"] for c in tagged.doc["cases"]] == ["kimoto-tagged-005", "seasonal-tags-011"]
    filtered = run(
        capsys, server, SAKE_EVAL, tmp_path / "f.json", "--filter", "*-00?", "--tag", "製法"
    )
    assert filtered.case_ids == ["kimoto-tagged-005"]
    assert filtered.doc["inputs"]["selection"]["tag"] == ["製法"]


def test_an_empty_selection_fails_before_the_network_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No server at this URL: the selection is refused before any call.
    out = tmp_path / "nothing.json"
    ran = run(capsys, "http://127.0.0.1:9", SAKE_EVAL, out, "--filter", "brand")
    assert ran.code == 2 and not out.exists()
    lines = ran.err.splitlines()
    assert lines[0] == (
        f"{PREFIX}--filter 'brand' matched no case of {SAKE_EVAL} (16 case(s)): nothing would run"
    )
    assert lines[1].startswith(f"{HINT_PREFIX}a pattern is a glob over the whole case_id: 'brand*'")
    assert ran.out == ""


STRICT = {
    "taguru_evaluate_thresholds": 1,
    "cases": {"default": {"recall.ndcg": {"min": 0.99}}},
}


def test_failing_reruns_the_cases_a_stored_run_failed(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thresholds = tmp_path / "strict.json"
    thresholds.write_text(json.dumps(STRICT), encoding="utf-8")
    store = tmp_path / "runs"
    full = run(
        capsys, server, SAKE_EVAL, tmp_path / "full.json",
        "--thresholds", str(thresholds), "--store", str(store),
    )  # fmt: skip
    assert full.code == 3, full.err
    failed = [v["case_id"] for v in full.doc["thresholds"]["violations"] if v["scope"] == "case"]
    assert 0 < len(failed) < 16
    (stored,) = (store / "context=sake").glob("run=*")

    for source in (stored, full.path):
        again = run(capsys, server, SAKE_EVAL, tmp_path / "again.json", "--failing", str(source))
        assert again.code == 0, again.err
        assert again.case_ids == failed  # in file order
        assert again.doc["inputs"]["selection"]["failing"] == {
            "path": str(source),
            "kind": "failed",
            "cases": len(failed),
        }

    # The regressed cases of a compare: the full run against the rerun of its failures.
    out = tmp_path / "changes.jsonl"
    code, _stdout, stderr = compare(capsys, str(full.path), str(again.path), "--out", str(out))
    assert code == 0, stderr
    header, _records = changes(out)
    assert header["selection"][NOT_COMPARABLE] == 16 - len(failed)
    assert header["counts"]["removed"] == 0

    # A damaged stored run is one line naming it, exit 2, and nothing runs.
    artifact = stored_artifact(stored)
    artifact.write_bytes(artifact.read_bytes()[:100])
    broken = run(capsys, server, SAKE_EVAL, tmp_path / "b.json", "--failing", str(stored))
    assert broken.code == 2 and not broken.path.exists()
    (line,) = broken.err.splitlines()
    assert line.startswith(f"{PREFIX}--failing {artifact}: ")
    shutil.rmtree(stored)
    gone = run(capsys, server, SAKE_EVAL, tmp_path / "g.json", "--failing", str(stored))
    assert gone.code == 2
    assert gone.err.splitlines()[0] == (
        f"{PREFIX}--failing {stored}: No such file or directory (os error 2)"
    )


def test_a_stored_sampled_run_compares_as_its_artifact_does(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs"
    full = run(capsys, server, SAKE_EVAL, tmp_path / "full.json")
    sampled = run(
        capsys, server, SAKE_EVAL, tmp_path / "s.json", "--sample", "4", "--seed", "11",
        "--store", str(store),
    )  # fmt: skip
    assert sampled.code == 0 and len(sampled.case_ids) == 4
    (stored,) = (store / "context=sake").glob("run=*")
    assert not (store / ".partial").exists() or not any((store / ".partial").rglob("*.parquet"))
    texts = []
    for head in (sampled.path, stored):
        out = tmp_path / f"{head.name}.changes.jsonl"
        code, _stdout, stderr = compare(capsys, str(full.path), str(head), "--out", str(out))
        assert code == 0, stderr
        header, records = changes(out)
        assert header["selection"][NOT_COMPARABLE] == 12
        assert header["selection"]["head"]["sample"] == {"size": 4, "seed": 11, "strata": 3}
        texts.append([records, header["counts"]])
    assert texts[0] == texts[1]
