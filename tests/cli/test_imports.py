"""Each command imports what it uses (issue 30): checked in a fresh child process.

The child runs the real command line, then writes the names in ``sys.modules``
to a file, whatever the command's exit code. ``--version``, ``--help`` and
usage errors load none of the data or HTTP libraries; ``run``, ``compare``,
``export`` and ``import-golden`` never load the charts (altair, its
jsonschema, vl-convert) nor anything of Jupyter, which the ``notebooks`` extra
installs and altair's schema checks would drag in at seconds of cost.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.hints import hints, without_hints
from support.paths import DATA

from taguru_eval.cli.main import SUBCOMMANDS
from taguru_refserver.serve import running_server

DATA_LIBRARIES = ("polars", "pyarrow", "numpy", "httpx", "altair")
"""What --version, --help and a usage error must not import."""

CHARTS_AND_JUPYTER = (
    "altair",
    "vl_convert",
    "jsonschema",
    "ipykernel",
    "IPython",
    "jupyter",  # jupyter_core, jupyter_client, … by prefix
    "nbformat",
    "nbclient",
)
"""What run, compare, export and import-golden must not import."""

IR_TOOLS = ("ir_measures", "ranx", "pytrec_eval", "numba", "ir_datasets")
"""What only the measures command imports (ir_measures; the others never), and
import-qrels for an ``irds:`` id (ir_datasets)."""

INTEGRATIONS = ("opentelemetry", "mlflow")
"""The ``otel`` and ``mlflow`` extras: imported by a run only with ``--otlp`` / ``--mlflow``."""

REFERENCE_SERVER = ("taguru_refserver",)
"""The sibling package: imported by ``serve`` and ``demo`` only (tests/test_layout.py)."""

_CHILD = """
import json, sys
out = sys.argv[1]
sys.argv = ["taguru_eval", *sys.argv[2:]]
code = None
try:
    from taguru_eval.cli.main import main
    code = main()
finally:
    with open(out, "w", encoding="utf-8") as handle:
        json.dump({"code": code, "modules": sorted(sys.modules)}, handle)
sys.exit(code)
"""


@dataclass(frozen=True)
class Child:
    code: int
    modules: list[str]
    stderr: str

    def loaded(self, forbidden: Sequence[str]) -> list[str]:
        """The loaded modules whose top-level name is, or starts with, a forbidden name."""
        return sorted(
            {
                name
                for name in self.modules
                if any(name.split(".")[0].startswith(banned) for banned in forbidden)
            }
        )


_WITHOUT_SERVER_EXTRA = """
import sys
# As if the 'server' extra were not installed: importing either fails.
sys.modules["starlette"] = None
sys.modules["uvicorn"] = None
"""


def run_child(args: Sequence[str], cwd: Path, *, without_server_extra: bool = False) -> Child:
    report = cwd / f"modules-{len(list(cwd.iterdir()))}.json"
    code = (_WITHOUT_SERVER_EXTRA if without_server_extra else "") + _CHILD
    completed = subprocess.run(
        [sys.executable, "-c", code, str(report), *args],
        cwd=cwd,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    written = json.loads(report.read_text(encoding="utf-8"))
    assert written["code"] == completed.returncode, completed.stderr
    return Child(completed.returncode, written["modules"], completed.stderr)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--version"], 0),
        (["--help"], 0),
        (["-h"], 0),
        (["run", "--help"], 0),
        ([], 2),
        (["bogus"], 2),
        (["--eval", "e.jsonl"], 2),
        (["--eval", "e.jsonl", "--context", "c", "--concurrency", "0"], 2),
        (["--context", "c", "--frobnicate"], 2),
        (["load", "--help"], 0),
        (["load", "a", "--bogus"], 2),
    ],
)
def test_version_help_and_usage_errors_load_no_data_library(
    args: list[str], code: int, tmp_path: Path
) -> None:
    child = run_child(args, tmp_path)
    assert child.code == code, child.stderr
    assert child.loaded(DATA_LIBRARIES) == []
    assert child.loaded(CHARTS_AND_JUPYTER) == []
    assert child.loaded(INTEGRATIONS) == []
    assert child.loaded(REFERENCE_SERVER) == []
    if code == 2:
        assert without_hints(child.stderr).count("\n") == 1
        if args[:1] and args[0] in SUBCOMMANDS:  # a project subcommand's line names its own help
            assert child.stderr.endswith(f" — try 'python -m taguru_eval {args[0]} --help'\n")
        else:  # taguru's one line, then the hint naming the help that exists here
            assert hints(child.stderr)[-1].endswith("python -m taguru_eval --help")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Child]]:
    """A real run of the sake set against the reference server, with a run store."""
    work = tmp_path_factory.mktemp("run")
    with running_server(DATA) as url:
        child = run_child(
            [
                "--eval",
                str(DATA / "sake" / "eval.jsonl"),
                "--context",
                "sake",
                "--url",
                url,
                "--out",
                "evaluation.json",
                "--store",
                "store",
                "--quiet",
                "--no-step-summary",
            ],
            work,
        )
    assert child.code in (0, 3), child.stderr
    yield work, child


def test_a_run_loads_no_chart_nor_jupyter(finished_run: tuple[Path, Child]) -> None:
    work, child = finished_run
    assert (work / "evaluation.json").is_file()
    assert child.loaded(CHARTS_AND_JUPYTER) == []
    assert child.loaded(IR_TOOLS) == []
    assert child.loaded(INTEGRATIONS) == []
    assert child.loaded(REFERENCE_SERVER) == []


def test_the_library_imports_no_integration(tmp_path: Path) -> None:
    """The base install's library surface (``import taguru_eval``, its API, the run
    module) imports neither OpenTelemetry nor MLflow, installed or not."""
    code = (
        "import json, sys\n"
        "import taguru_eval, taguru_eval.api, taguru_eval.cli.run, taguru_eval.integrations\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    child = Child(0, json.loads(completed.stdout), completed.stderr)
    assert "taguru_eval.api" in child.modules  # the checks below can fail
    assert child.loaded(INTEGRATIONS) == []
    assert child.loaded(REFERENCE_SERVER) == []


def test_compare_loads_no_chart_nor_jupyter(finished_run: tuple[Path, Child]) -> None:
    work, _ = finished_run
    shutil.copyfile(work / "evaluation.json", work / "head.json")
    child = run_child(["compare", "evaluation.json", "head.json", "--out", "changes.jsonl"], work)
    assert child.code == 0, child.stderr
    assert (work / "changes.jsonl").is_file()
    assert child.loaded(CHARTS_AND_JUPYTER) == []
    assert child.loaded(IR_TOOLS) == []
    assert child.loaded(REFERENCE_SERVER) == []


def test_export_loads_no_chart_nor_jupyter(finished_run: tuple[Path, Child]) -> None:
    work, _ = finished_run
    child = run_child(
        ["export", "evaluation.json", "--trec", "trec", "--eval", str(DATA / "sake/eval.jsonl")],
        work,
    )
    assert child.code == 0, child.stderr
    assert (work / "trec" / "run.trec").is_file()
    assert child.loaded(CHARTS_AND_JUPYTER) == []
    assert child.loaded(IR_TOOLS) == []
    assert child.loaded(REFERENCE_SERVER) == []


def test_measures_loads_ir_measures_and_no_chart_nor_jupyter(
    finished_run: tuple[Path, Child],
) -> None:
    work, _ = finished_run
    child = run_child(
        ["measures", "evaluation.json", "nDCG@5", "--eval", str(DATA / "sake/eval.jsonl")], work
    )
    assert child.code == 0, child.stderr
    # ir_measures computes nDCG through pytrec_eval; ranx (and numba) stay out.
    loaded = {name.split(".")[0] for name in child.loaded(IR_TOOLS)}
    assert "ir_measures" in loaded
    assert child.loaded(("ranx", "numba", "ir_datasets")) == []
    assert child.loaded(CHARTS_AND_JUPYTER) == []


def test_import_golden_loads_no_chart_nor_jupyter(tmp_path: Path) -> None:
    (tmp_path / "golden.csv").write_text(
        "question,expected\nWhat notice ends a lease?,sixty days\n", encoding="utf-8"
    )
    child = run_child(["import-golden", "golden.csv"], tmp_path)
    assert child.code == 0, child.stderr
    assert child.loaded(CHARTS_AND_JUPYTER) == []


def test_import_qrels_loads_no_chart_nor_ir_tool(tmp_path: Path) -> None:
    (tmp_path / "qrels.txt").write_text("q1 0 doc-1 1\n", encoding="utf-8")
    (tmp_path / "topics.tsv").write_text("q1\tlease notice\n", encoding="utf-8")
    child = run_child(["import-qrels", "qrels.txt", "--topics", "topics.tsv"], tmp_path)
    assert child.code == 0, child.stderr
    assert (tmp_path / "qrels.eval.jsonl").is_file()
    assert child.loaded(CHARTS_AND_JUPYTER) == []
    assert child.loaded(IR_TOOLS) == []
    assert child.loaded(("httpx", "aiohttp")) == []


def test_load_needs_no_server_extra_and_no_chart(tmp_path: Path) -> None:
    with running_server(None) as url:
        child = run_child(
            ["load", str(DATA / "sake"), "--url", url, "--quiet"],
            tmp_path,
            without_server_extra=True,
        )
    # Importing either would have failed the load; only the blocking entries are there.
    assert child.code == 0, child.stderr
    assert child.loaded(("starlette", "uvicorn")) == ["starlette", "uvicorn"]
    assert child.loaded(CHARTS_AND_JUPYTER) == []
    assert child.loaded(IR_TOOLS) == []
    assert child.loaded(REFERENCE_SERVER) == []


@pytest.mark.parametrize(
    "word",
    [
        *("compare", "export", "measures", "import-golden", "import-qrels", "report", "ingest"),
        *("load", "serve", "demo"),
    ],
)
def test_subcommand_help_loads_no_chart_nor_jupyter_outside_report_and_ingest(
    word: str, tmp_path: Path
) -> None:
    child = run_child([word, "--help"], tmp_path)
    assert child.code == 0, child.stderr
    assert child.loaded(IR_TOOLS) == []
    assert child.loaded(REFERENCE_SERVER) == []  # serve and demo import it to start one
    if word not in ("report", "ingest"):
        assert child.loaded(CHARTS_AND_JUPYTER) == []


@pytest.mark.parametrize(
    ("args", "code"),
    [(["report", "--help"], 0), (["report", "--ouy", "x"], 2), (["report", "missing.json"], 2)],
)
def test_report_loads_no_chart_library_before_it_draws_one(
    args: list[str], code: int, tmp_path: Path
) -> None:
    # Start-up is the imports: its help, a usage error and a run it cannot read
    # answer before Altair (and jsonschema under it) or the HTTP client load.
    child = run_child(args, tmp_path)
    assert child.code == code, child.stderr
    assert child.loaded(CHARTS_AND_JUPYTER) == []
    assert child.loaded(("httpx", "aiohttp")) == []
    if args[1] == "--help":
        assert child.loaded(DATA_LIBRARIES) == []
