"""No CI output carries a control character raw (issue 44, "also seen").

Before, C1 controls (U+0085, U+009B: a CSI that drives a terminal) passed raw
into JUnit, the Markdown summary and changes.jsonl, where stdout and stderr
already escaped them. Here the sake demo runs with case ids holding C0, C1
and bidirectional controls (every case fails its gate, so every id is in every
report), through the command line against the reference server; its
``--junit`` and ``--summary``, then ``compare``'s changes.jsonl, ``--junit``
and ``--summary`` against an edited copy are searched byte by byte. The
reports stay what they are: the JUnit document parses, changes.jsonl decodes
to the same case ids (escaped as JSON ``\\u0085``, not replaced).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.paths import DATA
from support.run import run_args

from taguru_eval._base.text import CONTROL_CHARACTERS
from taguru_eval.cli.main import main
from taguru_refserver.serve import running_server

ODD = ("\x1b[31m", "\u0085", "\u009b2J", "\u202e", "\u2066", "\x7f")
UNSAFE = re.compile(CONTROL_CHARACTERS)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ci-controls")
    header, *lines = (DATA / "sake" / "eval.jsonl").read_text(encoding="utf-8").splitlines()
    cases = []
    for n, line in enumerate(lines):
        case = json.loads(line)
        case["case_id"] = f"{case['case_id']}{ODD[n % len(ODD)]}"
        cases.append(json.dumps(case, ensure_ascii=False))
    eval_path = root / "eval.jsonl"
    eval_path.write_text("\n".join([header, *cases]) + "\n", encoding="utf-8")
    thresholds = root / "thresholds.json"
    thresholds.write_text(json.dumps({"taguru_evaluate_thresholds": 1, "cases": {
        "default": {"recall.recall_at_k": {"min": 2.0}}}}), encoding="utf-8")  # fmt: skip
    names = ("base.json", "head.json", "junit.xml", "summary.md", "changes.jsonl", "compare.xml",
             "compare.md")  # fmt: skip
    files = {name: root / name for name in names}
    with running_server(DATA) as url:
        code = main(["run", *run_args(eval_path, "sake", url), "--out", str(files["base.json"]),
                     "--no-store", "--quiet", "--thresholds", str(thresholds), "--junit",
                     str(files["junit.xml"]), "--junit-cases", "all", "--summary",
                     str(files["summary.md"]), "--no-step-summary"])  # fmt: skip
    assert code == 3
    head = json.loads(files["base.json"].read_text(encoding="utf-8"))
    for case in head["cases"]:
        case["recall"]["recall_at_k"] = 0.0  # every case regressed: every id in changes.jsonl
    files["head.json"].write_text(json.dumps(head, ensure_ascii=False), encoding="utf-8")
    code = main(["compare", str(files["base.json"]), str(files["head.json"]), "--out",
                 str(files["changes.jsonl"]), "--junit", str(files["compare.xml"]), "--summary",
                 str(files["compare.md"])])  # fmt: skip
    assert code in (0, 3)
    return files


@pytest.mark.parametrize(
    "name", ["junit.xml", "summary.md", "changes.jsonl", "compare.xml", "compare.md"]
)
def test_no_ci_output_holds_a_control_character_raw(reports: dict[str, Path], name: str) -> None:
    text = reports[name].read_text(encoding="utf-8")
    assert text
    assert UNSAFE.findall(text) == []


def test_the_reports_still_say_what_they_said(reports: dict[str, Path]) -> None:
    ids = [case["case_id"] for case in json.loads(reports["base.json"].read_bytes())["cases"]]
    assert any("\u0085" in case_id for case_id in ids)
    # changes.jsonl: JSON escapes, so the ids read back exactly.
    lines = reports["changes.jsonl"].read_text(encoding="utf-8").splitlines()
    changed = [json.loads(line)["case_id"] for line in lines[1:]]
    assert sorted(changed) == sorted(ids)
    assert "\\u0085" in reports["changes.jsonl"].read_text(encoding="utf-8")
    # JUnit parses; an id is shown with its controls replaced, its printable rest kept.
    tree = ET.parse(reports["junit.xml"])
    names = [case.get("name") or "" for case in tree.iter("testcase")]
    assert any("brand-origin-001" in name and "\ufffd" in name for name in names)
    # The Markdown summary shows the ids' printable rest.
    assert "brand-origin-001" in reports["summary.md"].read_text(encoding="utf-8")
