"""Every mistake a new user made names its fix, on a line after taguru's own.

taguru's line stays byte for byte what taguru prints (checked against the real
taguru where one is installed); the fix follows on its own ``  hint: `` line.
Each test makes one mistake from the issue's list through the command line,
against the reference server over loopback where a server is involved.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.hints import hints, without_hints
from support.paths import DATA
from support.run import run_args
from support.taguru import RealTaguru, populate

from taguru_eval.cli.main import main
from taguru_eval.run.preflight import auth_hint
from taguru_refserver.serve import running_server

EVAL = DATA / "sake" / "eval.jsonl"
TOKEN = "hint-secret-5b2e"


def cli(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with (
        pytest.MonkeyPatch.context() as patch,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        for name in ("TAGURU_API_TOKEN", "TAGURU_API_TOKENS", "TAGURU_CONFIG", "TAGURU_ADDR"):
            patch.delenv(name, raising=False)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server(DATA, token=TOKEN) as url:
        yield url


def test_a_mistyped_flag_gets_the_closest_one_and_the_help_that_exists_here() -> None:
    code, _out, err = cli(["--eval", str(EVAL), "--contxt", "sake"])
    assert code == 2
    assert without_hints(err) == (
        "taguru: evaluate: unknown flag '--contxt' for evaluate — try 'taguru evaluate --help'\n"
    )
    assert hints(err) == ["did you mean '--context'? See python -m taguru_eval --help"]
    code, _out, err = cli(["--eval", str(EVAL), "--context", "sake", "--threshold", "t.json"])
    assert code == 2
    assert hints(err) == ["did you mean '--thresholds'? See python -m taguru_eval --help"]


def test_a_mistyped_metric_name_gets_the_catalog_s_closest(tmp_path: Path) -> None:
    thresholds = tmp_path / "t.json"
    thresholds.write_text(
        '{"taguru_evaluate_thresholds": 1, "aggregate": {"recall@k": {"min": 0.5}}}',
        encoding="utf-8",
    )
    code, _out, err = cli(
        ["--eval", str(EVAL), "--context", "sake", "--thresholds", str(thresholds)]
    )
    assert code == 2
    assert without_hints(err) == (
        f"taguru: evaluate: {thresholds}: aggregate: unknown metric name 'recall@k'\n"
    )
    assert hints(err) == ["'recall@k': did you mean 'recall.recall_at_k'?"]


def test_an_unknown_context_lists_the_server_s_contexts(server: str) -> None:
    code, _out, err = cli(
        [*run_args(EVAL, "sak", server), "--no-store"], env={"TAGURU_API_TOKEN": TOKEN}
    )
    assert code == 2
    assert without_hints(err).endswith(
        f"{server}/contexts/sak answered 404: context 'sak' not found\n"
    )
    assert hints(err) == ["did you mean 'sake'? The server's contexts: handbook, sake"]


def test_a_401_says_whether_a_token_was_sent_and_from_which_variable(server: str) -> None:
    argv = [*run_args(EVAL, "sake", server), "--no-store"]
    line = (
        f"taguru: evaluate: {server}/contexts/sake answered 401: missing or invalid bearer "
        "token (send Authorization: Bearer <token>)\n"
    )
    code, _out, err = cli(argv)
    assert code == 1
    assert without_hints(err).endswith(line)
    assert hints(err) == [
        "no token was sent: set TAGURU_API_TOKEN (or TAGURU_API_TOKENS) to one of the server's keys"
    ]
    code, _out, err = cli(argv, env={"TAGURU_API_TOKENS": "ci:wrong-one,bot:other"})
    assert code == 1
    assert hints(err) == [
        "a token was sent (from TAGURU_API_TOKENS (entry 1)) and the server did not accept "
        "it: set it to one of the server's keys"
    ]
    assert "wrong-one" not in err
    # A 403: the key was accepted, its role or grant is what to change.
    assert auth_hint(403, "TAGURU_API_TOKEN", "sake").startswith(
        "a token was sent (from TAGURU_API_TOKEN) and accepted, but its key may not read "
        "context 'sake'"
    )


def test_a_token_from_the_config_file_is_named_so(server: str, tmp_path: Path) -> None:
    config = tmp_path / "taguru.env"
    config.write_text("TAGURU_API_TOKEN=not-the-key\n", encoding="utf-8")
    code, _out, err = cli([*run_args(EVAL, "sake", server), "--no-store", "--config", str(config)])
    assert code == 1
    assert hints(err) == [
        f"a token was sent (from TAGURU_API_TOKEN from the config file {config}) and the "
        "server did not accept it: set it to one of the server's keys"
    ]


@pytest.mark.parametrize(("given", "code"), [("127.0.0.1:{port}", 2), ("localhost:{port}", 1)])
def test_a_url_without_a_scheme_says_to_add_one(server: str, given: str, code: int) -> None:
    value = given.format(port=server.rsplit(":", 1)[1])
    got, _out, err = cli([*run_args(EVAL, "sake", value), "--no-store"])
    assert got == code
    assert hints(err) == [f"a URL starts with its scheme: add http:// (--url http://{value})"]


def test_a_bom_is_refused_in_taguru_s_words_and_says_to_save_without_one(tmp_path: Path) -> None:
    bom = tmp_path / "eval.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + EVAL.read_bytes())
    code, _out, err = cli(["--eval", str(bom), "--context", "sake"])
    assert code == 2
    assert without_hints(err) == (
        f"taguru: evaluate: {bom}: line 1: not JSON: expected value at line 1 column 1\n"
    )
    assert hints(err) == [
        "the file starts with a UTF-8 byte order mark (BOM): save it as UTF-8 without one"
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("store") / "runs"
    with running_server(DATA) as url:
        for _ in range(2):
            assert (
                cli([*run_args(EVAL, "sake", url), "--store", str(runs), "--out", "/dev/null"])[0]
                == 0
            )
    return runs


def test_a_store_root_given_as_a_run_says_so_and_lists_its_newest_runs(store: Path) -> None:
    newest = sorted(store.glob("context=sake/run=*"), reverse=True)
    code, _out, err = cli(["compare", str(store), str(newest[0])])
    assert code == 2
    assert without_hints(err) == (
        f"taguru: evaluate: BASE reading {store}/evaluation.json.zst: No such file or "
        "directory (os error 2)\n"
    )
    assert hints(err) == [
        f"{store} is a run store, not one run: give a run directory; the newest of its 2 "
        f"run(s): {newest[0]}, {newest[1]}"
    ]
    code, _out, err = cli(["report", str(store / "context=sake"), "-o", str(store / "r.html")])
    assert code == 2
    assert hints(err)[0].startswith(f"{store}/context=sake is a context's runs, not one run")


def test_a_refused_resume_says_what_to_do(store: Path) -> None:
    with running_server(DATA) as url:
        code, _out, err = cli([*run_args(EVAL, "sake", url), "--store", str(store), "--resume"])
    assert code == 2
    assert without_hints(err) == (
        f"taguru: evaluate: --resume: no unfinished run of context 'sake' in {store}\n"
    )
    assert hints(err) == ["there is nothing to continue: run the same command without --resume"]


# ------------------------------------------------------------------ taguru's own words


def _taguru(binary: Path, args: list[str], env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run(
        [str(binary), "evaluate", *args],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    return done.returncode, done.stderr


def test_taguru_s_lines_are_taguru_s_with_the_hints_dropped(
    real_taguru: Callable[..., RealTaguru], tmp_path: Path
) -> None:
    from support.taguru import require_taguru

    server = real_taguru(token=TOKEN)
    populate(server.url, DATA / "sake", token=TOKEN)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + EVAL.read_bytes())
    port = server.url.rsplit(":", 1)[1]
    mistakes = [
        (["--eval", str(EVAL), "--contxt", "sake"], TOKEN),
        (["--eval", str(bom), "--context", "sake", "--url", server.url], TOKEN),
        (
            ["--eval", str(EVAL), "--context", "sak", "--url", server.url, "--out", "/dev/null"],
            TOKEN,
        ),
        (
            ["--eval", str(EVAL), "--context", "sake", "--url", server.url, "--out", "/dev/null"],
            "x",
        ),
        (["--eval", str(EVAL), "--context", "sake", "--url", f"127.0.0.1:{port}"], TOKEN),
    ]
    binary = require_taguru()
    for args, token in mistakes:
        env = {"PATH": "/usr/bin:/bin", "TAGURU_API_TOKEN": token}
        theirs = _taguru(binary, args, env)
        code, _out, err = cli(
            [*args, "--no-store"] if "--url" in args else args, env={"TAGURU_API_TOKEN": token}
        )
        assert (code, without_hints(err)) == theirs, args
        assert hints(err), args  # and ours names the fix
