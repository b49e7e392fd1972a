"""Schema documents: install, read back, and the off / warn / strict judgment of writes."""

from __future__ import annotations

from typing import Any

import pytest
from support.refserver import Server, context_path, in_process

NAME = "typed"


def document(mode: str = "warn", **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": 1,
        "mode": mode,
        "closed_labels": False,
        "types": {"Brewery": {"is_a": ["Organization"]}, "Organization": {}, "Person": {}},
        "relations": {"杜氏": {"domain": ["Brewery"], "range": ["Person"]}},
    }
    doc.update(changes)
    return doc


def item(subject: str, label: str, obj: str) -> dict[str, Any]:
    return {"subject": subject, "label": label, "object": obj, "weight": 1.0}


async def install(server: Server, body: Any) -> Any:
    return await server.call("PUT", context_path(NAME, "/schema"), body)


async def test_install_read_back_and_revision() -> None:
    async with in_process() as server:
        await server.create(NAME)
        missing = await server.call("GET", context_path(NAME, "/schema"))
        installed = await server.ok("PUT", context_path(NAME, "/schema"), document())
        again = await install(server, document())
        entry = await server.entry(NAME)
        await install(server, document("strict"))
        changed = await server.entry(NAME)
        read_back = await server.ok("GET", context_path(NAME, "/schema"))
    assert (missing.status_code, missing.json()["code"]) == (404, "no_schema")
    assert missing.json()["error"] == f"context '{NAME}' has no schema document"
    assert installed == {
        "closed_labels": False,
        "mode": "warn",
        "relations": {"杜氏": {"domain": ["Brewery"], "range": ["Person"]}},
        "schema": 1,
        "types": {
            "Brewery": {"is_a": ["Organization"]},
            "Organization": {"is_a": []},
            "Person": {"is_a": []},
        },
    }
    assert again.status_code == 200
    assert (entry["schema_mode"], entry["revision"]["config"]) == ("warn", 1)  # same doc: no bump
    assert (changed["schema_mode"], changed["revision"]["config"]) == ("strict", 2)
    assert read_back["mode"] == "strict"


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({**document(), "extra": 1}, 422, "unknown field `extra`"),
        (document("loud"), 422, "mode: unknown variant `loud`"),
        ({k: v for k, v in document().items() if k != "types"}, 422, "missing field `types`"),
        (document(schema=2), 400, "schema version 2 is not 1"),
        (
            document(relations={"schema:type": {}}),
            400,
            "relation 'schema:type' is reserved for type assertions — rename it",
        ),
        (
            document(types={"A": {"is_a": ["B"]}, "B": {"is_a": ["A"]}}),
            400,
            "is_a reaches itself through a cycle",
        ),
        (
            document(types={f"T{i}": {"is_a": [f"T{i + 1}"]} for i in range(9)}),
            400,
            "stacks more than 8 types",
        ),
    ],
)
async def test_refused_documents(body: Any, status: int, message: str) -> None:
    async with in_process() as server:
        await server.create(NAME)
        response = await install(server, body)
        entry = await server.entry(NAME)
    assert response.status_code == status
    assert message in response.json()["error"]
    assert entry["schema_mode"] is None and entry["revision"]["config"] == 0


async def test_warn_reports_violations_beside_the_applied_count() -> None:
    async with in_process() as server:
        await server.create(NAME)
        await install(server, document())
        clean = await server.call(
            "POST", context_path(NAME, "/associations"), [item("青嶺酒造", "杜氏", "高瀬")]
        )
        await server.associate(NAME, [item("高瀬", "schema:type", "Person")])
        # 高瀬 is a Person from the earlier write; 青嶺 is typed by this very batch
        # as a Brewery, which is_a Organization, so only the first item violates.
        warned = await server.call(
            "POST",
            context_path(NAME, "/associations"),
            [
                item("高瀬", "杜氏", "山田"),
                item("青嶺", "schema:type", "Brewery"),
                item("青嶺", "杜氏", "高瀬"),
            ],
        )
        entry = await server.entry(NAME)
    assert set(clean.json()) == {"result", "status", "time"}  # untyped never violates
    body = warned.json()
    assert (body["result"], body["schema_violations"]) == (3, 1)
    assert body["issues"] == [
        {
            "actual": "typed as [Person]",
            "expected": "'高瀬' typed as one of [Brewery] (or a subtype), for relation '杜氏'",
            "kind": "domain",
            "path": "associations[0].subject",
        }
    ]
    assert entry["revision"]["graph"] == 5


async def test_strict_refuses_and_off_judges_nothing() -> None:
    batch = [item("高瀬", "schema:type", "Person"), item("高瀬", "杜氏", "山田")]
    async with in_process() as server:
        await server.create(NAME)
        await install(server, document("strict"))
        refused = await server.call("POST", context_path(NAME, "/associations"), batch)
        after_refusal = await server.entry(NAME)
        await install(server, document("off"))
        accepted = await server.call("POST", context_path(NAME, "/associations"), batch)
    assert refused.status_code == 400
    body = refused.json()
    assert (body["code"], body["integrity"]) == ("invalid_argument", "nothing_written")
    assert body["issues"][0]["path"] == "associations[1].subject"
    assert after_refusal["revision"]["graph"] == 0
    assert accepted.json()["result"] == 2
    assert "issues" not in accepted.json()


async def test_closed_labels_flag_an_undeclared_label() -> None:
    async with in_process() as server:
        await server.create(NAME)
        await install(server, document(closed_labels=True))
        response = await server.call(
            "POST", context_path(NAME, "/associations"), [item("a", "所在地", "b")]
        )
    issue = response.json()["issues"][0]
    assert (issue["path"], issue["kind"]) == ("associations[0].label", "unknown_reference")
