"""Paired significance on ``compare``: the library frame, its draws, and the CLI gate.

A synthetic pair with a known shift must come out significant in the metric's
worse direction and an identical pair must not; the p-value is reproducible
with a fixed seed; the grouped draws must agree with the textbook procedures;
without the flags compare's output stays exactly taguru's.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from taguru_eval.catalog import CATALOG, Catalog
from taguru_eval.cli.compare import main, parse_args
from taguru_eval.compare import (
    FAIL_ON,
    NOT_SIGNIFICANT,
    NOT_TESTED,
    PASS,
    SIGNIFICANT_IMPROVEMENT,
    SIGNIFICANT_REGRESSION,
    Comparison,
    Verdict,
    compare,
    significance,
)
from taguru_eval.compare.significance import MAX_RESAMPLES, bootstrap_means, sign_flip_p_value

PREFIX = "taguru: evaluate: "
USAGE_SUFFIX = " — try 'taguru evaluate --help'\n  hint: see python -m taguru_eval compare --help"


def run_doc(recall: list[float], *, citations: list[float] | None = None) -> dict[str, Any]:
    """A minimal evaluation.json: one case per value, recall@k = MRR = nDCG = value."""
    cases: list[dict[str, Any]] = []
    for index, value in enumerate(recall):
        block: dict[str, Any] = {
            "case_id": f"case-{index:05d}",
            "recall": {"recall_at_k": value, "mrr": value, "ndcg": value, "expected_total": 1},
        }
        if citations is not None:
            block["citations"] = {"recall": {"value": citations[index]}}
        cases.append(block)
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


def shifted_pair(shift: float, n: int = 300, seed: int = 7) -> Comparison:
    base = np.random.default_rng(seed).uniform(0.2, 0.8, n)
    return compare(run_doc(base.tolist()), run_doc((base + shift).tolist()))


def row(result: Any, metric: str) -> dict[str, Any]:
    rows = result.frame.filter(result.frame["metric"] == metric).to_dicts()
    assert len(rows) == 1
    found: dict[str, Any] = rows[0]
    return found


def test_a_known_downward_shift_is_a_significant_regression() -> None:
    result = significance(shifted_pair(-0.05), resamples=2_000, seed=1)
    mrr = row(result, "recall.mrr")
    assert mrr["n"] == 300
    assert mrr["mean_delta"] == pytest.approx(-0.05)
    # Every pair moved by -0.05 (up to float rounding): the interval is that point.
    assert (mrr["ci_low"], mrr["ci_high"]) == (pytest.approx(-0.05), pytest.approx(-0.05))
    assert mrr["p_value"] == pytest.approx(1 / 2_001)
    assert mrr["verdict"] == SIGNIFICANT_REGRESSION
    assert set(result.regressed()["metric"]) == {"recall.recall_at_k", "recall.mrr", "recall.ndcg"}


def test_a_known_upward_shift_is_an_improvement_not_a_regression() -> None:
    result = significance(shifted_pair(0.05), resamples=2_000)
    assert row(result, "recall.ndcg")["verdict"] == SIGNIFICANT_IMPROVEMENT
    assert result.regressed().height == 0


def test_an_identical_pair_is_not_significant() -> None:
    result = significance(shifted_pair(0.0), resamples=2_000)
    ndcg = row(result, "recall.ndcg")
    assert (ndcg["mean_delta"], ndcg["ci_low"], ndcg["ci_high"]) == (0.0, 0.0, 0.0)
    assert ndcg["p_value"] == 1.0
    assert ndcg["verdict"] == NOT_SIGNIFICANT
    # A metric no case carries has no pair to test.
    assert row(result, "coverage.concepts")["verdict"] == NOT_TESTED
    assert row(result, "coverage.concepts")["n"] == 0


def test_noise_without_a_shift_is_not_significant() -> None:
    rng = np.random.default_rng(11)
    base = rng.uniform(0.2, 0.8, 500)
    head = base + rng.normal(0.0, 0.1, 500) - 0.001
    result = significance(compare(run_doc(base.tolist()), run_doc(head.tolist())), seed=3)
    assert row(result, "recall.mrr")["p_value"] > 0.05
    assert row(result, "recall.mrr")["verdict"] == NOT_SIGNIFICANT


def test_the_p_value_is_reproducible_with_a_fixed_seed_and_moves_with_another() -> None:
    rng = np.random.default_rng(5)
    base = rng.uniform(0.0, 1.0, 200)
    head = base + rng.normal(-0.01, 0.1, 200)
    comparison = compare(run_doc(base.tolist()), run_doc(head.tolist()))
    first = significance(comparison, resamples=3_000, seed=42)
    again = significance(comparison, resamples=3_000, seed=42)
    other = significance(comparison, resamples=3_000, seed=43)
    assert first.frame.equals(again.frame)
    assert row(first, "recall.mrr")["p_value"] != row(other, "recall.mrr")["p_value"]
    # A metric's draws do not depend on which other metrics are tested; only what
    # depends on the family's size does (the adjusted p-value and the MDE's level).
    with_citations = compare(
        run_doc(base.tolist(), citations=[0.5] * 200),
        run_doc(head.tolist(), citations=[0.5] * 200),
    )
    wider = row(significance(with_citations, resamples=3_000, seed=42), "recall.mrr")
    alone = row(first, "recall.mrr")
    family = {"p_adjusted", "mde", "verdict"}
    assert {k: v for k, v in wider.items() if k not in family} == {
        k: v for k, v in alone.items() if k not in family
    }
    # Four tests instead of three: Holm multiplies the smallest p by 4, not 3.
    assert wider["p_adjusted"] >= alone["p_adjusted"]


def test_direction_comes_from_the_catalog() -> None:
    lower_is_better = dataclasses.replace(CATALOG["recall.mrr"], higher_is_better=False)
    metrics = {**dict(CATALOG), "recall.mrr": lower_is_better}
    catalog = Catalog(metrics, list(CATALOG.per_case))
    result = significance(shifted_pair(-0.05), resamples=500, catalog=catalog)
    assert row(result, "recall.mrr")["verdict"] == SIGNIFICANT_IMPROVEMENT
    assert row(result, "recall.ndcg")["verdict"] == SIGNIFICANT_REGRESSION


def test_one_sided_and_unmatched_cases_are_not_pairs() -> None:
    base = run_doc([0.5, 0.5, 0.5])
    head = run_doc([0.4, 0.4])
    del head["cases"][1]["recall"]
    head["cases"].append({"case_id": "only-head", "recall": {"mrr": 0.0}})
    result = significance(compare(base, head), resamples=200)
    assert row(result, "recall.mrr")["n"] == 1
    assert row(result, "recall.mrr")["mean_delta"] == pytest.approx(-0.1)


@pytest.mark.parametrize(
    ("resamples", "alpha"), [(0, 0.05), (10, 0.0), (10, 1.0), (MAX_RESAMPLES + 1, 0.05)]
)
def test_bad_settings_are_refused(resamples: int, alpha: float) -> None:
    with pytest.raises(ValueError):
        significance(shifted_pair(0.0, n=3), resamples=resamples, alpha=alpha)


# ------------------------------------------------------------------ the grouped draws


def mixed_deltas(n: int, seed: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Mostly unchanged pairs, some repeated steps (heavy) and some unique values (light)."""
    rng = np.random.default_rng(seed)
    deltas = np.zeros(n)
    steps = rng.random(n) < 0.3
    deltas[steps] = rng.choice([-0.5, -0.25, 0.25, 1.0], steps.sum())
    unique = rng.random(n) < 0.05
    deltas[unique] = rng.normal(0.0, 0.3, unique.sum())
    return deltas


def test_grouped_bootstrap_matches_plain_resampling_in_distribution() -> None:
    deltas = mixed_deltas(2_000, 1)
    grouped = bootstrap_means(deltas, 20_000, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    plain = deltas[rng.integers(0, len(deltas), size=(20_000, len(deltas)))].mean(axis=1)
    assert grouped.mean() == pytest.approx(deltas.mean(), abs=2e-4)
    assert grouped.std() == pytest.approx(plain.std(), rel=0.03)
    assert grouped.std() == pytest.approx(deltas.std() / np.sqrt(len(deltas)), rel=0.03)
    assert np.quantile(grouped, [0.025, 0.975]) == pytest.approx(
        np.quantile(plain, [0.025, 0.975]), abs=plain.std() * 0.1
    )


def test_grouped_sign_flip_matches_the_exact_randomization_p_value() -> None:
    # Few pairs: the exact p-value enumerates every sign pattern.
    deltas = np.array([0.3, -0.1, 0.25, 0.2, 0.0, 0.15, -0.05, 0.4, 0.1, 0.35])
    observed = abs(deltas.mean())
    patterns = np.array(list(itertools.product((-1.0, 1.0), repeat=len(deltas))))
    exact = np.mean(np.abs((patterns * deltas).mean(axis=1)) >= observed - 1e-15)
    estimate = sign_flip_p_value(deltas, 40_000, np.random.default_rng(2))
    assert estimate == pytest.approx(exact, abs=0.006)


def test_grouped_sign_flip_with_heavy_values_matches_plain_sign_flips() -> None:
    deltas = mixed_deltas(3_000, 4)
    deltas = deltas - deltas.mean() + 0.01  # near the edge: p neither 0 nor 1
    grouped = sign_flip_p_value(deltas, 20_000, np.random.default_rng(3))
    rng = np.random.default_rng(4)
    signs = rng.choice([-1.0, 1.0], size=(20_000, len(deltas)))
    plain = (1 + np.count_nonzero(np.abs((signs * deltas).mean(axis=1)) >= abs(deltas.mean()))) / (
        20_001
    )
    assert 0.01 < plain < 0.99
    assert grouped == pytest.approx(plain, abs=0.015)


# ------------------------------------------------------------------ the command line


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def pair(tmp_path: Path) -> dict[str, Path]:
    base = np.random.default_rng(9).uniform(0.2, 0.8, 120)
    paths = {}
    for name, values in (("base", base), ("worse", base - 0.05), ("better", base + 0.05)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(run_doc(values.tolist())), "utf-8")
        paths[name] = path
    return paths


def test_without_the_flags_output_is_taguru_s(pair: dict[str, Path], tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    code, out, err = cli([str(pair["base"]), str(pair["worse"]), "--out", str(plain)])
    assert code == 0
    assert err == ""
    comparison = compare(pair["base"], pair["worse"])
    assert out == comparison.summary(str(plain))
    header = json.loads(plain.read_text("utf-8").splitlines()[0])
    assert "significance" not in header
    generated_at = header["generated_at"]
    assert plain.read_text("utf-8") == comparison.changes_jsonl(generated_at)


def test_significance_is_printed_after_the_summary_and_added_to_the_header(
    pair: dict[str, Path], tmp_path: Path
) -> None:
    changes = tmp_path / "changes.jsonl"
    argv = [str(pair["base"]), str(pair["worse"]), "--out", str(changes)]
    code, out, err = cli([*argv, "--significance", "--resamples", "500", "--seed", "3"])
    assert (code, err) == (0, "")
    comparison = compare(pair["base"], pair["worse"])
    tested = significance(comparison, resamples=500, seed=3)
    taguru_part = comparison.summary(str(changes))
    assert out == taguru_part + "".join(f"{line}\n" for line in tested.lines())
    lines = changes.read_text("utf-8").splitlines()
    header = json.loads(lines[0])
    assert list(header)[-1] == "significance"
    assert header["significance"] == json.loads(json.dumps(tested.header_block()))
    assert header["significance"]["metrics"][1]["verdict"] == SIGNIFICANT_REGRESSION
    # The rest of the file is taguru's, byte for byte.
    del header["significance"]
    expected = comparison.changes_jsonl(header["generated_at"]).splitlines()
    assert json.loads(expected[0]) == header
    assert lines[1:] == expected[1:]


def test_fail_on_regression_exits_3_on_a_significant_regression(
    pair: dict[str, Path], tmp_path: Path
) -> None:
    changes = tmp_path / "changes.jsonl"
    code, out, err = cli(
        [str(pair["base"]), str(pair["worse"]), "--out", str(changes), "--fail-on-regression"]
    )
    assert code == 3
    assert err == (
        f"{PREFIX}3 metric(s) regressed significantly (holm-adjusted p, alpha 0.05): "
        "recall.recall_at_k, recall.mrr, recall.ndcg\n"
    )
    assert (
        "significance (paired; 10000 resamples, seed 0, alpha 0.05; holm over 3 test(s) "
        "of one family, the whole run's metrics; MDE at 80% power, alpha 0.017):" in out
    )
    assert changes.is_file()


def test_the_library_answers_would_ci_fail_as_compare_exits(
    pair: dict[str, Path], tmp_path: Path
) -> None:
    """A notebook asks the Significance what compare's --fail-on-… flags decide."""
    tested = significance(compare(pair["base"], pair["worse"]), resamples=500)
    assert tested.verdict(fail_on=()) == Verdict(SIGNIFICANT_REGRESSION, 0)
    failing = tested.verdict(fail_on=["regression"])
    assert failing.failed
    assert failing == Verdict(
        SIGNIFICANT_REGRESSION,
        3,
        (
            "3 metric(s) regressed significantly (holm-adjusted p, alpha 0.05): "
            "recall.recall_at_k, recall.mrr, recall.ndcg",
        ),
    )
    # Regressed tests are not inconclusive: failing on that alone passes.
    assert tested.verdict(fail_on=["inconclusive"]) == Verdict(SIGNIFICANT_REGRESSION, 0)
    argv = [str(pair["base"]), str(pair["worse"]), "--out", str(tmp_path / "c.jsonl")]
    code, _out, err = cli([*argv, "--fail-on-regression", "--resamples", "500"])
    assert (code, err) == (failing.exit_code, "".join(f"{PREFIX}{r}\n" for r in failing.reasons))
    calm = significance(compare(pair["base"], pair["base"]), resamples=500)
    assert calm.verdict(fail_on=FAIL_ON) == Verdict(PASS, 0)


def test_fail_on_regression_passes_an_improvement_and_a_tight_alpha(
    pair: dict[str, Path], tmp_path: Path
) -> None:
    out_file = str(tmp_path / "c.jsonl")
    assert (
        cli([str(pair["base"]), str(pair["better"]), "--out", out_file, "--fail-on-regression"])[0]
        == 0
    )
    # 200 resamples cannot reach p < 0.001: the regression is not significant at that level.
    settings = ["--alpha", "0.001", "--resamples", "200"]
    code, _out, _err = cli(
        [
            str(pair["base"]),
            str(pair["worse"]),
            "--out",
            out_file,
            "--fail-on-regression",
            *settings,
        ]
    )
    assert code == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--alpha", "0.1"], "--alpha requires --significance or --fail-on-regression"),
        (["--seed", "1"], "--seed requires --significance or --fail-on-regression"),
        (["--significance", "--alpha", "1.5"], "--alpha needs a number between 0 and 1"),
        (["--significance", "--alpha", "nan"], "--alpha needs a number between 0 and 1"),
        (["--significance", "--alpha"], "--alpha needs a number between 0 and 1"),
        (["--significance", "--alpha", "0.1", "--alpha", "0.2"], "--alpha given twice"),
        (["--significance", "--significance"], "--significance given twice"),
        (["--significance", "--resamples", "0"], "--resamples needs a positive integer"),
        (["--significance", "--seed", "-1"], "--seed needs a non-negative integer"),
        (
            ["--significance", "--resamples", "99999999999999999999"],
            "--resamples needs a positive integer of at most 1000000",
        ),
        (
            ["--significance", "--resamples", "1000001"],
            "--resamples needs a positive integer of at most 1000000",
        ),
        (
            ["--significance", "--resamples", "9" * 5000],
            "--resamples needs a positive integer of at most 1000000",
        ),
        (
            ["--significance", "--seed", "9" * 5000],
            "--seed needs a non-negative integer of at most 18446744073709551615",
        ),
        (
            ["--significance", "--seed", "18446744073709551616"],
            "--seed needs a non-negative integer of at most 18446744073709551615",
        ),
    ],
)
def test_flag_errors_are_usage_errors(extra: list[str], message: str) -> None:
    assert cli(["a.json", "b.json", *extra]) == (2, "", f"{PREFIX}{message}{USAGE_SUFFIX}\n")


def test_the_largest_settings_are_taken() -> None:
    settings = ["--resamples", "1000000", "--seed", "18446744073709551615"]
    args = parse_args(["a.json", "b.json", "--significance", *settings])
    assert args is not None
    assert (args.resamples, args.seed) == (MAX_RESAMPLES, 2**64 - 1)


def test_an_extra_header_member_may_not_replace_taguru_s_own() -> None:
    comparison = compare(run_doc([0.5]), run_doc([0.5]))
    with pytest.raises(ValueError, match="counts"):
        comparison.header(extra={"counts": {}})
