"""``python -m taguru_eval comment HEAD [--base BASE] …``: the sticky pull-request comment.

Builds the comment (:mod:`taguru_eval.analyst.pr_comment`) from a head run and,
with ``--base``, its comparison and significance tests (as ``compare
--significance`` computes them), then posts it on the pull request the GitHub
Actions environment names (:mod:`taguru_eval.analyst.github`), updating this
job's earlier comment in place. ``--dry-run`` prints the Markdown and ``--out
FILE`` writes it, without posting.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TextIO

from taguru_eval.cli.flags import run_subcommand, scan_flags, write_report
from taguru_eval.compare.multiplicity import CORRECTIONS, DEFAULT_CORRECTION, Correction
from taguru_eval.compare.significance import DEFAULT_ALPHA
from taguru_eval.errors import EXIT_OK, UsageError

WORD: Final = "comment"
KEY_ENV: Final = ("GITHUB_WORKFLOW", "GITHUB_JOB")
"""The environment the default key is made of, with the run's context: two jobs
(or two workflows) of one pull request keep two comments."""

HELP: Final = """\
usage: python -m taguru_eval comment HEAD [--base BASE] [--key KEY]
           [--summary-url URL] [--report-url URL] [--alpha A]
           [--correction holm|bh|none] [--tolerances FILE]
           [--dry-run] [--out FILE]

Write the sticky pull-request comment for a run and post it: the gate's
verdict, the aggregate metrics (base -> head with the delta), each metric's
significance test (interval, adjusted p-value, MDE; what an inconclusive one
needs), the regressed cases grouped by signature, the must-refuse and answers
changes, and links to the job summary and the report. It stays under GitHub's
65,536-character limit whatever the run's size, and says what it left out.

Posting reads GitHub Actions' environment: GITHUB_API_URL (default
https://api.github.com), GITHUB_REPOSITORY, GITHUB_TOKEN (never printed) and
the event payload at GITHUB_EVENT_PATH (the pull request's number). The
earlier comment of the same key is found by a hidden marker and updated in
place; without one a comment is created. A 403 (a pull request from a fork,
whose token cannot write) prints one notice and exits 0.

arguments:
  HEAD               the run to report: an evaluation.json or a stored run
                     directory (runs/context=<ctx>/run=<id>/)
  --base BASE        the base branch's run, same forms: adds base and delta
                     columns, the significance tests and the regressed cases
  --key KEY          which comment is this job's (default: GITHUB_WORKFLOW,
                     GITHUB_JOB and the run's context)
  --summary-url URL  link to the job summary
  --report-url URL   link to the uploaded HTML report
  --alpha A          significance level, 0 < A < 1 (default 0.05)
  --correction C     holm (default), bh or none
  --tolerances FILE  the regression sizes that do not matter, as compare reads
                     them ({"taguru_eval_tolerances": 1, "tolerance": {...}})
  --dry-run          do not post; print the comment
  --out FILE         do not post; write the comment's Markdown to FILE
                     (atomically)
  -h, --help         show this help and exit

exit codes:
  0  the comment was posted (created or updated), printed or written, or
     skipped on a 403
  1  GitHub failed (another status, a network error), or --out could not be
     written
  2  usage error, an unreadable run, or the environment names no pull request
"""

_VALUE_FLAGS: Final = {
    "--base": "--base needs a run (an evaluation.json or a stored run directory)",
    "--key": "--key needs a text",
    "--summary-url": "--summary-url needs a URL",
    "--report-url": "--report-url needs a URL",
    "--alpha": "--alpha needs a number between 0 and 1",
    "--correction": f"--correction needs {', '.join(CORRECTIONS[:-1])} or {CORRECTIONS[-1]}",
    "--tolerances": "--tolerances needs a file path",
    "--out": "--out needs a file path",
}


@dataclass(frozen=True)
class CommentArgs:
    """The parsed command line."""

    head: str
    base: str | None = None
    key: str | None = None
    summary_url: str | None = None
    report_url: str | None = None
    alpha: float = DEFAULT_ALPHA
    correction: Correction = DEFAULT_CORRECTION
    tolerances: str | None = None
    dry_run: bool = False
    out: str | None = None


def parse_args(argv: Sequence[str]) -> CommentArgs | None:
    """``None`` means help; a bad command line is a :class:`UsageError`."""
    found = scan_flags(argv, _VALUE_FLAGS, ("--dry-run",), f"taguru_eval {WORD}")
    if found is None:
        return None
    if len(found.positionals) != 1:
        raise UsageError(
            f"{WORD} takes exactly one run, HEAD (got {len(found.positionals)} positional(s))"
        )
    values = found.values
    from taguru_eval.cli.compare import parse_alpha, parse_correction

    return CommentArgs(
        found.positionals[0],
        base=values.get("--base"),
        key=values.get("--key"),
        summary_url=values.get("--summary-url"),
        report_url=values.get("--report-url"),
        alpha=parse_alpha(values.get("--alpha")),
        correction=parse_correction(values.get("--correction")),
        tolerances=values.get("--tolerances"),
        dry_run="--dry-run" in found.switches,
        out=values.get("--out"),
    )


def default_key(context: str, env: Mapping[str, str]) -> str:
    """This job's comment key: workflow, job and context (``/``-joined)."""
    return "/".join(part for part in (*(env.get(name, "") for name in KEY_ENV), context) if part)


def build(args: CommentArgs, env: Mapping[str, str]) -> tuple[str, str]:
    """The comment's marker key and Markdown."""
    from taguru_eval.analyst.pr_comment import Links, comment_markdown
    from taguru_eval.api import load_run
    from taguru_eval.artifact.read import artifact_catalog

    head = load_run(args.head)
    comparison = tested = None
    if args.base is not None:
        from taguru_eval.cli.compare import TOLERATED
        from taguru_eval.compare import compare, significance
        from taguru_eval.inputs.tolerances import load_tolerances

        tolerances = {} if args.tolerances is None else load_tolerances(args.tolerances, TOLERATED)
        comparison = compare(args.base, args.head)
        tested = significance(
            comparison,
            alpha=args.alpha,
            correction=args.correction,
            tolerances={m: t for m, t in tolerances.items() if m in comparison.compared},
        )
    context = str((head.doc.get("inputs") or {}).get("context", ""))
    key = args.key if args.key is not None else default_key(context, env)
    markdown = comment_markdown(
        head.doc,
        head.metrics,
        head.cases,
        key=key,
        run_id=head.run_id,
        comparison=comparison,
        tested=tested,
        links=Links(summary=args.summary_url, report=args.report_url),
        lanes=head.tables.case_lanes,
        catalog=artifact_catalog(head.doc),
    )
    return key, markdown


def act(args: CommentArgs, out: TextIO, err: TextIO, env: Mapping[str, str] | None = None) -> int:
    """Build, write, post; the exit code."""
    environment = os.environ if env is None else env
    key, markdown = build(args, environment)
    if args.out is not None:
        write_report(args.out, markdown)
        return EXIT_OK
    if args.dry_run:
        out.write(markdown)
        return EXIT_OK
    return post(markdown, key, environment, out)


def post(markdown: str, key: str, env: Mapping[str, str], out: TextIO) -> int:
    """Post ``markdown`` as the comment of ``key`` on the pull request ``env`` names.

    A 403 prints one notice (GitHub Actions' annotation) and is exit 0; any other
    failure raises (:class:`~taguru_eval.errors.RunError`, exit 1)."""
    from taguru_eval.analyst.github import CommentForbidden, post_comment, pull_request_from_env
    from taguru_eval.analyst.pr_comment import marker

    pull = pull_request_from_env(env)
    try:
        posted = post_comment(pull, markdown, marker(key))
    except CommentForbidden as forbidden:
        # One line in the log and on the run's page; stdout, where a runner reads
        # workflow commands as it does from stderr.
        out.write(f"::notice title=taguru_eval comment skipped::{forbidden}\n")
        return EXIT_OK
    where = f": {posted.html_url}" if posted.html_url else ""
    target = f"{pull.repository}#{pull.number}"
    out.write(f"taguru_eval: {posted.action} the comment on {target}{where}\n")
    return EXIT_OK


def main(
    argv: Sequence[str],
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """``python -m taguru_eval comment …``: returns the exit code."""
    return run_subcommand(
        WORD,
        argv,
        parse_args,
        lambda args, out, err: act(args, out, err, env),
        HELP,
        stdout=stdout or sys.stdout,
        stderr=stderr or sys.stderr,
    )
