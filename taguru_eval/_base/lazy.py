"""Packages whose public names are imported on first use (PEP 562).

A package that re-exports a function under the name of one of its own
submodules (``taguru_eval.run``, ``taguru_eval.compare.significance``) has a
trap: the import system binds every loaded submodule as an attribute of its
parent, so once the submodule is imported the attribute is the module, not
the function. An eager ``from .x import x`` wins by running last; a lazy name
must instead refuse the binding, which :func:`lazy_names` arranges.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from types import ModuleType
from typing import Any


class _PublicNamesFirst(ModuleType):
    """A module type on which a submodule never takes the place of a public name."""

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, ModuleType) and name in self.__dict__.get("_LAZY_NAMES", ()):
            return
        super().__setattr__(name, value)


def lazy_names(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """Make each of ``names`` (public name -> the module defining it, or
    ``module:attribute`` when the name differs there) an attribute of
    ``package`` resolved on first access; returns the package's
    ``__getattr__``. Call it at the end of the package's ``__init__``.

    The package also gets a ``__dir__`` (PEP 562): ``dir()`` — and so Jupyter's
    and the REPL's tab completion — lists the public names and the loaded public
    submodules, not the module's own plumbing (``TYPE_CHECKING``,
    ``annotations``, this function)."""
    module = sys.modules[package]
    namespace = module.__dict__
    namespace["_LAZY_NAMES"] = frozenset(names)

    def dir_() -> list[str]:
        submodules = {
            name
            for name, value in namespace.items()
            if isinstance(value, ModuleType) and not name.startswith("_")
        }
        return sorted({*names, *submodules})

    namespace["__dir__"] = dir_

    def getattr_(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        source, _, attribute = names[name].partition(":")
        value = getattr(import_module(source), attribute or name)
        namespace[name] = value
        return value

    module.__class__ = _PublicNamesFirst
    return getattr_


def by_module(package: str, modules: Mapping[str, str]) -> dict[str, str]:
    """``{module: "name name …"}`` (modules of ``package``) as :func:`lazy_names`
    takes it (name -> module); a ``module:attribute`` key gives its one name to
    that attribute."""
    return {
        name: f"{package}.{module}" for module, names in modules.items() for name in names.split()
    }


def lazy_main(module: str) -> Callable[[list[str]], int]:
    """The ``main(argv) -> int`` of ``module``, imported only when it is called:
    a command pays for its own libraries, not for every other command's."""

    def call(argv: list[str]) -> int:
        entry: Callable[[list[str]], int] = import_module(module).main
        return entry(argv)

    call.__name__ = call.__qualname__ = f"{module}.main"
    return call
