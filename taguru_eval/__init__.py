"""taguru_eval: a retrieval and citation quality gate for taguru contexts.

The library API returns Polars frames: ``run`` evaluates a context,
``load_run`` reads a stored run or any evaluation.json back, ``compare`` diffs
two runs, ``scan_runs`` lazily reads one table across every stored run.
"""

from __future__ import annotations

from taguru_eval.api import Run, load_run, run, scan_runs
from taguru_eval.compare import Comparison, compare

__version__ = "0.1.0"

__all__ = ["Comparison", "Run", "__version__", "compare", "load_run", "run", "scan_runs"]
