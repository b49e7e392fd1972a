"""CLI dispatch and run-mode flags (EVALUATE.md §2.1, §2.2, §8, §9.2)."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.hints import hints, without_hints
from support.paths import PROJECT_ROOT

from taguru_eval._base import extras
from taguru_eval.cli import main as cli_main
from taguru_eval.cli import run as cli_run
from taguru_eval.cli.main import SUBCOMMANDS, main
from taguru_eval.cli.run import HELP, parse_run_args
from taguru_eval.errors import InputError, UsageError
from taguru_eval.inputs.config import ConfigError
from taguru_eval.inputs.prepare import PreparedRun
from taguru_eval.options import Budget, RunOptions, parse_positive

PROJECT = PROJECT_ROOT
TAGURU_SUFFIX = " — try 'taguru evaluate --help'"
SUFFIX = f"{TAGURU_SUFFIX}\n  hint: see python -m taguru_eval --help"
"""taguru's usage suffix, then the hint line naming the help that exists here."""
COMPARE_SUFFIX = " — try 'taguru evaluate --help'\n  hint: see python -m taguru_eval compare --help"
UNKNOWN = (
    "unknown subcommand '{}' — the default mode is selected by a leading flag, "
    "e.g. 'taguru evaluate --eval FILE --context NAME', or use the 'compare' subcommand"
)
MIN = ["--eval", "eval.jsonl", "--context", "sake"]
COUNT_FLAGS = ["--max-items", "--max-bytes", "--max-tokens", "--concurrency", "--repeat"]


def usage_message(args: list[str]) -> str:
    with pytest.raises(UsageError) as info:
        parse_run_args(args)
    assert info.value.exit_code == 2
    return info.value.message


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --------------------------------------------------------------------------- §9.2 scenarios


def test_24_context_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["--context", "sake"], capsys)
    assert (code, out) == (2, "")
    assert err == f"taguru: evaluate: --eval FILE is required{SUFFIX}\n"


def test_25_eval_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_main(["--eval", "eval.jsonl"], capsys)
    assert code == 2
    assert err == f"taguru: evaluate: --context NAME is required{SUFFIX}\n"


def test_26_eval_twice() -> None:
    assert usage_message([*MIN, "--eval", "b"]) == "--eval given twice"


def test_27_unknown_flag() -> None:
    assert usage_message([*MIN, "--bogus"]) == "unknown flag '--bogus' for evaluate"
    assert usage_message(["--", *MIN]) == "unknown flag '--' for evaluate"


def test_28_trailing_positional() -> None:
    assert usage_message([*MIN, "extra"]) == "evaluate takes no positional arguments"
    assert usage_message([*MIN, "-x"]) == "evaluate takes no positional arguments"


def test_29_minimal_flags() -> None:
    options = parse_run_args(MIN)
    assert options == RunOptions(eval_path="eval.jsonl", context="sake")
    assert options.out == "evaluation.json"
    assert options.url is None and options.config is None and options.thresholds is None
    assert options.concurrency == 8
    assert options.refusal_rule is None and options.resolved_refusal_rule == "semantic"
    assert options.store_dir is None and not options.no_store


def test_30_all_flags_captured() -> None:
    options = parse_run_args(
        [
            "--eval", "e.jsonl", "--context", "ctx", "--url", "http://h:1/", "--config", "c.env",
            "--out", "o.json", "--thresholds", "t.json", "--assembly", "--max-items", "5",
            "--max-bytes", "+100", "--max-tokens", "7", "--rerank", "m", "--concurrency", "3",
            "--must-refuse", "mr.jsonl", "--refusal-rule", "any", "--store", "runs",
        ]
    )  # fmt: skip
    assert options == RunOptions(
        eval_path="e.jsonl",
        context="ctx",
        url="http://h:1",
        config="c.env",
        out="o.json",
        thresholds="t.json",
        assembly=True,
        max_items=5,
        max_bytes=100,
        max_tokens=7,
        rerank="m",
        concurrency=3,
        must_refuse="mr.jsonl",
        refusal_rule="any",
        store_dir="runs",
        no_store=False,
    )


def test_31_no_assembly_no_budget() -> None:
    options = parse_run_args(MIN)
    assert options is not None
    assert not options.assembly and not options.budget_given and options.rerank is None
    assert options.mode == "baseline" and not options.records_budget


def test_32_assembly_alone() -> None:
    options = parse_run_args([*MIN, "--assembly"])
    assert options is not None
    assert options.assembly and not options.budget_given and options.records_budget
    assert options.budget == Budget(40, 65536, 4000)
    assert options.mode == "assembly"


def test_33_max_items_alone() -> None:
    options = parse_run_args([*MIN, "--max-items", "5"])
    assert options is not None
    assert (options.max_items, options.max_bytes, options.max_tokens) == (5, None, None)
    assert options.budget_given and options.records_budget
    assert options.budget.to_json() == {"max_items": 5, "max_bytes": 65536, "max_tokens": 4000}


@pytest.mark.parametrize("flag", COUNT_FLAGS)
@pytest.mark.parametrize(
    "value",
    [
        "0",
        "abc",
        "-1",
        " 5",
        "5 ",
        "1_0",
        "1.5",
        "+",
        "",
        "18446744073709551616",
        "٣",
        # Past int()'s 4,300-digit limit: a ValueError traceback before.
        "9" * 5000,
        "+" + "9" * 5000,
    ],
)
def test_34_bad_positive_integers(flag: str, value: str) -> None:
    assert usage_message([*MIN, flag, value]) == f"{flag} needs a positive integer"


def test_34_leading_zeros_do_not_count_against_the_length() -> None:
    options = parse_run_args([*MIN, "--max-items", "+" + "0" * 5000 + "7"])
    assert options is not None and options.max_items == 7


def test_a_huge_demo_run_count_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_main(["demo", "--runs", "9" * 5000], capsys)
    assert code == 2
    assert err == (
        "taguru: evaluate: demo: --runs needs a positive integer"
        " — try 'python -m taguru_eval demo --help'\n"
    )


@pytest.mark.parametrize("flag", COUNT_FLAGS)
def test_34_missing_count_value(flag: str) -> None:
    assert usage_message([*MIN, flag]) == f"{flag} needs a positive integer"


def test_repeat_sends_each_case_up_to_a_hundred_times(capsys: pytest.CaptureFixture[str]) -> None:
    plain = parse_run_args(MIN)
    assert plain is not None and plain.repeat == 1
    options = parse_run_args([*MIN, "--repeat", "+100"])
    assert options is not None and options.repeat == 100
    assert usage_message([*MIN, "--repeat", "101"]) == (
        "--repeat needs a positive integer of at most 100"
    )
    # A repeated run keeps no checkpoint, so --resume has nothing to continue.
    message = usage_message([*MIN, "--repeat", "2", "--resume"])
    assert message == (
        "--resume cannot continue a run with --repeat: a repeated run keeps no checkpoint, "
        "run it again without --resume"
    )
    assert parse_run_args([*MIN, "--repeat", "1", "--resume"]) is not None
    code, out, err = run_main(["run", *MIN, "--repeat", "0"], capsys)
    assert (code, out) == (2, "")
    assert err == f"taguru: evaluate: --repeat needs a positive integer{SUFFIX}\n"
    # The library meets the same rule with the same words.
    with pytest.raises(UsageError, match="at most 100"):
        RunOptions(eval_path="e", context="c", repeat=1000)
    with pytest.raises(UsageError, match="--repeat needs"):
        RunOptions(eval_path="e", context="c", repeat=True)
    assert "--repeat N" in HELP


def test_35_assembly_twice() -> None:
    assert usage_message([*MIN, "--assembly", "--assembly"]) == "--assembly given twice"


@pytest.mark.parametrize("flag", COUNT_FLAGS)
def test_36_count_twice_checked_before_value(flag: str) -> None:
    assert usage_message([*MIN, flag, "5", flag, "garbage"]) == f"{flag} given twice"
    assert usage_message([*MIN, flag, "5", flag]) == f"{flag} given twice"


def test_36_rerank_twice() -> None:
    args = [*MIN, "--assembly", "--rerank", "a", "--rerank", "b"]
    assert usage_message(args) == "--rerank given twice"


def test_37_rerank_without_assembly() -> None:
    assert usage_message([*MIN, "--rerank", "some-model"]) == "--rerank requires --assembly"


def test_38_rerank_with_assembly() -> None:
    options = parse_run_args([*MIN, "--rerank", "some-model", "--assembly"])
    assert options is not None and options.rerank == "some-model"


def test_39_no_args(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main([], capsys)
    assert (code, out) == (2, "")
    assert err == f"taguru: evaluate: expected --eval FILE --context NAME{SUFFIX}\n"


@pytest.mark.parametrize("word", ["bogus", "-x", "", "evaluate", "-"])
def test_40_unknown_word(word: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_main([word, *MIN], capsys)
    assert code == 2
    assert err == f"taguru: evaluate: {UNKNOWN.format(word)}{SUFFIX}\n"


@pytest.mark.parametrize(
    "args",
    [["--help"], ["-h"], ["run", "--help"], [*MIN, "-h"], ["--eval", "x", "--help", "--bogus"]],
)
def test_41_help(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(args, capsys)
    assert (code, err) == (0, "")
    assert out == HELP


def test_help_after_a_bad_argument_is_too_late() -> None:
    assert usage_message(["--bogus", "--help"]) == "unknown flag '--bogus' for evaluate"


# --------------------------------------------------------------------------- §2.2 messages


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--eval", "--eval needs a file path"),
        ("--context", "--context needs a name"),
        ("--url", "--url needs a value"),
        ("--config", "--config needs a file path"),
        ("--out", "--out needs a file path"),
        ("--thresholds", "--thresholds needs a file path"),
        ("--rerank", "--rerank needs a model name"),
        ("--must-refuse", "--must-refuse needs a file path"),
        ("--refusal-rule", "--refusal-rule needs a value"),
        ("--store", "--store needs a directory"),
    ],
)
def test_value_flag_messages(flag: str, message: str) -> None:
    assert usage_message([*MIN, flag]) == message
    value = "any" if flag == "--refusal-rule" else "v"
    twice = [*MIN, flag, value, flag, value]
    if flag in ("--eval", "--context"):
        twice = [flag, "v", *MIN]
    assert usage_message(twice) == f"{flag} given twice"
    # needs-a-value is checked before given-twice
    base = (
        ["--context", "c"] if flag == "--eval" else ["--eval", "e"] if flag == "--context" else MIN
    )
    assert usage_message([*base, flag, value, flag]) == message


def test_value_flag_consumes_next_argument_verbatim() -> None:
    options = parse_run_args(["--eval", "--context", "--context", "--eval"])
    assert options is not None
    assert (options.eval_path, options.context) == ("--context", "--eval")
    assert usage_message(["--eval", "--context"]) == "--context NAME is required"


def test_refusal_rule_messages() -> None:
    assert usage_message([*MIN, "--refusal-rule", "strict"]) == (
        "--refusal-rule must be 'semantic' or 'any'"
    )
    assert usage_message([*MIN, "--refusal-rule", "any"]) == "--refusal-rule requires --must-refuse"
    options = parse_run_args([*MIN, "--must-refuse", "m", "--refusal-rule", "semantic"])
    assert options is not None and options.refusal_rule == "semantic"


def test_post_loop_order() -> None:
    assert usage_message(["--rerank", "m", "--refusal-rule", "any"]) == "--eval FILE is required"
    assert usage_message(["--eval", "e", "--rerank", "m"]) == "--context NAME is required"
    args = [*MIN, "--rerank", "m", "--refusal-rule", "any", "--store", "d", "--no-store"]
    assert usage_message(args) == "--rerank requires --assembly"
    args = [*MIN, "--refusal-rule", "any", "--store", "d", "--no-store"]
    assert usage_message(args) == "--refusal-rule requires --must-refuse"


def test_store_flags() -> None:
    assert usage_message([*MIN, "--store", "d", "--no-store"]) == (
        "--store and --no-store are exclusive"
    )
    assert usage_message([*MIN, "--no-store", "--no-store"]) == "--no-store given twice"
    options = parse_run_args([*MIN, "--no-store"])
    assert options is not None and options.no_store and options.store_dir is None


def test_budget_clamped_silently() -> None:
    options = parse_run_args(
        [*MIN, "--max-items", "5000", "--max-bytes", "99999999", "--max-tokens", "123456789"]
    )
    assert options is not None
    assert options.budget == Budget(1000, 1048576, 123456789)


@pytest.mark.parametrize(
    ("text", "value"), [("1", 1), ("+7", 7), ("007", 7), ("18446744073709551615", 2**64 - 1)]
)
def test_parse_positive_accepts(text: str, value: int) -> None:
    assert parse_positive(text) == value


def test_url_trailing_slashes_removed() -> None:
    options = parse_run_args([*MIN, "--url", "http://h:1///"])
    assert options is not None and options.url == "http://h:1"


# --------------------------------------------------------------------------- §2.1 dispatch


def test_run_alias_is_run_mode(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_main(["run"], capsys)
    assert code == 2
    assert err == f"taguru: evaluate: --eval FILE is required{SUFFIX}\n"
    code, _out, err = run_main(["run", "--context", "x", "extra"], capsys)
    assert err == f"taguru: evaluate: evaluate takes no positional arguments{SUFFIX}\n"


def test_subcommands_are_plain_functions() -> None:
    assert set(SUBCOMMANDS) == {
        "compare",
        "comment",
        "action-step",
        "export",
        "measures",
        "serve",
        "wait",
        "load",
        "demo",
        "report",
        "ingest",
        "import-golden",
        "import-qrels",
        "refusal-bands",
    }
    assert all(callable(entry) for entry in SUBCOMMANDS.values())


def test_a_word_that_is_no_subcommand_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for word, meant in (
        ("refusal_bands", "'refusal-bands'"),
        ("golden", "'import-golden'"),
        ("import_golden", "'import-golden'"),
    ):
        code, out, err = run_main([word, "a.csv"], capsys)
        assert (code, out) == (2, "")
        assert err.startswith(f"taguru: evaluate: unknown subcommand '{word}'")
        # taguru's one line, then the closest subcommand and the help that exists here.
        assert without_hints(err).endswith(f"{TAGURU_SUFFIX}\n")
        assert without_hints(err).count("\n") == 1
        assert hints(err) == [f"did you mean {meant}? See python -m taguru_eval --help"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "demo: unexpected argument '--bogus'"),
        (["--runs", "0"], "demo: --runs needs a positive integer"),
        (["--runs"], "demo: --runs needs a value"),
        (["--max-items", "3"], "demo: --max-items requires --assembly"),
        (["--assembly", "--runs", "2"], "demo: --assembly and --runs cannot be combined"),
    ],
)
def test_demo_usage_errors_point_at_the_demo_s_help(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Like every project subcommand (report, export, ingest, …); only run mode and
    # compare keep taguru's 'taguru evaluate --help' (GATE_AND_COMPARE.md §1.1).
    code, out, err = run_main(["demo", *args], capsys)
    assert (code, out) == (2, "")
    assert err == f"taguru: evaluate: {message} — try 'python -m taguru_eval demo --help'\n"


def test_compare_usage_errors_keep_taguru_s_help_pointer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _out, err = run_main(["compare", "--bogus"], capsys)
    assert code == 2
    assert err == f"taguru: evaluate: unknown flag '--bogus' for evaluate compare{COMPARE_SUFFIX}\n"


def test_a_missing_extra_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_import = extras.import_module

    def without_uvicorn(name: str) -> object:
        if name == "uvicorn":
            raise ModuleNotFoundError("No module named 'uvicorn'", name="uvicorn")
        return real_import(name)

    monkeypatch.setattr(extras, "import_module", without_uvicorn)
    for word, args in (("demo", []), ("serve", ["data"])):
        code, out, err = run_main([word, *args], capsys)
        assert (code, out) == (2, "")
        assert err == (
            f"taguru: {word}: needs the 'server' extra, which is not installed "
            "(no module 'uvicorn'): pip install 'taguru_eval[server]'\n"
        )


def test_subcommand_called_with_remaining_args(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[list[str]] = []

    def fake(argv: list[str]) -> int:
        calls.append(argv)
        return 7

    monkeypatch.setitem(SUBCOMMANDS, "compare", fake)
    code, _out, _err = run_main(["compare", "a.json", "b.json", "--out", "c"], capsys)
    assert code == 7
    assert calls == [["a.json", "b.json", "--out", "c"]]


def test_run_mode_hands_prepared_run_to_the_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_path = tmp_path / "eval.jsonl"
    eval_path.write_text('{"taguru_eval":1}\n{"case_id":"c1","query":"q"}\n', encoding="utf-8")
    seen: list[PreparedRun] = []

    def fake_runner(prepared: PreparedRun) -> int:
        seen.append(prepared)
        return 3

    monkeypatch.setattr(cli_run, "run_prepared", fake_runner)
    monkeypatch.delenv("TAGURU_CONFIG", raising=False)
    code, _out, _err = run_main(
        ["run", "--eval", str(eval_path), "--context", "c", "--url", "http://h:9/"], capsys
    )
    assert code == 3
    assert seen[0].base_url == "http://h:9"
    assert seen[0].eval_set.case_ids == ["c1"]


def test_keyboard_interrupt_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(args: list[str]) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_main, "dispatch", interrupted)
    code, _out, err = run_main(["--help"], capsys)
    assert code == 130
    assert "Traceback" not in err


def test_project_errors_keep_their_prefix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail_with(error: InputError) -> None:
        def raiser(args: list[str]) -> int:
            raise error

        monkeypatch.setattr(cli_main, "dispatch", raiser)

    config_line = "taguru: config x.env: line 2: expected KEY=VALUE, got 'y' — try 'taguru --help'"
    fail_with(ConfigError(config_line))
    assert run_main([], capsys)[2] == config_line + "\n"
    fail_with(InputError("eval.jsonl: line 2: not JSON: x"))
    assert run_main([], capsys)[2] == "taguru: evaluate: eval.jsonl: line 2: not JSON: x\n"
    # The prefix is the error's kind, not a guess from its words: a file named "taguru".
    fail_with(InputError("taguru: line 2: not JSON: x", path="taguru"))
    assert run_main([], capsys)[2] == "taguru: evaluate: taguru: line 2: not JSON: x\n"


# --------------------------------------------------------------------------- help text


def test_help_content() -> None:
    assert HELP.startswith("usage: python -m taguru_eval --eval FILE --context NAME [--url URL]")
    assert "python -m taguru_eval compare BASE.json HEAD.json [--out FILE]" in HELP
    for flag in [
        "--eval", "--context", "--url", "--config", "--out", "--thresholds", "--assembly",
        "--max-items", "--max-bytes", "--max-tokens", "--rerank", "--concurrency",
        "--must-refuse", "--refusal-rule", "--store", "--no-store",
    ]:  # fmt: skip
        assert f"  {flag} " in HELP, flag
    for word in ["run", "compare", "serve", "demo", "report", "ingest"]:
        assert f"  {word} " in HELP, word
    for code in "0123":
        assert f"\n  {code}  " in HELP
    import re

    read = {"TAGURU_ADDR", "TAGURU_CONFIG", "TAGURU_API_TOKEN", "TAGURU_API_TOKENS"}
    assert set(re.findall(r"TAGURU_[A-Z_]+", HELP)) <= read


# --------------------------------------------------------------------------- subprocess


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT)}
    return subprocess.run(
        [sys.executable, "-m", "taguru_eval", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_subprocess_broken_eval_is_one_line_exit_2_no_network(tmp_path: Path) -> None:
    (tmp_path / "broken.jsonl").write_text(
        textwrap.dedent(
            """\
            {"taguru_eval":1}

            {"case_id":"c1","query":"q","expected_sources":[{"source":"a","relevance":"high"}]}
            """
        ),
        encoding="utf-8",
    )
    url = f"http://127.0.0.1:{closed_port()}"
    result = run_cli("--eval", "broken.jsonl", "--context", "x", "--url", url, cwd=tmp_path)
    # exit 1 would mean the network phase ran (nothing listens there); 2 is the input error
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("taguru: evaluate: broken.jsonl: line 3: not a valid eval case: ")
    assert "expected_sources[0].relevance" in lines[0]
    assert not (tmp_path / "evaluation.json").exists()
    # control: the same command with a valid file reaches the network phase and fails there (1)
    (tmp_path / "ok.jsonl").write_text('{"taguru_eval":1}\n{"case_id":"c1","query":"q"}\n', "utf-8")
    result = run_cli("--eval", "ok.jsonl", "--context", "x", "--url", url, cwd=tmp_path)
    assert result.returncode == 1


def test_subprocess_help_and_usage(tmp_path: Path) -> None:
    result = run_cli("--help", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == HELP
    result = run_cli("bogus", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"taguru: evaluate: {UNKNOWN.format('bogus')}{SUFFIX}\n"
    result = run_cli("run", "--eval", "e", "--context", "c", "--max-items", "0", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"taguru: evaluate: --max-items needs a positive integer{SUFFIX}\n"


def test_subprocess_limit_and_url_errors_before_network(tmp_path: Path) -> None:
    (tmp_path / "e.jsonl").write_text(
        '{"taguru_eval":1}\n{"case_id":"c1","query":"q","options":{"limit":0}}\n', encoding="utf-8"
    )
    result = run_cli("--eval", "e.jsonl", "--context", "x", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "taguru: evaluate: e.jsonl: line 2: case 'c1': options.limit: must be 1..=1000, got 0\n"
    )
    (tmp_path / "ok.jsonl").write_text('{"taguru_eval":1}\n{"case_id":"c1","query":"q"}\n', "utf-8")
    result = run_cli("--eval", "ok.jsonl", "--context", "x", "--url", "http://u:p@h", cwd=tmp_path)
    assert result.returncode == 2
    assert "must not carry credentials" in result.stderr
    assert not (tmp_path / "evaluation.json").exists()
