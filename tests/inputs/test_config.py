"""Config file, base URL, masking and token (EVALUATE.md §0.3, §0.4, §2.4, §2.5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.paths import DATA
from support.run import run_args
from support.vectors import vector_cases

from taguru_eval._base.text import truncate_utf8
from taguru_eval.cli.main import main as cli_main
from taguru_eval.cli.run import parse_run_args
from taguru_eval.errors import InputError
from taguru_eval.inputs.config import (
    ConfigError,
    apply_config_file,
    base_url_from_addr,
    effective_env,
    mask_url,
    parse_url,
    resolve_base_url,
    resolve_token,
)

# --------------------------------------------------------------------------- vectors


@pytest.mark.parametrize("case", vector_cases("url_mask"))
def test_url_mask_vector(case: dict[str, Any]) -> None:
    url = case["input"]["url"]
    expected = case["expected"]
    check = case["check"]
    if check == "mask":
        assert set(expected) == {"masked"}
        assert mask_url(url) == expected["masked"]
    elif check == "flag":
        assert set(expected) == {"base"}
        options = parse_run_args([*run_args("e", "c", url)])
        assert options is not None
        assert options.url == expected["base"]
    elif check == "validate":
        assert set(expected) <= {"ok", "exit", "error", "error_contains"}
        if expected["ok"]:
            assert resolve_base_url(url, {}) == url
            return
        with pytest.raises(InputError) as info:
            resolve_base_url(url, {})
        assert info.value.exit_code == expected["exit"]
        if "error" in expected:
            assert str(info.value) == expected["error"]
        if "error_contains" in expected:
            assert expected["error_contains"] in str(info.value)
    else:
        pytest.fail(f"unknown check {check}")


@pytest.mark.parametrize("case", vector_cases("truncate_error"))
def test_truncate_error_vector(case: dict[str, Any]) -> None:
    message = case["input"]["message"]
    expected = case["expected"]
    assert set(expected) <= {"output", "ends_with", "shorter_than_input"}
    got = truncate_utf8(message)
    if "output" in expected:
        assert got == expected["output"]
    if "ends_with" in expected:
        assert got.endswith(expected["ends_with"])
    if expected.get("shorter_than_input"):
        assert len(got.encode()) < len(message.encode())
    assert len(got.encode()) <= 203


# --------------------------------------------------------------------------- URL parsing


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("http://h:8080", "http://h:8080"),
        ("https://h:8443/a/b?c#d", "https://h:8443"),
        ("http://[::]:80/", "http://[::]"),
        ("http://[0:0:0:0:0:0:0:1]:9/", "http://[::1]:9"),
        ("http://@h:1", "http://h:1"),
        ("HTTPS://BÜCHER.example", "https://xn--bcher-kva.example"),
    ],
)
def test_mask_more(url: str, masked: str) -> None:
    assert mask_url(url) == masked


@pytest.mark.parametrize(
    "url",
    [
        "",
        "not a url",
        "://h",
        "http://",
        "http://h:99999",
        "http://h:12a",
        "http://exa mple.com",
        "http://[::g]:1",
        "http://[::1",
        "1http://h",
    ],
)
def test_unparseable(url: str) -> None:
    assert parse_url(url) is None
    with pytest.raises(InputError, match=r"^the --url value could not be parsed as a URL$"):
        resolve_base_url(url, {})


@pytest.mark.parametrize(
    "url",
    [
        "http://h:1/\x01",
        "http://h:1/a\x00b",
        "http://h:1/\x7f",
        "http://h:1\x00",
        "http://h:1\\x",  # WHATWG reads a path; the client reads a port '1\\x'
        "http:/h:1",  # WHATWG reads host h; the client finds none
    ],
)
def test_a_url_the_client_cannot_send_is_unparseable(url: str) -> None:
    assert parse_url(url) is not None
    with pytest.raises(InputError, match=r"^the --url value could not be parsed as a URL$"):
        resolve_base_url(url, {})


@pytest.mark.parametrize(
    "url", ["http://h:1/a\tb", " http://h:1", "http://h:1/a?q=\x01#\x02", "http:h:1"]
)
def test_what_the_client_drops_or_encodes_still_resolves(url: str) -> None:
    assert resolve_base_url(url, {}) == url


@pytest.mark.parametrize(
    ("host", "dotted"),
    [
        ("127.1", "127.0.0.1"),
        ("0x7F.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.01", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("10.0.513", "10.0.2.1"),
    ],
)
def test_an_ipv4_host_in_a_legacy_form_names_its_dotted_quad(host: str, dotted: str) -> None:
    # WHATWG (and so taguru) reads these as the dotted quad; aiohttp will not connect.
    assert mask_url(f"http://{host}:8080/x") == f"http://{dotted}:8080"
    with pytest.raises(InputError) as info:
        resolve_base_url(f"http://{host}:8080", {})
    assert str(info.value) == (
        f"the URL's host '{host.lower()}' is the IPv4 address {dotted} in a form the HTTP "
        f"client will not connect to; write {dotted} instead"
    )
    assert info.value.exit_code == 2


@pytest.mark.parametrize("host", ["1.2.3.256", "1.2.3.4.5", "a.1", "09", "4294967296", "0x1g.1"])
def test_a_host_ending_in_a_number_must_be_ipv4(host: str) -> None:
    assert parse_url(f"http://{host}:1") is None
    assert parse_url(f"localhost://{host}:1") is not None  # only special schemes


def test_non_http_scheme_is_not_refused_here() -> None:
    # WHATWG accepts it; it fails later at /health (exit 1), EVALUATE.md §2.4 step 4
    assert resolve_base_url("localhost:8080", {}) == "localhost:8080"
    assert resolve_base_url("ftp://h", {}) == "ftp://h"


@pytest.mark.parametrize(
    "url", ["http://u:p@h:1", "http://u@h", "http://:p@h", "https://a:b@[::1]:5/x"]
)
def test_credentials_refused(url: str) -> None:
    with pytest.raises(InputError) as info:
        resolve_base_url(url, {})
    assert str(info.value) == (
        "the URL must not carry credentials (user:password@…) — "
        "set TAGURU_API_TOKEN (or TAGURU_API_TOKENS) instead"
    )
    assert info.value.exit_code == 2


def test_url_flag_wins_over_addr() -> None:
    assert resolve_base_url("http://x:1", {"TAGURU_ADDR": "0.0.0.0:0"}) == "http://x:1"


@pytest.mark.parametrize(
    ("addr", "base"),
    [
        (None, "http://127.0.0.1:8248"),
        ("0.0.0.0:9000", "http://127.0.0.1:9000"),
        ("[::]:8248", "http://[::1]:8248"),
        ("10.0.0.5:80", "http://10.0.0.5:80"),
        ("myhost:7000", "http://myhost:7000"),
        ("[::1]:8248", "http://[::1]:8248"),
    ],
)
def test_base_url_from_addr(addr: str | None, base: str) -> None:
    env = {} if addr is None else {"TAGURU_ADDR": addr}
    assert resolve_base_url(None, env) == base


@pytest.mark.parametrize("addr", ["0.0.0.0:0", "127.0.0.1:0", "[::]:0", "myhost:0"])
def test_port_zero_refused(addr: str) -> None:
    with pytest.raises(InputError) as info:
        base_url_from_addr(addr)
    assert str(info.value) == (
        f"TAGURU_ADDR ({addr}) binds to port 0 (OS-assigned) — the actual port can't be "
        "discovered from here; pass the server's real URL explicitly: "
        "'taguru health http://host:PORT'"
    )
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("addr", "shown"),
    [
        ("http://127.0.0.1:8248", "http://127.0.0.1:8248"),
        ("https://user:s3cret@h:8443/api?key=s3cret", "https://h:8443"),
        ("http://u:s3cret@h:0", "http://h:0"),  # a URL first, before the port-0 check
        ("ftp://bad host", "<unparseable-url>"),
    ],
)
def test_a_url_in_addr_is_refused_masked(addr: str, shown: str) -> None:
    with pytest.raises(InputError) as info:
        resolve_base_url(None, {"TAGURU_ADDR": addr})
    assert str(info.value) == (
        f"TAGURU_ADDR ({shown}) is a URL, but it must be host:port "
        "(the base URL is 'http://' + TAGURU_ADDR); pass a URL with --url instead"
    )
    assert info.value.exit_code == 2
    assert resolve_base_url("http://x:1", {"TAGURU_ADDR": addr}) == "http://x:1"


def test_port_zero_message_masks_userinfo() -> None:
    with pytest.raises(InputError) as info:
        base_url_from_addr("user:s3cret@h:0")
    assert str(info.value).startswith("TAGURU_ADDR ([REDACTED]@h:0) binds to port 0")


def test_unparseable_addr_uses_url_message() -> None:
    with pytest.raises(InputError, match="could not be parsed as a URL"):
        resolve_base_url(None, {"TAGURU_ADDR": "bad host:1"})
    with pytest.raises(InputError, match="must not carry credentials"):
        resolve_base_url(None, {"TAGURU_ADDR": "u:p@h:1"})


@pytest.mark.parametrize(
    ("url", "addr"),
    [
        (f"http://127.0.0.1:{'9' * 5000}", None),
        (None, f"127.0.0.1:{'9' * 5000}"),
        (None, f"myhost:{'9' * 5000}"),
    ],
)
def test_a_port_past_int_s_digit_limit_is_an_unparseable_url(
    url: str | None, addr: str | None
) -> None:
    # int() refuses more than 4,300 digits with a ValueError: a traceback before.
    env = {} if addr is None else {"TAGURU_ADDR": addr}
    with pytest.raises(InputError, match="could not be parsed as a URL"):
        resolve_base_url(url, env)


# --------------------------------------------------------------------------- token


@pytest.mark.parametrize(
    ("env", "token"),
    [
        ({}, None),
        ({"TAGURU_API_TOKEN": "  abc  "}, "abc"),
        ({"TAGURU_API_TOKEN": "   ", "TAGURU_API_TOKENS": "ci:xyz"}, "xyz"),
        ({"TAGURU_API_TOKEN": "one", "TAGURU_API_TOKENS": "ci:xyz"}, "one"),
        ({"TAGURU_API_TOKENS": "bare, ci: , bot : t2 ,x:t3"}, "t2"),
        ({"TAGURU_API_TOKENS": "a:b:c"}, "b:c"),
        ({"TAGURU_API_TOKENS": ",,"}, None),
    ],
)
def test_resolve_token(env: dict[str, str], token: str | None) -> None:
    assert resolve_token(env) == token


@pytest.mark.parametrize(
    ("env", "source"),
    [
        ({"TAGURU_API_TOKEN": "zq9\u3042x"}, "TAGURU_API_TOKEN"),
        ({"TAGURU_API_TOKEN": "zq9\udc85x"}, "TAGURU_API_TOKEN"),  # undecodable env bytes
        ({"TAGURU_API_TOKEN": "zq9\x1fx"}, "TAGURU_API_TOKEN"),  # not trimmed: no White_Space
        (
            {"TAGURU_API_TOKENS": "bare, ci: , bot:zq9\r\n2"},
            "TAGURU_API_TOKENS (entry 3, the one sent)",
        ),
    ],
)
def test_a_token_no_header_can_carry_is_refused_unshown(env: dict[str, str], source: str) -> None:
    with pytest.raises(InputError) as info:
        resolve_token(env)
    assert info.value.exit_code == 2
    assert str(info.value).startswith(f"{source} contains a ")
    assert "zq9" not in str(info.value)


def test_only_the_token_sent_must_fit_a_header() -> None:
    # Inner spaces and tabs are legal in a header value; an entry that is never sent is not checked.
    env = {"TAGURU_API_TOKEN": "a b\tc", "TAGURU_API_TOKENS": "ci:\u3042"}
    assert resolve_token(env) == "a b\tc"


# --------------------------------------------------------------------------- config file


def write(tmp_path: Path, text: str | bytes) -> str:
    path = tmp_path / "taguru.env"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def test_config_file_applied_without_touching_the_input(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "\ufeff# comment\n\n  TAGURU_ADDR = 10.1.1.1:9 \r\nTAGURU_API_TOKEN=a=b c\n  # x=y\n",
    )
    env = {"HOME": "/h"}
    warnings: list[str] = []
    merged = apply_config_file(path, env, warnings.append)
    assert merged == {"HOME": "/h", "TAGURU_ADDR": "10.1.1.1:9", "TAGURU_API_TOKEN": "a=b c"}
    assert env == {"HOME": "/h"}
    assert warnings == []
    assert resolve_base_url(None, merged) == "http://10.1.1.1:9"
    assert resolve_token(merged) == "a=b c"


def test_config_environment_wins_and_duplicates_warn(tmp_path: Path) -> None:
    path = write(tmp_path, "TAGURU_ADDR=h:1\nTAGURU_API_TOKEN=first\nTAGURU_API_TOKEN=second\n")
    warnings: list[str] = []
    merged = apply_config_file(path, {"TAGURU_ADDR": "env:2"}, warnings.append)
    assert merged["TAGURU_ADDR"] == "env:2"
    assert merged["TAGURU_API_TOKEN"] == "second"
    assert warnings == [
        "taguru: config: TAGURU_API_TOKEN appears more than once in the file; the last value wins",
        "taguru: config: TAGURU_ADDR set in the environment; the file value is ignored",
    ]


def test_config_line_without_equals(tmp_path: Path) -> None:
    path = write(tmp_path, "A=1\n\n  JUSTAWORD  \n")
    with pytest.raises(ConfigError) as info:
        apply_config_file(path, {}, print)
    assert str(info.value) == (
        f"taguru: config {path}: line 3: expected KEY=VALUE, "
        "got '  JUSTAWORD  ' — try 'taguru --help'"
    )
    assert info.value.exit_code == 2
    assert info.value.line == 3


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("TAGURU_API_TOKEN s3cret", "expected KEY=VALUE, got 'TAGURU_API_TOKEN [REDACTED]'"),
        (
            "export TAGURU_API_TOKENS ci:s3cret",
            "expected KEY=VALUE, got 'TAGURU_API_TOKENS [REDACTED]'",
        ),
        ("taguru_api_token: s3cret", "expected KEY=VALUE, got 'taguru_api_token [REDACTED]'"),
        # A base64 token's own '=' splits the line: the bad "key" holds most of the token.
        ("TAGURU_API_TOKEN s3cretdGVzdA==", "'TAGURU_API_TOKEN [REDACTED]' is not a variable name"),
        # The server's own secrets, when a shared file holds them.
        (
            "TAGURU_EMBED_API_KEY s3cret",
            "expected KEY=VALUE, got 'TAGURU_EMBED_API_KEY [REDACTED]'",
        ),
        (
            "TAGURU_RERANK_API_KEY: s3cret",
            "expected KEY=VALUE, got 'TAGURU_RERANK_API_KEY [REDACTED]'",
        ),
    ],
)
def test_config_error_never_echoes_a_token_line(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, f"A=1\n{line}\n")
    with pytest.raises(ConfigError) as info:
        apply_config_file(path, {}, print)
    assert str(info.value) == f"taguru: config {path}: line 2: {message} — try 'taguru --help'"
    assert "s3cret" not in str(info.value)


def test_cli_prints_a_token_line_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TAGURU_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, "TAGURU_API_TOKEN s3cret\n")
    eval_path = str(DATA / "sake" / "eval.jsonl")
    code = cli_main(["--eval", eval_path, "--context", "sake", "--config", path, "--no-store"])
    assert code == 2
    assert capsys.readouterr().err == (
        f"taguru: config {path}: line 1: expected KEY=VALUE, got 'TAGURU_API_TOKEN [REDACTED]'"
        " — try 'taguru --help'\n"
    )


@pytest.mark.parametrize(("line", "key"), [("=v", ""), ("MY KEY=v", "MY KEY"), (" \u3000=v", "")])
def test_config_bad_key(tmp_path: Path, line: str, key: str) -> None:
    path = write(tmp_path, line + "\n")
    with pytest.raises(ConfigError) as info:
        apply_config_file(path, {}, print)
    assert str(info.value) == (
        f"taguru: config {path}: line 1: '{key}' is not a variable name — try 'taguru --help'"
    )


def test_config_unreadable(tmp_path: Path) -> None:
    missing = str(tmp_path / "none.env")
    with pytest.raises(ConfigError) as info:
        apply_config_file(missing, {}, print)
    message = str(info.value)
    assert message.startswith(f"taguru: cannot read config {missing}: ")
    assert message.endswith(" — try 'taguru --help'")
    with pytest.raises(ConfigError, match="cannot read config"):
        apply_config_file(write(tmp_path, b"A=\xff\n"), {}, print)


def test_config_flag_then_taguru_config_env(tmp_path: Path) -> None:
    path = write(tmp_path, "TAGURU_ADDR=h:5\n")
    assert effective_env(None, {"TAGURU_CONFIG": path}, print)["TAGURU_ADDR"] == "h:5"
    assert effective_env(path, {}, print)["TAGURU_ADDR"] == "h:5"
    assert "TAGURU_ADDR" not in effective_env(None, {}, print)
    with pytest.raises(ConfigError):
        effective_env(str(tmp_path / "missing"), {"TAGURU_CONFIG": path}, print)
