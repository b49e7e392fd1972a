"""A server that stops, resets, disconnects or cannot be found: both evaluators
print the same lines (taguru's client's words, ``run/http/failures.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.differential import MODES, Outcome, run_ours, run_taguru, without_hints
from support.loopback import RawServer, Request, Scripted, StoppingProxy
from support.taguru import RealTaguru, require_taguru

SAKE = next(mode for mode in MODES if mode.name == "sake-baseline")


def _both(url: str, inputs: Path, workdir: Path, *ours: str) -> tuple[Outcome, Outcome]:
    args = [*SAKE.argv(inputs), "--url", url]
    theirs = run_taguru(require_taguru(), args, workdir / "taguru")
    mine = run_ours([*args, *ours], workdir / "ours")
    return theirs, mine


def _assert_same(theirs: Outcome, ours: Outcome) -> None:
    assert (ours.exit_code, ours.stdout) == (theirs.exit_code, theirs.stdout)
    assert without_hints(ours.stderr) == theirs.stderr


def _closed_port() -> str:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_port_nobody_listens_on(mode_inputs: Path, tmp_path: Path) -> None:
    theirs, ours = _both(_closed_port(), mode_inputs, tmp_path)
    assert theirs.exit_code == 1 and "io: Connection refused" in theirs.stderr
    _assert_same(theirs, ours)


def test_a_host_that_does_not_resolve(mode_inputs: Path, tmp_path: Path) -> None:
    theirs, ours = _both("http://no-such-host.invalid:8248", mode_inputs, tmp_path)
    assert "io: failed to lookup address information: " in theirs.stderr
    _assert_same(theirs, ours)


SCRIPTS: dict[str, Callable[[Request], Scripted]] = {
    "closed-before-answering": lambda _request: Scripted(b"", close=True),
    "closed-inside-the-body": lambda _request: Scripted(
        b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"res', close=True
    ),
}


@pytest.mark.parametrize("script", SCRIPTS, ids=list(SCRIPTS))
def test_a_server_that_hangs_up(script: str, mode_inputs: Path, tmp_path: Path) -> None:
    with RawServer(SCRIPTS[script]) as url:
        theirs, ours = _both(url, mode_inputs, tmp_path)
    assert "io: Peer disconnected" in theirs.stderr
    _assert_same(theirs, ours)


def test_the_server_stops_mid_run(
    taguru_server: RealTaguru, mode_inputs: Path, tmp_path: Path
) -> None:
    """taguru stops after 40 requests (inside the cases): the failed calls, the
    after-run read and the exit code are the same. Ours runs one case at a time
    here, as taguru does, so the same calls meet the stopped server."""
    upstream = taguru_server.url.removeprefix("http://")
    outcomes = []
    for run in ("taguru", "ours"):
        with StoppingProxy(upstream, requests=40) as url:
            args = [*SAKE.argv(mode_inputs), "--url", url]
            if run == "taguru":
                outcome = run_taguru(require_taguru(), args, tmp_path / run)
            else:
                outcome = run_ours([*args, "--concurrency", "1"], tmp_path / run)
        # Each run has a proxy (a port) of its own.
        outcomes.append(
            Outcome(
                outcome.exit_code,
                outcome.stdout.replace(url, "PROXY"),
                outcome.stderr.replace(url, "PROXY"),
                outcome.artifact,
            )
        )
    theirs, ours = outcomes
    assert theirs.exit_code == 1
    assert "could not re-read the context after the run" in theirs.stderr
    _assert_same(theirs, ours)
