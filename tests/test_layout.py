"""The package's shape: data flows one way, and no import runs back against it.

Every module belongs to one stage of the flow (DESIGN.md "Shape"); a module may
import its own stage and earlier ones, never a later one. Imports are read
from the source (``ast``), so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "taguru_eval"

STAGES: tuple[tuple[str, ...], ...] = (
    ("_base",),
    ("errors", "contract", "options", "catalog", "store_artifact"),
    ("corpus",),
    ("tables",),
    ("inputs",),
    ("run",),
    ("populate",),
    ("score",),
    ("artifact",),
    ("gate", "flag_gates"),
    ("store", "resume"),
    ("compare",),
    ("analyst",),
    ("summary",),
    ("pipeline",),
    ("api",),
    ("integrations",),
    ("refserver",),
    ("demo",),
    ("cli",),
    ("__init__", "__main__"),
)
"""The flow, first stage first; a top-level module or sub-package per entry."""

STAGE_OF = {name: index for index, names in enumerate(STAGES) for name in names}


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        yield ".".join(("taguru_eval", *parts)), path


def _imports(path: Path, module: str, known: set[str]) -> Iterator[str]:
    """The project modules ``path`` imports (``from pkg import mod`` names ``pkg.mod``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            target = ".".join(part for part in (base, node.module) if part)
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if submodule in known:
                    yield submodule
                elif target in known:
                    yield target


def _stage(module: str) -> int | None:
    parts = module.split(".")
    return STAGE_OF["__init__"] if len(parts) == 1 else STAGE_OF.get(parts[1])


def _project_imports() -> dict[str, set[str]]:
    """Module -> the project modules it imports (a package is named without ``__init__``)."""
    paths = {module.removesuffix(".__init__"): path for module, path in _modules()}
    known = set(paths)
    return {module: set(_imports(path, module, known)) - {module} for module, path in paths.items()}


def test_every_module_stands_in_a_stage() -> None:
    unplaced = sorted(module for module, _path in _modules() if _stage(module) is None)
    assert unplaced == []


def test_no_import_runs_against_the_flow() -> None:
    graph = _project_imports()
    # The reader sees real arrows (else the check below could not fail).
    assert "taguru_eval.score.aggregate" in graph["taguru_eval.pipeline.finish"]
    backwards = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if (_stage(target) or 0) > (_stage(module) or 0)
    )
    assert backwards == []


REFSERVER_MAY_IMPORT = ("taguru_eval._base", "taguru_eval.errors", "taguru_eval.corpus")
"""Besides itself, all the reference server needs: it stands in for taguru's own
server, so it must not share the evaluator's reading of the contract (an error
there would then agree with itself on both sides of the wire). ``corpus`` is the
context-folder reader ``serve DIR`` and ``load`` share, and the paragraph split a
stored text and a sent section marker must agree on; it reads files, never the
evaluator's contract (the next test holds it to that)."""


def _within(module: str, roots: tuple[str, ...]) -> bool:
    return any(module == root or module.startswith(f"{root}.") for root in roots)


def test_the_reference_server_imports_only_base_and_errors() -> None:
    graph = _project_imports()
    own = ("taguru_eval.refserver",)
    server = {module: targets for module, targets in graph.items() if _within(module, own)}
    # The reader sees real arrows, inside and out (else the check below could not fail).
    assert "taguru_eval.refserver.envelope" in server["taguru_eval.refserver.app"]
    assert any(
        _within(target, REFSERVER_MAY_IMPORT) for targets in server.values() for target in targets
    )
    foreign = sorted(
        f"{module} -> {target}"
        for module, targets in server.items()
        for target in targets
        if not _within(target, (*own, *REFSERVER_MAY_IMPORT))
    )
    assert foreign == []


def test_the_folder_reader_imports_only_base_and_errors() -> None:
    graph = _project_imports()
    own = ("taguru_eval.corpus",)
    reader = {module: targets for module, targets in graph.items() if _within(module, own)}
    assert "taguru_eval.corpus.paragraphs" in reader["taguru_eval.corpus.folder"]
    foreign = sorted(
        f"{module} -> {target}"
        for module, targets in reader.items()
        for target in targets
        if not _within(target, (*own, "taguru_eval._base", "taguru_eval.errors"))
    )
    assert foreign == []


def test_no_import_cycle() -> None:
    graph = _project_imports()
    done: set[str] = set()

    def cycle_from(node: str, trail: list[str]) -> list[str] | None:
        for target in sorted(graph[node]):
            if target in trail:
                return [*trail[trail.index(target) :], target]
            if target not in done:
                found = cycle_from(target, [*trail, target])
                if found:
                    return found
        done.add(node)
        return None

    cycles = [found for start in sorted(graph) if (found := cycle_from(start, [start]))]
    assert cycles == []


@pytest.mark.parametrize("word", ["import_module", "__import__"])
def test_dynamic_imports_live_in_the_two_loaders_only(word: str) -> None:
    """The extras loader (an optional dependency, with the install hint) and
    the lazy loader (a name or a command imported on first use)."""
    users = {
        str(path.relative_to(PACKAGE))
        for _module, path in _modules()
        if word in path.read_text(encoding="utf-8")
    }
    assert users <= {"_base/extras.py", "_base/lazy.py"}


def test_at_most_twelve_top_level_modules() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top
