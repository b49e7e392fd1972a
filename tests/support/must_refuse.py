"""The lease corpus the must-refuse tests share: two contexts (without and with the
toy vector lane), an eval set, must-refuse files, and a JSONL writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CORPUS = {
    "corpus/rent.md": (
        "# Rent\n\nRent is due on the first day of each month.\n\n"
        "A late rent payment incurs a fee of fifty dollars after five days.\n"
    ),
    "corpus/repairs.md": (
        "---\ntags: repairs\n---\n# Repairs\n\n"
        "The landlord repairs heating and plumbing within seven days of written notice.\n\n"
        "Tenants may not paint the walls without written consent from the landlord.\n"
    ),
    "corpus/deposit.md": (
        "# Security deposit\n\n"
        "The security deposit is returned within thirty days after the lease ends.\n"
    ),
    "associations.jsonl": json.dumps(
        {
            "subject": "Landlord",
            "label": "repairs",
            "object": "Heating",
            "weight": 1.0,
            "source": "corpus/repairs.md",
            "paragraph": 1,
        }
    )
    + "\n",
}

EVAL = [
    {
        "case_id": "rent-due",
        "query": "When is rent due each month?",
        "expected_sources": [{"source": "corpus/rent.md", "paragraphs": [1], "relevance": 3}],
    },
    {
        # Served by BM25 alone: the semantic rule abstains although the right
        # paragraph is there (a false refusal with the expected source present).
        "case_id": "late-fee",
        "query": "How much is the fee?",
        "expected_sources": [{"source": "corpus/rent.md", "paragraphs": [2], "relevance": 3}],
    },
    {
        "case_id": "deposit-days",
        "query": "When is the security deposit returned after the lease ends?",
        "expected_sources": [{"source": "corpus/deposit.md", "paragraphs": [1], "relevance": 3}],
    },
    {"case_id": "no-expectation", "query": "heating"},
]

MUST_REFUSE = [
    {
        "case_id": "mr-volcano",
        "query": "Which volcano erupted near Reykjavik in 2010?",
        "kind": "out_of_corpus",
        "why": "no term in common with the corpus",
    },
    {
        "case_id": "mr-pets",
        "query": "Are pets allowed in the garden?",
        "cues": ["pet policy"],
        "kind": "adjacent",
        "why": "shares only 'the' with the corpus: BM25 serves it, the vector lane does not",
    },
    {
        "case_id": "mr-insurance",
        "query": "Does the landlord carry insurance?",
        "cues": ["landlord insurance"],
        "kind": "adjacent",
    },
    {
        "case_id": "mr-tagged",
        "query": "rent",
        "options": {"tags": ["no-such-tag"]},
    },
]

SURFACING = [
    {
        "case_id": "mr-deposit-refund",
        "query": "When is the security deposit returned after the lease ends?",
        "kind": "out_of_corpus",
    }
]


def write_jsonl(path: Path, header: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """A header line and one JSON line per row; returns the path as a string."""
    lines = [json.dumps(header), *(json.dumps(row, ensure_ascii=False) for row in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def lease_data(root: Path) -> Path:
    """``root/data`` with contexts ``lease`` (no vector lane) and ``lease-vec``
    (the toy vector lane on), plus eval.jsonl, mr.jsonl, surfacing.jsonl and
    clean.jsonl in ``root``; returns the data folder."""
    for context, meta in (("lease", {}), ("lease-vec", {"vector_lane": True})):
        for relative, text in CORPUS.items():
            target = root / "data" / context / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        (root / "data" / context / "context.json").write_text(
            json.dumps({"description": context, **meta}), encoding="utf-8"
        )
    write_jsonl(root / "eval.jsonl", {"taguru_eval": 1, "name": "lease"}, EVAL)
    write_jsonl(root / "mr.jsonl", {"taguru_eval_must_refuse": 1, "name": "lease mr"}, MUST_REFUSE)
    write_jsonl(root / "surfacing.jsonl", {"taguru_eval_must_refuse": 1}, SURFACING)
    write_jsonl(root / "clean.jsonl", {"taguru_eval_must_refuse": 1}, MUST_REFUSE[:1])
    return root / "data"
