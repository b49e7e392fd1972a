"""The README's library example runs as written, and writes where the README says.

The ``python`` block under "Library use" is executed as it stands, in an empty
working directory holding only a link to the bundled ``data/``; it starts the
reference server itself (``running_server``) and evaluates over loopback.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from support.paths import DATA, PROJECT_ROOT

import taguru_eval


def library_example() -> str:
    readme = (PROJECT_ROOT / "README.md").read_text("utf-8")
    section = readme.split("## Library use", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "README: no python block under 'Library use'"
    return match.group(1)


def test_the_library_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").symlink_to(DATA, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    for name in ("TAGURU_API_TOKEN", "TAGURU_API_TOKENS", "TAGURU_CONFIG", "TAGURU_ADDR"):
        monkeypatch.delenv(name, raising=False)
    namespace: dict[str, Any] = {}
    exec(compile(library_example(), "<README library example>", "exec"), namespace)
    run = namespace["run"]
    assert isinstance(run, taguru_eval.Run)
    assert run.exit_code == 0
    assert isinstance(namespace["history"], pl.LazyFrame)
    assert namespace["diff"].counts["unchanged"] == run.cases.height
    assert namespace["tests"].regressed().height == 0
    # The defaults the README states: evaluation.json and runs/ in the working directory.
    assert (tmp_path / "evaluation.json").is_file()
    assert run.path is not None and run.path.parent.parent == Path("runs")
    assert namespace["history"].collect().height == run.metrics.height
