"""Honest statistics in ``compare --significance``: multiplicity, power, tolerance.

* Holm and Benjamini–Hochberg adjusted p-values against hand-computed values
  and statsmodels' ``multipletests`` (recorded here as literals);
* the family is every test of one compare (metrics × tag slices), the verdicts
  and ``--fail-on-regression`` read the adjusted p-values;
* the minimum detectable effect follows its formula at the family's level;
* ``inconclusive``: not significant, and the interval reaches further than
  the tolerance in the worse direction — what a 16-case compare of a real
  shift says, with its MDE; ``--tolerance``/``--tolerances`` and
  ``--fail-on-inconclusive``;
* A/A calibration on synthetic runs: Holm keeps the family-wise false-alarm
  rate low where the uncorrected tests raise many alarms.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.documents import evaluation_document, write_document
from support.paired_runs import paired_runs

from taguru_eval.analyst.ingest import ingest
from taguru_eval.catalog import COMPARISON_METRICS
from taguru_eval.cli.compare import main
from taguru_eval.compare import (
    INCONCLUSIVE,
    NOT_SIGNIFICANT,
    NOT_TESTED,
    SIGNIFICANT_IMPROVEMENT,
    SIGNIFICANT_REGRESSION,
    PairedCases,
    compare,
    significance,
)
from taguru_eval.compare.multiplicity import adjust_p_values
from taguru_eval.compare.significance import DEFAULT_TOLERANCE, MEASURED_SCHEMA, judge
from taguru_eval.compare.tags import CASE_LANES_FILE, NO_TAG

PREFIX = "taguru: evaluate: "
USAGE_SUFFIX = " — try 'taguru evaluate --help'\n  hint: see python -m taguru_eval compare --help"


def run_doc(recall: list[float]) -> dict[str, Any]:
    """A minimal evaluation.json: one case per value, recall@k = MRR = nDCG = value."""
    cases = [
        {
            "case_id": f"case-{index:05d}",
            "recall": {"recall_at_k": value, "mrr": value, "ndcg": value, "expected_total": 1},
        }
        for index, value in enumerate(recall)
    ]
    return {
        "taguru_evaluation": 1,
        "generated_at": "2026-07-28T10:00:00Z",
        "inputs": {"context": "sake"},
        "corpus": {"stable": True},
        "thresholds": None,
        "definitions": {},
        "cases": cases,
        "metrics": {},
    }


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def write_pair(tmp_path: Path, base: np.ndarray[Any, Any], head: np.ndarray[Any, Any]) -> list[str]:
    paths = []
    for name, values in (("base", base), ("head", head)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(run_doc(values.tolist())), "utf-8")
        paths.append(str(path))
    return paths


def header(path: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(path.read_text("utf-8").splitlines()[0])
    return found


# ------------------------------------------------------------------ the adjustment

# p-values with ties, a 1.0 and one below every step, in no particular order.
MIXED = [0.01, 0.04, 0.03, 0.005, 0.2, 0.5, 0.04, 0.9, 0.0001]
TIES = [0.02, 0.02, 1.0, 0.001, 0.3, 0.3, 0.049]

# statsmodels 0.15.0: multipletests(p, alpha=0.05, method="holm" | "fdr_bh")[1].
STATSMODELS = {
    ("holm", "mixed"): [0.07, 0.2, 0.18, 0.04, 0.6000000000000001, 1.0, 0.2, 1.0, 0.0009],
    ("bh", "mixed"): [0.03, 0.06, 0.06, 0.0225, 0.2571428571428572, 0.5625, 0.06, 0.9, 0.0009],
    ("holm", "ties"): [0.12, 0.12, 1.0, 0.007, 0.9, 0.9, 0.196],
    ("bh", "ties"): [0.04666666666666667, 0.04666666666666667, 1.0, 0.007, 0.35, 0.35, 0.08575],
}


def test_holm_by_hand() -> None:
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04;
    # the running maximum makes the last 0.06.
    assert adjust_p_values([0.01, 0.04, 0.03, 0.005], "holm") == pytest.approx(
        [0.03, 0.06, 0.06, 0.02]
    )


def test_benjamini_hochberg_by_hand() -> None:
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4/1, 4/2, 4/3, 4/4: 0.02, 0.02, 0.04, 0.04;
    # the running minimum from the top changes nothing.
    assert adjust_p_values([0.01, 0.04, 0.03, 0.005], "bh") == pytest.approx(
        [0.02, 0.04, 0.04, 0.02]
    )
    # Here it does: 0.04 * 3/2 = 0.06 is lowered to the next one's 0.045 * 3/3.
    assert adjust_p_values([0.001, 0.04, 0.045], "bh") == pytest.approx([0.003, 0.045, 0.045])


@pytest.mark.parametrize(("correction", "name"), list(STATSMODELS))
def test_adjustment_matches_statsmodels(correction: Any, name: str) -> None:
    p = MIXED if name == "mixed" else TIES
    assert adjust_p_values(p, correction) == pytest.approx(STATSMODELS[(correction, name)])


def test_no_correction_and_an_empty_family_keep_the_p_values() -> None:
    assert adjust_p_values(MIXED, "none").tolist() == MIXED
    assert adjust_p_values([], "holm").tolist() == []
    assert adjust_p_values([0.3], "holm").tolist() == [0.3]


@pytest.mark.parametrize("bad", [[0.1, math.nan], [1.5], [-0.1]])
def test_a_p_value_outside_0_1_is_refused(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="p-values"):
        adjust_p_values(bad, "holm")
    with pytest.raises(ValueError, match="correction"):
        adjust_p_values([0.1], "bonferroni")  # type: ignore[arg-type]


# ------------------------------------------------------------------ the family


def borderline() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """100 pairs moved by -0.018 on average with a spread of exactly 0.08: a mean
    2.25 standard errors below 0, each raw p near 0.025."""
    rng = np.random.default_rng(17)
    base = rng.uniform(0.3, 0.7, 100)
    noise = rng.normal(0.0, 1.0, 100)
    noise = (noise - noise.mean()) / noise.std(ddof=1)
    return base, base - 0.018 + 0.08 * noise


def test_holm_turns_three_borderline_regressions_into_no_alarm() -> None:
    base, head = borderline()
    comparison = compare(run_doc(base.tolist()), run_doc(head.tolist()))
    raw = significance(comparison, resamples=4_000, correction="none")
    holm = significance(comparison, resamples=4_000)
    tested = raw.frame.filter(pl.col("n") > 0)
    assert tested.height == holm.family_size == 3
    # Each test alone is significant; the three of them are not, as a family.
    assert tested.get_column("p_value").max() < 0.05  # type: ignore[operator]
    assert set(tested.get_column("verdict")) == {SIGNIFICANT_REGRESSION}
    adjusted = holm.frame.filter(pl.col("n") > 0)
    assert adjusted.get_column("p_adjusted").to_list() == pytest.approx(
        adjust_p_values(tested.get_column("p_value").to_numpy(), "holm").tolist()
    )
    assert adjusted.get_column("p_adjusted").min() >= 0.05  # type: ignore[operator]
    assert holm.regressed().height == 0
    # Not significant, and the interval reaches well past -0.01: inconclusive.
    assert set(adjusted.get_column("verdict")) == {INCONCLUSIVE}
    # The raw draws are the same; only the judgement moved.
    assert raw.frame.select(list(MEASURED_SCHEMA)).equals(holm.frame.select(list(MEASURED_SCHEMA)))


def test_fail_on_regression_reads_the_adjusted_p_values(tmp_path: Path) -> None:
    base, head = borderline()
    paths = write_pair(tmp_path, base, head)
    out = ["--out", str(tmp_path / "c.jsonl"), "--fail-on-regression", "--resamples", "4000"]
    code, stdout, err = cli([*paths, *out])
    assert (code, err) == (0, "")
    assert "(holm 0." in stdout
    code, _stdout, err = cli([*paths, *out, "--correction", "none"])
    assert code == 3
    assert err == (
        f"{PREFIX}3 metric(s) regressed significantly (alpha 0.05): "
        "recall.recall_at_k, recall.mrr, recall.ndcg\n"
    )
    assert cli([*paths, *out, "--correction", "bh"])[0] == 3  # BH: 3 of 3 at 0.02 pass


def test_every_test_entry_carries_the_adjusted_p_value_and_the_mde(tmp_path: Path) -> None:
    base, head = borderline()
    paths = write_pair(tmp_path, base, head)
    changes = tmp_path / "c.jsonl"
    assert cli([*paths, "--out", str(changes), "--significance", "--resamples", "500"])[0] == 0
    block = header(changes)["significance"]
    assert (block["correction"], block["tests"], block["power"]) == ("holm", 3, 0.8)
    assert block["mde_alpha"] == pytest.approx(0.05 / 3)
    assert "by_tag" not in block
    entry = block["metrics"][1]
    assert list(entry) == [
        "metric",
        "n",
        "base_mean",
        "head_mean",
        "mean_delta",
        "ci",
        "p_value",
        "p_adjusted",
        "correction",
        "mde",
        "tolerance",
        "verdict",
    ]
    assert (entry["metric"], entry["correction"], entry["tolerance"]) == (
        "recall.mrr",
        "holm",
        DEFAULT_TOLERANCE,
    )
    untested = block["metrics"][3]
    assert (untested["verdict"], untested["p_adjusted"], untested["mde"]) == (
        NOT_TESTED,
        None,
        None,
    )


# ------------------------------------------------------------------ the MDE


def test_the_mde_is_the_normal_approximation_at_the_family_level() -> None:
    base, head = borderline()
    comparison = compare(run_doc(base.tolist()), run_doc(head.tolist()))
    deltas = head - base
    sd = float(np.std(deltas, ddof=1))
    z = NormalDist().inv_cdf
    for correction, level in (("holm", 0.05 / 3), ("bh", 0.05 / 3), ("none", 0.05)):
        result = significance(comparison, resamples=200, correction=correction)  # type: ignore[arg-type]
        assert result.mde_alpha == pytest.approx(level)
        expected = (z(1 - level / 2) + z(0.8)) * sd / math.sqrt(100)
        mde = result.frame.filter(pl.col("metric") == "recall.mrr").item(0, "mde")
        assert mde == pytest.approx(expected)
    # One pair has no spread: no MDE. No change at all has none either: an MDE of 0
    # would promise to see any shift, so it says it cannot tell.
    one = significance(compare(run_doc([0.5]), run_doc([0.4])), resamples=50)
    assert one.frame.item(0, "mde") is None
    assert one.frame.item(0, "verdict") == INCONCLUSIVE
    same = significance(compare(run_doc([0.5, 0.6]), run_doc([0.5, 0.6])), resamples=50)
    assert (same.frame.item(0, "mde"), same.frame.item(0, "verdict")) == (None, NOT_SIGNIFICANT)
    assert "MDE n/a (no variance: cannot tell) — no significant change" in same.lines()[1]
    assert "MDE n/a —" in one.lines()[1]


# ------------------------------------------------------------------ inconclusive


def sixteen_cases() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A real shift of -0.05 seen through 16 noisy cases (the noise centred and
    scaled, so the 16 pairs move by exactly -0.05 on average with a spread of 0.15)."""
    rng = np.random.default_rng(3)
    base = rng.uniform(0.3, 0.7, 16)
    noise = rng.normal(0.0, 1.0, 16)
    noise = (noise - noise.mean()) / noise.std(ddof=1)
    return base, base - 0.05 + 0.15 * noise


def test_a_16_case_compare_of_a_real_shift_says_inconclusive_with_its_mde(
    tmp_path: Path,
) -> None:
    base, head = sixteen_cases()
    paths = write_pair(tmp_path, base, head)
    code, out, _err = cli([*paths, "--out", str(tmp_path / "c.jsonl"), "--significance"])
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("    recall.mrr:"))
    assert "Δ -0.0500 over 16 pair(s)" in line
    verdict = line.split(" — ")[1]
    assert verdict.startswith("inconclusive: a regression up to ")
    reach = float(verdict.split("up to ")[1].split(" ")[0])
    assert reach > 0.05  # the interval's worse end, far past -0.01
    # (z(1 - 0.05/3/2) + z(0.8)) * 0.15 / 4 = 0.121: above the shift, 16 cases cannot see it.
    z = NormalDist().inv_cdf
    expected = (z(1 - 0.05 / 3 / 2) + z(0.8)) * 0.15 / 4
    assert float(line.split("MDE ")[1].split(" ")[0]) == pytest.approx(expected, abs=1e-4)
    entry = header(tmp_path / "c.jsonl")["significance"]["metrics"][1]
    assert entry["mde"] == pytest.approx(expected, rel=1e-6)
    # The cases that would bring the MDE down to the tolerance: 16 * (0.121 / 0.01)^2.
    assert f"about {math.ceil(16 * (entry['mde'] / 0.01) ** 2)} pairs would bring" in verdict
    assert entry["verdict"] == INCONCLUSIVE
    assert entry["p_adjusted"] >= 0.05
    assert entry["ci"][0] < -0.01 < 0 < entry["ci"][1]


def test_a_tolerance_wider_than_the_interval_says_no_significant_change(tmp_path: Path) -> None:
    base, head = sixteen_cases()
    comparison = compare(run_doc(base.tolist()), run_doc(head.tolist()))
    tolerances = dict.fromkeys(("recall.recall_at_k", "recall.mrr"), 0.5)
    result = significance(comparison, resamples=2_000, tolerances=tolerances)
    verdicts = dict(result.frame.select("metric", "verdict").iter_rows())
    assert verdicts["recall.mrr"] == NOT_SIGNIFICANT
    assert verdicts["recall.ndcg"] == INCONCLUSIVE  # its tolerance is still 0.01
    assert result.frame.filter(pl.col("metric") == "recall.mrr").item(0, "tolerance") == 0.5


def test_tolerances_from_a_file_and_the_flag_which_wins(tmp_path: Path) -> None:
    base, head = sixteen_cases()
    paths = write_pair(tmp_path, base, head)
    file = tmp_path / "tolerances.json"
    file.write_text(
        json.dumps(
            {"taguru_eval_tolerances": 1, "tolerance": {"recall.mrr": 0.5, "recall.ndcg": 0.5}}
        ),
        "utf-8",
    )
    changes = tmp_path / "c.jsonl"
    argv = [*paths, "--out", str(changes), "--significance", "--tolerances", str(file)]
    assert cli([*argv, "--tolerance", "recall.ndcg=0.02"])[0] == 0
    entries = {e["metric"]: e for e in header(changes)["significance"]["metrics"]}
    assert entries["recall.mrr"]["tolerance"] == 0.5
    assert entries["recall.mrr"]["verdict"] == NOT_SIGNIFICANT
    assert entries["recall.ndcg"]["tolerance"] == 0.02
    assert entries["recall.ndcg"]["verdict"] == INCONCLUSIVE
    assert entries["recall.recall_at_k"]["tolerance"] == DEFAULT_TOLERANCE


def test_fail_on_inconclusive_exits_3_and_names_the_tests(tmp_path: Path) -> None:
    base, head = sixteen_cases()
    paths = write_pair(tmp_path, base, head)
    changes = tmp_path / "c.jsonl"
    code, out, err = cli([*paths, "--out", str(changes), "--fail-on-inconclusive"])
    assert code == 3
    assert err == (
        f"{PREFIX}3 metric(s) inconclusive (holm-adjusted p, alpha 0.05; a regression beyond "
        "the tolerance is not ruled out, default 0.01): recall.recall_at_k, recall.mrr, "
        "recall.ndcg\n"
    )
    assert "significance (paired;" in out
    assert changes.is_file()
    wide = ["--tolerance", f"{'recall.recall_at_k'}=1", "--tolerance", "recall.mrr=1"]
    wide += ["--tolerance", "recall.ndcg=1"]
    assert cli([*paths, "--out", str(changes), "--fail-on-inconclusive", *wide]) == (
        0,
        cli([*paths, "--out", str(changes), "--significance", *wide])[1],
        "",
    )
    # Without the flag an inconclusive test never changes the exit code.
    assert cli([*paths, "--out", str(changes), "--fail-on-regression"])[0] == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--correction", "holm"], "--correction requires --significance or --fail-on-regression"),
        (["--by-tag"], "--by-tag requires --significance or --fail-on-regression"),
        (
            ["--tolerance", "recall.mrr=0.1"],
            "--tolerance requires --significance or --fail-on-regression",
        ),
        (
            ["--significance", "--correction", "bonferroni"],
            "--correction needs holm, bh or none (got 'bonferroni')",
        ),
        (["--significance", "--correction"], "--correction needs holm, bh or none"),
        (["--significance", "--tolerance"], "--tolerance needs METRIC=DELTA, e.g. recall.mrr=0.02"),
        (
            ["--significance", "--tolerance", "recall.mrr"],
            "--tolerance needs METRIC=DELTA, e.g. recall.mrr=0.02 (got 'recall.mrr')",
        ),
        (
            ["--significance", "--tolerance", "passages.recall=0.1"],
            "--tolerance: unknown metric 'passages.recall' (compare tests recall.recall_at_k, "
            "recall.mrr, recall.ndcg, coverage.concepts, coverage.labels, "
            "coverage.associations, citations.recall, citations.locator_validity, "
            "diversity.sources, answers.hit_at_k, answers.mrr, answers.coverage)",
        ),
        *[
            (
                ["--significance", "--tolerance", f"recall.mrr={bad}"],
                f"--tolerance recall.mrr={bad}: the delta must be a finite number >= 0 "
                "(a regression's size, e.g. 0.02)",
            )
            for bad in ("-0.1", "abc", "nan", "inf", "", " 0.1", "1e999")
        ],
        (
            [
                "--fail-on-inconclusive",
                "--tolerance",
                "recall.mrr=1",
                "--tolerance",
                "recall.mrr=2",
            ],
            "--tolerance recall.mrr given twice",
        ),
        (["--significance", "--by-tag", "--by-tag"], "--by-tag given twice"),
        (["--significance", "--tolerances"], "--tolerances needs a file path"),
    ],
)
def test_bad_flags_exit_2_naming_them(extra: list[str], message: str) -> None:
    assert cli(["a.json", "b.json", *extra]) == (2, "", f"{PREFIX}{message}{USAGE_SUFFIX}\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "line 1 column 2"),
        ('{"tolerance": {}}', "missing field `taguru_eval_tolerances`"),
        (
            '{"taguru_eval_tolerances": 2, "tolerance": {}}',
            "taguru_eval_tolerances must be 1, got 2",
        ),
        (
            '{"taguru_eval_tolerances": 1, "tolerance": {}, "aggregate": {}}',
            "unknown field `aggregate`",
        ),
        ('{"taguru_eval_tolerances": 1, "tolerance": {"recall.mrr": "x"}}', "tolerance.recall.mrr"),
        (
            # A metric twice: which one was meant? (before, the last one won silently)
            '{"taguru_eval_tolerances": 1, "tolerance": {"recall.mrr": 0.02, "recall.mrr": 0.5}}',
            "tolerance: duplicate key `recall.mrr`",
        ),
        (
            '{"taguru_eval_tolerances": 1, "tolerance": {"passages.recall": 0.1, '
            '"recall.mrr": -1}}',
            "tolerance: unknown metric name 'passages.recall' (compare tests "
            "recall.recall_at_k, recall.mrr, recall.ndcg, coverage.concepts, coverage.labels, "
            "coverage.associations, citations.recall, citations.locator_validity, "
            "diversity.sources, answers.hit_at_k, answers.mrr, answers.coverage); "
            "tolerance: 'recall.mrr': -1 must be a finite number >= 0 "
            "(a regression's size)",
        ),
    ],
)
def test_a_bad_tolerances_file_exits_2_naming_the_file_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    file = tmp_path / "tol.json"
    file.write_text(text, "utf-8")
    code, out, err = cli(["a.json", "b.json", "--significance", "--tolerances", str(file)])
    assert (code, out) == (2, "")
    assert err.startswith(f"{PREFIX}{file}: ")
    assert message in err
    assert err.count("\n") == 1


def test_the_tolerances_file_is_not_overwritten_by_out(tmp_path: Path) -> None:
    file = str(tmp_path / "tol.json")
    code, out, err = cli(
        ["a.json", "b.json", "--significance", "--tolerances", file, "--out", file]
    )
    assert (code, out) == (2, "")
    assert err == f"{PREFIX}--out '{file}' is the same file as --tolerances{USAGE_SUFFIX}\n"


def test_a_missing_tolerances_file_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    code, _out, err = cli(["a.json", "b.json", "--significance", "--tolerances", str(missing)])
    assert code == 2
    assert err == f"{PREFIX}cannot read {missing}: No such file or directory (os error 2)\n"


# ------------------------------------------------------------------ by tag


def stored_pair(tmp_path: Path, *, tags: bool = True) -> tuple[Path, Path]:
    """Two stored runs of 60 cases; HEAD drops MRR to 0 on the cases tagged ``faq``
    (the first 20); the rest are ``howto`` or untagged, unchanged."""
    ids = [f"case-{index:03d}" for index in range(60)]
    base = evaluation_document(case_ids=ids, generated_at="2026-07-28T10:00:00Z")
    head = evaluation_document(case_ids=ids, generated_at="2026-07-28T11:00:00Z")
    for case in head["cases"][:20]:
        case["recall"]["mrr"] = 0.0
    runs = tmp_path / "runs"
    base_dir = ingest(write_document(tmp_path / "base.json", base), runs).path
    head_dir = ingest(write_document(tmp_path / "head.json", head), runs).path
    if tags:
        lanes_path = Path(head_dir) / CASE_LANES_FILE
        lanes = pq.read_table(lanes_path)
        names = lanes.column("case_id").to_pylist()
        values = [
            ["faq"]
            if int(name[-3:]) < 20
            else ["howto", "faq"]
            if int(name[-3:]) < 22
            else ["howto"]
            if int(name[-3:]) < 40
            else []
            for name in names
        ]
        column = pa.array(values, type=lanes.schema.field("tags").type)
        lanes = lanes.set_column(lanes.schema.get_field_index("tags"), "tags", column)
        pq.write_table(lanes, lanes_path)
    return Path(base_dir), Path(head_dir)


def test_by_tag_tests_every_slice_in_one_family(tmp_path: Path) -> None:
    base, head = stored_pair(tmp_path)
    changes = tmp_path / "c.jsonl"
    argv = [str(base), str(head), "--out", str(changes), "--fail-on-regression", "--by-tag"]
    code, out, err = cli([*argv, "--resamples", "2000"])
    block = header(changes)["significance"]
    slices = block["by_tag"]
    tags = [entry["tag"] for entry in slices]
    assert tags == sorted(tags, key=lambda tag: (tag == NO_TAG, tag))
    assert sorted(set(tags)) == sorted({"faq", "howto", NO_TAG})
    assert len(slices) == 3 * len(COMPARISON_METRICS)
    assert list(slices[0])[:2] == ["tag", "metric"]
    tested = [e for e in [*block["metrics"], *slices] if e["verdict"] != NOT_TESTED]
    assert block["tests"] == len(tested)
    by_key = {(e["tag"], e["metric"]): e for e in slices}
    faq = by_key[("faq", "recall.mrr")]
    assert faq["n"] == 22  # the two cases tagged howto and faq are in both slices
    assert faq["verdict"] == SIGNIFICANT_REGRESSION
    howto = by_key[("howto", "recall.mrr")]
    assert (howto["n"], howto["mean_delta"], howto["verdict"]) == (20, 0.0, NOT_SIGNIFICANT)
    assert by_key[(NO_TAG, "recall.mrr")]["mean_delta"] == 0.0
    assert by_key[(NO_TAG, "recall.mrr")]["verdict"] == NOT_SIGNIFICANT
    # The family is adjusted together: Holm over every tested entry.
    raw = [e["p_value"] for e in tested]
    assert [e["p_adjusted"] for e in tested] == pytest.approx(adjust_p_values(raw, "holm").tolist())
    assert code == 3
    assert err.startswith(f"{PREFIX}")
    assert "test(s) regressed significantly (holm-adjusted p, alpha 0.05): recall.mrr, " in err
    assert "recall.mrr [faq]" in err
    assert "  by tag (HEAD's tags; one family with the lines above):" in out
    assert "    recall.mrr [faq]: Δ " in out


def test_by_tag_needs_a_stored_head_with_tags(tmp_path: Path) -> None:
    base, head = stored_pair(tmp_path, tags=False)
    argv = ["--out", str(tmp_path / "c.jsonl"), "--significance", "--by-tag"]
    code, out, err = cli([str(base), str(head), *argv])
    assert (code, out) == (2, "")
    assert err == (
        f"{PREFIX}--by-tag: HEAD {head} recorded no case tags (a run imported from an "
        "evaluation.json does not carry options.tags)\n"
    )
    document = tmp_path / "head.json"
    code, out, err = cli([str(base), str(document), *argv])
    assert (code, out) == (2, "")
    assert err.startswith(f"{PREFIX}--by-tag: HEAD {document} is not a stored run directory")
    assert err.count("\n") == 1
    assert not (tmp_path / "c.jsonl").exists()


def test_without_by_tag_the_slices_are_not_tested(tmp_path: Path) -> None:
    base, head = stored_pair(tmp_path)
    result = significance(compare(base, head), resamples=200)
    assert result.frame.get_column("tag").null_count() == result.frame.height
    assert not result.by_tag


# ------------------------------------------------------------------ the report


def test_the_report_s_compare_view_shows_the_verdicts(tmp_path: Path) -> None:
    from taguru_eval.analyst import build_report

    base, head = stored_pair(tmp_path)
    page = build_report(head, base=base)
    assert "<h3>Is the move more than noise?</h3>" in page
    assert "holm over" in page
    section = page.split("<h3>Is the move more than noise?</h3>")[1].split("</table>")[0]
    assert SIGNIFICANT_REGRESSION in section
    # One family, the command line's (no --by-tag there): the same adjusted p-values.
    assert "faq" not in section
    tested = compare(base, head).tests
    family = f"holm over {tested.family_size} tests of one family, the whole run&#39;s metrics"
    assert family in section
    cli_tests = significance(compare(base, head))
    assert tested.frame.equals(cli_tests.frame)


# ------------------------------------------------------------------ calibration


def test_a_a_calibration_holm_keeps_false_alarms_rare() -> None:
    """60 comparisons of runs with no real change (half redrawn, half with per-case
    noise; seeded, so the counts are fixed: 3 and 17 today): the uncorrected family
    raises an alarm in about a third of them, Holm's in about alpha's 5%. The bounds
    leave room for the binomial noise of 60 draws should NumPy's streams change;
    benchmarks/aa_calibration.py measures the rates on 1,000."""
    alarms = {"holm": 0, "none": 0}
    for trial in range(60):
        design = "redraw" if trial % 2 else "noise"
        frame = paired_runs(np.random.default_rng([2026, trial]), 200, design)
        result = significance(PairedCases(frame, COMPARISON_METRICS), resamples=500, seed=trial)
        uncorrected = judge(result.frame.select(list(MEASURED_SCHEMA)), 0.05, "none", {})
        for name, judged in (("holm", result.frame), ("none", uncorrected)):
            verdicts = set(judged.get_column("verdict"))
            alarms[name] += bool(verdicts & {SIGNIFICANT_REGRESSION, SIGNIFICANT_IMPROVEMENT})
    assert alarms["holm"] <= 5
    assert alarms["none"] >= 12
    assert alarms["none"] >= 3 * alarms["holm"]


# ------------------------------------------------------------------ CI reports of the tests


def test_junit_and_summary_carry_the_verdicts(tmp_path: Path) -> None:
    import xmlschema
    from support.paths import TEST_DATA

    base, head = sixteen_cases()
    paths = write_pair(tmp_path, base, head)
    junit, summary = tmp_path / "c.xml", tmp_path / "c.md"
    argv = [*paths, "--out", str(tmp_path / "c.jsonl"), "--junit", str(junit)]
    code, _out, err = cli([*argv, "--summary", str(summary)])  # both imply --significance
    assert (code, err) == (0, "")
    xmlschema.XMLSchema(TEST_DATA / "junit_schema.xsd").validate(str(junit))
    xml = junit.read_text("utf-8")
    assert (
        '<testsuite name="taguru_eval.compare" tests="9" failures="0" errors="0" skipped="' in xml
    )
    skipped = xml.split('<testcase classname="taguru_eval.compare" name="recall.mrr" time="0">')[1]
    assert skipped.lstrip().startswith('<skipped message="inconclusive: a regression up to ')
    text = summary.read_text("utf-8")
    assert text.startswith("## taguru_eval compare: ")
    assert "| recall.mrr | inconclusive | -0.0500 |" in text
    assert "Inconclusive: add cases rather than loosen a bound." in text


def test_a_regressed_test_fails_in_junit(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    base = rng.uniform(0.5, 0.9, 400)
    paths = write_pair(tmp_path, base, base - 0.2)
    junit = tmp_path / "c.xml"
    assert cli([*paths, "--out", str(tmp_path / "c.jsonl"), "--junit", str(junit)])[0] == 0
    xml = junit.read_text("utf-8")
    failed = xml.split('name="recall.recall_at_k" time="0">')[1].lstrip()
    assert failed.startswith('<failure type="threshold" message="regressed"')


def test_the_reports_may_not_overwrite_an_input(tmp_path: Path) -> None:
    base, head = sixteen_cases()
    paths = write_pair(tmp_path, base, head)
    code, _out, err = cli([*paths, "--junit", paths[0]])
    assert code == 2
    assert "--junit" in err
