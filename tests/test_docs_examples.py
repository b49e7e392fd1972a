"""The README and the documentation pages (``docs/``) say what really runs.

- Every ``python`` block runs as written, in one working directory that holds a link
  to the bundled ``data/`` (the README's library example first: it makes the run
  store the other examples read). A block that cannot run here says why, in an
  ``<!-- not run: … -->`` line right above it.
- The README's quick start runs end to end against the reference server, standing in
  for "your own taguru server": its eval set, its command, its thresholds file and each
  command its list names.
- Every ``python -m taguru_eval …`` command line, in a code block or inline, uses only
  flags that command's own ``--help`` lists.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.paths import DATA, PROJECT_ROOT

from taguru_eval.cli.main import SUBCOMMANDS, main
from taguru_refserver.serve import running_server

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*$")
COMMAND = re.compile(r"python -m taguru_eval((?: [^`\n|]*)?)")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _blocks(page: Path) -> Iterator[tuple[str, str, str]]:
    """(language, code, the line above the fence) of each fenced block of ``page``."""
    text = page.read_text("utf-8")
    for match in FENCE.finditer(text):
        indent = match.group(1)
        code = "".join(line.removeprefix(indent) + "\n" for line in match.group(3).splitlines())
        above = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        yield match.group(2), code, above


def _python_blocks() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for number, (language, code, above) in enumerate(_blocks(page)):
            if language != "python":
                continue
            skipped = NOT_RUN.search(above)
            if skipped:
                assert skipped.group(1).strip(), f"{page.name}: a skipped block names no reason"
                continue
            found.append((f"{page.name}#{number}", code))
    return found


def _prepared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "data").symlink_to(DATA, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    for name in ("TAGURU_API_TOKEN", "TAGURU_API_TOKENS", "TAGURU_CONFIG", "TAGURU_ADDR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return tmp_path


def test_every_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _prepared(tmp_path, monkeypatch)
    blocks = _python_blocks()
    assert blocks[0][0].startswith("README.md#")  # the library example first: it makes runs/
    assert len(blocks) >= 2
    for label, code in blocks:
        namespace: dict[str, Any] = {"__name__": "__docs__"}
        exec(compile(code, f"<{label}>", "exec"), namespace)


def _section(title: str) -> str:
    readme = (PROJECT_ROOT / "README.md").read_text("utf-8")
    return readme.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def _arguments(command: str) -> list[str]:
    words = shlex.split(command.replace("\\\n", " "))
    assert words[:3] == ["python", "-m", "taguru_eval"], command
    return words[3:]


def test_the_quick_start_runs_against_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _prepared(tmp_path, monkeypatch)
    section = _section("Quick start against your own taguru server")
    fences = [(language, code) for language, code, _ in _blocks_of(section)]
    eval_set, thresholds = [code for language, code in fences if language == "json"]
    (command,) = [code for language, code in fences if language == "sh"]
    (tmp_path / "my.eval.jsonl").write_text(eval_set, encoding="utf-8")
    (tmp_path / "thresholds.json").write_text(thresholds, encoding="utf-8")
    shutil.copy(DATA / "handbook" / "golden.csv", tmp_path / "golden.csv")
    with running_server(DATA) as url:
        args = [url if word == "http://127.0.0.1:8248" else word for word in _arguments(command)]
        assert main(args) == 0
        first = json.loads((tmp_path / "evaluation.json").read_text("utf-8"))
        assert first["metrics"]["recall.recall_at_k"]["n"] == 2
        shutil.copy(tmp_path / "evaluation.json", tmp_path / "base.json")
        assert main([*args, "--thresholds", "thresholds.json"]) == 0
        inline = re.findall(r"`(python -m taguru_eval [^`]+)`", section)
        named = [
            [url if word == "http://127.0.0.1:8248" else word for word in _arguments(line)]
            for line in inline
            if "--help" not in line
        ]
        assert [words[0] for words in named] == ["compare", "report", "import-golden", "--eval"]
        *plain, golden = named
        for words in plain:
            assert main(words) == 0, words
        # The golden CSV's gated run on a server without a vector lane: the must-refuse
        # list is an assertion the default rule cannot evaluate, so the gate fails and
        # says how to measure it.
        (gate,) = re.findall(r'`(\{"taguru_evaluate_thresholds"[^`]+)`', section)
        (tmp_path / "golden_thresholds.json").write_text(gate, encoding="utf-8")
        capsys.readouterr()
        assert main(golden) == 3
        out = capsys.readouterr().out
        (undetermined,) = [line for line in out.splitlines() if "undetermined_rate" in line]
        assert "cases: golden-007, golden-008, golden-009" in undetermined
        assert "--refusal-rule any, a server whose vector lane runs" in undetermined
        assert "abstention.* bounds" in undetermined
        assert "  must-refuse gate: FAIL — every must-refuse case must abstain" in out
        assert "  answers gate: PASS — the thresholds file's answers.* bounds" in out
    assert (tmp_path / "changes.jsonl").is_file()
    assert (tmp_path / "report.html").is_file()
    capsys.readouterr()


def _blocks_of(text: str) -> Iterator[tuple[str, str, str]]:
    for match in FENCE.finditer(text):
        indent = match.group(1)
        code = "".join(line.removeprefix(indent) + "\n" for line in match.group(3).splitlines())
        yield match.group(2), code, ""


def _documented_commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = page.read_text("utf-8")
        for language, code, _ in _blocks(page):
            if language in ("python", "json", "sql"):
                continue
            joined = code.replace("\\\n", " ")
            # A synopsis continues a command on indented lines.
            joined = re.sub(r"\n +(?=\[|--|-o )", " ", joined)
            found += [(page.name, line) for line in COMMAND.findall(joined)]
        found += [(page.name, line) for line in re.findall(r"`python -m taguru_eval([^`]*)`", text)]
    return found


_HELP: dict[str, str] = {}


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    if command not in _HELP:
        capsys.readouterr()
        code = main([command, "--help"] if command else ["--help"])
        assert code == 0
        captured = capsys.readouterr()
        _HELP[command] = captured.out + captured.err
    return _HELP[command]


def test_every_documented_command_uses_real_flags(capsys: pytest.CaptureFixture[str]) -> None:
    commands = _documented_commands()
    assert len(commands) > 30
    problems = []
    for page, line in commands:
        words = line.split()
        command = words[0] if words and words[0] in SUBCOMMANDS else ""
        if command == "" and words[:1] == ["run"]:
            command = ""
        known = set(FLAG.findall(_help(command, capsys)))
        unknown = sorted(set(FLAG.findall(line)) - known - {"--help", "--version"})
        if unknown:
            problems.append(f"{page}: python -m taguru_eval{line}: {unknown}")
    assert problems == []
