"""taguru_eval: a retrieval and citation quality gate for taguru contexts.

The library API returns Polars frames: ``run`` evaluates a context,
``load_run`` reads a stored run or any evaluation.json back, ``compare`` diffs
two runs and ``significance`` tests its moves, ``scan_runs`` lazily reads one
table across every stored run, ``to_ir_measures`` hands a run to ir_measures or
ranx. Every failure a user can cause is a :class:`TaguruEvalError` carrying its
exit code.
"""

from __future__ import annotations

from taguru_eval.api import Run, load_run, run, scan_runs, to_ir_measures
from taguru_eval.compare import Comparison, Significance, compare, significance
from taguru_eval.contract import VERSION
from taguru_eval.errors import InputError, RunError, TaguruEvalError, UsageError

__version__ = VERSION

__all__ = [
    "Comparison",
    "InputError",
    "Run",
    "RunError",
    "Significance",
    "TaguruEvalError",
    "UsageError",
    "__version__",
    "compare",
    "load_run",
    "run",
    "scan_runs",
    "significance",
    "to_ir_measures",
]
