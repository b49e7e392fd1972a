"""Charts that carry their own Vega libraries: the report's and the notebooks' rendering.

Vega, Vega-Lite and Vega-Embed come from the ``vl-convert-python`` wheel (the
``report`` extra), which bundles them, so nothing is ever fetched from a CDN:

* :func:`javascript_bundle` is the one script both surfaces inline;
* :func:`enable` registers and switches on the Altair renderer
  ``taguru_offline``, whose notebook output is a ``<div>`` plus a script
  holding the bundle and the chart spec — an executed notebook opened with no
  network draws every chart (Altair's own ``html`` renderer loads the
  libraries from a CDN);
* :func:`embeddable` is the spec as embedded: without its ``$schema``
  identifier (Vega-Embed is told the mode instead), so no output holds a URL
  outside the vendored library code;
* :func:`datatables_bundle` is DataTables (with jQuery) as the ``itables``
  wheel (the ``report`` extra) ships it, for the report's sortable,
  filterable tables; None when that wheel is not installed.

Altair's row limit stays in force: the renderer sees specs after Altair's
data transformers, and the chart builders aggregate first (:mod:`.aggregate`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Final

from taguru_eval._base.extras import MissingExtra, extra_file, load_extra
from taguru_eval._base.files import write_bytes_atomic
from taguru_eval._base.html import render as render_template
from taguru_eval.errors import RunError

RENDERER: Final = "taguru_offline"

EMBED_OPTIONS: Final = {"mode": "vega-lite", "renderer": "svg", "actions": False}

_BUNDLE_SNIPPET: Final = "window.vegaEmbed=vegaEmbed; window.vegaLite=vegaLite; window.vega=vega;"


CACHE_ENV: Final = "TAGURU_EVAL_CACHE"


def cache_dir() -> Path:
    """``$TAGURU_EVAL_CACHE``, else ``$XDG_CACHE_HOME/taguru_eval`` (``~/.cache/…``)."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "taguru_eval"


@functools.cache
def javascript_bundle() -> str:
    """Vega + Vega-Lite + Vega-Embed as one script (from the vl-convert-python wheel).

    Bundling takes vl-convert seconds, so the result is kept in
    :func:`cache_dir` under a name that carries both versions (a new
    vl-convert or Altair makes a new file); a cache that cannot be read or
    written is simply not used.
    """
    try:
        vl_convert = load_extra("report", "vl_convert")
    except MissingExtra:
        raise RunError(
            "offline charts need the vl-convert-python package "
            "(pip install 'taguru_eval[report]'), which ships the chart libraries"
        ) from None
    import altair as alt

    # The bundled Vega-Lite must be the one Altair writes specs for.
    major_minor = ".".join(alt.VEGALITE_VERSION.split(".")[:2])
    version = major_minor if major_minor in vl_convert.get_vegalite_versions() else None
    try:
        tool = metadata.version("vl-convert-python")
    except metadata.PackageNotFoundError:
        tool = "unknown"
    cached = cache_dir() / f"vega-bundle-vlc{tool}-vl{version or 'default'}.js"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return cached.read_text(encoding="utf-8")
    bundle: str = vl_convert.javascript_bundle(
        _BUNDLE_SNIPPET, vl_version=f"v{version}" if version else None
    )
    # A literal "</script" inside the bundle would end the inline element early.
    bundle = bundle.replace("</script", "<\\/script")
    with contextlib.suppress(OSError):
        cached.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(cached, bundle.encode("utf-8"))
    return bundle


@dataclass(frozen=True)
class DataTablesBundle:
    """DataTables as the report inlines it (see :func:`datatables_bundle`)."""

    source: str
    """The ES module's text as a JSON string, safe inside ``<script type="application/json">``."""
    css: str
    """Its stylesheet (images are ``data:`` URLs already)."""
    version: str
    """The itables release the files come from."""


DATATABLES_FILE: Final = "itables/html/dt_bundle.js"
"""DataTables, jQuery and their extensions as one ES module, in the itables wheel."""


@functools.cache
def datatables_bundle() -> DataTablesBundle | None:
    """DataTables from the ``itables`` wheel, or None when it is not installed.

    The bundle is an ES module holding ``<!--`` and ``<script`` inside its
    own code, which would end or derail an inline ``<script>``; as a JSON string
    with every ``<`` escaped it is inert text that the page imports from a Blob
    URL (itables' own offline mode does the same from base64, a third larger).
    """
    try:
        script = extra_file("report", "itables", DATATABLES_FILE)
        css = script.with_suffix(".css").read_text(encoding="utf-8")
        source = script.read_text(encoding="utf-8")
    except (MissingExtra, OSError):
        return None
    try:
        version = metadata.version("itables")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return DataTablesBundle(
        source=json.dumps(source, ensure_ascii=False).replace("<", "\\u003c"),
        css=css.replace("</", "<\\/"),
        version=version,
    )


def embeddable(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as embedded: everything but the ``$schema`` identifier URL."""
    return {key: value for key, value in spec.items() if key != "$schema"}


def json_for_script(value: object) -> str:
    """JSON safe inside an inline ``<script>``: no ``<`` at all (``\\u003c`` is the same
    string), so neither ``</script`` nor ``<!--`` from a case id or answer text can end
    or derail the element."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False).replace("<", "\\u003c")


def chart_fragment(spec: dict[str, Any]) -> str:
    """One chart as an HTML fragment carrying the libraries, the spec and the embed call."""
    from markupsafe import Markup

    return render_template(
        "chart_fragment.html.j2",
        element=f"taguru-chart-{uuid.uuid4().hex[:12]}",
        # Inert inside their script elements: "</script" escaped, no "<" in the JSON.
        bundle=Markup(javascript_bundle()),
        spec=Markup(json_for_script(embeddable(spec))),
        options=Markup(json_for_script(EMBED_OPTIONS)),
    )


def render(spec: dict[str, Any], **_metadata: Any) -> dict[str, str]:
    """The ``taguru_offline`` renderer: a notebook output with everything inline."""
    title = spec.get("name") or "chart"
    return {
        "text/html": chart_fragment(spec),
        "text/plain": f"<taguru_eval offline chart {title}>",
    }


def enable() -> str:
    """Register and enable :data:`RENDERER` for Altair charts; returns its name.

    Notebooks call this first, so every chart they show works offline.
    """
    import altair as alt

    javascript_bundle()  # fail now, with the extra to install, not at the first chart
    if RENDERER not in alt.renderers.names():
        alt.renderers.register(RENDERER, render)
    alt.renderers.enable(RENDERER)
    return RENDERER
