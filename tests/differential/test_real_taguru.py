"""The real taguru in the loop: the harness itself (a fresh server, a token, a load)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from support.paths import DATA
from support.taguru import TAGURU_VERSION, RealTaguru, populate


def test_a_fresh_server_reports_the_followed_release(
    real_taguru: Callable[..., RealTaguru],
) -> None:
    server = real_taguru()
    health = httpx.get(f"{server.url}/health").json()
    assert health["status"] == "ok"
    assert health["version"] == TAGURU_VERSION
    assert httpx.get(f"{server.url}/contexts").json()["result"]["contexts"] == []


def test_a_token_is_required_when_one_is_set(real_taguru: Callable[..., RealTaguru]) -> None:
    server = real_taguru(token="differential-secret")
    assert httpx.get(f"{server.url}/contexts").status_code == 401
    sent = {"Authorization": "Bearer differential-secret"}
    assert httpx.get(f"{server.url}/contexts", headers=sent).status_code == 200


def test_the_demo_corpus_goes_in(real_taguru: Callable[..., RealTaguru]) -> None:
    server = real_taguru()
    populate(server.url, DATA / "sake")
    stats = httpx.get(f"{server.url}/contexts/sake").json()["result"]["stats"]
    assert (stats["sources"], stats["associations"]) == (7, 47)
