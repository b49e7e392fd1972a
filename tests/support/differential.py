"""The modes both differential suites run, declared once.

A :class:`Mode` is one command line of taguru's ``evaluate`` (every flag in it
is one taguru knows) on one of the loaded contexts; ``ours`` adds flags only
this package has (``--must-refuse``, ``--answers``), which the request-replay
suite uses and the evaluator suite leaves out. Files the modes need beyond
``data/`` are written by :func:`write_inputs`; a mode's arguments name them
with ``{data}`` (the repository's ``data/``) and ``{inputs}`` (that folder).

:func:`run_taguru` and :func:`run_ours` run one mode with each evaluator in a
working folder of its own (``--out evaluation.json`` there), so the two tools'
outputs can be compared byte for byte; :func:`normalized_artifact` masks what
the issue allows to differ (latencies, the clock, ``inputs.concurrency``, the
definitions prose).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.paths import DATA

CONTEXTS = ("sake", "handbook")
"""The demo corpora every server of the suites holds (``load``ed from ``data/``)."""

OUT = "evaluation.json"

TOKEN = "differential-token-7f3a"
"""The bearer token of the authenticated servers (never printed by either tool)."""

HINT = "  hint: "
"""Our own suggestion lines after a taguru line (docs/decisions.md): dropped before comparing."""


@dataclass(frozen=True)
class Mode:
    """One evaluate command line, ``{data}``/``{inputs}`` standing for folders."""

    name: str
    args: tuple[str, ...]
    ours: tuple[str, ...] = ()
    """Flags only this package has: the replay suite adds them, the evaluator suite does not."""

    def argv(self, inputs: Path, *, ours: bool = False) -> list[str]:
        spelled = (*self.args, *(self.ours if ours else ()))
        return [arg.format(data=DATA, inputs=inputs) for arg in spelled]


SAKE = ("--eval", "{data}/sake/eval.jsonl", "--context", "sake")
HANDBOOK = ("--eval", "{data}/handbook/eval.jsonl", "--context", "handbook")
BUDGETS = ("--max-items", "3", "--max-bytes", "900", "--max-tokens", "300")

MODES: tuple[Mode, ...] = (
    Mode("sake-baseline", SAKE, ("--must-refuse", "{data}/sake/must_refuse.jsonl")),
    Mode("sake-gate-pass", (*SAKE, "--thresholds", "{data}/sake/thresholds.json")),
    Mode("sake-gate-fail", (*SAKE, "--thresholds", "{inputs}/strict.thresholds.json")),
    Mode("sake-assembly", (*SAKE, "--assembly")),
    Mode("sake-budgets", (*SAKE, *BUDGETS)),
    Mode("sake-assembly-budgets", (*SAKE, "--assembly", *BUDGETS)),
    Mode("sake-rerank-without-provider", (*SAKE, "--assembly", "--rerank", "rerank-model-x")),
    Mode(
        "handbook-baseline",
        HANDBOOK,
        (
            "--must-refuse",
            "{data}/handbook/must_refuse.jsonl",
            "--answers",
            "{inputs}/handbook.answers.jsonl",
        ),
    ),
    Mode("handbook-gate", (*HANDBOOK, "--thresholds", "{data}/handbook/thresholds.json")),
    Mode("handbook-assembly", (*HANDBOOK, "--assembly")),
    Mode(
        "failed-citations-past-the-cap",
        ("--eval", "{inputs}/failed_citations.eval.jsonl", "--context", "sake"),
    ),
    Mode("long-cue", ("--eval", "{inputs}/long_cue.eval.jsonl", "--context", "sake")),
    Mode("limit-out-of-range", ("--eval", "{inputs}/limit.eval.jsonl", "--context", "sake")),
    Mode("config-file", (*SAKE, "--config", "{inputs}/taguru.config")),
    Mode("missing-context", ("--eval", "{data}/sake/eval.jsonl", "--context", "no-such-context")),
    Mode("bad-flag", ("--eval", "{data}/sake/eval.jsonl", "--contxt", "sake")),
)


def _eval_lines(name: str, cases: Sequence[Mapping[str, Any]]) -> str:
    lines = [json.dumps({"taguru_eval": 1, "name": name}, ensure_ascii=False)]
    lines.extend(json.dumps(case, ensure_ascii=False) for case in cases)
    return "\n".join(lines) + "\n"


def _failed_citations() -> str:
    """Five cases whose citations fail (no such source, no such paragraph): more
    failures than the three a lane's stdout lines name."""
    cases = [
        {
            "case_id": f"cite-fails-{n:02d}",
            "query": "青嶺酒造の沿革",
            "expected_sources": [{"source": "corpus/brewery.md", "relevance": 1}],
            "expected_citations": [
                {"source": f"corpus/missing-{n}.md", "paragraph": 0},
                {"source": "corpus/brewery.md", "paragraph": 900 + n},
            ],
        }
        for n in range(1, 6)
    ]
    return _eval_lines("citations that fail", cases)


def _long_cue() -> str:
    """A cue over taguru's 1024-byte resolve cap beside one exactly at it."""
    at_cap = "青" * 341 + "a"  # 3 * 341 + 1 = 1024 bytes
    over_cap = "青" * 342  # 1026 bytes
    cases = [
        {
            "case_id": "cue-over-the-cap",
            "query": "青嶺酒造",
            "cues": [over_cap, "青嶺"],
            "expected_concepts": ["青嶺酒造"],
            "expected_labels": ["所在地"],
        },
        {
            "case_id": "cue-at-the-cap",
            "query": "青嶺酒造",
            "cues": [at_cap],
            "expected_concepts": ["青嶺酒造"],
        },
    ]
    return _eval_lines("long cues", cases)


def _limit_out_of_range() -> str:
    """A limit of 1001 on the fourth physical line (a blank line counts)."""
    good = {"case_id": "fine", "query": "青嶺酒造", "options": {"limit": 1000}}
    bad = {"case_id": "too-many", "query": "青嶺酒造", "options": {"limit": 1001}}
    header = json.dumps({"taguru_eval": 1, "name": "limits"})
    return "\n".join([header, json.dumps(good), "", json.dumps(bad)]) + "\n"


STRICT_THRESHOLDS = {
    "taguru_evaluate_thresholds": 1,
    "aggregate": {"recall.recall_at_k": {"min": 0.99}, "recall.ndcg": {"min": 0.97}},
    "cases": {"default": {"recall.mrr": {"min": 1.0}, "coverage.concepts": {"min": 1.0}}},
}
"""Bounds the sake demo misses, aggregate and per case."""

HANDBOOK_ANSWERS = {
    "remote-days-h01": ["three days"],
    "stipend-h02": ["USD 600", "600"],
    "vpn-fullwidth-h04": ["WireGuard"],
}
"""Answer text for three handbook cases (``--answers``, one of the replay suite's flags)."""


def _answers() -> str:
    lines = [json.dumps({"taguru_eval_answers": 1, "name": "handbook answers"})]
    lines.extend(
        json.dumps({"case_id": case_id, "answers": answers})
        for case_id, answers in HANDBOOK_ANSWERS.items()
    )
    return "\n".join(lines) + "\n"


CONFIG = "\n".join(
    [
        "# a config file with keys only taguru 0.9.7 knows, and one typo",
        "TAGURU_EXTRACT_REDACT=1",
        "TAGURU_EXTRACT_CANDIDATES=5",
        "TAGURU_FLUSH_SECS=5",
        "TAGURU_FLUSH_SECZ=5",
        "",
    ]
)


def write_inputs(folder: Path) -> Path:
    """Write the files the modes name under ``{inputs}``; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "failed_citations.eval.jsonl": _failed_citations(),
        "long_cue.eval.jsonl": _long_cue(),
        "limit.eval.jsonl": _limit_out_of_range(),
        "strict.thresholds.json": json.dumps(STRICT_THRESHOLDS, indent=2) + "\n",
        "taguru.config": CONFIG,
        "handbook.answers.jsonl": _answers(),
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@dataclass(frozen=True)
class Outcome:
    """What one evaluator did: exit code, the two streams, the artifact's text."""

    exit_code: int
    stdout: str
    stderr: str
    artifact: str | None


def _environment(token: str | None) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("TAGURU_") or key in ("TAGURU_BIN", "TAGURU_EVAL_SHARED")
    }
    if token is not None:
        env["TAGURU_API_TOKEN"] = token
    return env


def _outcome(argv: list[str], workdir: Path, token: str | None, out: str = OUT) -> Outcome:
    workdir.mkdir(parents=True, exist_ok=True)
    completed = subprocess.run(
        argv,
        cwd=workdir,
        capture_output=True,
        text=True,
        env=_environment(token),
        timeout=300,
        check=False,
    )
    written = workdir / out
    artifact = written.read_text(encoding="utf-8") if written.is_file() else None
    return Outcome(completed.returncode, completed.stdout, completed.stderr, artifact)


def run_taguru(
    binary: Path, args: Sequence[str], workdir: Path, *, token: str | None = None
) -> Outcome:
    """``taguru evaluate ARGS --out evaluation.json`` in ``workdir``."""
    return _outcome([str(binary), "evaluate", *args, "--out", OUT], workdir, token)


def run_ours(args: Sequence[str], workdir: Path, *, token: str | None = None) -> Outcome:
    """``python -m taguru_eval ARGS --out evaluation.json --no-store`` in ``workdir``."""
    argv = [sys.executable, "-m", "taguru_eval", *args, "--out", OUT, "--no-store"]
    return _outcome(argv, workdir, token)


CHANGES = "changes.jsonl"


def run_compare(binary: Path | None, base: Path, head: Path, workdir: Path) -> Outcome:
    """``compare BASE HEAD --out changes.jsonl`` in ``workdir``: taguru's own with
    ``binary``, ours without; the outcome's ``artifact`` is the changes' text."""
    tool = [str(binary), "evaluate"] if binary else [sys.executable, "-m", "taguru_eval"]
    argv = [*tool, "compare", str(base), str(head), "--out", CHANGES]
    return _outcome(argv, workdir, None, out=CHANGES)


def comparable_changes(text: str) -> str:
    """changes.jsonl with the compare's own clock masked: the header's first
    ``generated_at`` is when that compare ran (the sides' are their files')."""
    header, _, records = text.partition("\n")
    stamp = header.index('"generated_at":"') + len('"generated_at":"')
    return header[:stamp] + MASKED + header[header.index('"', stamp) :] + "\n" + records


def assert_same(theirs: Outcome, ours: Outcome) -> None:
    """Both evaluators did the same: exit code, stdout, stderr (our hints aside)
    and the artifact, as :func:`normalized_artifact` compares it."""
    assert ours.exit_code == theirs.exit_code, (theirs.stderr, ours.stderr)
    assert ours.stdout == theirs.stdout
    assert without_hints(ours.stderr) == theirs.stderr
    assert (ours.artifact is None) == (theirs.artifact is None)
    if theirs.artifact is not None and ours.artifact is not None:
        assert normalized_artifact(ours.artifact) == normalized_artifact(theirs.artifact)


def without_hints(stderr: str) -> str:
    """Our stderr without the suggestion lines taguru does not print."""
    return "".join(line for line in stderr.splitlines(True) if not line.startswith(HINT))


class Number:
    """A JSON number kept as it was spelled: ``1.0`` is not ``1``, ``-0.0`` not ``0.0``."""

    def __init__(self, spelling: str) -> None:
        self.spelling = spelling

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Number) and other.spelling == self.spelling

    def __hash__(self) -> int:
        return hash(self.spelling)

    def __repr__(self) -> str:
        return self.spelling


MASKED = "<masked>"

UNCOMPARED = (("generated_at",), ("inputs", "out"))
"""Paths of the artifact that differ between any two runs (with the latencies)."""


PROSE = ("description", "caveat")
"""The definitions' prose: ours is in our own words (EVALUATE.md §5.3)."""


def _is_object(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, tuple) for item in value)


def _mask(value: Any, path: tuple[str, ...]) -> Any:
    if _is_object(value):
        masked = []
        for key, item in value:
            here = (*path, key)
            if key == "latency_ms" or key.startswith("latency.") or here in UNCOMPARED:
                masked.append((key, MASKED))
            elif here == ("inputs", "concurrency"):
                continue  # our one additive key (DESIGN.md)
            elif path[:1] == ("definitions",) and key in PROSE:
                masked.append((key, MASKED))
            else:
                masked.append((key, _mask(item, here)))
        return masked
    if isinstance(value, list):
        return [_mask(item, path) for item in value]
    return value


def normalized_artifact(text: str) -> Any:
    """The artifact as ordered (key, value) pairs, numbers as spelled, the allowed
    differences masked."""
    parsed = json.loads(
        text,
        object_pairs_hook=lambda pairs: [(key, value) for key, value in pairs],
        parse_float=Number,
        parse_int=Number,
    )
    return _mask(parsed, ())
