"""Where the bundled demo corpora live (``data/`` of a source checkout)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from taguru_eval.errors import RunError

DEMO_CONTEXT: Final = "sake"


def demo_data_dir() -> Path:
    """``data/`` beside the package (a source checkout or an editable install)."""
    # taguru_eval/demo/data.py -> the checkout holding the taguru_eval package
    checkout = Path(__file__).resolve().parents[2]
    for candidate in (checkout / "data", Path.cwd() / "data"):
        if (candidate / DEMO_CONTEXT / "eval.jsonl").is_file():
            return candidate
    raise RunError(
        f"the demo data was not found (looked for data/{DEMO_CONTEXT}/eval.jsonl beside the "
        f"taguru_eval package at {checkout} and under {Path.cwd()}); run the demo from a "
        "source checkout (pip install -e .)"
    )
