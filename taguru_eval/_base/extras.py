"""Optional extras: the one place a feature's optional dependencies are imported by name.

The core install (polars, pyarrow, httpx, altair) evaluates, gates, compares
and stores runs. The reference server, the HTML report's inlined Vega bundle,
the ``measures`` command (ir_measures), ``--otlp`` (OpenTelemetry), ``--mlflow``
and the notebooks need extras; a
command that needs a missing one fails with one line naming the extra to
install, never with an import traceback.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Final

EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    "server": ("starlette", "uvicorn"),
    "report": ("vl_convert",),
    # The extra installs ranx too (to read an export back); no command imports it.
    # ir_datasets serves import-qrels' `irds:` ids.
    "ir": ("ir_measures", "ir_datasets"),
    # --otlp: the SDK and its OTLP/HTTP (protobuf) exporter.
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
    # --mlflow and taguru_eval.integrations.mlflow.
    "mlflow": ("mlflow",),
}
"""Extra name (``pip install 'taguru_eval[<extra>]'``) -> the modules it provides."""

EXTRA_FILES: Final[dict[str, tuple[str, ...]]] = {
    "report": ("itables",),
}
"""Extra name -> the distributions it installs for their data files only (read, never
imported: ``import itables`` takes 0.4 s, pandas included, for a file's path)."""


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
    """Import ``module`` of ``extra``, or without one every module of it (raising
    :class:`MissingExtra` for the first one missing), and return ``module``
    (default: the extra's first). A command imports only the module it uses:
    ``measures`` does not pay for ir_datasets' import, nor import-qrels for
    ir_measures'."""
    if module is not None and module not in EXTRAS[extra]:
        raise ValueError(f"{module!r} is not a module of the {extra!r} extra")
    loaded: dict[str, ModuleType] = {}
    for name in EXTRAS[extra] if module is None else (module,):
        try:
            loaded[name] = import_module(name)
        except ModuleNotFoundError as exc:
            raise MissingExtra(extra, exc.name or name) from None
    return loaded[module or EXTRAS[extra][0]]


def extra_file(extra: str, distribution: str, path: str) -> Path:
    """The file ``path`` (e.g. ``itables/html/dt_bundle.js``) that ``distribution`` of
    ``extra`` installed, found from its installed metadata without importing it.
    Raises :class:`MissingExtra` when the distribution or the file is not there."""
    if distribution not in EXTRA_FILES[extra]:
        raise ValueError(f"{distribution!r} is not a file distribution of the {extra!r} extra")
    # Imported here: importlib.metadata costs every command 20 ms, and only the
    # HTML report's inlined files need it.
    from importlib import metadata

    try:
        files = metadata.distribution(distribution).files or []
    except metadata.PackageNotFoundError:
        raise MissingExtra(extra, distribution) from None
    for entry in files:
        if entry.as_posix() == path:
            located = Path(str(entry.locate()))
            if located.is_file():
                return located
    raise MissingExtra(extra, path)
