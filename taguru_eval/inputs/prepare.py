"""Everything a run does before its first network call (EVALUATE.md §2.3 steps 2–6).

:func:`prepare_run` loads and validates every input in the reference's order —
eval.jsonl, ``options.limit``, the ``--assembly`` filter warnings, the
must-refuse file (step 4a), the thresholds file, then config and base URL —
so a bad input always exits 2 without touching the network. The runner takes the returned
:class:`PreparedRun`, prints ``evaluate → {masked_url}`` (step 7) and starts
the network phase.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from taguru_eval._base.text import one_line
from taguru_eval.errors import PREFIX, UsageError
from taguru_eval.inputs.answers import AnswerSet, load_answers
from taguru_eval.inputs.config import (
    effective_env,
    mask_url,
    resolve_base_url,
    resolve_secrets,
    resolve_token,
    token_source,
)
from taguru_eval.inputs.dataset import EvalSet, load_eval, validate_limits
from taguru_eval.inputs.must_refuse import MustRefuseSet, load_must_refuse
from taguru_eval.inputs.outputs import refuse_overlaps, require_output_directories
from taguru_eval.inputs.proxy import ProxyConfig, proxy_config
from taguru_eval.inputs.thresholds import Thresholds, load_run_thresholds
from taguru_eval.options import RunOptions, flag_values

Stderr = Callable[[str], None]

ASSEMBLY_FILTER_WARNING = (
    "case '{case_id}': options.tags/since/until are not applied under --assembly "
    "(POST /contexts/{{name}}/evidence has no such request fields)"
)


@dataclass(frozen=True)
class PreparedRun:
    """A run whose inputs are all valid; nothing here has touched the network.

    ``warnings`` are the texts (without the ``taguru: evaluate: `` prefix) that
    go into the artifact's ``warnings`` list; ``must_refuse_warnings`` those
    that go into its ``abstention`` block. ``token`` (the one sent) and
    ``secrets`` (every configured token, redacted from whatever the server
    says) are excluded from ``repr`` so they cannot leak into a log line.
    ``proxies`` are the proxy settings of the environment (after ``--config``).
    """

    options: RunOptions
    eval_set: EvalSet
    thresholds: Thresholds | None
    base_url: str
    masked_url: str
    warnings: tuple[str, ...] = ()
    must_refuse: MustRefuseSet | None = None
    must_refuse_warnings: tuple[str, ...] = ()
    answers: AnswerSet | None = None
    token: str | None = field(default=None, repr=False)
    secrets: tuple[str, ...] = field(default=(), repr=False)
    token_source: str | None = None
    """The variable the sent token came from (never the token): a 401 names it."""
    proxies: ProxyConfig = field(default_factory=ProxyConfig)
    selection: Mapping[str, Any] | None = None
    """``inputs.selection`` when a selection flag was given (``eval_set`` then holds
    only the selected cases); None for a run of the whole file."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def assembly_warnings(eval_set: EvalSet | MustRefuseSet) -> list[str]:
    """§2.3 step 4: one text per case whose tags/since/until ``--assembly`` cannot
    apply (an eval case, or a must-refuse case: ABSTENTION.md §3.2)."""
    prefix = "must-refuse " if isinstance(eval_set, MustRefuseSet) else ""
    return [
        prefix + ASSEMBLY_FILTER_WARNING.format(case_id=case.case_id)
        for case in eval_set.cases
        if case.options.tags or case.options.since is not None or case.options.until is not None
    ]


def _outputs(options: RunOptions) -> dict[str, str | None]:
    """The files the run writes, once checked against what it reads (exit 2)."""
    outputs = flag_values(options, "out", "junit", "summary")
    inputs = flag_values(options, "eval_path", "thresholds", "must_refuse", "answers", "config")
    refuse_overlaps(inputs, outputs)
    # The summary's base is read before the run: --out may replace it (the last
    # run's artifact as the next run's base), the reports may not.
    reports = flag_values(options, "junit", "summary")
    refuse_overlaps(flag_values(options, "summary_base"), reports)
    if options.store_dir == "":
        raise UsageError("--store needs a directory, not an empty one")
    return outputs


def prepare_run(
    options: RunOptions,
    env: Mapping[str, str] | None = None,
    *,
    stderr: Stderr = _stderr,
) -> PreparedRun:
    """Steps 2–6 of §2.3; any problem raises a project error (exit 2).

    ``env`` defaults to ``os.environ`` and is never modified: the ``--config``
    file is applied to a copy. ``stderr`` receives each complete diagnostic
    line as it happens (so warnings printed before a later failure still show).
    """
    environment: Mapping[str, str] = os.environ if env is None else env
    outputs = _outputs(options)
    eval_set = load_eval(options.eval_path)
    validate_limits(eval_set)
    # The other files are checked against every case of the file, as a full run
    # checks them; only the selected cases run (dataset -> lanes, one way).
    case_ids = eval_set.case_ids
    selection: dict[str, Any] | None = None
    if options.selects:
        # Loaded only for a selection: a plain run imports what it always did.
        from taguru_eval.inputs.selection import select_cases

        selected = select_cases(eval_set, options)
        eval_set, selection = selected.eval_set, selected.block
    warnings = _say(assembly_warnings(eval_set), stderr) if options.assembly else []
    must_refuse = (
        None if options.must_refuse is None else load_must_refuse(options.must_refuse, case_ids)
    )
    must_refuse_warnings = (
        _say(assembly_warnings(must_refuse), stderr)
        if must_refuse is not None and options.assembly
        else []
    )
    answers = None if options.answers is None else load_answers(options.answers, case_ids)
    if selection is not None:
        from taguru_eval.inputs.selection import selected_answers

        answers = selected_answers(answers, eval_set)
    thresholds = (
        None
        if options.thresholds is None
        else load_run_thresholds(
            options.thresholds,
            case_ids,
            must_refuse=must_refuse is not None,
            answers=answers is not None,
            repeat=options.repeat > 1,
        )
    )
    resolved_env = effective_env(options.config, environment, stderr)
    base_url = resolve_base_url(options.url, resolved_env)
    require_output_directories(outputs)
    return PreparedRun(
        options=options,
        eval_set=eval_set,
        thresholds=thresholds,
        base_url=base_url,
        masked_url=mask_url(base_url),
        warnings=tuple(warnings),
        must_refuse=must_refuse,
        must_refuse_warnings=tuple(must_refuse_warnings),
        answers=answers,
        token=resolve_token(resolved_env),
        secrets=resolve_secrets(resolved_env),
        token_source=token_source(resolved_env, environment, options.config),
        proxies=proxy_config(resolved_env),
        selection=selection,
    )


def _say(warnings: Iterable[str], stderr: Callable[[str], None]) -> list[str]:
    """Each warning on its own stderr line (one line, prefixed); the warnings said."""
    said = list(warnings)
    for warning in said:
        stderr(one_line(f"{PREFIX}{warning}"))
    return said
