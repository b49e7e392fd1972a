"""What a server holds of a context, read back over its public routes, and what a
context folder says it should hold: the two are compared by the ``load`` tests.

The snapshot covers every source (its listing entry's tags and date), every
paragraph's text and section (one citation per paragraph, and the one past the
last refused), the aliases, and the graph's size (distinct edges, the graph
sources the associations name) with the revision.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from taguru_eval.corpus.folder import read_context_folder
from taguru_eval.corpus.paragraphs import split_paragraphs


def _get(client: httpx.Client, path: str, **params: str) -> Any:
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()["result"]


def read_back(url: str, name: str, token: str | None = None) -> dict[str, Any]:
    """The snapshot of context ``name`` on the server at ``url``."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    base = "/contexts/" + quote(name, safe="")
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        entry = _get(client, base)
        entries: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            page = _get(
                client, base + "/sources", limit="1000", **({"after": after} if after else {})
            )
            if not page["entries"]:
                break
            entries += page["entries"]
            after = page["sources"][-1]
        sources: dict[str, Any] = {}
        for listed in entries:
            paragraphs: list[dict[str, Any]] = []
            while True:
                body = {"source": listed["name"], "paragraph": len(paragraphs)}
                response = client.post(base + "/citations", json=body)
                if response.status_code == 404:
                    assert response.json()["code"] == "no_paragraph", response.text
                    break
                assert response.status_code == 200, response.text
                cited = response.json()["result"]
                paragraphs.append({"text": cited["text"], "section": cited["section"]})
            sources[listed["name"]] = {
                "tags": listed.get("tags", []),
                "date": listed.get("date"),
                "paragraphs": paragraphs,
            }
        aliases = _get(client, base + "/aliases", limit="1000")
    return {
        "description": entry["description"],
        "pinned": entry["pinned"],
        "sources": sources,
        "aliases": {"concepts": aliases["concepts"], "labels": aliases["labels"]},
        "edges": entry["stats"]["associations"],
        "graph_sources": entry["stats"]["sources"],
        "revision": entry["revision"],
    }


def expected_of(folder: Path) -> dict[str, Any]:
    """The snapshot a server holding exactly ``folder`` gives (``read_back``'s shape)."""
    read = read_context_folder(folder)
    sources: dict[str, Any] = {}
    for source in read.sources:
        markers = {entry["paragraph"]: entry["section"] for entry in source.sections}
        section = None
        paragraphs = []
        for index, text in enumerate(split_paragraphs(source.text)):
            section = markers.get(index, section)
            paragraphs.append({"text": text, "section": section})
        sources[source.source] = {
            "tags": sorted(set(source.tags)),
            "date": source.date,
            "paragraphs": paragraphs,
        }
    items = [association.item for association in read.associations]
    aliases = read.aliases if isinstance(read.aliases, dict) else {}
    settings = read.settings if isinstance(read.settings, dict) else {}
    pairs = sum(len(aliases.get(space, {})) for space in ("concepts", "labels"))
    return {
        "description": settings.get("description", ""),
        "pinned": settings.get("pinned", False),
        "sources": sources,
        "aliases": {space: aliases.get(space, {}) for space in ("concepts", "labels")},
        "edges": len({json.dumps([i["subject"], i["label"], i["object"]]) for i in items}),
        "graph_sources": len({i["source"] for i in items if i.get("source") is not None}),
        "revision": {"graph": len(items) + pairs, "passages": len(read.sources), "config": 0},
    }
