"""A corpus this repository has never seen: generated from a seed, with its eval set.

Neither evaluator nor the reference server was tuned on it. Each document is a
markdown file in ``serve``'s layout (front matter with tags and a date, ATX
headings that become sections, paragraphs of pseudo-words, Latin and kana
mixed so both tokenizers are exercised); ``associations.jsonl`` and
``aliases.json`` name concepts that occur in the text. The eval set asks for
paragraphs by words taken from them, with graded relevance, and declares
concepts, labels, associations and citations (some that resolve, some that do
not), so every lane and every failure kind is used.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SYLLABLES = ("ka", "lo", "mi", "ren", "dus", "ta", "vor", "qui", "ne", "sa", "bel", "tor", "ix")
KANA = "かきくけこさしすせそたちつてとなにぬねのまみむめもやゆよらりるれろわ"
KANJI = "山川田村森林海空風雲雪花石鉄金銀酒米水火土"


@dataclass(frozen=True)
class Paragraph:
    source: str
    index: int
    words: tuple[str, ...]
    section: str | None


def _latin(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))


def _kana(rng: random.Random) -> str:
    head = "".join(rng.choice(KANJI) for _ in range(rng.randint(1, 2)))
    return head + "".join(rng.choice(KANA) for _ in range(rng.randint(1, 3)))


def write_unseen_corpus(folder: Path, *, seed: int, documents: int = 120) -> Path:
    """Write the corpus folder and ``eval.jsonl`` beside its sources; returns ``folder``."""
    rng = random.Random(seed)
    vocabulary = sorted({_latin(rng) for _ in range(400)} | {_kana(rng) for _ in range(200)})
    concepts = sorted({_latin(rng).capitalize() for _ in range(60)})
    labels = sorted({_latin(rng) + "-of" for _ in range(12)})
    paragraphs: list[Paragraph] = []
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "context.json").write_text(
        json.dumps({"description": f"unseen corpus, seed {seed}"}), encoding="utf-8"
    )
    for number in range(documents):
        source = f"docs/d{number:04d}.md"
        lines = [
            "---",
            f"tags: {rng.choice(('alpha', 'beta', 'gamma'))}, t{number % 7}",
            f"date: {1_600_000_000 + number * 86_400}",
            "---",
        ]
        index = 0
        section: str | None = None
        for block in range(rng.randint(2, 6)):
            if rng.random() < 0.4:
                section = f"{rng.choice(concepts)} {block}"
                lines.extend([f"# {section}", ""])
                index += 1  # a heading-only paragraph is a paragraph of its own
            words = tuple(rng.choice(vocabulary) for _ in range(rng.randint(8, 40)))
            mentioned = rng.choice(concepts)
            text = " ".join((*words[:4], mentioned, *words[4:]))
            lines.extend([text + ".", ""])
            paragraphs.append(Paragraph(source, index, (*words, mentioned), section))
            index += 1
        (folder / source).parent.mkdir(parents=True, exist_ok=True)
        (folder / source).write_text("\n".join(lines), encoding="utf-8")
    associations = []
    for paragraph in rng.sample(paragraphs, min(150, len(paragraphs))):
        associations.append(
            {
                "subject": paragraph.words[-1],
                "label": rng.choice(labels),
                "object": rng.choice(concepts),
                "weight": rng.choice((1.0, 0.5, 2.0, -1.0)),
                "source": paragraph.source,
                "paragraph": paragraph.index,
            }
        )
    (folder / "associations.jsonl").write_text(
        "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in associations),
        encoding="utf-8",
    )
    named = sorted({item["subject"] for item in associations})
    aliases = {"concepts": {name.lower() + "-alias": name for name in named[:10]}, "labels": {}}
    (folder / "aliases.json").write_text(json.dumps(aliases, ensure_ascii=False), "utf-8")
    cases = [_case(rng, n, paragraphs, associations, labels) for n in range(60)]
    header = json.dumps({"taguru_eval": 1, "name": f"unseen corpus, seed {seed}"})
    (folder / "eval.jsonl").write_text(
        header + "\n" + "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases),
        encoding="utf-8",
    )
    return folder


def _case(
    rng: random.Random,
    number: int,
    paragraphs: list[Paragraph],
    associations: list[dict[str, Any]],
    labels: list[str],
) -> dict[str, Any]:
    target = rng.choice(paragraphs)
    other = rng.choice(paragraphs)
    query = " ".join(rng.sample(target.words, min(4, len(target.words))))
    case: dict[str, Any] = {
        "case_id": f"unseen-{number:03d}",
        "query": query,
        "expected_sources": [
            {"source": target.source, "paragraphs": [target.index], "relevance": 3},
            {"source": other.source, "relevance": rng.choice((0, 1, 2))},
        ],
    }
    if number % 2 == 0:
        edge = rng.choice(associations)
        case["cues"] = [edge["subject"], edge["label"]]
        case["expected_concepts"] = [edge["subject"]]
        case["expected_labels"] = [rng.choice((edge["label"], rng.choice(labels)))]
        case["expected_associations"] = [
            {"subject": edge["subject"], "label": edge["label"], "object": edge["object"]}
        ]
    if number % 3 == 0:
        citation: dict[str, Any] = {"source": target.source, "paragraph": target.index}
        if target.section is not None and rng.random() < 0.5:
            citation["section"] = target.section
        if rng.random() < 0.5:
            citation["quote"] = " ".join(target.words[:3])
        missing = {"source": target.source, "paragraph": 500 + number}
        case["expected_citations"] = [citation, missing] if number % 9 == 0 else [citation]
    if number % 5 == 0:
        case["options"] = {"limit": rng.choice((1, 3, 20))}
    return case
