"""Executing the notebooks and checking that what they (or the report) show loads nothing.

``execute_notebook`` runs a notebook top to bottom with nbclient and returns
what a probe cell appended at the end printed (JSON) plus the executed
notebook. ``external_urls`` lists every URL a page or an output could reach
out to: any http(s) URL that is not loopback, and any ``src``/``href`` or
CSS ``url()`` pointing off the page — after removing the vendored Vega
bundle, whose library code mentions URLs it never loads here (the specs
embed their data).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from support.paths import PROJECT_ROOT

ROOT = PROJECT_ROOT
NOTEBOOKS = ROOT / "notebooks"

_URL = re.compile(r"https?://[^\s\"'<>)\\]+", re.IGNORECASE)
_LOOPBACK = re.compile(r"https?://(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?(/|$)", re.I)
_OFF_PAGE = re.compile(
    r"""(\b(src|href)\s*=\s*["']?\s*(https?:|//|ftp:))|(url\(\s*["']?\s*(https?:|//))|@import""",
    re.IGNORECASE,
)


def external_urls(text: str, bundle: str) -> list[str]:
    """Every external reference in ``text`` once the vendored ``bundle`` is removed."""
    own = text.replace(bundle, "")
    found = [url for url in _URL.findall(own) if not _LOOPBACK.match(url)]
    found += [match.group(0) for match in _OFF_PAGE.finditer(own)]
    return found


def output_texts(notebook: Any) -> list[str]:
    """Every output of every code cell as text (rich outputs and streams alike)."""
    texts: list[str] = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.outputs:
            if "text" in output:
                texts.append(str(output["text"]))
            for value in (output.get("data") or {}).values():
                texts.append(value if isinstance(value, str) else json.dumps(value))
    return texts


def execute_notebook(name: str, probe: str, env: dict[str, str]) -> tuple[dict[str, Any], Any]:
    """Run ``notebooks/<name>.ipynb`` plus a probe cell printing ``json.dumps(probe)``."""
    import nbclient
    import nbformat

    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "outputs must be stripped"
    notebook.cells.append(nbformat.v4.new_code_cell(f"import json\nprint(json.dumps({probe}))"))
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        client = nbclient.NotebookClient(
            notebook,
            timeout=600,
            kernel_name="python3",
            resources={"metadata": {"path": str(NOTEBOOKS)}},
        )
        client.execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    stream = [o for o in notebook.cells[-1].outputs if o.get("name") == "stdout"]
    result: dict[str, Any] = json.loads("".join(o["text"] for o in stream))
    return result, notebook


def notebook_env(store_dir: Path, **extra: str) -> dict[str, str]:
    """The environment a notebook test runs with: the store, and the project importable."""
    path = os.environ.get("PYTHONPATH", "")
    return {
        "TAGURU_EVAL_STORE": str(store_dir),
        "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT),
        **extra,
    }


def chart_outputs(notebook: Any) -> list[str]:
    """The HTML of every chart output (the offline renderer's fragments)."""
    return [
        str(output["data"]["text/html"])
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if "taguru-chart-" in str((output.get("data") or {}).get("text/html", ""))
    ]
