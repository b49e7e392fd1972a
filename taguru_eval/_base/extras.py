"""Optional extras: the one place a feature's optional dependencies are imported by name.

The core install (polars, pyarrow, httpx, altair) evaluates, gates, compares
and stores runs. The reference server, the HTML report's inlined Vega bundle,
the ``measures`` command (ir_measures) and the notebooks need extras; a
command that needs a missing one fails with one line naming the extra to
install, never with an import traceback.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType
from typing import Final

EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    "server": ("starlette", "uvicorn"),
    "report": ("vl_convert",),
    # The extra installs ranx too (to read an export back); no command imports it.
    "ir": ("ir_measures",),
}
"""Extra name (``pip install 'taguru_eval[<extra>]'``) -> the modules it provides."""


class MissingExtra(ImportError):
    """An optional dependency is not installed; ``str()`` says which extra brings it."""

    def __init__(self, extra: str, module: str) -> None:
        super().__init__(
            f"needs the '{extra}' extra, which is not installed (no module '{module}'): "
            f"pip install 'taguru_eval[{extra}]'"
        )
        self.extra = extra
        self.module = module


def load_extra(extra: str, module: str | None = None) -> ModuleType:
    """Import every module of ``extra`` (raising :class:`MissingExtra` for the
    first one missing) and return ``module`` (default: the extra's first)."""
    loaded: dict[str, ModuleType] = {}
    for name in EXTRAS[extra]:
        try:
            loaded[name] = import_module(name)
        except ModuleNotFoundError as exc:
            raise MissingExtra(extra, exc.name or name) from None
    return loaded[module or EXTRAS[extra][0]]
