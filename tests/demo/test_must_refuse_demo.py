"""The bundled must-refuse files and the demo's walk-through (ABSTENTION.md §3.13)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.paths import DATA
from support.run import run_args

from taguru_eval.cli.main import main
from taguru_eval.demo.run import run_demo
from taguru_eval.inputs.dataset import load_eval
from taguru_eval.inputs.must_refuse import load_must_refuse
from taguru_refserver.serve import running_server

CONTEXTS = ("sake", "handbook")


@pytest.mark.parametrize("name", CONTEXTS)
def test_each_context_ships_a_must_refuse_file(name: str) -> None:
    eval_set = load_eval(DATA / name / "eval.jsonl")
    refusals = load_must_refuse(DATA / name / "must_refuse.jsonl", eval_set.case_ids)
    kinds = {case.kind for case in refusals.cases}
    assert kinds == {"out_of_corpus", "adjacent"}
    # A cross-script question: nothing of it in the corpus's script.
    corpus_is_ascii = name == "handbook"
    assert any(case.query.isascii() != corpus_is_ascii for case in refusals.cases)
    assert all(case.why for case in refusals.cases)
    # The context folder's own settings leave the vector lane off (the honest demo).
    context = json.loads((DATA / name / "context.json").read_text("utf-8"))
    assert "vector_lane" not in context


def test_the_demo_shows_the_three_situations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every run completed: the gates' FAIL verdicts are what the demo shows.
    assert run_demo(tmp_path) == 0
    captured = capsys.readouterr()
    out, err = captured.out, captured.err
    lines = out.splitlines()
    # The first screen: the must-refuse gate abstaining and surfacing, under `any`
    # on the server as shipped.
    first = [line for line in err.splitlines() if line.startswith("taguru: evaluate: must-refuse")]
    assert first[0].startswith("taguru: evaluate: must-refuse: 6 case(s), rule any,")
    assert first[0].endswith("— 2 abstained, 4 surfaced, 0 undetermined, 0 failed")
    assert first[1].startswith("taguru: evaluate: must-refuse case 'mr-shochu' (out_of_corpus)")
    opening = out[: out.index("metrics of 16 case(s):")]
    assert "  must-refuse gate: FAIL — every must-refuse case must abstain" in opening
    assert "cases: mr-shochu, mr-beer, mr-price, mr-tour" in opening
    # The run summary's trade-off pair and the abstention metrics in the table.
    assert any(line.startswith("  must-refuse over 6 case(s), rule any:") for line in lines)
    assert any(line.startswith("  answerability over 16 answerable case(s):") for line in lines)
    assert any(line.startswith("  abstention.refusal_rate ") for line in lines)
    table = {line.split()[0]: line for line in lines if line.startswith("  mr-")}
    cells = [cell.strip() for cell in table["mr-france-en"].split("  ") if cell.strip()]
    # `any` abstains on the cross-script question and surfaces the adjacent Japanese one...
    assert cells[2] == "abstained"
    assert "surfaced (passage_hit)" in table["mr-beer"]
    # ...without a vector lane the default rule cannot judge a passage probe.
    assert cells[3] == "undetermined (vector_lane_not_run)"
    doc = json.loads((tmp_path / "evaluation.json").read_text("utf-8"))
    structural = {
        case["case_id"]: case["structural"]["verdict"]
        for case in doc["abstention"]["cases"]
        if "structural" in case
    }
    # A well-chosen cue abstains structurally; a question-length cue surfaces by containment.
    assert structural["mr-shochu"] == "abstained"
    assert structural["mr-tour"] == "surfaced"
    vector = json.loads((tmp_path / "must-refuse-semantic-toy-vector-lane.json").read_text("utf-8"))
    assert vector["abstention"]["vector"]["provider_model"] == "refserver-toy-hash-v1"
    assert vector["abstention"]["vector"]["passage_vectors"] == "ready"
    assert "semantic + toy vector lane" in out
    # Every sake run is stored: each notebook has what it reads (compare.ipynb two).
    assert len(list((tmp_path / "runs").glob("context=sake/run=*/evaluation.json.zst"))) == 3
    # The golden CSV from import-golden to the gate: answers beside recall and abstention.
    golden = out[out.index("golden CSV (data/handbook/golden.csv):") :]
    assert "import-golden: 6 eval case(s), 6 with answer text, 3 must-refuse case(s)" in golden
    assert "  recall over 4 case(s):" in golden
    assert "  answers over 6 of 6 listed case(s), match normalized: hit@k " in golden
    assert "  must-refuse over 3 case(s), rule semantic:" in golden
    assert "  answers gate: PASS" in golden
    assert "  must-refuse gate: FAIL" in golden  # the toy vector lane surfaces the parking one
    gated = json.loads((tmp_path / "golden" / "evaluation.json").read_text("utf-8"))
    assert [v["metric"] for v in gated["thresholds"]["violations"]] == ["abstention.false_answers"]
    assert "cases: gold-parking —" in gated["thresholds"]["violations"][0]["reason"]
    assert gated["metrics"]["answers.hit_at_k"]["n"] == 6


def test_the_handbook_file_runs_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_server(DATA) as url:
        code = main(
            [
                "run", *run_args(DATA / "handbook" / "eval.jsonl", "handbook", url),
                "--must-refuse", str(DATA / "handbook" / "must_refuse.jsonl"),
                "--refusal-rule", "any", "--out", str(tmp_path / "e.json"), "--no-store",
            ]
        )  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "must-refuse: 4 case(s), rule any" in err
    doc = json.loads((tmp_path / "e.json").read_text("utf-8"))
    verdicts = {case["case_id"]: case["verdict"] for case in doc["abstention"]["cases"]}
    assert verdicts["mr-leave-ja-h"] == "abstained"  # a Japanese question on English text
    assert doc["inputs"]["must_refuse"]["refusal_rule"] == "any"
