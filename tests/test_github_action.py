"""The GitHub Action end to end, on loopback: a push to main stores the baseline, a pull
request is compared with it, commented on once, then the comment is updated.

The action's steps run as a runner runs them (:mod:`support.actions_runner`:
``action.yml`` read as written, its shell steps in bash), against the reference
server and a fake of GitHub's REST API (:mod:`support.github_api`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from support.actions_runner import Runner, action
from support.github_api import PULL, REPOSITORY, TOKEN, FakeGitHub

from taguru_eval.analyst.pr_comment import marker
from taguru_eval.cli.action_step import (
    ERROR,
    GATE_FAILED,
    INCONCLUSIVE,
    PASS,
    REGRESSED,
    verdict_and_code,
)
from taguru_eval.compare import Significance
from taguru_eval.compare.significance import SIGNIFICANCE_SCHEMA
from taguru_refserver.serve import running_server

DATA = Path(__file__).resolve().parents[1] / "data"
KEY = "retrieval/gate/sake"


def regressed_corpus(folder: Path) -> Path:
    """``data/sake`` with every document's text but rice.md's replaced by one
    sentence (same paragraphs, so the eval set still names real ones)."""
    target = folder / "sake"
    shutil.copytree(DATA / "sake", target)
    for document in (target / "corpus").glob("*.md"):
        if document.name == "rice.md":
            continue
        lines = document.read_text(encoding="utf-8").split("\n")
        end = lines.index("---", 1)
        body = [
            "記録は別紙にまとめた。" if line and not line.startswith("#") else line
            for line in lines[end + 1 :]
        ]
        document.write_text("\n".join([*lines[: end + 1], *body]), encoding="utf-8")
    return folder


def github_env(
    tmp_path: Path, api: str, event_name: str, event: dict[str, object]
) -> dict[str, str]:
    path = tmp_path / f"event-{event_name}.json"
    path.write_text(json.dumps(event), encoding="utf-8")
    return {
        "GITHUB_API_URL": api,
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_REPOSITORY": REPOSITORY,
        "GITHUB_RUN_ID": "41",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_WORKFLOW": "retrieval",
        "GITHUB_JOB": "gate",
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(path),
        "GITHUB_STEP_SUMMARY": str(tmp_path / f"summary-{event_name}.md"),
        "HOME": str(tmp_path),
    }


def push_env(tmp_path: Path, api: str) -> dict[str, str]:
    event = {"ref": "refs/heads/main", "repository": {"default_branch": "main"}}
    return {
        **github_env(tmp_path, api, "push", event),
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_REF_NAME": "main",
        "GITHUB_SHA": "a" * 40,
    }


def pull_env(tmp_path: Path, api: str) -> dict[str, str]:
    event = {
        "pull_request": {"number": PULL, "base": {"ref": "main", "sha": "b" * 40}},
        "repository": {"default_branch": "main"},
    }
    return {
        **github_env(tmp_path, api, "pull_request", event),
        "GITHUB_REF": f"refs/pull/{PULL}/merge",
        "GITHUB_REF_NAME": f"{PULL}/merge",
        "GITHUB_BASE_REF": "main",
        "GITHUB_HEAD_REF": "feature",
        "GITHUB_SHA": "c" * 40,
    }


GITHUB_CONTEXT = {"job": "gate", "run_attempt": "1", "token": TOKEN}


def test_the_pull_request_flow(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    shutil.copytree(DATA / "sake", workspace / "sake")
    inputs = {"eval": "sake/eval.jsonl", "context": "sake", "url": "", "fail-on": "regression"}
    fake = FakeGitHub()
    with fake.server:  # type: ignore[union-attr]
        # main: the run is stored as the baseline, nothing is commented.
        with running_server(DATA) as url:
            runner = Runner(workspace, push_env(tmp_path, fake.url))
            main = runner.run_job({**inputs, "url": url}, GITHUB_CONTEXT)
        assert not main.failed, main.log
        assert main.outputs["verdict"] == PASS and main.outputs["exit-code"] == "0"
        assert [s.id for s in main.steps if not s.ran] == ["restore", "comment"]
        assert list(runner.cache) == [f"taguru-eval-baseline-retrieval-gate-sake-main-{'a' * 40}"]
        stored = json.loads((next(iter(runner.cache.values())) / "evaluation.json").read_text())
        assert stored["inputs"]["context"] == "sake"
        assert fake.requests == []

        # The pull request, on a server whose corpus lost most of its text.
        with running_server(regressed_corpus(tmp_path / "pr-corpus")) as url:
            runner.env = pull_env(tmp_path, fake.url)
            first = runner.run_job({**inputs, "url": url}, GITHUB_CONTEXT)
            assert first.step("restore").outputs["cache-matched-key"] in runner.cache
            assert first.outputs["verdict"] == REGRESSED
            assert first.outputs["exit-code"] == "3"
            assert first.failed and first.steps[-1].id == "finish" and first.steps[-1].code == 3
            assert "::error title=taguru_eval::verdict regressed (fail-on regression)" in first.log
            (comment,) = fake.mine()
            body = str(comment["body"])
            # The next push to the pull request: the same comment, updated; with
            # fail-on gate a regression no longer fails the job.
            second = runner.run_job({**inputs, "url": url, "fail-on": "gate"}, GITHUB_CONTEXT)
        assert second.outputs["verdict"] == REGRESSED and second.outputs["exit-code"] == "0"
        assert not second.failed, second.log
    (updated,) = fake.mine()
    assert updated["id"] == comment["id"]
    assert [r.method for r in fake.requests] == ["GET", "POST", "GET", "PATCH"]
    assert body.startswith(marker(KEY) + "\n## taguru_eval: context `sake` — report-only")
    assert "| recall.ndcg | regressed |" in body
    assert "### Regressed cases by signature" in body
    assert (
        "Details: [job summary](https://github.example/acme/handbook/actions/runs/41/attempts/1)"
        " · [HTML report](https://github.example/acme/handbook/actions/runs/1/artifacts/"
    ) in body
    # The uploaded folder holds the run, its comparison and the reports.
    artifact = runner.artifacts["taguru-eval-retrieval-gate-sake-1"]
    uploaded = sorted(path.name for path in artifact.iterdir())
    assert uploaded == [
        "changes.jsonl",
        "compare.md",
        "evaluation.json",
        "junit.xml",
        "report.html",
        "summary.md",
    ]
    job_summary = Path(runner.env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert "| base | Δ |" in job_summary and "taguru_eval compare:" in job_summary
    for job in (main, first, second):
        assert TOKEN not in job.log
    assert second.outputs["summary"] == ".taguru-eval/out/summary.md"
    assert second.outputs["report"] == ".taguru-eval/out/report.html"


def test_a_fork_pull_request_without_write_permission_still_gates(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    shutil.copytree(DATA / "sake", workspace / "sake")
    fake = FakeGitHub(status=403)
    with fake.server, running_server(DATA) as url:  # type: ignore[union-attr]
        runner = Runner(workspace, pull_env(tmp_path, fake.url))
        job = runner.run_job(
            {"eval": "sake/eval.jsonl", "context": "sake", "url": url}, GITHUB_CONTEXT
        )
    # No baseline yet: one notice, no comparison; the comment: one notice, exit 0.
    assert not job.failed, job.log
    assert job.outputs["verdict"] == PASS
    assert job.log.count("::notice title=taguru_eval comment skipped::") == 1
    assert (
        "::notice title=taguru_eval: no baseline::no run of main is in the Actions cache" in job.log
    )
    assert TOKEN not in job.log


def test_a_run_that_cannot_reach_its_server_fails_the_job(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    shutil.copytree(DATA / "sake", workspace / "sake")
    fake = FakeGitHub()
    with fake.server:  # type: ignore[union-attr]
        with running_server(DATA) as url:
            closed = url
        runner = Runner(workspace, pull_env(tmp_path, fake.url))
        job = runner.run_job(
            {"eval": "sake/eval.jsonl", "context": "sake", "url": closed}, GITHUB_CONTEXT
        )
    assert job.outputs["verdict"] == ERROR and job.outputs["exit-code"] == "1"
    assert [s.id for s in job.steps if not s.ran] == ["upload", "save"]
    assert job.steps[-1].code == 1
    # The comment says the run did not finish (an earlier push's must not stand).
    (posted,) = fake.mine()
    assert str(posted["body"]).startswith(
        f"{marker(KEY)}\n## taguru_eval: context `sake` — the run did not finish (exit 1)\n"
    )


def test_bad_inputs_stop_the_job_at_the_plan(tmp_path: Path) -> None:
    runner = Runner(tmp_path, pull_env(tmp_path, "http://127.0.0.1:9"))
    job = runner.run_job(
        {"eval": "e.jsonl", "context": "c", "url": "http://127.0.0.1:9", "fail-on": "noise"},
        GITHUB_CONTEXT,
    )
    plan = job.step("plan")
    assert plan.code == 2
    assert plan.stdout == "::error title=taguru_eval::input fail-on is 'noise'\n"
    assert plan.stderr == (
        "taguru: evaluate: input fail-on is 'noise'\n"
        "  hint: fail-on: gate | regression | inconclusive\n"
    )
    assert [s.id for s in job.steps if s.ran] == ["step-0", "install", "plan", "finish"]


def significance_with(*verdicts: str) -> Significance:
    """Significance tests with these verdicts, one metric each."""
    rows = [{"metric": f"m{i}", "n": 9, "verdict": v} for i, v in enumerate(verdicts)]
    return Significance(pl.DataFrame(rows, schema=SIGNIFICANCE_SCHEMA), 100, 0, 0.05)


@pytest.mark.parametrize(
    ("run_code", "verdicts", "fail_on", "expected"),
    [
        (0, None, "inconclusive", (PASS, 0)),
        (0, ("no significant change",), "inconclusive", (PASS, 0)),
        (3, ("regressed",), "gate", (GATE_FAILED, 3)),
        (0, ("regressed", "inconclusive"), "gate", (REGRESSED, 0)),
        (0, ("regressed", "improved"), "regression", (REGRESSED, 3)),
        (0, ("inconclusive",), "regression", (INCONCLUSIVE, 0)),
        (0, ("inconclusive",), "inconclusive", (INCONCLUSIVE, 3)),
        (2, None, "gate", (ERROR, 2)),
    ],
)
def test_fail_on_levels(
    run_code: int, verdicts: tuple[str, ...] | None, fail_on: str, expected: tuple[str, int]
) -> None:
    tested = None if verdicts is None else significance_with(*verdicts)
    assert verdict_and_code(run_code, tested, fail_on) == expected


def test_the_action_declares_the_inputs_and_outputs_of_the_issue() -> None:
    spec = action()
    assert spec["runs"]["using"] == "composite"
    assert set(spec["outputs"]) == {"verdict", "exit-code", "summary", "report"}
    assert {
        "eval",
        "context",
        "url",
        "thresholds",
        "must-refuse",
        "answers",
        "assembly",
        "max-items",
        "max-bytes",
        "max-tokens",
        "baseline",
        "comment",
        "fail-on",
        "python-version",
        "extras",
    } <= set(spec["inputs"])
