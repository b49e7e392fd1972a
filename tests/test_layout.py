"""The package's shape: data flows one way, and no import runs back against it.

Every module belongs to one stage of the flow (DESIGN.md "Shape"); a module may
import its own stage and earlier ones, never a later one. Imports are read
from the source (``ast``), so a lazy import inside a function counts too. The
reference server is a sibling package (``taguru_refserver``) with its own rule:
it leans on the evaluator's base only, and the evaluator starts it from the
``serve`` and ``demo`` commands only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "taguru_eval"
SERVER = ROOT / "taguru_refserver"

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
    ("demo",),
    ("cli",),
    ("__init__", "__main__"),
)
"""The flow, first stage first; a top-level module or sub-package per entry."""

STAGE_OF = {name: index for index, names in enumerate(STAGES) for name in names}


def _modules(package: Path = PACKAGE) -> Iterator[tuple[str, Path]]:
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        yield ".".join((package.name, *parts)), path


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
    """The evaluator module's stage; None outside ``taguru_eval`` (the sibling has its rule)."""
    parts = module.split(".")
    if parts[0] != PACKAGE.name:
        return None
    return STAGE_OF["__init__"] if len(parts) == 1 else STAGE_OF.get(parts[1])


def _project_imports() -> dict[str, set[str]]:
    """Module -> the project modules it imports, across both packages (a package is
    named without ``__init__``)."""
    paths = {
        module.removesuffix(".__init__"): path
        for package in (PACKAGE, SERVER)
        for module, path in _modules(package)
    }
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
        if _stage(module) is not None and (_stage(target) or 0) > (_stage(module) or 0)
    )
    assert backwards == []


REFSERVER_MAY_IMPORT = ("taguru_eval._base", "taguru_eval.errors", "taguru_eval.corpus")
"""Besides itself, all the reference server needs of the evaluator: it stands in for
taguru's own server, so it must not share the evaluator's reading of the contract
(an error there would then agree with itself on both sides of the wire). ``corpus``
is the context-folder reader ``serve DIR`` and ``load`` share, and the paragraph
split a stored text and a sent section marker must agree on; it reads files, never
the evaluator's contract (the folder reader's test holds it to that). It cannot
join ``_base``: it raises ``errors.InputError``, a later stage."""

STARTS_THE_SERVER = {"taguru_eval.cli.serve", "taguru_eval.demo.run", "taguru_eval.demo.history"}
"""The only evaluator modules that import the reference server: the ``serve`` command
and the demo (``demo`` and its ``--runs`` history), each inside the function that
starts a server, so importing the evaluator never loads it."""


def _within(module: str, roots: tuple[str, ...]) -> bool:
    return any(module == root or module.startswith(f"{root}.") for root in roots)


def test_the_reference_server_imports_only_base_and_errors() -> None:
    graph = _project_imports()
    own = (SERVER.name,)
    server = {module: targets for module, targets in graph.items() if _within(module, own)}
    # The reader sees real arrows, inside and out (else the check below could not fail).
    assert "taguru_refserver.envelope" in server["taguru_refserver.app"]
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


def _eager_imports(path: Path) -> set[str]:
    """What importing ``path`` imports: every import outside a function body."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lazy = {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
    }
    eager: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in lazy:
            continue
        if isinstance(node, ast.Import):
            eager.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            eager.add(node.module)
    return eager


def test_the_evaluator_starts_the_reference_server_from_serve_and_demo_only() -> None:
    graph = _project_imports()
    importers = {
        module
        for module, targets in graph.items()
        if _within(module, (PACKAGE.name,))
        and any(_within(target, (SERVER.name,)) for target in targets)
    }
    assert importers == STARTS_THE_SERVER
    # The reader tells an eager import from a lazy one (else the check below could not fail).
    assert "taguru_refserver.envelope" in _eager_imports(SERVER / "app.py")
    for module in sorted(STARTS_THE_SERVER):
        path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
        eager = _eager_imports(path)
        assert not any(_within(target, (SERVER.name,)) for target in eager), module


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
