"""Runs the composite action (``action.yml``) the way a GitHub runner would, on loopback.

Each ``run:`` step runs in bash with its ``env:`` resolved and its own
``$GITHUB_OUTPUT`` file; the ``uses:`` steps are played by stand-ins for the
actions they name (the Actions cache as a dict of folders, an artifact upload
as a copy). Only the expression forms ``action.yml`` uses are understood — a
plain ``${{ context.path }}`` reference, and the conditions ``always()``,
``steps.S.outputs.O == 'true'`` and their ``&&`` — and anything else fails the
test, so an edit to the action that this runner would misread cannot pass.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"

_REFERENCE = re.compile(r"\$\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}")
_OUTPUT_TRUE = re.compile(r"steps\.([a-z-]+)\.outputs\.([a-z-]+) == 'true'")


def action() -> dict[str, Any]:
    loaded = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@dataclass
class Step:
    """What one step did."""

    id: str
    ran: bool
    code: int = 0
    stdout: str = ""
    stderr: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class Job:
    """One job that used the action: its steps, in order, and whether it failed."""

    steps: list[Step]
    outputs: dict[str, str]

    @property
    def failed(self) -> bool:
        return any(step.code != 0 for step in self.steps)

    def step(self, step_id: str) -> Step:
        return next(step for step in self.steps if step.id == step_id)

    @property
    def log(self) -> str:
        return "".join(step.stdout + step.stderr for step in self.steps)


@dataclass
class Runner:
    """A runner's workspace, environment and the state that outlives a job: the
    Actions cache (key -> saved folder, newest last) and the uploaded artifacts."""

    workspace: Path
    env: dict[str, str]
    cache: dict[str, Path] = field(default_factory=dict)
    artifacts: dict[str, Path] = field(default_factory=dict)

    def run_job(self, inputs: Mapping[str, str], github: Mapping[str, str]) -> Job:
        """Run every step of the action once, as a job's ``uses: ./`` would."""
        spec = action()
        # A default may be an expression itself (the token's is ``github.token``).
        values = {
            name: str(inputs[name])
            if name in inputs
            else _resolve(str(declared.get("default", "")), {"github": github})
            for name, declared in spec["inputs"].items()
        }
        for name in inputs:
            assert name in values, f"input {name} is not declared in action.yml"
        outputs: dict[str, dict[str, str]] = {}
        steps: list[Step] = []
        job_dir = self.workspace.parent / f"job-{len(list(self.workspace.parent.glob('job-*')))}"
        job_dir.mkdir()
        for index, declared in enumerate(spec["runs"]["steps"]):
            step_id = str(declared.get("id", f"step-{index}"))
            failed_before = any(step.code != 0 for step in steps)
            if not self._runs(declared.get("if"), outputs, failed_before):
                steps.append(Step(step_id, ran=False))
                outputs[step_id] = {}  # a skipped step's outputs read as ''
                continue
            context = _context(values, outputs, github)
            if "uses" in declared:
                step = self._uses(step_id, declared, context, job_dir)
            else:
                step = self._shell(step_id, declared, context, job_dir)
            outputs[step_id] = step.outputs
            steps.append(step)
        context = _context(values, outputs, github)
        job_outputs = {
            name: _resolve(str(declared["value"]), context)
            for name, declared in spec["outputs"].items()
        }
        return Job(steps, job_outputs)

    @staticmethod
    def _runs(condition: object, outputs: Mapping[str, Mapping[str, str]], failed: bool) -> bool:
        if condition is None:
            return not failed
        parts = [part.strip() for part in str(condition).split("&&")]
        always = "always()" in parts
        result = always or not failed
        for part in parts:
            if part == "always()":
                continue
            match = _OUTPUT_TRUE.fullmatch(part)
            assert match, f"the test runner does not read the condition {condition!r}"
            result = result and outputs.get(match[1], {}).get(match[2]) == "true"
        return result

    def _shell(
        self, step_id: str, declared: Mapping[str, Any], context: Mapping[str, Any], job_dir: Path
    ) -> Step:
        if step_id == "install":
            # The package under test is installed in this interpreter already.
            assert "pip install" in declared["run"]
            return Step(step_id, ran=True)
        assert declared.get("shell") == "bash"
        output_file = job_dir / f"{step_id}.output"
        output_file.touch()
        env = {
            **self.env,
            "GITHUB_OUTPUT": str(output_file),
            "GITHUB_ACTION_PATH": str(ROOT),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        for name, value in (declared.get("env") or {}).items():
            env[name] = _resolve(str(value), context)
        done = subprocess.run(
            ["bash", "-e", "-c", declared["run"]],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        outputs = {}
        for line in output_file.read_text(encoding="utf-8").splitlines():
            name, equals, value = line.partition("=")
            assert equals, f"{step_id} wrote {line!r} to GITHUB_OUTPUT"
            outputs[name] = value
        return Step(step_id, True, done.returncode, done.stdout, done.stderr, outputs)

    def _uses(
        self, step_id: str, declared: Mapping[str, Any], context: Mapping[str, Any], job_dir: Path
    ) -> Step:
        uses = str(declared["uses"])
        given = {
            name: _resolve(str(value), context)
            for name, value in (declared.get("with") or {}).items()
        }
        if uses.startswith("actions/setup-python@"):
            return Step(step_id, ran=True)
        if uses.startswith("actions/cache/restore@"):
            return Step(step_id, True, outputs=self._restore(given))
        if uses.startswith("actions/cache/save@"):
            key = given["key"]
            if key in self.cache:  # GitHub keeps the first cache of a key, and warns
                return Step(step_id, True, stderr=f"cache {key} exists\n")
            saved = job_dir / f"cache-{len(self.cache)}"
            shutil.copytree(self.workspace / given["path"], saved)
            self.cache[key] = saved
            return Step(step_id, True)
        if uses.startswith("actions/upload-artifact@"):
            name = given["name"]
            copy = job_dir / f"artifact-{name}"
            shutil.copytree(self.workspace / given["path"], copy)
            self.artifacts[name] = copy
            url = f"https://github.example/acme/handbook/actions/runs/1/artifacts/{len(self.artifacts)}"
            return Step(step_id, True, outputs={"artifact-url": url})
        raise AssertionError(f"the test runner has no stand-in for {uses}")

    def _restore(self, given: Mapping[str, str]) -> dict[str, str]:
        """actions/cache/restore: the exact key, else the newest key with a restore prefix."""
        key = given["key"]
        prefixes = [line.strip() for line in given.get("restore-keys", "").splitlines() if line]
        found = key if key in self.cache else None
        if found is None:
            matches = [name for name in self.cache if any(name.startswith(p) for p in prefixes)]
            found = matches[-1] if matches else None
        if found is None:
            return {"cache-hit": "false"}
        target = self.workspace / given["path"]
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.cache[found], target)
        return {"cache-hit": str(found == key).lower(), "cache-matched-key": found}


def _context(
    inputs: Mapping[str, str], outputs: Mapping[str, Mapping[str, str]], github: Mapping[str, str]
) -> dict[str, Any]:
    """The expression contexts a step sees: ``inputs``, ``steps.<id>.outputs``, ``github``."""
    steps = {step_id: {"outputs": values} for step_id, values in outputs.items()}
    return {"inputs": inputs, "steps": steps, "github": github}


def _resolve(text: str, context: Mapping[str, Any]) -> str:
    def lookup(match: re.Match[str]) -> str:
        current: Any = context
        for part in match[1].split("."):
            assert isinstance(current, Mapping), f"cannot resolve {match[0]}"
            current = current.get(part, "")
        return str(current)

    resolved = _REFERENCE.sub(lookup, text)
    assert "${{" not in resolved, f"the test runner does not read {text!r}"
    return resolved
