"""A token or base URL the HTTP client could not send is exit 2 before any request.

Each case runs the real CLI against a loopback server that records every
request: the error must be one stderr line, name its variable or flag, never
echo the secret, write no file and leave the server untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.loopback import Response, ScriptedServer
from support.paths import DATA

from taguru_eval.cli.main import main as cli_main

SECRET = "s3cret-token"
COMMANDS = {
    "run": ["--eval", "EVAL", "--context", "sake", "--out", "OUT", "--no-store"],
    "import-golden": ["import-golden", "GOLDEN", "--sources-column", "docs", "--context", "sake"],
    "refusal-bands": [
        "refusal-bands", "--eval", "EVAL", "--must-refuse", "REFUSE", "--context", "sake",
        "--out", "OUT",
    ],
}  # fmt: skip


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    recorder = ScriptedServer(lambda _request: Response.of_json(200, {"status": "ok"}))
    with recorder:
        yield recorder


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("TAGURU_ADDR", "TAGURU_CONFIG", "TAGURU_API_TOKEN", "TAGURU_API_TOKENS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # import-golden's default outputs land here, if anywhere


def run_cli(
    command: str, tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[str]]:
    """Exit code and stderr lines of ``command`` with ``extra`` flags; asserts no file appeared."""
    golden = tmp_path / "golden.csv"
    golden.write_text("question,expected,docs\nWhat year?,1897,brewery\n", encoding="utf-8")
    files = {
        "EVAL": str(DATA / "sake" / "eval.jsonl"),
        "REFUSE": str(DATA / "sake" / "must_refuse.jsonl"),
        "GOLDEN": str(golden),
        "OUT": str(tmp_path / "out.json"),
    }
    before = sorted(tmp_path.iterdir())
    code = cli_main([files.get(arg, arg) for arg in COMMANDS[command]] + extra)
    captured = capsys.readouterr()
    assert sorted(tmp_path.iterdir()) == before, "a file was written"
    assert captured.out == ""
    return code, captured.err.splitlines()


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("variable", "value", "what"),
    [
        ("TAGURU_API_TOKEN", f"{SECRET}\u3042", "a non-ASCII character"),
        ("TAGURU_API_TOKEN", f"{SECRET}\nX-Injected: 1", "a control character"),
        ("TAGURU_API_TOKEN", f"{SECRET}\x7f", "a control character"),
        ("TAGURU_API_TOKENS", f"first, ci:{SECRET}\u00e9", "a non-ASCII character"),
    ],
    ids=["non-ascii", "newline", "del", "tokens-entry"],
)
def test_a_token_no_header_can_carry_is_exit_2_before_any_request(
    command: str,
    variable: str,
    value: str,
    what: str,
    server: ScriptedServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(variable, value)
    code, lines = run_cli(command, tmp_path, ["--url", server.url], capsys)
    assert code == 2
    named = "TAGURU_API_TOKENS (entry 2, the one sent)" if variable.endswith("S") else variable
    assert lines == [
        f"taguru: evaluate: {named} contains {what}, which an HTTP Authorization header "
        "cannot carry (the token itself is not shown)"
    ]
    assert SECRET not in lines[0]
    assert server.requests == []


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("via_config", [False, True], ids=["env", "config"])
def test_a_url_in_taguru_addr_is_exit_2_with_its_userinfo_masked(
    command: str,
    via_config: bool,
    server: ScriptedServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # taguru would send this to host "http" with the userinfo in the request path.
    addr = f"http://user:{SECRET}@127.0.0.1:{server.port}"
    extra: list[str] = []
    if via_config:
        config = tmp_path / "taguru.env"
        config.write_text(f"TAGURU_ADDR={addr}\n", encoding="utf-8")
        extra = ["--config", str(config)]
    else:
        monkeypatch.setenv("TAGURU_ADDR", addr)
    code, lines = run_cli(command, tmp_path, extra, capsys)
    assert code == 2
    assert lines == [
        f"taguru: evaluate: TAGURU_ADDR (http://127.0.0.1:{server.port}) is a URL, but it "
        "must be host:port (the base URL is 'http://' + TAGURU_ADDR); pass a URL with --url "
        "instead"
    ]
    assert server.requests == []


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("source", "suffix"),
    [("--url", "/\x01"), ("--url", "/a\x7f"), ("config", "/\x00x")],
    ids=["url-c0", "url-del", "config-addr-nul"],
)
def test_a_url_the_client_cannot_send_is_exit_2_unparseable(
    command: str,
    source: str,
    suffix: str,
    server: ScriptedServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if source == "--url":
        extra = ["--url", server.url + suffix]
    else:
        config = tmp_path / "taguru.env"
        config.write_text(f"TAGURU_ADDR=127.0.0.1:{server.port}{suffix}\n", encoding="utf-8")
        extra = ["--config", str(config)]
    code, lines = run_cli(command, tmp_path, extra, capsys)
    assert code == 2
    assert lines == ["taguru: evaluate: the --url value could not be parsed as a URL"]
    assert server.requests == []


@pytest.mark.parametrize("command", COMMANDS)
def test_a_legacy_ipv4_host_is_exit_2_naming_the_dotted_quad(
    command: str, server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # aiohttp refuses 127.1 outright, which read as "only http:// and https:// can be reached".
    code, lines = run_cli(command, tmp_path, ["--url", f"http://127.1:{server.port}"], capsys)
    assert code == 2
    assert lines == [
        "taguru: evaluate: the URL's host '127.1' is the IPv4 address 127.0.0.1 in a form the "
        "HTTP client will not connect to; write 127.0.0.1 instead"
    ]
    assert server.requests == []


@pytest.mark.parametrize("command", COMMANDS)
def test_a_config_error_is_taguru_s_own_line_once(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Not "taguru: evaluate: taguru: cannot read config …": the line carries its prefix.
    missing = tmp_path / "none.env"
    code, lines = run_cli(command, tmp_path, ["--config", str(missing)], capsys)
    assert code == 2
    (line,) = lines
    assert line.startswith(f"taguru: cannot read config {missing}: "), line
