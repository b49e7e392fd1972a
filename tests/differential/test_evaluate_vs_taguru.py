"""taguru's own ``evaluate`` and ``python -m taguru_eval`` on one live taguru 0.9.7.

Every mode of ``support.differential.MODES`` runs with both evaluators on the
same server: the exit codes, stdout and stderr (our ``  hint:`` lines aside)
must be equal, and evaluation.json equal but for latencies, the clock,
``inputs.concurrency`` and the definitions prose (ours is in our own words).
The same against a server that requires a token, and ``compare`` of each
tool's artifacts by both tools, byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.differential import (
    MODES,
    OUT,
    TOKEN,
    Mode,
    Outcome,
    assert_same,
    comparable_changes,
    run_ours,
    run_taguru,
    without_hints,
)
from support.taguru import RealTaguru, require_taguru


def _both(
    mode: Mode, url: str, inputs: Path, workdir: Path, token: str | None = None
) -> tuple[Outcome, Outcome]:
    args = [*mode.argv(inputs), "--url", url]
    theirs = run_taguru(require_taguru(), args, workdir / "taguru", token=token)
    ours = run_ours(args, workdir / "ours", token=token)
    return theirs, ours


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.name)
def test_both_evaluators_agree(
    mode: Mode, taguru_server: RealTaguru, mode_inputs: Path, tmp_path: Path
) -> None:
    theirs, ours = _both(mode, taguru_server.url, mode_inputs, tmp_path)
    assert_same(theirs, ours)


AUTHENTICATED = ("sake-baseline", "sake-assembly", "handbook-gate")


@pytest.mark.parametrize("name", AUTHENTICATED)
def test_both_evaluators_agree_with_a_token(
    name: str, taguru_server_with_token: RealTaguru, mode_inputs: Path, tmp_path: Path
) -> None:
    mode = next(mode for mode in MODES if mode.name == name)
    theirs, ours = _both(mode, taguru_server_with_token.url, mode_inputs, tmp_path, TOKEN)
    assert theirs.exit_code == 0
    assert_same(theirs, ours)
    for outcome in (theirs, ours):
        assert TOKEN not in outcome.stdout + outcome.stderr + (outcome.artifact or "")


@pytest.mark.parametrize("token", [None, "a-wrong-token"], ids=["no-token", "wrong-token"])
def test_both_evaluators_are_refused_alike(
    token: str | None, taguru_server_with_token: RealTaguru, mode_inputs: Path, tmp_path: Path
) -> None:
    mode = next(mode for mode in MODES if mode.name == "sake-baseline")
    theirs, ours = _both(mode, taguru_server_with_token.url, mode_inputs, tmp_path, token)
    assert theirs.exit_code == 1
    assert_same(theirs, ours)


COMPARED = (("sake-baseline", "sake-assembly"), ("sake-budgets", "sake-assembly-budgets"))


@pytest.mark.parametrize("pair", COMPARED, ids=lambda pair: " vs ".join(pair))
def test_compare_agrees_on_both_tools_artifacts(
    pair: tuple[str, str], taguru_server: RealTaguru, mode_inputs: Path, tmp_path: Path
) -> None:
    """Each tool's two artifacts, compared by both tools: stdout, exit code and
    changes.jsonl byte for byte."""
    import subprocess
    import sys

    artifacts: dict[str, list[Path]] = {"taguru": [], "ours": []}
    for name in pair:
        mode = next(mode for mode in MODES if mode.name == name)
        theirs, ours = _both(mode, taguru_server.url, mode_inputs, tmp_path / name)
        assert theirs.exit_code == ours.exit_code == 0
        artifacts["taguru"].append(tmp_path / name / "taguru" / OUT)
        artifacts["ours"].append(tmp_path / name / "ours" / OUT)
    for producer, (base, head) in artifacts.items():
        outputs = {}
        for tool, argv in (
            ("taguru", [str(require_taguru()), "evaluate", "compare"]),
            ("ours", [sys.executable, "-m", "taguru_eval", "compare"]),
        ):
            workdir = tmp_path / f"compare-{producer}-by-{tool}"
            workdir.mkdir()
            completed = subprocess.run(
                [*argv, str(base), str(head), "--out", "changes.jsonl"],
                cwd=workdir,
                capture_output=True,
                text=True,
                check=False,
            )
            changes = (workdir / "changes.jsonl").read_bytes()
            outputs[tool] = (completed.returncode, completed.stdout, completed.stderr, changes)
        assert outputs["ours"][0] == outputs["taguru"][0] == 0
        assert outputs["ours"][1] == outputs["taguru"][1]
        assert without_hints(outputs["ours"][2]) == outputs["taguru"][2]
        # Byte for byte but for the header's clock (when each compare ran).
        assert comparable_changes(outputs["ours"][3].decode()) == comparable_changes(
            outputs["taguru"][3].decode()
        ), producer
