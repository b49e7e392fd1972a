"""``python -m taguru_eval action-step plan|run|comment|finish``: the GitHub Action's logic.

The composite action (``action.yml`` at the repository root) is a thin list of
steps; every decision is made here, where a test can drive it over loopback:

* ``plan`` — checks the inputs, and says whether to restore the base branch's
  baseline from the Actions cache and under which key (a pull request with
  ``baseline: auto``);
* ``run`` — runs the gate (JUnit, job summary with base and Δ), compares with
  the baseline (``compare --significance``), writes the HTML report, puts the run
  where the cache step stores it (a push to the default branch), and sets the
  step's outputs: ``verdict``, ``exit-code`` (per ``fail-on``), the files, and
  whether to upload, comment and save. It exits 0 so that those steps run;
* ``comment`` — posts the sticky comment (:mod:`taguru_eval.cli.comment`); a
  failure to post is a warning, never the gate's verdict;
* ``finish`` — ends the job with ``exit-code``.

Inputs come as ``TAGURU_EVAL_INPUT_<NAME>`` environment variables (the action
maps each ``inputs.<name>`` there, never into a shell line), outputs go to
``$GITHUB_OUTPUT``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO

from taguru_eval.errors import EXIT_GATE, EXIT_INPUT, EXIT_OK, EXIT_RUN_FAILED, InputError

if TYPE_CHECKING:
    from taguru_eval.analyst.pr_comment import Links
    from taguru_eval.compare.significance import Significance

WORD: Final = "action-step"
INPUT_PREFIX: Final = "TAGURU_EVAL_INPUT_"
WORK_DIR: Final = Path(".taguru-eval")
OUT_DIR: Final = WORK_DIR / "out"
BASELINE_DIR: Final = WORK_DIR / "baseline"
"""The folder the cache steps restore and save: one evaluation.json."""
BASELINE_FILE: Final = "evaluation.json"
CACHE_PREFIX: Final = "taguru-eval-baseline"

PULL_REQUEST_EVENTS: Final = ("pull_request", "pull_request_target")
FAIL_ON: Final = ("gate", "regression", "inconclusive")
"""``fail-on`` levels, each failing on what the ones before it do and more."""
BASELINES: Final = ("auto", "none")

PASS, GATE_FAILED, REGRESSED, INCONCLUSIVE, ERROR = (
    "pass",
    "gate-failed",
    "regressed",
    "inconclusive",
    "error",
)
"""The ``verdict`` output, the worst finding first: the run could not finish, the
gate failed, a metric regressed significantly, a test was inconclusive, or none."""

HELP: Final = """\
usage: python -m taguru_eval action-step plan|run|comment|finish

The steps of the taguru_eval GitHub Action (action.yml), run by the action
itself. Inputs come from TAGURU_EVAL_INPUT_* environment variables, outputs go
to $GITHUB_OUTPUT; docs/pull-request.md explains the flow.

  plan     check the inputs; decide whether (and under which cache key) to
           restore the base branch's baseline
  run      run the gate, compare with the baseline (--significance), write
           the reports; outputs verdict, exit-code, summary, report
  comment  post or update the sticky pull-request comment (a failure to
           post is a warning)
  finish   end the job with exit-code

exit codes: plan 0 or 2 (bad input); run 0 (its verdict is an output);
comment 0; finish the run's exit-code (0, 3, or the run's own 1/2).
"""


@dataclass(frozen=True)
class Inputs:
    """The action's inputs, checked."""

    eval: str
    context: str
    url: str
    thresholds: str
    must_refuse: str
    answers: str
    assembly: bool
    budgets: tuple[tuple[str, str], ...]
    baseline: str
    comment: bool
    fail_on: str
    key: str


_BUDGETS: Final = ("max-items", "max-bytes", "max-tokens")


def _input(env: Mapping[str, str], name: str) -> str:
    return env.get(INPUT_PREFIX + name.upper().replace("-", "_"), "").strip()


def _switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = _input(env, name).lower()
    if not value:
        return default
    if value not in ("true", "false"):
        raise InputError(f"input {name} is '{value}'", hint=f"{name}: true or false")
    return value == "true"


def read_inputs(env: Mapping[str, str]) -> Inputs:
    """The inputs from the environment; :class:`InputError` names the bad one."""
    for required in ("eval", "context", "url"):
        if not _input(env, required):
            raise InputError(
                f"input {required} is empty", hint=f"give the action `with: {required}: …`"
            )
    fail_on = _input(env, "fail-on") or "gate"
    if fail_on not in FAIL_ON:
        raise InputError(f"input fail-on is '{fail_on}'", hint=f"fail-on: {' | '.join(FAIL_ON)}")
    from taguru_eval.cli.comment import default_key

    context = _input(env, "context")
    return Inputs(
        eval=_input(env, "eval"),
        context=context,
        url=_input(env, "url"),
        thresholds=_input(env, "thresholds"),
        must_refuse=_input(env, "must-refuse"),
        answers=_input(env, "answers"),
        assembly=_switch(env, "assembly", False),
        budgets=tuple((f"--{name}", _input(env, name)) for name in _BUDGETS if _input(env, name)),
        baseline=_input(env, "baseline") or "auto",
        comment=_switch(env, "comment", True),
        fail_on=fail_on,
        key=_input(env, "key") or default_key(context, env),
    )


def _slug(key: str) -> str:
    """``key`` in the alphabet cache keys and artifact names accept."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", key)


def cache_key_prefix(key: str, branch: str) -> str:
    """``taguru-eval-baseline-<key>-<branch>-``: the newest cache of a branch is the
    newest whose key starts with it."""
    return f"{CACHE_PREFIX}-{_slug(key)}-{branch}-"


def _event(env: Mapping[str, str]) -> dict[str, object]:
    """The event payload GitHub wrote (``{}`` when there is none or it is unreadable:
    then nothing is stored or restored)."""
    path = env.get("GITHUB_EVENT_PATH", "")
    if not path:
        return {}
    try:
        event = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return event if isinstance(event, dict) else {}


def _default_branch(env: Mapping[str, str]) -> str:
    repository = _event(env).get("repository")
    branch = repository.get("default_branch") if isinstance(repository, dict) else None
    return branch if isinstance(branch, str) else ""


def is_pull_request(env: Mapping[str, str]) -> bool:
    return env.get("GITHUB_EVENT_NAME", "") in PULL_REQUEST_EVENTS


def on_default_branch(env: Mapping[str, str]) -> bool:
    """A push (or schedule, or manual run) on the default branch: its run is the baseline."""
    branch = _default_branch(env)
    return (
        not is_pull_request(env)
        and bool(branch)
        and env.get("GITHUB_REF", "") == f"refs/heads/{branch}"
    )


def set_outputs(env: Mapping[str, str], values: Mapping[str, str], out: TextIO) -> None:
    """Append ``name=value`` lines to ``$GITHUB_OUTPUT`` (or print them without one)."""
    for name, value in values.items():
        if "\n" in value or "\r" in value:
            raise InputError(f"output {name} would hold a line break", hint="rename the file")
    lines = "".join(f"{name}={value}\n" for name, value in values.items())
    target = env.get("GITHUB_OUTPUT", "")
    if not target:
        out.write(lines)
        return
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(lines)


def plan(env: Mapping[str, str], out: TextIO) -> int:
    """Check the inputs; the restore decision and keys."""
    inputs = read_inputs(env)
    restore = inputs.baseline == "auto" and is_pull_request(env)
    prefix = key = ""
    if restore:
        base = env.get("GITHUB_BASE_REF", "")
        pull = _event(env).get("pull_request")
        head = pull.get("base") if isinstance(pull, dict) else None
        sha = head.get("sha") if isinstance(head, dict) else None
        prefix = cache_key_prefix(inputs.key, base)
        key = prefix + (sha if isinstance(sha, str) else "")
    elif inputs.baseline not in BASELINES and not Path(inputs.baseline).exists():
        raise InputError(
            f"input baseline: {inputs.baseline} does not exist",
            path=inputs.baseline,
            hint="baseline: auto, none, or the path of an evaluation.json or stored run",
        )
    set_outputs(
        env,
        {
            "restore": str(restore).lower(),
            "restore-key": key,
            "restore-prefix": prefix,
            "baseline-dir": str(BASELINE_DIR),
        },
        out,
    )
    return EXIT_OK


def _baseline(inputs: Inputs, env: Mapping[str, str], out: TextIO) -> str | None:
    if inputs.baseline == "none":
        return None
    if inputs.baseline != "auto":
        return inputs.baseline
    if not is_pull_request(env):
        return None
    restored = BASELINE_DIR / BASELINE_FILE
    if restored.is_file():
        return str(restored)
    base = env.get("GITHUB_BASE_REF", "the base branch")
    out.write(
        f"::notice title=taguru_eval: no baseline::no run of {base} is in the Actions cache "
        f"yet (a push to {base} stores one); the run is not compared\n"
    )
    return None


def _gate_argv(inputs: Inputs, base: str | None) -> list[str]:
    argv = ["--eval", inputs.eval, "--context", inputs.context, "--url", inputs.url]
    argv += ["--out", str(OUT_DIR / "evaluation.json"), "--no-store"]
    argv += ["--junit", str(OUT_DIR / "junit.xml"), "--summary", str(OUT_DIR / "summary.md")]
    for flag, value in (
        ("--thresholds", inputs.thresholds),
        ("--must-refuse", inputs.must_refuse),
        ("--answers", inputs.answers),
    ):
        if value:
            argv += [flag, value]
    if inputs.assembly:
        argv.append("--assembly")
    for flag, value in inputs.budgets:
        argv += [flag, value]
    if base is not None:
        argv += ["--summary-base", base]
    return argv


def verdict_and_code(run_code: int, tested: Significance | None, fail_on: str) -> tuple[str, int]:
    """The ``verdict`` (the worst finding) and the job's exit code under ``fail_on``:
    the run's own, then the significance tests' (:meth:`Significance.verdict`, judged
    on what the ``fail_on`` level adds to the gate)."""
    if run_code not in (EXIT_OK, EXIT_GATE):
        return ERROR, run_code
    if run_code == EXIT_GATE:
        return GATE_FAILED, EXIT_GATE
    if tested is None:
        return PASS, EXIT_OK
    from taguru_eval.compare.significance import FAIL_ON as TESTS_FAIL_ON

    verdict = tested.verdict(fail_on=TESTS_FAIL_ON[: FAIL_ON.index(fail_on)])
    return verdict.finding, verdict.exit_code


def run(env: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    """The gate, the comparison, the report, the baseline to store; the outputs."""
    from taguru_eval.cli.main import main as command

    inputs = read_inputs(env)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    base = _baseline(inputs, env, out)
    head = OUT_DIR / "evaluation.json"
    head.unlink(missing_ok=True)  # a file from an earlier step must not pass for this run's
    out.flush()
    run_code = command(_gate_argv(inputs, base))
    completed = run_code in (EXIT_OK, EXIT_GATE) and head.is_file()
    tested: Significance | None = None
    compared = ""
    if completed and base is not None:
        tested, compared = _compare(base, str(head), env, out, err)
    report = ""
    if completed:
        report = _report(str(head), base, out)
    save = completed and inputs.baseline == "auto" and on_default_branch(env)
    if save:
        BASELINE_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(head, BASELINE_DIR / BASELINE_FILE)
    verdict, code = verdict_and_code(run_code, tested, inputs.fail_on)
    branch = env.get("GITHUB_REF_NAME", "")
    set_outputs(
        env,
        {
            "verdict": verdict,
            "exit-code": str(code),
            "summary": str(OUT_DIR / "summary.md") if completed else "",
            "report": report,
            "evaluation": str(head) if completed else "",
            "baseline": base or "",
            "changes": compared,
            "upload": str(completed).lower(),
            # Unique per job and attempt (an artifact name is, within a workflow run).
            "artifact": f"taguru-eval-{_slug(inputs.key)}-{env.get('GITHUB_RUN_ATTEMPT', '1')}",
            "comment": str(inputs.comment and is_pull_request(env)).lower(),
            "save": str(save).lower(),
            "save-key": cache_key_prefix(inputs.key, branch) + env.get("GITHUB_SHA", "")
            if save
            else "",
        },
        out,
    )
    out.write(f"taguru_eval: verdict {verdict} (fail-on {inputs.fail_on}: exit {code})\n")
    return EXIT_OK


def _compare(
    base: str, head: str, env: Mapping[str, str], out: TextIO, err: TextIO
) -> tuple[Significance | None, str]:
    """``compare --significance`` with its Markdown summary appended to the job
    summary: (its tests, changes.jsonl path)."""
    from taguru_eval.cli.compare import CompareArgs, compare_and_report

    changes = OUT_DIR / "changes.jsonl"
    summary = OUT_DIR / "compare.md"
    args = CompareArgs(base, head, out=str(changes), significance=True, summary=str(summary))
    code, tested = compare_and_report(args, out, err)
    if code != EXIT_OK or tested is None:
        out.write(f"::warning title=taguru_eval::compare with {base} failed (exit {code})\n")
        return None, ""
    step_summary = env.get("GITHUB_STEP_SUMMARY", "")
    if step_summary and summary.is_file():
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write("\n" + summary.read_text(encoding="utf-8"))
    return tested, str(changes)


def _report(head: str, base: str | None, out: TextIO) -> str:
    """The offline HTML report (with the base run's comparison), or ``""`` with a
    notice when the ``report`` extra is not installed or the report fails."""
    from taguru_eval.cli.main import subcommand

    target = OUT_DIR / "report.html"
    argv = [head, "-o", str(target), *(["--base", base] if base is not None else [])]
    code = subcommand("report", argv)
    if code != EXIT_OK or not target.is_file():
        out.write("::notice title=taguru_eval::no HTML report (see the lines above)\n")
        return ""
    return str(target)


def comment(env: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    """Post the comment; a failure to post is a warning (exit 0). A run that did not
    finish replaces the comment with one that says so, so an earlier push's
    results do not stand for this one's."""
    from taguru_eval.cli import comment as comment_command

    inputs = read_inputs(env)
    links = _links(env)
    evaluation = env.get("TAGURU_EVAL_EVALUATION", "")
    if evaluation:
        argv = [evaluation, "--key", inputs.key]
        base = env.get("TAGURU_EVAL_BASELINE", "")
        if base:
            argv += ["--base", base]
        if links.summary:
            argv += ["--summary-url", links.summary]
        if links.report:
            argv += ["--report-url", links.report]
        code = comment_command.main(argv, stdout=out, stderr=err, env=env)
    else:
        from taguru_eval.analyst.pr_comment import unfinished_markdown
        from taguru_eval.errors import TaguruEvalError, error_lines

        markdown = unfinished_markdown(
            inputs.key, inputs.context, env.get("TAGURU_EVAL_EXIT_CODE", ""), links
        )
        try:
            code = comment_command.post(markdown, inputs.key, env, out)
        except TaguruEvalError as exc:
            err.write(error_lines(exc))
            code = exc.exit_code
    if code != EXIT_OK:
        out.write(
            "::warning title=taguru_eval::the pull-request comment was not posted (see the line "
            "above); the gate's verdict stands\n"
        )
    return EXIT_OK


def _links(env: Mapping[str, str]) -> Links:
    """The job summary (the run's page) and the uploaded report."""
    from taguru_eval.analyst.pr_comment import Links

    server, repository, run_id = (
        env.get(name, "") for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    )
    summary = None
    if server and repository and run_id:
        attempt = env.get("GITHUB_RUN_ATTEMPT", "")
        page = f"{server}/{repository}/actions/runs/{run_id}"
        summary = f"{page}/attempts/{attempt}" if attempt else page
    return Links(summary=summary, report=env.get("TAGURU_EVAL_REPORT_URL") or None)


def finish(env: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    """End the job with the run step's ``exit-code``."""
    text = env.get("TAGURU_EVAL_EXIT_CODE", "")
    verdict = env.get("TAGURU_EVAL_VERDICT", "")
    if not text.isdigit():
        out.write("::error title=taguru_eval::the gate step did not finish (see its log)\n")
        return EXIT_RUN_FAILED
    code = int(text)
    fail_on = _input(env, "fail-on") or "gate"
    if code != EXIT_OK:
        out.write(f"::error title=taguru_eval::verdict {verdict} (fail-on {fail_on})\n")
    else:
        out.write(f"taguru_eval: verdict {verdict} (fail-on {fail_on})\n")
    return code


PHASES: Final = ("plan", "run", "comment", "finish")


def main(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> int:
    """``python -m taguru_eval action-step PHASE``: returns the exit code."""
    environment = os.environ if env is None else env
    out, err = sys.stdout, sys.stderr
    if len(argv) != 1 or argv[0] in ("-h", "--help") or argv[0] not in PHASES:
        stream = out if argv[:1] in (["-h"], ["--help"]) else err
        stream.write(HELP)
        return EXIT_OK if stream is out else EXIT_INPUT
    phase = argv[0]
    try:
        if phase == "plan":
            return plan(environment, out)
        if phase == "run":
            return run(environment, out, err)
        if phase == "comment":
            return comment(environment, out, err)
        return finish(environment, out, err)
    except InputError as exc:
        from taguru_eval.errors import error_lines

        out.write(f"::error title=taguru_eval::{exc.message}\n")
        out.flush()
        err.write(error_lines(exc))
        return exc.exit_code
