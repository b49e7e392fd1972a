"""The ``expected`` table against a row-by-row reading of the loaded cases.

Both builders of the table (from the decoded cases and from Arrow's parse)
share one columnar assembly; this holds that assembly to the module
docstring of :mod:`taguru_eval.inputs.evalcase` written out as a plain loop:
rows by case, then kind, then declaration; one source row per distinct
listed paragraph (a null paragraph when none is listed), numbered per case.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from support.eval_files import valid_files

from taguru_eval.inputs.dataset import ABSENT, EvalCase, load_eval_fast, load_eval_strict
from taguru_eval.tables.schemas import EXPECTED


def rows_of(case_index: int, case: EvalCase) -> list[dict[str, Any]]:
    def row(kind: str, entry_index: int, item_index: int, **values: Any) -> dict[str, Any]:
        blank = dict.fromkeys(EXPECTED)
        return blank | {
            "case_id": case.case_id,
            "case_index": case_index,
            "kind": kind,
            "entry_index": entry_index,
            "item_index": item_index,
            **values,
        }

    rows = []
    item = 0
    for entry_index, source in enumerate(case.expected_sources):
        for paragraph in dict.fromkeys(source.paragraphs) or [None]:
            rows.append(
                row(
                    "source",
                    entry_index,
                    item,
                    source=source.source,
                    paragraph=paragraph,
                    relevance=source.relevance,
                )
            )
            item += 1
    for kind, texts in (("concept", case.expected_concepts), ("label", case.expected_labels)):
        rows += [row(kind, index, index, text=text) for index, text in enumerate(texts)]
    for index, association in enumerate(case.expected_associations):
        parts = {"subject": association.subject, "label": association.label}
        rows.append(row("association", index, index, object=association.object, **parts))
    for index, citation in enumerate(case.expected_citations):
        declared = citation.section is not ABSENT
        rows.append(
            row(
                "citation",
                index,
                index,
                source=citation.source,
                paragraph=citation.paragraph,
                section_declared=declared,
                section=citation.section if declared else None,
                quote=citation.quote,
            )
        )
    return rows


def assert_both_builders_give_the_loop_rows(raw: bytes) -> None:
    strict = load_eval_strict(raw.decode("utf-8"), "eval.jsonl")
    fast = load_eval_fast(raw, "eval.jsonl")
    assert fast is not None
    wanted = [row for index, case in enumerate(strict.cases) for row in rows_of(index, case)]
    assert strict.expected.schema == EXPECTED
    assert strict.expected.to_dicts() == wanted
    assert fast.expected.to_dicts() == wanted


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=valid_files())
def test_both_builders_give_the_rows_of_a_plain_loop(raw: bytes) -> None:
    assert_both_builders_give_the_loop_rows(raw)


def test_a_large_file_keeps_declaration_order() -> None:
    # Large enough for Polars to sort in parallel, where only a total key keeps order.
    generator = random.Random(15)
    lines = ['{"taguru_eval": 1}']
    for number in range(4000):
        paragraphs = [generator.randrange(4) for _ in range(generator.randrange(4))]
        concepts = [f"c{generator.randrange(9)}" for _ in range(generator.randrange(5))]
        citations = [
            {"source": f"s{generator.randrange(3)}", "paragraph": generator.randrange(9)}
            for _ in range(generator.randrange(4))
        ]
        case = {
            "case_id": f"case-{number}",
            "query": "q",
            "expected_sources": [
                {"source": f"s{index}", "paragraphs": paragraphs[index:]} for index in range(3)
            ],
            "expected_concepts": concepts,
            "expected_labels": concepts[::-1],
            "expected_citations": citations,
        }
        lines.append(json.dumps(case))
    assert_both_builders_give_the_loop_rows(("\n".join(lines) + "\n").encode())
