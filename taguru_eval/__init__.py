"""taguru_eval: a retrieval and citation quality gate for taguru contexts.

The library API returns Polars frames: ``run`` evaluates a context (``load``
first puts a context folder into a server),
``load_run`` reads a stored run or any evaluation.json back, ``compare`` diffs
two runs and ``significance`` tests its moves, ``scan_runs`` lazily reads one
table across every stored run, ``to_ir_measures`` hands a run to ir_measures or
ranx. Every failure a user can cause is a :class:`TaguruEvalError` carrying its
exit code.

The names are imported on first use (PEP 562): every ``taguru_eval.*``
submodule imports this package first, and the command line's ``--version``,
``--help`` and usage errors must not pay for Polars, pyarrow and httpx
through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taguru_eval._base.lazy import lazy_names

if TYPE_CHECKING:
    from taguru_eval.api import Run, load_run, measures, run, scan_runs, to_ir_measures
    from taguru_eval.compare import Comparison, compare
    from taguru_eval.compare.significance import Significance, significance
    from taguru_eval.contract import VERSION as __version__
    from taguru_eval.errors import InputError, RunError, TaguruEvalError, UsageError
    from taguru_eval.populate import Loaded, load

__all__ = [
    "Comparison",
    "InputError",
    "Loaded",
    "Run",
    "RunError",
    "Significance",
    "TaguruEvalError",
    "UsageError",
    "__version__",
    "compare",
    "load",
    "load_run",
    "measures",
    "run",
    "scan_runs",
    "significance",
    "to_ir_measures",
]

_api = "taguru_eval.api"
_compare = "taguru_eval.compare"
_errors = "taguru_eval.errors"

__getattr__ = lazy_names(
    __name__,
    {
        "Run": _api,
        "load_run": _api,
        "measures": _api,
        "run": _api,
        "scan_runs": _api,
        "to_ir_measures": _api,
        "Comparison": _compare,
        "Significance": _compare,
        "compare": _compare,
        "significance": _compare,
        "InputError": _errors,
        "RunError": _errors,
        "TaguruEvalError": _errors,
        "UsageError": _errors,
        "Loaded": "taguru_eval.populate",
        "load": "taguru_eval.populate",
        "__version__": "taguru_eval.contract:VERSION",
    },
)
