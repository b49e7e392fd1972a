"""The evaluator modes whose requests the reference server is replayed against.

Interim home of the list: the lead's ``support.differential`` (one declaration
of the modes for both differential suites) replaces it once it is on main; the
replay suite takes its modes as a parameter (``support.replay.record_runs``),
so the switch is an import. The shape is the same: a :class:`Mode` is one
command line on one loaded context, ``ours`` the flags only this package has
(``--must-refuse``, ``--answers``); its arguments name the repository's
``data/`` as ``{data}`` and the folder :func:`write_inputs` fills as
``{inputs}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.paths import DATA

CONTEXTS = ("sake", "handbook")
"""The demo corpora every server of the suite holds."""


@dataclass(frozen=True)
class Mode:
    """One evaluate command line, ``{data}``/``{inputs}`` standing for folders."""

    name: str
    args: tuple[str, ...]
    ours: tuple[str, ...] = ()

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
    Mode(
        "handbook-assembly",
        (*HANDBOOK, "--assembly"),
        ("--must-refuse", "{data}/handbook/must_refuse.jsonl"),
    ),
    Mode("handbook-assembly-budgets", (*HANDBOOK, "--assembly", *BUDGETS)),
    Mode(
        "failed-citations-past-the-cap",
        ("--eval", "{inputs}/failed_citations.eval.jsonl", "--context", "sake"),
    ),
    Mode("long-cue", ("--eval", "{inputs}/long_cue.eval.jsonl", "--context", "sake")),
    Mode("missing-context", ("--eval", "{data}/sake/eval.jsonl", "--context", "no-such-context")),
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
    """Cues over taguru's 1024-byte resolve cap, one exactly at it, on both resolve routes."""
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
            "expected_labels": ["所在地"],
        },
    ]
    return _eval_lines("long cues", cases)


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
"""Answer text for three handbook cases (``--answers``; checked client-side)."""


def _answers() -> str:
    lines = [json.dumps({"taguru_eval_answers": 1, "name": "handbook answers"})]
    lines.extend(
        json.dumps({"case_id": case_id, "answers": answers})
        for case_id, answers in HANDBOOK_ANSWERS.items()
    )
    return "\n".join(lines) + "\n"


def write_inputs(folder: Path) -> Path:
    """Write the files the modes name under ``{inputs}``; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "failed_citations.eval.jsonl": _failed_citations(),
        "long_cue.eval.jsonl": _long_cue(),
        "strict.thresholds.json": json.dumps(STRICT_THRESHOLDS, indent=2) + "\n",
        "handbook.answers.jsonl": _answers(),
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder
