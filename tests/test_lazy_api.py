"""The package's public API is resolved on first use (PEP 562) and stays what it was.

Each check runs in a fresh interpreter: the suite's own process has long
imported every submodule, which is exactly the state in which a subpackage
named ``run`` or ``compare`` could have replaced the function of that name.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import taguru_eval

PUBLIC = [
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


def in_child(code: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_all_is_unchanged_and_every_name_resolves() -> None:
    assert sorted(taguru_eval.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(taguru_eval, name) is not None
    assert set(PUBLIC) <= set(dir(taguru_eval))


def test_importing_the_package_loads_no_data_library() -> None:
    out = in_child(
        "import sys, taguru_eval\n"
        "print(sorted(m for m in ('polars', 'pyarrow', 'numpy', 'httpx', 'altair') "
        "if m in sys.modules))"
    )
    assert out == "[]\n"


def test_star_import_gives_the_functions() -> None:
    out = in_child(
        "from taguru_eval import *\n"
        "import inspect\n"
        "print(inspect.isfunction(run), inspect.isfunction(compare), "
        "inspect.isfunction(significance), isinstance(__version__, str))"
    )
    assert out == "True True True True\n"


@pytest.mark.parametrize(
    "first",
    [
        # each subpackage imported before the name is asked for, and after
        "import taguru_eval.run.http, taguru_eval.compare.classify",
        "import taguru_eval.compare.significance, taguru_eval.run.lanes",
        "from taguru_eval.run import console; from taguru_eval.compare import load",
        "import taguru_eval.populate.load, taguru_eval.populate.client",
        "pass",
    ],
)
def test_a_loaded_submodule_never_hides_a_function(first: str) -> None:
    out = in_child(
        f"{first}\n"
        "import inspect, taguru_eval\n"
        "from taguru_eval import run, compare, significance, load\n"
        "import taguru_eval.run.runner, taguru_eval.compare.report, taguru_eval.populate.load\n"
        "print(inspect.isfunction(run), inspect.isfunction(compare), "
        "inspect.isfunction(significance), inspect.isfunction(load),\n"
        "      taguru_eval.run is run, taguru_eval.compare is compare,\n"
        "      taguru_eval.significance is significance, taguru_eval.load is load)"
    )
    assert out == "True True True True True True True True\n"


def test_names_come_from_their_modules() -> None:
    from taguru_eval import api, contract, errors
    from taguru_eval.compare import report

    # compare/__init__ binds the name ``significance`` to the function as well
    significance_module = importlib.import_module("taguru_eval.compare.significance")
    # populate/__init__ re-exports ``load``, the function, over the submodule's name
    populate_load = importlib.import_module("taguru_eval.populate.load")

    assert taguru_eval.run is api.run
    assert taguru_eval.load_run is api.load_run
    assert taguru_eval.load is populate_load.load
    assert taguru_eval.Loaded is populate_load.Loaded
    assert taguru_eval.Run is api.Run
    assert taguru_eval.Comparison is report.Comparison
    assert taguru_eval.Significance is significance_module.Significance
    assert taguru_eval.UsageError is errors.UsageError
    assert taguru_eval.__version__ == contract.VERSION


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = taguru_eval.nope  # type: ignore[attr-defined]
    with pytest.raises(ImportError):
        from taguru_eval import nope  # type: ignore[attr-defined]  # noqa: F401


def test_the_package_version_is_the_metadata_version() -> None:
    from importlib.metadata import version

    assert taguru_eval.__version__ == version("taguru_eval")


def test_dir_and_tab_completion_list_the_public_api() -> None:
    # A fresh interpreter: dir() is what Jupyter's and the REPL's completion read.
    out = in_child(
        "import rlcompleter, taguru_eval\n"
        "print(dir(taguru_eval))\n"
        "complete = rlcompleter.Completer({'taguru_eval': taguru_eval}).complete\n"
        "print([complete('taguru_eval.lo', i) for i in range(2)])"
    )
    listed, completed = out.splitlines()
    assert listed == repr(PUBLIC)  # not TYPE_CHECKING, annotations, lazy_names
    assert completed == "['taguru_eval.load(', 'taguru_eval.load_run(']"


def test_jedi_completes_the_public_api() -> None:
    jedi = pytest.importorskip("jedi")  # Jupyter's completer
    names = {
        c.name for c in jedi.Interpreter("taguru_eval.", [{"taguru_eval": taguru_eval}]).complete()
    }
    assert {"run", "compare", "load_run", "scan_runs", "significance"} <= names
    assert not {"TYPE_CHECKING", "annotations", "lazy_names", "_LAZY_NAMES"} & names
