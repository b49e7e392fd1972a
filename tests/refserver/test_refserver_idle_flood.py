"""Idle sockets cannot crowd out clients that send requests (issue 44, failure 6).

Before, every accepted connection counted towards uvicorn's
``limit_concurrency`` (512) until its 10 s header deadline, so 520 sockets that
connect and say nothing made ``/health`` answer 503 in 79% of polls, and any
health check (the README's ``wait`` included) read the server as down. Now a
connection that has not sent a complete request head is *headless*: at most
128 are kept, and each one accepted past that closes the oldest.

``serve`` runs as a child process with a token; the test holds a kept-alive
authenticated client, opens 520 idle sockets, then polls ``/health`` on new
connections and keeps using the authenticated one.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.paths import DATA, PROJECT_ROOT

from taguru_eval._base.ready import read_ready_file
from taguru_refserver.serve import DEFAULT_LIMITS

TOKEN = "flood-test-token-1234"
IDLE = 520


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[str]:
    ready = tmp_path / "ready.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "taguru_eval", "serve", str(DATA), "--port", "0",
         "--token", TOKEN, "--ready-file", str(ready)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while (found := read_ready_file(ready)) is None:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no ready file"
            time.sleep(0.02)
        yield found.url
    finally:
        process.terminate()
        process.communicate(timeout=30)


def idle_sockets(url: str, count: int) -> list[socket.socket]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return [socket.create_connection((host, int(port)), timeout=5) for _ in range(count)]


def closed_by_the_server(sock: socket.socket) -> bool:
    sock.settimeout(0.05)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:  # reset
        return True


def test_520_idle_sockets_leave_health_and_an_authenticated_client_alive(serve: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=serve, headers=headers, trust_env=False, timeout=30) as client:
        assert client.get("/contexts/sake").status_code == 200  # a kept-alive connection
        flood = idle_sockets(serve, IDLE)
        try:
            # Every idle socket is accepted before the polls: the last one is
            # answered (it sends a request), so the server has seen all before it.
            statuses = []
            for _ in range(100):
                statuses.append(
                    httpx.get(f"{serve}/health", trust_env=False, timeout=30).status_code
                )
                statuses.append(client.get("/contexts/sake").status_code)
            assert statuses == [200] * 200
            # The oldest headless sockets were closed to make room (each poll's new
            # connection closes one more).
            deadline = time.monotonic() + 30
            while (
                sum(map(closed_by_the_server, flood)) < IDLE - DEFAULT_LIMITS.headless_connections
            ):
                assert time.monotonic() < deadline, "the server kept more headless sockets"
            assert closed_by_the_server(flood[0])
        finally:
            for sock in flood:
                sock.close()


def test_an_evaluation_runs_through_the_flood(serve: str, tmp_path: Path) -> None:
    flood = idle_sockets(serve, IDLE)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "taguru_eval", "run", "--eval",
             str(DATA / "sake" / "eval.jsonl"), "--context", "sake", "--url", serve,
             "--no-store", "--quiet", "--out", str(tmp_path / "evaluation.json")],
            capture_output=True, text=True, timeout=300,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(PROJECT_ROOT),
                 "TAGURU_API_TOKEN": TOKEN},
        )  # fmt: skip
    finally:
        for sock in flood:
            sock.close()
    assert done.returncode == 0, done.stderr
    assert "503" not in (tmp_path / "evaluation.json").read_text(encoding="utf-8")
