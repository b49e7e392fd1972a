"""The ``check: resolve`` conformance vectors replayed through ``/resolve`` and ``/resolve_label``.

The names are stored the way a client stores them — as the subjects, labels
and objects of associations — and the aliases through ``POST …/aliases``, so
the route's namespaces, alias refinement, floors and wire shape (``tier``
always ``lexical``, ``gloss`` on the first eight) are checked end to end.
Filler names live only in the *other* namespace, so the namespace under test
holds exactly the vector's spellings.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.refserver import context_path, in_process
from support.vectors import vector_cases

NAME = "vectors"
FILLER_CONCEPT = "filler-concept"
FILLER_LABEL = "filler-label"
UNDERSTOOD = {
    "prefix", "candidates", "empty", "len", "contains_names", "names", "excludes_names",
    "tolerance",
}  # fmt: skip


def associations(concepts: list[str], labels: list[str]) -> list[dict[str, Any]]:
    anchor_label = labels[0] if labels else FILLER_LABEL
    anchor_concept = concepts[0] if concepts else FILLER_CONCEPT
    items = [{"subject": c, "label": anchor_label, "object": c, "weight": 1.0} for c in concepts]
    items += [
        {"subject": anchor_concept, "label": label, "object": anchor_concept, "weight": 1.0}
        for label in labels
    ]
    return items


async def served(data: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The served candidates; None when the population itself is refused over HTTP."""
    route = "/resolve" if data["namespace"] == "concept" else "/resolve_label"
    request: dict[str, Any] = {"cue": data["cue"]}
    if "dice_floor" in data:
        request["dice_floor"] = data["dice_floor"]
    async with in_process() as server:
        await server.create(NAME)
        await server.associate(NAME, associations(data["concepts"], data["labels"]))
        aliases = {
            "concepts": data.get("concept_aliases", {}),
            "labels": data.get("label_aliases", {}),
        }
        if any("" in pairs for pairs in aliases.values()):
            # An empty alias spelling only exists inside the index primitive;
            # over HTTP registering one is refused, which is what is checked here.
            refused = await server.call("POST", context_path(NAME, "/aliases"), aliases)
            assert refused.status_code == 400, refused.text
            assert refused.json()["code"] == "invalid_argument"
            return None
        if aliases["concepts"] or aliases["labels"]:
            await server.ok("POST", context_path(NAME, "/aliases"), aliases)
        result: list[dict[str, Any]] = await server.ok("POST", context_path(NAME, route), request)
    return result


@pytest.mark.parametrize("case", vector_cases("resolve", "resolve"))
async def test_resolve_vector_over_http(case: dict[str, Any]) -> None:
    expected = case["expected"]
    unknown = set(expected) - UNDERSTOOD
    assert not unknown, f"expected keys this test does not understand: {sorted(unknown)}"
    result = await served(case["input"])
    if result is None:
        return
    assert all(item["tier"] == "lexical" for item in result)
    assert all(("gloss" in item) == (index < 8) for index, item in enumerate(result))
    names = [item["name"] for item in result]
    tolerance = expected.get("tolerance", 1e-9)
    for key, value in expected.items():
        if key == "candidates":
            assert [{k: c[k] for k in ("name", "score", "kind")} for c in result] == value
        elif key == "prefix":
            assert len(result) >= len(value)
            for want, got in zip(value, result, strict=False):
                check_prefix_entry(want, got, tolerance)
        elif key == "empty":
            assert (not result) is value
        elif key == "len":
            assert len(result) == value
        elif key == "names":
            assert names == value
        elif key == "contains_names":
            assert set(value) <= set(names)
        elif key == "excludes_names":
            assert not set(value) & set(names)


def check_prefix_entry(want: dict[str, Any], got: dict[str, Any], tolerance: float) -> None:
    for field, value in want.items():
        if field == "score_approx":
            assert abs(got["score"] - value) <= tolerance
        elif field == "score_between":
            low, high = value
            assert low < got["score"] < high
        else:
            assert got[field] == value, field
