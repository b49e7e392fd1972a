"""langchain-taguru's retriever (PyPI ``langchain-taguru`` 0.9.7) against the reference server.

The retriever runs two lanes, graph (resolve → activate → citations) and text
(search_passages), and isolates a failing lane: before issue 29 the missing
``/activate`` route made the graph lane fail and the retriever answered from
the text lane alone without a word. These tests run it over real loopback
HTTP and check that graph-lane Documents are in the answer.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from taguru import Taguru
from taguru_langchain import TaguruRetriever

from taguru_refserver.serve import running_server

NAME = "sake"
KURA = "docs/kura.md"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_server(None) as served, Taguru(served, retries=0) as client:
        client.contexts.create(NAME)
        ctx = client.context(NAME)
        ctx.store_passages(
            {
                KURA: "青嶺酒造は雲居県霧沢町の蔵元である。\n\n杜氏は高瀬である。",
                "docs/other.md": "梅雨明けの空に入道雲が広がった。",
            }
        )
        ctx.add_associations(
            [
                {
                    "subject": "青嶺酒造",
                    "label": "杜氏",
                    "object": "高瀬",
                    "weight": 1.0,
                    "source": KURA,
                    "paragraph": 1,
                },
                # No attribution: only the graph lane can produce this fact.
                {"subject": "高瀬", "label": "出身", "object": "南部", "weight": 2.0},
            ]
        )
        yield served


def test_graph_lane_alone_returns_its_documents(url: str) -> None:
    with TaguruRetriever(base_url=url, context=NAME, include_text=False) as retriever:
        documents = retriever.invoke("青嶺酒造")
    lanes = [(d.metadata["lane"], d.metadata["source"], d.metadata["paragraph"]) for d in documents]
    assert ("graph", KURA, 1) in lanes
    cited = next(d for d in documents if d.metadata["paragraph"] == 1)
    assert cited.page_content == "杜氏は高瀬である。"
    # The unattributed fact one hop on comes back as a graph-only Document.
    assert any(d.metadata["paragraph"] is None and "南部" in d.page_content for d in documents)


def test_both_lanes_merge_and_the_graph_lane_is_not_dropped(url: str) -> None:
    with TaguruRetriever(base_url=url, context=NAME) as retriever:
        documents = retriever.invoke("青嶺酒造")
    lanes = {d.metadata["lane"] for d in documents}
    # The cited paragraph is found by both lanes and fused; the graph-only fact
    # is the graph lane's own.
    assert "graph" in lanes
    assert any(d.metadata["lane"] in ("graph", "graph+text") for d in documents)
    assert any("南部" in d.page_content for d in documents)


async def test_async_graph_lane(url: str) -> None:
    retriever = TaguruRetriever(base_url=url, context=NAME, include_text=False)
    try:
        documents = await retriever.ainvoke("青嶺酒造")
    finally:
        await retriever.aclose()
    assert {d.metadata["lane"] for d in documents} == {"graph"}
    assert len(documents) == 2
