"""Tables built from outputs converted batch by batch as cases finish equal the tables
of the whole list at once.

A live run hands each case's lane output to :class:`TableRows` when the case
completes, in whatever order the network returns them, and every full batch
becomes nested Arrow rows right away. Whatever the batch size and the order,
the finished tables must be exactly :func:`build_tables` of the outputs in
case order — same rows, same order within a case, same dtypes.
"""

from __future__ import annotations

import asyncio
import copy
import io
import math
import random
from dataclasses import fields
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.must_refuse import lease_data

from taguru_eval._base.jsonstrict import I64_MAX
from taguru_eval.demo.data import DEMO_CONTEXT, demo_data_dir
from taguru_eval.demo.synthetic import template_eval_set, template_outputs
from taguru_eval.inputs.prepare import prepare_run
from taguru_eval.options import RunOptions
from taguru_eval.run.console import Console
from taguru_eval.run.runner import network_phase
from taguru_eval.tables import RunTables, TableRows, build_tables, flatten
from taguru_eval.tables.columns import Columns
from taguru_eval.tables.flatten import (
    _LANE_OUTPUT,
    _REFUSAL_OUTPUT,
    _arrow_rows,
    _nested_chunk,
    _nested_frame,
    _tables_of,
)
from taguru_eval.tables.shapes import LaneOutput
from taguru_refserver.serve import running_server

TEMPLATE_OUTPUTS = template_outputs(template_eval_set())
TABLE_FIELDS = [field.name for field in fields(RunTables) if field.name != "run_id"]


def assert_same_tables(got: RunTables, expected: RunTables) -> None:
    assert got.run_id == expected.run_id
    for name in TABLE_FIELDS:
        frame, reference = getattr(got, name), getattr(expected, name)
        assert frame.schema == reference.schema, name
        assert frame.equals(reference), name


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_size=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_any_batch_size_and_arrival_order_gives_the_same_tables(batch_size: int, seed: int) -> None:
    arrived = list(TEMPLATE_OUTPUTS)
    random.Random(seed).shuffle(arrived)
    rows = TableRows(batch_size)
    rows.extend(arrived)
    assert_same_tables(rows.finish("run-x"), build_tables(TEMPLATE_OUTPUTS, "run-x"))


def test_a_batch_pyarrow_refuses_joins_the_arrow_batches_in_case_order() -> None:
    """A value pyarrow will not take (a lane rank past i32) sends its batch the Polars
    way; mixed with Arrow batches, the tables are those of one conversion of all."""
    outputs = copy.deepcopy(TEMPLATE_OUTPUTS)
    odd = next(
        output
        for output in outputs
        if output["passage"]["outcome"] == "searched"
        and any("bm25" in hit["lanes"] for hit in output["passage"]["hits"])
    )
    hit = next(hit for hit in odd["passage"]["hits"] if "bm25" in hit["lanes"])
    hit["lanes"]["bm25"]["rank"] = 2**40
    assert isinstance(_nested_chunk([odd], _LANE_OUTPUT), pl.DataFrame)
    assert all(
        not isinstance(_nested_chunk([output], _LANE_OUTPUT), pl.DataFrame)
        for output in outputs
        if output is not odd
    )
    rows = TableRows(3)
    rows.extend(outputs[::-1])
    assert_same_tables(rows.finish("mixed"), build_tables(outputs, "mixed"))


def test_outputs_added_after_a_finish_join_the_rows_already_made() -> None:
    arrived = list(TEMPLATE_OUTPUTS)
    random.Random(7).shuffle(arrived)
    rows = TableRows(4)
    rows.extend(arrived[:9])
    assert_same_tables(rows.finish("r"), build_tables(sorted_by_case(arrived[:9]), "r"))
    rows.extend(arrived[9:])
    assert_same_tables(rows.finish("r"), build_tables(TEMPLATE_OUTPUTS, "r"))
    assert_same_tables(rows.finish("r"), build_tables(TEMPLATE_OUTPUTS, "r"))


def sorted_by_case(outputs: list[LaneOutput]) -> list[LaneOutput]:
    return sorted(outputs, key=lambda output: output["case_index"])


def test_every_table_has_rows_in_the_template_outputs() -> None:
    """The comparison above means something only if the outputs fill the tables."""
    tables = build_tables(TEMPLATE_OUTPUTS, "run-x")
    empty = [name for name in TABLE_FIELDS if getattr(tables, name).height == 0]
    # no assembly, no must-refuse probes, no answers file
    assert empty == ["evidence_items", "refusal_lanes", "answer_checks"]
    assert tables.case_lanes["run_id"].unique().to_list() == ["run-x"]


def test_no_outputs_finish_as_empty_tables_with_their_schemas() -> None:
    tables = TableRows(8).finish("empty")
    for name in TABLE_FIELDS:
        frame = getattr(tables, name)
        assert frame.height == 0
        assert frame.schema == getattr(build_tables([], "empty"), name).schema


def test_a_live_run_builds_its_tables_while_the_cases_run(tmp_path: Path) -> None:
    """The network phase feeds its accumulator case by case, batches converted along the way."""
    with running_server(demo_data_dir()) as url:
        options = RunOptions(
            eval_path=str(demo_data_dir() / DEMO_CONTEXT / "eval.jsonl"),
            context=DEMO_CONTEXT,
            url=url,
            out=str(tmp_path / "evaluation.json"),
            concurrency=4,
            no_store=True,
        )
        console = Console(stdout=io.StringIO(), stderr=io.StringIO())
        prepared = prepare_run(options, {}, stderr=console.err)
        outputs: list[LaneOutput] = []
        phase = asyncio.run(network_phase(prepared, console=console, on_finished=outputs.append))
    outputs.sort(key=lambda output: output["case_index"])
    assert [output["case_index"] for output in outputs] == list(range(len(outputs)))
    assert_same_tables(phase.rows.finish("live"), build_tables(outputs, "live"))
    # Finishing again (a phase finished with and without its probes) gives the same rows.
    assert_same_tables(phase.rows.finish("live"), build_tables(outputs, "live"))


def test_must_refuse_rows_follow_the_eval_rows_of_every_batch(tmp_path: Path) -> None:
    """A live --must-refuse run: the probes' rows are appended at finish, after
    the eval rows the batches built, exactly as build_tables puts them."""
    lease_data(tmp_path)
    with running_server(tmp_path / "data") as url:
        options = RunOptions(
            eval_path=str(tmp_path / "eval.jsonl"),
            context="lease-vec",
            url=url,
            out=str(tmp_path / "evaluation.json"),
            concurrency=3,
            no_store=True,
            must_refuse=str(tmp_path / "mr.jsonl"),
        )
        console = Console(stdout=io.StringIO(), stderr=io.StringIO())
        prepared = prepare_run(options, {}, stderr=console.err)
        outputs: list[LaneOutput] = []
        phase = asyncio.run(network_phase(prepared, console=console, on_finished=outputs.append))
    assert phase.refusal_outputs
    outputs.sort(key=lambda output: output["case_index"])
    rows = TableRows(1)
    rows.extend(outputs)
    tables = rows.finish("mr", phase.refusal_outputs)
    assert_same_tables(tables, build_tables(outputs, "mr", phase.refusal_outputs))
    assert tables.refusal_lanes.height == len(phase.refusal_outputs)
    populations = tables.calls.get_column("population").to_list()
    assert populations == sorted(populations, key=lambda name: name != "eval")
    assert set(populations) == {"eval", "must_refuse"}


def test_rows_of_one_case_keep_their_order_across_batches() -> None:
    """Calls sort by (case, seq); every other table keeps the order the case produced."""
    arrived = TEMPLATE_OUTPUTS[::-1]
    rows = TableRows(1)
    rows.extend(arrived)
    tables = rows.finish("r")
    resolutions = tables.resolutions.group_by("case_index", maintain_order=True).agg(
        pl.col("cue_index")
    )
    assert all(indices == sorted(indices) for indices in resolutions["cue_index"].to_list())


def _live_outputs(tmp_path: Path, assembly: bool) -> tuple[list[LaneOutput], list[Any]]:
    """A live demo run's lane outputs and must-refuse probes (plain or --assembly)."""
    with running_server(demo_data_dir()) as url:
        options = RunOptions(
            eval_path=str(demo_data_dir() / DEMO_CONTEXT / "eval.jsonl"),
            context=DEMO_CONTEXT,
            url=url,
            out=str(tmp_path / "evaluation.json"),
            assembly=assembly,
            no_store=True,
            must_refuse=str(demo_data_dir() / DEMO_CONTEXT / "must_refuse.jsonl"),
        )
        console = Console(stdout=io.StringIO(), stderr=io.StringIO())
        prepared = prepare_run(options, {}, stderr=console.err)
        outputs: list[LaneOutput] = []
        phase = asyncio.run(network_phase(prepared, console=console, on_finished=outputs.append))
    return outputs, list(phase.refusal_outputs)


@pytest.mark.parametrize("assembly", [False, True], ids=["baseline", "assembly"])
def test_arrow_rows_are_pyarrow_s_own_conversion_of_the_outputs(
    tmp_path: Path, assembly: bool
) -> None:
    """The nested rows come from msgspec's JSON lines through Arrow's JSON reader
    (pyarrow's conversion of Python objects imports pandas): the same rows as that
    conversion, every value kept, for live outputs of each shape and the templates."""
    outputs, refusals = _live_outputs(tmp_path, assembly)
    if assembly:
        assert any(output.get("evidence_rows") for output in outputs)
    assert refusals
    for batch, schema in (
        (outputs, _LANE_OUTPUT),
        (TEMPLATE_OUTPUTS, _LANE_OUTPUT),
        (refusals, _REFUSAL_OUTPUT),
    ):
        rows = [{name: output.get(name) for name in schema.names()} for output in batch]
        arrow = pl.DataFrame(schema=schema).to_arrow().schema
        reference = pl.from_arrow(pa.Table.from_pylist(rows, schema=arrow))
        got = pl.from_arrow(_arrow_rows(batch, schema))
        assert isinstance(got, pl.DataFrame) and isinstance(reference, pl.DataFrame)
        assert got.schema == reference.schema == schema
        assert got.equals(reference)


def _reference(outputs: list[LaneOutput], repeat: int = 0) -> dict[str, pl.DataFrame]:
    """The tables as declared: selects and explodes of the nested rows."""
    return _tables_of(_nested_frame([_nested_chunk(outputs, _LANE_OUTPUT)]), repeat)


def _with_answer_checks(outputs: list[LaneOutput]) -> list[LaneOutput]:
    """The templates, every third one judged on two answers (``--answers``)."""
    judged = copy.deepcopy(outputs)
    for index, output in enumerate(judged[::3]):
        output["answer_checks"] = [
            {"answer_index": 0, "found": True, "rank": 1 + index % 4, "match": "normalized"},
            {"answer_index": 1, "found": False, "rank": None, "match": "tokens"},
        ]
    return judged


@pytest.mark.parametrize("assembly", [False, True], ids=["baseline", "assembly"])
def test_the_columns_are_the_declared_tables(tmp_path: Path, assembly: bool) -> None:
    """A live run reads each output straight into the tables' columns; the tables
    are the ones declared as selects and explodes of the nested rows, value for
    value and dtype for dtype, for live outputs of each shape and the templates."""
    outputs, _ = _live_outputs(tmp_path, assembly)
    outputs.sort(key=lambda output: output["case_index"])
    filled = ["case_lanes", "calls", "hits", "evidence_items" if assembly else "resolutions"]
    judged = _with_answer_checks(TEMPLATE_OUTPUTS)
    for batch, repeat, full in ((outputs, 0, filled), (judged, 2, ["probes", "answer_checks"])):
        columns = Columns()
        for output in batch:
            columns.add(output)
        got, reference = columns.frames(repeat), _reference(batch, repeat)
        assert list(got) == list(reference)
        for name, frame in got.items():
            assert frame.schema == reference[name].schema, name
            assert frame.equals(reference[name]), name
        assert all(got[name].height > 0 for name in full)


def test_an_infinite_score_stays_infinite_in_a_live_run_s_tables() -> None:
    """A score past binary32's range is infinite once the lane rounds it (Rust's cast);
    a live run's tables keep it so, as evaluation.json's null reads back as null."""
    outputs = copy.deepcopy(TEMPLATE_OUTPUTS)
    hit = next(output for output in outputs if output["passage"].get("hits"))["passage"]["hits"][0]
    hit["score"] = math.inf
    rows = TableRows()
    rows.extend(outputs)
    assert rows.finish("inf").hits.filter(pl.col("score").is_infinite()).height == 1
    assert build_tables(outputs, "inf").hits.filter(pl.col("score").is_null()).height == 1


def test_a_count_past_int64_takes_its_batch_the_declared_way_and_saturates() -> None:
    outputs = copy.deepcopy(TEMPLATE_OUTPUTS)
    probe = next(
        probe
        for output in outputs
        for probe in (output.get("structural") or {}).get("associations", [])
        if "total" in (probe.get("query") or {})
    )
    probe["query"]["total"] = 2**64 - 1
    rows = TableRows(5)
    rows.extend(outputs)
    tables = rows.finish("big")
    assert tables.probes.get_column("query_total").max() == I64_MAX
    assert_same_tables(tables, build_tables(outputs, "big"))


def test_outputs_held_back_too_long_give_up_their_order_not_their_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A case that never seems to come (a slow call) holds back at most MAX_WAITING
    later outputs; past that they are taken as they are and sorted at the end."""
    monkeypatch.setattr(flatten, "MAX_WAITING", 3)
    rows = TableRows(2)
    rows.extend(TEMPLATE_OUTPUTS[1:])  # case 0 last: every other one arrives ahead of it
    assert len(rows._waiting) <= 3
    rows.add(TEMPLATE_OUTPUTS[0])
    assert_same_tables(rows.finish("late"), build_tables(TEMPLATE_OUTPUTS, "late"))
