"""taguru's own ``evaluate`` and ``python -m taguru_eval``, run the same way.

Each runs as a child process in the same working directory with the same
environment (a token, if any, in ``TAGURU_API_TOKEN``), so their exit codes,
stdout, stderr and files can be compared byte for byte. ``masked`` blanks what
differs between any two runs of one tool (latencies, clocks); ``artifact_view``
drops from an evaluation.json what the issue lets differ between the tools.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.paths import PROJECT_ROOT

TIMEOUT_S = 240


@dataclass(frozen=True)
class Ran:
    """One finished command: its exit code and what it printed."""

    code: int
    stdout: str
    stderr: str

    def masked(self) -> Ran:
        return Ran(self.code, masked(self.stdout), masked(self.stderr))


def _environment(token: str | None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": str(PROJECT_ROOT),
        "TAGURU_EVAL_SHARED": os.environ.get("TAGURU_EVAL_SHARED", ""),
    }
    if token is not None:
        env["TAGURU_API_TOKEN"] = token
    return {key: value for key, value in env.items() if value}


def _run(argv: list[str], cwd: Path, token: str | None) -> Ran:
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=_environment(token),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def taguru(binary: Path, args: list[str], cwd: Path, token: str | None = None) -> Ran:
    """``taguru evaluate ARGS`` (``args`` may start with ``compare``)."""
    return _run([str(binary), "evaluate", *args], cwd, token)


def ours(args: list[str], cwd: Path, token: str | None = None) -> Ran:
    """``python -m taguru_eval ARGS``; a run gets ``--no-store`` (taguru keeps no run store)."""
    run_mode = bool(args) and args[0] != "compare"
    extra = ["--no-store"] if run_mode else []
    return _run([sys.executable, "-m", "taguru_eval", *args, *extra], cwd, token)


_LATENCY = re.compile(r"(latency\S*|_ms)(\"?:? ?)\d+(\.\d+)?")


def masked(text: str) -> str:
    """``text`` with every latency figure replaced by ``#``."""
    return _LATENCY.sub(r"\1\2#", text)


_MEASURED_ELSEWHERE = frozenset({"generated_at"})
_RUN_SPECIFIC_INPUTS = frozenset({"out", "concurrency"})


def artifact_view(path: Path) -> dict[str, Any]:
    """An evaluation.json without what the tools may write differently: every
    ``latency_ms``, the ``latency.*`` metrics and definitions, ``generated_at``,
    ``inputs.out``, ``inputs.concurrency`` and the definitions' prose (their
    keys, units and statistics stay)."""
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    for key in _MEASURED_ELSEWHERE:
        document.pop(key, None)
    for key in _RUN_SPECIFIC_INPUTS:
        document["inputs"].pop(key, None)
    document["metrics"] = {
        name: value
        for name, value in document["metrics"].items()
        if not name.startswith("latency.")
    }
    document["definitions"] = {
        name: {key: value for key, value in entry.items() if key in ("unit", "statistic")}
        for name, entry in document["definitions"].items()
        if not name.startswith("latency.")
    }
    return _without_latencies(document)


def _without_latencies(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_latencies(item) for key, item in value.items() if key != "latency_ms"}
    if isinstance(value, list):
        return [_without_latencies(item) for item in value]
    return value


def changes_view(path: Path) -> list[str]:
    """changes.jsonl's lines, the header's ``generated_at`` (the compare's clock) blanked."""
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[0] = re.sub(r'"generated_at":"[^"]*"', '"generated_at":"#"', lines[0], count=1)
    return lines
