"""The sticky pull-request comment: built from runs, posted to a loopback fake of GitHub.

The fake (:mod:`support.github_api`) speaks real HTTP on loopback: the comment
command lists, creates and updates comments through it as it would through
api.github.com, pages through a ``Link`` header, and meets a fork's 403 and a 5xx.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.documents import evaluation_document, write_document
from support.github_api import PULL, REPOSITORY, TOKEN, FakeGitHub

from taguru_eval.analyst.pr_comment import COMMENT_LIMIT, Section, fit, marker
from taguru_eval.cli import comment
from taguru_refserver.serve import running_server

DATA = Path(__file__).resolve().parents[2] / "data"

CASE_IDS = [f"case-{index:03d}" for index in range(60)]


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    """A base run, a head run that regressed against it, and a later head run."""
    return {
        name: write_document(
            tmp_path / f"{name}.json", evaluation_document(step=step, case_ids=CASE_IDS)
        )
        for name, step in (("base", 0), ("head", 1), ("next", 2))
    }


def actions_env(tmp_path: Path, api_url: str, **extra: str) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "synchronize", "pull_request": {"number": PULL}}))
    return {
        "GITHUB_API_URL": api_url,
        "GITHUB_REPOSITORY": REPOSITORY,
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_WORKFLOW": "retrieval",
        "GITHUB_JOB": "gate",
        **extra,
    }


def run_comment(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = comment.main(argv, stdout=out, stderr=err, env=env)
    text_out, text_err = out.getvalue(), err.getvalue()
    assert TOKEN not in text_out + text_err
    return code, text_out, text_err


def test_one_comment_is_created_then_updated_in_place(
    tmp_path: Path, runs: dict[str, Path]
) -> None:
    fake = FakeGitHub()
    with fake.server:  # type: ignore[union-attr]
        env = actions_env(tmp_path, fake.url)
        first = run_comment([str(runs["head"]), "--base", str(runs["base"])], env)
        assert first[0] == 0 and first[2] == ""
        assert first[1].startswith(f"taguru_eval: created the comment on {REPOSITORY}#{PULL}: ")
        (created,) = fake.mine()
        body = str(created["body"])
        assert body.startswith(marker("retrieval/gate/demo") + "\n")
        assert "60 regressed" in body and "### Regressed cases by signature (60 case(s)" in body
        second = run_comment([str(runs["next"]), "--base", str(runs["base"])], env)
        assert second[0] == 0 and "updated the comment" in second[1]
    (updated,) = fake.mine()
    assert updated["id"] == created["id"] and updated["body"] != body
    assert [r.method for r in fake.requests] == ["GET", "POST", "GET", "PATCH"]
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in fake.requests)
    assert fake.requests[0].query == {"per_page": "100"}


def test_the_marker_is_found_on_the_second_page(tmp_path: Path, runs: dict[str, Path]) -> None:
    fake = FakeGitHub(per_page=2)
    for index in range(2):
        fake.add(f"a reviewer's comment {index}")
    ours = fake.add(marker("retrieval/gate/demo") + "\nan older comment of this job")
    fake.add("a later comment")
    fake.add(marker("other-job") + "\nanother job's comment")  # page 3: never read
    with fake.server:  # type: ignore[union-attr]
        code, out, _err = run_comment([str(runs["head"])], actions_env(tmp_path, fake.url))
    assert code == 0 and "updated" in out
    assert [(r.method, r.query.get("page")) for r in fake.requests] == [
        ("GET", None),
        ("GET", "2"),
        ("PATCH", None),
    ]
    assert fake.requests[-1].path == f"/repos/{REPOSITORY}/issues/comments/{ours}"
    assert "No base run to compare with" in str(fake.comments[ours]["body"])


def test_two_jobs_keep_two_comments(tmp_path: Path, runs: dict[str, Path]) -> None:
    fake = FakeGitHub(per_page=1)
    with fake.server:  # type: ignore[union-attr]
        for job in ("gate-a", "gate-b", "gate-a"):
            env = actions_env(tmp_path, fake.url, GITHUB_JOB=job)
            assert run_comment([str(runs["head"])], env)[0] == 0
    bodies = sorted(str(c["body"]).splitlines()[0] for c in fake.mine())
    assert bodies == [marker("retrieval/gate-a/demo"), marker("retrieval/gate-b/demo")]


def test_a_fork_403_is_one_notice_and_exit_0(tmp_path: Path, runs: dict[str, Path]) -> None:
    fake = FakeGitHub(status=403)
    with fake.server:  # type: ignore[union-attr]
        code, out, err = run_comment([str(runs["head"])], actions_env(tmp_path, fake.url))
    assert (code, err) == (0, "")
    assert out == (
        f"::notice title=taguru_eval comment skipped::no permission to comment on "
        f"{REPOSITORY}#{PULL} (HTTP 403: a pull request from a fork gets a read-only token); "
        "the comment was skipped\n"
    )
    assert len(fake.requests) == 1


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_github_5xx_fails_with_one_error_and_no_token(
    tmp_path: Path, runs: dict[str, Path], status: int
) -> None:
    fake = FakeGitHub(status=status)
    with fake.server:  # type: ignore[union-attr]
        code, out, err = run_comment([str(runs["head"])], actions_env(tmp_path, fake.url))
    assert (code, out) == (1, "")
    assert err.startswith(
        f"taguru: evaluate: listing the comments of {REPOSITORY}#{PULL}: "
        f"GitHub answered HTTP {status}\n"
    )
    assert "hint: GitHub failed; run the job again" in err


def test_an_unreachable_api_names_the_call_not_the_token(
    tmp_path: Path, runs: dict[str, Path]
) -> None:
    fake = FakeGitHub()
    with fake.server:  # type: ignore[union-attr]
        closed = fake.url
    code, out, err = run_comment([str(runs["head"])], actions_env(tmp_path, closed))
    assert (code, out) == (1, "")
    assert err.startswith(f"taguru: evaluate: listing the comments of {REPOSITORY}#{PULL}: Connect")


@pytest.mark.parametrize(
    ("drop", "event", "message"),
    [
        ("GITHUB_TOKEN", None, "GITHUB_TOKEN is not set"),
        ("GITHUB_REPOSITORY", None, "GITHUB_REPOSITORY is not set"),
        (None, {"ref": "refs/heads/main"}, "the event is not a pull request's"),
    ],
)
def test_an_environment_without_a_pull_request_is_exit_2(
    tmp_path: Path, runs: dict[str, Path], drop: str | None, event: object, message: str
) -> None:
    fake = FakeGitHub()
    with fake.server:  # type: ignore[union-attr]
        env = actions_env(tmp_path, fake.url)
        if drop is not None:
            del env[drop]
        if event is not None:
            Path(env["GITHUB_EVENT_PATH"]).write_text(json.dumps(event))
        code, out, err = run_comment([str(runs["head"])], env)
    assert (code, out) == (2, "")
    assert message in err.splitlines()[0]
    assert fake.requests == []


def test_dry_run_writes_the_comment_and_posts_nothing(
    tmp_path: Path, runs: dict[str, Path]
) -> None:
    fake = FakeGitHub()
    out_file = tmp_path / "comment.md"
    with fake.server:  # type: ignore[union-attr]
        env = actions_env(tmp_path, fake.url)
        argv = [str(runs["head"]), "--base", str(runs["base"]), "--key", "k", "--dry-run"]
        code, printed, err = run_comment(argv, env)
        assert (code, err) == (0, "")
        code, quiet, err = run_comment([*argv[:-1], "--out", str(out_file)], env)
        assert (code, quiet, err) == (0, "", "")
    assert fake.requests == []
    assert out_file.read_text("utf-8") == printed
    assert printed.startswith(marker("k") + "\n## taguru_eval: context `demo` — report-only")
    # The significance section is compare --significance's: an interval, adjusted p, MDE.
    assert "| citations.locator_validity | regressed | -1.0000 | [-1.0000, -1.0000] |" in printed
    assert "- recall.mrr inconclusive: a regression up to " in printed
    assert "pairs would bring the MDE down to 0.01" in printed


def test_the_links_are_shown(tmp_path: Path, runs: dict[str, Path]) -> None:
    code, printed, _err = run_comment(
        [
            str(runs["head"]),
            "--dry-run",
            "--summary-url",
            "https://github.example/acme/handbook/actions/runs/5 (summary)",
            "--report-url",
            "https://github.example/artifacts/9",
        ],
        {},
    )
    assert code == 0
    assert (
        "Details: [job summary](https://github.example/acme/handbook/actions/runs/5%20%28summary%29)"
        " · [HTML report](https://github.example/artifacts/9)"
    ) in printed


def test_a_20000_case_regression_stays_under_the_cap(tmp_path: Path) -> None:
    ids = [f"policies/remote-work/{'x' * 150}/{index:05d}" for index in range(20_000)]
    base = write_document(tmp_path / "base.json", evaluation_document(step=0, case_ids=ids))
    head = write_document(tmp_path / "head.json", evaluation_document(step=1, case_ids=ids))
    code, printed, _err = run_comment([str(head), "--base", str(base), "--dry-run"], {})
    assert code == 0
    assert len(printed.encode("utf-8")) < COMMENT_LIMIT
    assert "### Regressed cases by signature (20000 case(s)" in printed
    section = printed.split("### Regressed cases by signature")[1].split("\n\n")[1]
    rows = section.splitlines()[2:]
    shown = sum(int(line.split(" | ")[3]) for line in rows)
    assert shown == 20_000  # every signature listed, and their counts add up
    assert "xxx…`" in printed  # the long ids are cut, with an ellipsis


def test_what_does_not_fit_is_named() -> None:
    many = [f"| row {index} | {'y' * 200} |" for index in range(2_000)]
    text = fit(
        ["<!-- m -->", "## title"],
        [
            Section("first", ["a"]),
            Section("big table", many),
            Section("huge", ["z" * COMMENT_LIMIT]),
            Section("after", ["b", "c"]),  # what still fits after a cut is kept
        ],
        COMMENT_LIMIT,
        has_links=True,
    )
    assert len(text.encode("utf-8")) < COMMENT_LIMIT
    kept = sum(line.startswith("| row ") for line in text.splitlines())
    assert 200 < kept < 2_000
    assert "\nb\nc\n" in text
    assert text.rstrip().endswith(
        f"Left out: big table (the last {2_000 - kept} of 2000 line(s)); huge (all 1 line(s)). "
        "The job summary and the HTML report hold the whole run._"
    )


def test_the_comment_command_is_dispatched(tmp_path: Path, runs: dict[str, Path]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "taguru_eval", "comment", str(runs["head"]), "--dry-run"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("<!-- taguru_eval:comment key=demo -->\n")
    help_text = subprocess.run(
        [sys.executable, "-m", "taguru_eval", "comment", "--help"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert help_text == comment.HELP


def test_a_marker_key_cannot_end_the_html_comment() -> None:
    assert marker("a --> b\n<c>") == "<!-- taguru_eval:comment key=a_-___b__c_ -->"
    assert marker("x---->y").count("-->") == 1  # only its own end
    assert marker("") == "<!-- taguru_eval:comment key=default -->"


def test_the_gate_verdict_is_read_back_from_the_artifact(tmp_path: Path) -> None:
    thresholds = {
        "sha256": "ab" * 32,
        "passed": False,
        "allow_unstable_corpus": False,
        "violations": [
            {
                "scope": "aggregate",
                "metric": "recall.recall_at_k",
                "bound": "min",
                "threshold": 0.9,
                "actual": 0.8,
                "reason": "recall.recall_at_k 0.800 < min 0.900",
            }
        ],
    }
    head = write_document(
        tmp_path / "gated.json", evaluation_document(case_ids=CASE_IDS, thresholds=thresholds)
    )
    code, printed, _err = run_comment([str(head), "--dry-run"], {})
    assert code == 0
    assert "— ❌ FAIL (1 violation(s))" in printed.splitlines()[1]
    assert "- [aggregate] recall.recall_at_k: recall.recall_at_k 0.800 &lt; min 0.900" in printed


def _blanked(folder: Path, document: str) -> Path:
    """``data/handbook`` with one document's paragraphs replaced by one sentence."""
    target = folder / "handbook"
    shutil.copytree(DATA / "handbook", target)
    path = target / document
    lines = path.read_text(encoding="utf-8").split("\n")
    end = lines.index("---", 1) if lines[:1] == ["---"] else -1
    body = [
        "This part moved to another page." if line and not line.startswith("#") else line
        for line in lines[end + 1 :]
    ]
    path.write_text("\n".join([*lines[: end + 1], *body]), encoding="utf-8")
    return folder


def _run(url: str, out: Path, golden: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "taguru_eval",
            "--eval",
            str(golden / "golden.eval.jsonl"),
            "--context",
            "handbook",
            "--url",
            url,
            "--answers",
            str(golden / "golden.answers.jsonl"),
            "--must-refuse",
            str(golden / "golden.must_refuse.jsonl"),
            "--refusal-rule",
            "any",
            "--out",
            str(out),
            "--no-store",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_must_refuse_and_answers_changes_are_shown(tmp_path: Path) -> None:
    golden = tmp_path / "golden"
    golden.mkdir()
    shutil.copyfile(DATA / "handbook" / "golden.csv", golden / "golden.csv")
    made = subprocess.run(
        [sys.executable, "-m", "taguru_eval", "import-golden", "golden.csv"],
        cwd=golden,
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    with running_server(DATA) as url:
        _run(url, tmp_path / "base.json", golden)
    with running_server(_blanked(tmp_path / "pr", "policies/leave.md")) as url:
        _run(url, tmp_path / "head.json", golden)
    # One must-refuse verdict flipped, edited into the head's artifact: the corpus
    # edit above moves the answers, and a flip needs a case that stops surfacing.
    head = json.loads((tmp_path / "head.json").read_text(encoding="utf-8"))
    block = head["abstention"]
    flipped = next(case for case in block["cases"] if case["verdict"] == "surfaced")
    flipped["verdict"] = "abstained"
    flipped.pop("reason", None)
    block["counts"]["surfaced"] -= 1
    block["counts"]["abstained"] += 1
    edited = write_document(tmp_path / "head-flipped.json", head)
    code, printed, _err = run_comment(
        [str(edited), "--base", str(tmp_path / "base.json"), "--dry-run"], {}
    )
    assert code == 0
    answers_row = next(
        line for line in printed.splitlines() if line.startswith("| answers.hit_at_k |")
    )
    value, base = answers_row.split(" | ")[2], answers_row.split(" | ")[4]
    assert float(value) < float(base)  # the blanked policy held some answers
    assert (
        "### Answers\n\ncases classified on answers.hit_at_k, answers.mrr, answers.coverage too"
        in printed
    )
    changes = printed.split("### Must-refuse changes\n\n")[1]
    assert changes.startswith("1 improved, 0 regressed, ")
    assert f"- improved: `{flipped['case_id']}` ({flipped['kind']}) surfaced → abstained" in changes
    assert "| must-refuse (`--must-refuse`) | not gated |" in printed


def test_compare_warnings_head_the_comment(tmp_path: Path, runs: dict[str, Path]) -> None:
    other = write_document(
        tmp_path / "other.json",
        evaluation_document(step=1, case_ids=CASE_IDS, context="handbook", revision=(11, 7, 0)),
    )
    code, printed, _err = run_comment([str(other), "--base", str(runs["base"]), "--dry-run"], {})
    assert code == 0
    warnings = [line for line in printed.splitlines() if line.startswith("> ⚠️ ")]
    assert warnings[0] == "> ⚠️ context differs: BASE 'demo' vs HEAD 'handbook'"
    assert any("revision" in line for line in warnings[1:])
    assert printed.index("> ⚠️ ") < printed.index("### Aggregate metrics")


def test_the_pull_request_never_shows_its_token(tmp_path: Path) -> None:
    from taguru_eval.analyst.github import pull_request_from_env

    pull = pull_request_from_env(actions_env(tmp_path, "http://127.0.0.1:9/"))
    assert (pull.api_url, pull.repository, pull.number) == ("http://127.0.0.1:9", REPOSITORY, PULL)
    assert TOKEN not in repr(pull) and TOKEN not in str(pull)
