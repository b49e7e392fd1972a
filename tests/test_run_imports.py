"""What a run imports, written down in docs/architecture.md, is what it imports.

One run of the bundled demo against the reference server, in a fresh
interpreter under ``python -X importtime``: the package's modules it loaded
must be the documented list, the installed distributions it loaded the
documented ones and what those require, and never pandas, httpx, pyarrow or
numpy (a run's tables are Polars frames, stored by Polars' Parquet writer), nor
the reference server beside the package (``taguru_refserver``).
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from support.paths import DATA

from taguru_refserver.serve import running_server

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "taguru_eval"
DOC = ROOT / "docs" / "architecture.md"
HEADING = "## What a run imports"
NEVER = (
    "pandas", "httpx", "httpcore", "jinja2", "altair", "starlette", "uvicorn",
    "pyarrow", "numpy",  # 0.13 s and 40-55 MiB; compare and dataset() import them
    "opentelemetry", "mlflow",  # the otel and mlflow extras: only with --otlp / --mlflow
    "taguru_refserver",  # the sibling package: serve and demo start it, never a run
)  # fmt: skip


def _documented() -> tuple[dict[str, set[str]], set[str]]:
    """(package -> module names, distributions) from the section's two text blocks."""
    section = DOC.read_text(encoding="utf-8").split(HEADING, 1)[1]
    modules_block, distributions_block = re.findall(r"```text\n(.*?)```", section, re.S)[:2]
    modules: dict[str, set[str]] = {}
    for line in modules_block.splitlines():
        package, _, names = line.partition(":")
        modules[package.strip()] = set(names.split())
    return modules, set(distributions_block.split())


def _importtime(arguments: list[str], cwd: Path) -> list[str]:
    """Every module ``python -X importtime ARGUMENTS`` imported, in order."""
    command = [sys.executable, "-X", "importtime", *arguments]
    completed = subprocess.run(command, capture_output=True, text=True, cwd=cwd, check=False)
    assert completed.returncode in (0, 3), completed.stderr[-2000:]
    return [
        line.rpartition("|")[2].strip()
        for line in completed.stderr.splitlines()
        if line.startswith("import time:") and "[us]" not in line
    ]


def _imported(tmp_path: Path) -> list[str]:
    """Every module a run of the demo imported beyond what the bare interpreter
    imports at start-up (``site`` and its ``.pth`` hooks)."""
    with running_server(DATA) as url:
        run = _importtime(
            [
                "-m", "taguru_eval", "--eval", str(DATA / "sake" / "eval.jsonl"),
                "--context", "sake", "--url", url, "--out", str(tmp_path / "evaluation.json"),
                "--store", str(tmp_path / "runs"), "--no-step-summary",
            ],
            tmp_path,
        )  # fmt: skip
    bare = set(_importtime(["-c", "pass"], tmp_path))
    return [name for name in run if name not in bare]


def _by_package(names: list[str]) -> dict[str, set[str]]:
    """The package's modules as the document lists them: a sub-package as ``__init__``
    of its own line, a module under its package (the top level as ``taguru_eval``)."""
    found: dict[str, set[str]] = defaultdict(set)
    for name in names:
        parts = name.split(".")
        if parts[0] != "taguru_eval":
            continue
        if (PACKAGE.joinpath(*parts[1:]) / "__init__.py").is_file():
            found[name].add("__init__")
        else:
            found[".".join(parts[:-1])].add(parts[-1])
    return dict(found)


def _requirements(distribution: str, seen: set[str]) -> set[str]:
    """``distribution`` and everything it requires, transitively (installed ones)."""
    key = distribution.lower().replace("_", "-")
    if key in seen:
        return seen
    seen.add(key)
    try:
        requires = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        return seen
    for requirement in requires:
        if "extra ==" in requirement:
            continue
        name = re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0]
        _requirements(name, seen)
    return seen


def test_a_run_imports_what_the_architecture_page_says(tmp_path: Path) -> None:
    names = _imported(tmp_path)
    tops = {name.split(".")[0] for name in names}
    assert not tops & set(NEVER), sorted(tops & set(NEVER))
    modules, distributions = _documented()
    assert _by_package(names) == modules

    owners = metadata.packages_distributions()
    loaded = {
        owner.lower().replace("_", "-")
        for top in tops - set(sys.stdlib_module_names) - {"taguru_eval"}
        for owner in owners.get(top, [])  # an optional import that failed has no owner
    }
    allowed: set[str] = set()
    for distribution in distributions:
        _requirements(distribution, allowed)
    documented = {name.lower() for name in distributions}
    assert documented <= loaded
    assert loaded <= allowed, sorted(loaded - allowed)
