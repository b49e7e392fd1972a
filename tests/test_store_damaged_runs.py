"""One damaged run never breaks the store or the analyst surface (issue 12, item 4).

A store of three runs of one context, the oldest damaged in one file — its
``metrics.parquet``, ``cases.parquet``, ``evaluation.json`` or ``run.json``,
truncated, overwritten with garbage, or holding a value of the wrong type:
``report`` on another run still exits 0 and says, in one warning line, which
file it skipped; the drift helpers leave the run out with a
``DamagedRunWarning`` naming the file; asking for the damaged run itself
(``load_run``, ``report RUN``) is one ``InputError`` naming it. A store or a
table that does not exist is an error, not an empty frame.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from support.documents import history_documents, write_document
from support.layouts import to_old_layout

import taguru_eval
from taguru_eval.analyst import drift, ingest
from taguru_eval.cli import report
from taguru_eval.errors import DamagedRunWarning, InputError
from taguru_eval.store import collect_runs, dataset, list_runs, scan_runs

PREFIX = "taguru: evaluate: "


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path: Path) -> None:
    size = path.stat().st_size
    path.write_bytes(bytes((index * 131 + 7) % 256 for index in range(size)))


def _wrong_type(path: Path) -> None:
    if path.name == "metrics.parquet":
        frame = pl.read_parquet(path).with_columns(pl.col("value").cast(pl.String))
        frame.write_parquet(path)
    elif path.name == "cases.parquet":
        frame = pl.read_parquet(path).with_columns(pl.col("mrr").cast(pl.String))
        frame.write_parquet(path)
    elif path.name == "evaluation.json":
        document = json.loads(path.read_text(encoding="utf-8"))
        document["taguru_evaluation"] = "1"
        path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    else:
        path.write_text('{"kind": 5, "writer": "taguru_eval 0.1.0"}', encoding="utf-8")


def _deeply_nested(path: Path) -> None:
    # Past Python's recursion limit: a JSON reader must fail with a message, not a trace.
    path.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")


def _missing(path: Path) -> None:
    path.unlink()


DAMAGES: dict[str, Callable[[Path], None]] = {
    "deeply-nested": _deeply_nested,
    "missing": _missing,
    "truncated": _truncate,
    "garbage": _garbage,
    "wrong-type": _wrong_type,
}
FILES = ("metrics.parquet", "cases.parquet", "evaluation.json", "run.json")
DAMAGED_FILES = [
    *(
        (file_name, how)
        for file_name in FILES
        for how in sorted(DAMAGES)
        # A run without run.json is one stored before it existed; without evaluation.json,
        # not a run at all.
        if how != "missing" or file_name.endswith(".parquet")
    ),
    # Today's compressed artifact, cut short or overwritten: the codec's damage.
    ("evaluation.json.zst", "truncated"),
    ("evaluation.json.zst", "garbage"),
]
"""Every damage of every file a report or the drift helpers read."""


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("history")
    runs = root / "runs"
    for index, document in enumerate(history_documents(3)):
        ingest.ingest(write_document(root / f"e{index}.json", document), runs)
    return runs


@pytest.fixture
def store(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "runs"
    shutil.copytree(pristine, copy)
    return copy


def run_dirs(store: Path) -> list[Path]:
    """The three runs, oldest first."""
    return [Path(path) for path in list_runs(store).get_column("path").to_list()]


def damage(store: Path, file_name: str, how: str) -> Path:
    """Damage ``file_name`` of the oldest run; returns the damaged file."""
    directory = run_dirs(store)[0]
    if file_name == "evaluation.json":
        to_old_layout(directory)  # damaged as text: the layout of a run stored before .zst
    target = directory / file_name
    DAMAGES[how](target)
    return target


def report_cli(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = report.main(argv, stdout=out, stderr=err)
    return code, err.getvalue()


@pytest.mark.parametrize(("file_name", "how"), DAMAGED_FILES)
def test_report_on_another_run_exits_0_and_warns_naming_the_file(
    store: Path, tmp_path: Path, file_name: str, how: str
) -> None:
    damaged = damage(store, file_name, how)
    newest = run_dirs(store)[-1]
    out = tmp_path / "report.html"
    code, err = report_cli([str(newest), "-o", str(out)])
    assert code == 0, err
    assert out.is_file()
    (line,) = err.splitlines()
    assert line.startswith(f"{PREFIX}warning: skipping a damaged stored run: "), line
    assert str(damaged) in line
    # The drift section still shows the two healthy runs.
    assert "Drift over 2 stored runs" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize(("file_name", "how"), DAMAGED_FILES)
def test_report_on_the_damaged_run_itself_is_one_error_naming_the_file(
    store: Path, tmp_path: Path, file_name: str, how: str
) -> None:
    damaged = damage(store, file_name, how)
    code, err = report_cli([str(damaged.parent), "-o", str(tmp_path / "report.html")])
    assert code == 2
    (line,) = err.splitlines()
    assert line.startswith(PREFIX), line
    assert str(damaged) in line
    assert not (tmp_path / "report.html").exists()


@pytest.mark.parametrize(("file_name", "how"), DAMAGED_FILES)
def test_the_drift_helpers_leave_the_damaged_run_out_with_a_warning(
    store: Path, file_name: str, how: str
) -> None:
    damaged = damage(store, file_name, how)
    healthy = [path.name.removeprefix("run=") for path in run_dirs(store)[1:]]
    with pytest.warns(DamagedRunWarning) as caught:
        runs = drift.run_index(store, "demo")
        metrics = drift.metric_history(store, "demo", runs)
        cases = drift.case_history(store, "demo", ["mrr"], runs)
    (warning,) = caught
    assert str(warning.message).startswith("skipping a damaged stored run: ")
    assert str(damaged) in str(warning.message)
    assert runs.get_column("run").to_list() == healthy
    assert sorted(metrics.get_column("run").unique().to_list()) == healthy
    assert sorted(cases.get_column("run").unique().to_list()) == healthy


@pytest.mark.parametrize(
    ("file_name", "how"),
    [*DAMAGED_FILES, ("hits.parquet", "missing"), ("calls.parquet", "missing")],
)
def test_load_run_of_the_damaged_run_raises_input_error_naming_the_file(
    store: Path, file_name: str, how: str
) -> None:
    damaged = damage(store, file_name, how)
    with pytest.raises(InputError) as info:
        taguru_eval.load_run(damaged.parent)
    assert str(damaged) in str(info.value)
    assert info.value.path == str(damaged)


@pytest.mark.parametrize("how", sorted(DAMAGES))
@pytest.mark.parametrize("table", ["metrics", "cases"])
def test_scan_runs_and_dataset_leave_a_damaged_file_out(store: Path, table: str, how: str) -> None:
    damaged = damage(store, f"{table}.parquet", how)
    with pytest.warns(DamagedRunWarning, match=str(damaged)):
        scanned = scan_runs(store, table).collect()
    assert scanned.get_column("run").n_unique() == 2
    with pytest.warns(DamagedRunWarning, match=str(damaged)):
        assert dataset(store, table).to_table().column("run").unique().to_pylist() != []


def test_damage_inside_the_data_pages_is_found_when_collected(store: Path) -> None:
    # The footer still reads: only reading the pages shows the damage.
    target = run_dirs(store)[0] / "metrics.parquet"
    data = bytearray(target.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    for index in range(4, len(data) - 8 - footer):  # every data page, not the footer
        data[index] = (data[index] * 7 + 13) % 256
    target.write_bytes(bytes(data))
    pl.read_parquet_schema(target)
    with pytest.raises(pl.exceptions.PolarsError):
        scan_runs(store, "metrics").collect()  # a direct collect sees Polars' error
    with pytest.warns(DamagedRunWarning, match=str(target)):
        frame = collect_runs(store, "metrics", lambda scan: scan.select("run", "value"))
    assert frame.get_column("run").n_unique() == 2
    with pytest.warns(DamagedRunWarning, match=str(target)):
        history = drift.metric_history(store, "demo")
    assert history.get_column("run").n_unique() == 2


def test_an_unknown_table_or_a_missing_store_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no table 'metric' in the run store"):
        scan_runs(tmp_path, "metric")
    missing = tmp_path / "no-store"
    with pytest.raises(InputError) as info:
        scan_runs(missing, "metrics")
    assert str(info.value) == (
        f"reading the run store {missing}: No such file or directory (os error 2)"
    )
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match=r"Not a directory \(os error 20\)"):
        scan_runs(tmp_path / "a-file", "cases")
    with pytest.raises(InputError, match="No such file or directory"):
        drift.run_index(missing, "demo")
    # An existing store with no run of a known table is still an empty frame.
    empty = scan_runs(tmp_path, "metrics").collect()
    assert empty.height == 0
    assert {"metric", "value", "context", "run"} <= set(empty.columns)
