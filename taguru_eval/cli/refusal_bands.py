"""``python -m taguru_eval refusal-bands``: a report-only look at the passage vector floor.

ABSTENTION.md §3.12. The sweep is :mod:`taguru_eval.run.bands`, the bands
:mod:`taguru_eval.score.bands`; this module reads the inputs (eval.jsonl and
the must-refuse file, validated as run mode validates them), reaches the
server (health and the context read, as run mode's preflight does) and prints
the report. Exit 0 even on an overlap (an honest finding), 1 when the server
ran no vector lane or every sweep search failed (there is nothing to measure;
the message says which), 2 for bad input. It never
gates and writes nothing but the optional ``--out`` JSON.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, TextIO

import polars as pl

from taguru_eval._base.signals import stoppable
from taguru_eval._base.text import one_line
from taguru_eval.cli.flags import run_subcommand, scan_flags, write_report
from taguru_eval.errors import (
    EXIT_OK,
    RunError,
    UsageError,
)
from taguru_eval.inputs.config import (
    effective_env,
    mask_url,
    resolve_base_url,
    resolve_token,
    token_source,
)
from taguru_eval.inputs.dataset import load_eval, validate_limits
from taguru_eval.inputs.must_refuse import load_must_refuse
from taguru_eval.inputs.outputs import refuse_overlaps
from taguru_eval.options import DEFAULT_CONCURRENCY, parse_positive
from taguru_eval.run import loop
from taguru_eval.run.http import TaguruClient
from taguru_eval.run.lanes.bands import SWEEP_FLOOR, sweep
from taguru_eval.run.preflight import (
    check_expected_sources,
    check_health,
    read_context,
    walk_sources,
)
from taguru_eval.score.bands import Bands, bands
from taguru_eval.tables.schemas import POPULATION_EVAL

DEFAULT_WINDOW: Final = 50

HELP: Final = f"""\
usage: python -m taguru_eval refusal-bands --eval FILE --must-refuse FILE --context NAME
           [--url URL] [--config FILE] [--limit N] [--out FILE]

A report-only diagnostic for the passage vector floor (the analogue of taguru's
calibrate). Every answerable eval case and every must-refuse case is searched
once at the sweep floor {SWEEP_FLOOR} with a window of N hits (default
{DEFAULT_WINDOW}). The upper band is each answerable case's best-ranked expected
hit's vector cosine; the lower band each must-refuse case's best vector cosine.
A gap between them suggests its midpoint; an overlap is an honest finding.

It reads cosines, which is why it never gates. One floor serves both the gloss
tier of /resolve (what calibrate measures) and the passage vector lane, so the
two suggestions may disagree, and setting the context's semantic_floor moves both.

exit codes: 0 report printed (gap or overlap); 1 the server ran no vector lane,
every sweep search failed, or the server could not be reached; 2 usage error or
bad input. Searches that failed are listed apart and left out of both bands
"""

_VALUE_FLAGS: Final = {
    flag: f"{flag} needs a value"
    for flag in ("--eval", "--must-refuse", "--context", "--url", "--config", "--limit", "--out")
}


@dataclass(frozen=True)
class BandsArgs:
    eval_path: str
    must_refuse: str
    context: str
    url: str | None = None
    config: str | None = None
    window: int = DEFAULT_WINDOW
    out: str | None = None


def parse_args(argv: Sequence[str]) -> BandsArgs | None:
    """The command line; ``None`` means help. Raises :class:`UsageError`."""
    flags = scan_flags(argv, _VALUE_FLAGS, (), "refusal-bands")
    if flags is None:
        return None
    if flags.positionals:
        raise UsageError("refusal-bands takes no positional arguments")
    values = flags.values
    for required in ("--eval", "--must-refuse", "--context"):
        if required not in values:
            raise UsageError(f"{required} is required")
    window = DEFAULT_WINDOW
    if "--limit" in values:
        parsed = parse_positive(values["--limit"])
        if parsed is None or parsed > 1000:
            raise UsageError("--limit needs an integer within 1..=1000")
        window = parsed
    inputs = {flag: values.get(flag) for flag in ("--eval", "--must-refuse", "--config")}
    refuse_overlaps(inputs, {"--out": values.get("--out")})
    return BandsArgs(
        eval_path=values["--eval"],
        must_refuse=values["--must-refuse"],
        context=values["--context"],
        url=values.get("--url"),
        config=values.get("--config"),
        window=window,
        out=values.get("--out"),
    )


def report_lines(found: Bands) -> list[str]:
    """The printed report: both bands with their counts, the gap or the overlap."""

    def spelled(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.4f}"

    lines = [
        f"refusal-bands: sweep floor {SWEEP_FLOOR}",
        f"  upper band (answerable, best expected hit): {found.upper.height} of "
        f"{found.answerable} case(s), min {spelled(found.upper_min)}",
        f"  lower band (must-refuse, best hit): {found.lower.height} of {found.must_refuse} "
        f"case(s), max {spelled(found.lower_max)} (the others had no hit above the sweep floor)",
    ]
    if found.below_sweep:
        lines.append(
            f"  {len(found.below_sweep)} answerable case(s) whose best expected hit has no vector "
            f"lane even at {SWEEP_FLOOR} (no floor rescues them): {', '.join(found.below_sweep)}"
        )
    if found.not_served:
        lines.append(
            f"  {len(found.not_served)} answerable case(s) with no expected hit in the window: "
            f"{', '.join(found.not_served)}"
        )
    if found.failed:
        lines.append(
            f"  {len(found.failed)} case(s) whose sweep search failed, left out of both bands "
            f"and their counts: {', '.join(found.failed)}"
        )
    gap = found.gap
    if gap is None:
        lines.append("  gap: n/a (a band has no sample)")
    elif gap <= 0:
        lines.append(
            f"  overlap: {-gap:.4f} — no single floor separates the two populations "
            "(an honest finding, not an error)"
        )
    else:
        lines.append(f"  gap: {gap:.4f} — suggested floor {found.suggestion:.4f}")
    lines.append(
        "  one floor serves the gloss tier of /resolve and the passage vector lane: "
        "calibrate's suggestion may differ, and setting semantic_floor moves both"
    )
    return lines


def report_json(found: Bands) -> dict[str, Any]:
    """The ``--out`` document (cosines of the two bands, per case)."""

    def rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
        return [{"case_id": case_id, "cosine": cosine} for case_id, cosine in frame.iter_rows()]

    return {
        "taguru_eval_refusal_bands": 1,
        "sweep_floor": SWEEP_FLOOR,
        "upper": rows(found.upper),
        "lower": rows(found.lower),
        "below_sweep": list(found.below_sweep),
        "not_served": list(found.not_served),
        "failed": list(found.failed),
        "gap": found.gap,
        "suggested_floor": found.suggestion,
    }


def run_bands(args: BandsArgs, out: TextIO, _err: TextIO) -> int:
    eval_set = load_eval(args.eval_path)
    validate_limits(eval_set)
    refusals = load_must_refuse(args.must_refuse, eval_set.case_ids)
    env = effective_env(args.config, os.environ, lambda line: print(line, file=sys.stderr))
    base_url = resolve_base_url(args.url, env)
    token = resolve_token(env)

    async def measure() -> Any:
        async with TaguruClient(base_url, token) as client:
            await check_health(client, mask_url(base_url), args.url)
            await read_context(client, args.context, token_source(env, os.environ, args.config))
            # As run mode (exit 2): a misspelled source would read as a case never served.
            check_expected_sources(eval_set, args.context, await walk_sources(client, args.context))
            return await sweep(
                client,
                args.context,
                eval_set.cases,
                refusals.cases,
                args.window,
                DEFAULT_CONCURRENCY,
            )

    swept = loop.run(stoppable(measure()))
    plans = swept.plans
    failed = plans.filter(pl.col("outcome") != "searched")
    if plans.height and failed.height == plans.height:
        # Not "no vector lane": nothing answered, so nothing is known about one.
        case_id, message = failed.select("case_id", "message").row(0)
        raise RunError(
            one_line(
                f"refusal-bands: every sweep search failed ({failed.height} of {plans.height}; "
                f"first, {case_id}: {message}): nothing to measure"
            )
        )
    searched = plans.filter(pl.col("outcome") == "searched")
    if searched.filter(pl.col("vector_ran").fill_null(False)).is_empty():
        reasons = searched.get_column("vector_reason").drop_nulls().unique().to_list()
        because = f" ({'; '.join(reasons)})" if reasons else ""
        raise RunError(f"refusal-bands: the server ran no vector lane{because}: nothing to measure")
    answerable = searched.filter(pl.col("population") == POPULATION_EVAL).select(
        "case_index", "case_id"
    )
    refused_searched = searched.filter(pl.col("population") != POPULATION_EVAL).height
    found = replace(
        bands(swept.hits, eval_set.expected, answerable, refused_searched),
        failed=tuple(failed.get_column("case_id").to_list()),
    )
    out.write("\n".join(report_lines(found)) + "\n")
    if args.out is not None:
        write_report(args.out, json.dumps(report_json(found), ensure_ascii=False, indent=2) + "\n")
    return EXIT_OK


def main(argv: Sequence[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """``python -m taguru_eval refusal-bands …``; returns the exit code."""
    return run_subcommand(
        "refusal-bands", argv, parse_args, run_bands, HELP, stdout=stdout, stderr=stderr
    )
