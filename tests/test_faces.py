"""The sub-packages' faces: every public name resolves to the object its module
defines, and the lazy faces cost nothing until a name is asked for."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

FACES = ("analyst", "artifact", "compare", "tables")
LAZY = ("analyst", "artifact", "tables")


@pytest.mark.parametrize("face", FACES)
def test_every_public_name_is_its_module_s(face: str) -> None:
    package = importlib.import_module(f"taguru_eval.{face}")
    assert len(set(package.__all__)) == len(package.__all__)
    for name in package.__all__:
        value = getattr(package, name)
        home = getattr(value, "__module__", None)
        if home is not None and home.startswith("taguru_eval."):
            assert home.partition(".")[2].split(".")[0] == face, (name, home)
    # A public name never shadows a submodule of the same package.
    submodules = {n for n in dir(package) if isinstance(getattr(package, n), type(sys))}
    assert not submodules & set(package.__all__)


@pytest.mark.parametrize("face", LAZY)
def test_a_lazy_face_imports_a_module_only_for_its_names(face: str) -> None:
    package = f"taguru_eval.{face}"
    code = (
        "import sys, importlib\n"
        f"p = importlib.import_module({package!r})\n"
        f"print(sorted(m for m in sys.modules if m.startswith({package + '.'!r})))\n"
        "getattr(p, p.__all__[-1])\n"
        f"print(len([m for m in sys.modules if m.startswith({package + '.'!r})]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = done.stdout.splitlines()
    assert before == "[]"
    assert int(after) >= 1
