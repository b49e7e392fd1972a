"""The run's tables: their schemas, the lane-output shapes, and the step between them.

:mod:`.schemas` declares every table once (name -> Polars schema; the Arrow
schemas, Parquet file names and empty frames derive from it), :mod:`.shapes`
the nested lane-output shapes (exactly evaluation.json's; their key orders and
nested dtypes derive from them through :mod:`.derive`), and :mod:`.flatten`
turns lane outputs into the flat tables. The public names are imported on first
use (:func:`~taguru_eval._base.lazy.lazy_names`); a table's schema is
``TABLE[name].polars``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taguru_eval._base.lazy import by_module, lazy_names

if TYPE_CHECKING:
    from taguru_eval.tables.flatten import TableRows, build_tables
    from taguru_eval.tables.schemas import (
        EXPECTED,
        TABLE,
        TABLES,
        RunTables,
        TableSpec,
        conform,
        metrics_frame,
        table_specs,
    )

__all__ = [
    "EXPECTED",
    "TABLE",
    "TABLES",
    "RunTables",
    "TableRows",
    "TableSpec",
    "build_tables",
    "conform",
    "metrics_frame",
    "table_specs",
]

__getattr__ = lazy_names(
    __name__,
    by_module(
        __name__,
        {
            "schemas": (
                "EXPECTED TABLE TABLES RunTables TableSpec conform metrics_frame table_specs"
            ),
            "flatten": "TableRows build_tables",
        },
    ),
)
