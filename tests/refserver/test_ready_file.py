"""``serve --ready-file`` and ``wait``: a CI recipe that cannot race, over real loopback.

``serve`` runs as a child process on port 0; the test waits for its ready
file (never for a line or a sleep), reads the URL from it and talks to the
server there. ``wait`` runs as a child process too, against that server, and
against a closed port with a 1 s timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.loopback import ForwardProxy, Response, ScriptedServer
from support.paths import PROJECT_ROOT

from taguru_eval._base.ready import ReadyFile, read_ready_file
from taguru_eval.cli.serve import main as serve_main
from taguru_eval.cli.wait import main as wait_main
from taguru_eval.cli.wait import parse_args
from taguru_eval.errors import InputError, RunError
from taguru_eval.run.wait import health_url, wait_until_healthy

READY_LINE = re.compile(r'\{"url": "http://127\.0\.0\.1:(\d+)", "pid": (\d+)\}\n')
ENV = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}


def taguru_eval(*args: str) -> list[str]:
    return [sys.executable, "-m", "taguru_eval", *args]


def wait_for_file(path: Path, process: subprocess.Popen[str], seconds: float = 30.0) -> bytes:
    """The ready file's bytes, once it exists (the test's own poll, no sleep guess)."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no ready file"
        time.sleep(0.02)
    return path.read_bytes()


@contextlib.contextmanager
def serving(corpus: Path, ready: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        taguru_eval("serve", str(corpus), "--port", "0", "--ready-file", str(ready)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
        process.communicate(timeout=15)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_serve_writes_the_ready_file_once_it_answers_and_removes_it(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    stale = b'{"url": "http://127.0.0.1:1", "pid": 1}\n'
    ready.write_bytes(stale)  # what a killed server left: removed at start, then rewritten
    with serving(tmp_path, ready) as process:
        data = wait_for_file(ready, process)
        while data == stale:
            time.sleep(0.02)
            data = wait_for_file(ready, process)
        match = READY_LINE.fullmatch(data.decode())
        assert match, data
        assert int(match.group(2)) == process.pid
        url = json.loads(data)["url"]
        # The file exists, so the server answers: no retry, no sleep.
        health = httpx.get(url + "/health", timeout=10, trust_env=False)
        assert health.status_code == 200
        assert health.json()["status"] == "ok"
        # No temp file is left beside it.
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ready.json"]
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
        assert process.returncode == 0
    assert not ready.exists()


def test_the_wait_command_against_the_server_and_a_closed_port(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    with serving(tmp_path, ready) as process:
        # Started before the server can answer: it waits for the file first.
        by_file = subprocess.run(
            taguru_eval("wait", "--ready-file", str(ready), "--timeout", "60"),
            capture_output=True,
            text=True,
            env=ENV,
            timeout=90,
            check=False,
        )
        assert by_file.returncode == 0, by_file.stderr
        url = by_file.stdout.strip()
        assert url == json.loads(ready.read_text())["url"]
        assert by_file.stderr == ""
        by_url = subprocess.run(
            taguru_eval("wait", url, "--timeout", "1"),
            capture_output=True,
            text=True,
            env=ENV,
            timeout=60,
            check=False,
        )
        assert (by_url.returncode, by_url.stdout, by_url.stderr) == (0, url + "\n", "")
        assert process.poll() is None
    port = closed_port()
    started = time.monotonic()
    refused = subprocess.run(
        taguru_eval("wait", f"http://127.0.0.1:{port}", "--timeout", "1"),
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
        check=False,
    )
    took = time.monotonic() - started
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr.count("\n") == 1
    assert refused.stderr.startswith(
        f"taguru_eval wait: http://127.0.0.1:{port}/health did not answer 200 within 1 s (last: "
    ), refused.stderr
    assert "Traceback" not in refused.stderr
    assert took < 30  # the 1 s budget plus an interpreter's start, never a hang


def test_wait_for_a_ready_file_that_never_comes(tmp_path: Path) -> None:
    with pytest.raises(RunError, match=r"^no ready file .*never\.json within 0\.3 s$"):
        wait_until_healthy(ready_file=tmp_path / "never.json", timeout=0.3)


def test_wait_follows_a_non_200_answer_to_its_timeout() -> None:
    last = r"did not answer 200 within 0\.5 s \(last: HTTP 503\)$"
    with (
        ScriptedServer(lambda request: Response.of_text(503, "no")) as url,
        pytest.raises(RunError, match=last),
    ):
        wait_until_healthy(url, timeout=0.5)


def test_wait_goes_through_the_proxy_run_mode_would_use() -> None:
    proxy = ForwardProxy()
    with (
        ScriptedServer(lambda request: Response.of_json(200, {"status": "ok"})) as url,
        proxy as proxy_url,
    ):
        assert wait_until_healthy(url, timeout=10, env={"HTTP_PROXY": proxy_url}) == url
        assert proxy.seen == [("GET", f"{url}/health")]
        proxy.seen.clear()
        no_proxy = {"HTTP_PROXY": proxy_url, "NO_PROXY": "127.0.0.1"}
        assert wait_until_healthy(url, timeout=10, env=no_proxy) == url
        assert proxy.seen == []


def test_a_bad_ready_file_is_exit_2_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "ready.json"
    bad.write_text("not json\n")
    assert wait_main(["--ready-file", str(bad), "--timeout", "5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"taguru_eval wait: {bad}: not a ready file (not a JSON line")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "wait needs the server's URL or --ready-file PATH (one of them)"),
        (["http://a", "--ready-file", "r"], "wait needs the server's URL or --ready-file"),
        (["http://a", "http://b"], "wait takes one URL"),
        (["http://a", "--timeout", "0"], "--timeout must be a number of seconds in (0, 86400]"),
        (["http://a", "--timeout", "nan"], "--timeout must be a number of seconds"),
        (["http://a", "--timeout", "-1"], "--timeout must be a number of seconds"),
        (["http://a", "--timeout"], "--timeout needs a value"),
        (["http://a", "--bogus"], "unknown flag '--bogus' for wait"),
        (["ftp://a"], "not an http:// or https:// URL with a host: 'ftp://a'"),
        (["http://u:p@a"], "the URL must not carry user:password@"),
    ],
)
def test_wait_flag_errors_are_one_line_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert wait_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"taguru_eval wait: {message}"), err
    assert err.count("\n") == 1


def test_parse_and_health_url() -> None:
    assert parse_args(["http://h:1/", "--timeout=2.5"]) == ("http://h:1/", None, 2.5)
    assert parse_args(["--ready-file", "r.json"]) == (None, Path("r.json"), 30.0)
    assert parse_args(["--help"]) is None
    assert health_url("http://h:1//") == "http://h:1/health"
    assert health_url("http://h:1/base/?x=1") == "http://h:1/base/health?x=1"
    with pytest.raises(InputError):
        health_url("h:1")


def test_ready_file_round_trip_and_refusals(tmp_path: Path) -> None:
    ready = ReadyFile("http://127.0.0.1:8248", 42)
    assert ready.to_bytes() == b'{"url": "http://127.0.0.1:8248", "pid": 42}\n'
    assert ReadyFile.from_bytes(ready.to_bytes()) == ready
    for bad in (b"[]", b'{"url": 5, "pid": 1}', b'{"url": "http://x", "pid": true}'):
        with pytest.raises(ValueError, match="not a ready file"):
            ReadyFile.from_bytes(bad)
    assert read_ready_file(tmp_path / "absent.json") is None


@pytest.mark.parametrize("where", ["missing-dir/ready.json", "."])
def test_an_unwritable_ready_file_is_refused_before_binding(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / where
    assert serve_main([str(tmp_path), "--port", "0", "--ready-file", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"taguru_eval serve: --ready-file {target}: ")
    assert err.count("\n") == 1
