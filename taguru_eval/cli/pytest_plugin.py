"""The pytest entry point: ``pytest --taguru-url URL`` runs the project's eval sets as test items.

Registered as a ``pytest11`` plugin by the base install (an extra cannot make an
entry point conditional). It stays out of the way of every pytest run that does
not ask for it: unless ``--taguru-url`` is given or the rootdir's pyproject.toml
has a ``[tool.taguru_eval]`` table, it collects nothing and imports nothing of
the evaluator (no Polars, no HTTP client: a plain ``pytest`` pays for this
module and ``tomllib`` only).

Once active, each eval set becomes one pytest file node whose items are the
gate's checks (docs/pytest.md): one per aggregate bound of its thresholds file
(``aggregate[recall.recall_at_k]``), one for corpus stability (``corpus[stable]``),
one per per-case metric bound with every violating case grouped in its failure
(``cases[recall.mrr]``), one per flag gate (``must-refuse``, ``answers``), or a
single ``run`` item when the set has no thresholds file. So ``-k``, ``-x`` and
``--junitxml`` work on them as on any test. The set runs once, through the
library (:func:`taguru_eval.api.run`), when its first item runs, and every item
reads the same :class:`~taguru_eval.api.Run`. Without a URL every item is skipped
with the reason. The fixture ``taguru_eval_run`` hands the same ``Run`` to
hand-written asserts.
"""

from __future__ import annotations

import tempfile
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from taguru_eval.api import Run

URL_OPTION: Final = "--taguru-url"
EVAL_SUFFIX: Final = ".eval.jsonl"
TABLE: Final = "[tool.taguru_eval]"
MARKER: Final = "taguru_eval"
NO_URL: Final = (
    f"no taguru server to run against: pass {URL_OPTION} URL "
    "(e.g. pytest --taguru-url http://127.0.0.1:8248)"
)
CASES_LISTED: Final = 10
"""How many violating cases a grouped per-case item names before counting the rest."""

_SIBLINGS: Final = {
    "thresholds": ".thresholds.json",
    "must_refuse": ".must_refuse.jsonl",
    "answers": ".answers.jsonl",
}
"""The files beside ``NAME.eval.jsonl`` a set picks up by itself (``import-golden``'s names)."""


@dataclass(frozen=True)
class EvalSpec:
    """One eval set to run: its files (absolute) and context."""

    eval: Path
    context: str
    thresholds: Path | None = None
    must_refuse: Path | None = None
    answers: Path | None = None

    @classmethod
    def beside(cls, path: Path, context: str | None = None) -> EvalSpec:
        """``NAME.eval.jsonl``: context ``NAME``, and the sibling files that exist."""
        stem = path.name.removesuffix(EVAL_SUFFIX)
        found = {
            key: sibling
            for key, suffix in _SIBLINGS.items()
            if (sibling := path.with_name(stem + suffix)).is_file()
        }
        return cls(eval=path, context=context or stem, **found)


_KEYS: Final = tuple(item.name for item in fields(EvalSpec))


def _spec(entry: Mapping[str, Any], root: Path, where: str) -> EvalSpec:
    """One entry of the table (or a marker's keywords), paths relative to ``root``."""
    unknown = sorted(set(entry) - set(_KEYS))
    if unknown:
        raise pytest.UsageError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(_KEYS)})")
    for key, value in entry.items():
        if not isinstance(value, str) or not value:
            raise pytest.UsageError(f"{where}: {key} must be a non-empty string")
    if "eval" not in entry:
        raise pytest.UsageError(f"{where}: eval is required (the eval.jsonl to run)")
    path = (root / entry["eval"]).resolve()
    if "context" not in entry and not path.name.endswith(EVAL_SUFFIX):
        raise pytest.UsageError(
            f"{where}: context is required for {entry['eval']} (only NAME{EVAL_SUFFIX} "
            "names its context NAME)"
        )
    given = {key: (root / entry[key]).resolve() for key in _SIBLINGS if key in entry}
    defaults = EvalSpec.beside(path, entry.get("context"))
    return EvalSpec(
        eval=path,
        context=defaults.context,
        **{key: given.get(key, getattr(defaults, key)) for key in _SIBLINGS},
    )


def _table(root: Path) -> list[EvalSpec] | None:
    """The eval sets ``[tool.taguru_eval]`` names; None without the table."""
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return None
    try:
        document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise pytest.UsageError(f"{pyproject}: {exc}") from None
    table = document.get("tool", {}).get("taguru_eval")
    if table is None:
        return None
    where = f"{pyproject} {TABLE}"
    if not isinstance(table, dict) or set(table) - {"evals"}:
        raise pytest.UsageError(f"{where}: the table takes one key, evals (a list of tables)")
    entries = table.get("evals", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise pytest.UsageError(f"{where}: evals must be a list of tables")
    return [_spec(entry, root, f"{where} evals[{i}]") for i, entry in enumerate(entries)]


@dataclass
class Session:
    """The plugin's state for one pytest session: the URL, the configured sets,
    and each set's run (or the error that ended it), made once."""

    url: str | None
    configured: list[EvalSpec] | None
    work: Path
    runs: dict[EvalSpec, Run | BaseException] = field(default_factory=dict)

    def spec_for(self, path: Path) -> EvalSpec | None:
        """The set to run for a collected file: the table's entry, or by convention."""
        if self.configured is None:
            return EvalSpec.beside(path) if path.name.endswith(EVAL_SUFFIX) else None
        return next((spec for spec in self.configured if spec.eval == path), None)

    def run(self, spec: EvalSpec) -> Run:
        """The set's run, made on first use; skipped without a URL, failed (no
        traceback) when the run could not complete."""
        if self.url is None:
            pytest.skip(NO_URL)
        if spec not in self.runs:
            self.runs[spec] = self._run(spec)
        outcome = self.runs[spec]
        if isinstance(outcome, BaseException):
            raise CheckFailed(_error_text(spec, outcome))
        return outcome

    def _run(self, spec: EvalSpec) -> Run | BaseException:
        from taguru_eval.api import run
        from taguru_eval.errors import TaguruEvalError

        out = self.work / f"{len(self.runs)}.evaluation.json"
        try:
            return run(
                spec.eval,
                spec.context,
                url=self.url,
                out=out,
                no_store=True,
                thresholds=spec.thresholds,
                must_refuse=spec.must_refuse,
                answers=spec.answers,
            )
        except TaguruEvalError as exc:
            return exc


def _error_text(spec: EvalSpec, error: BaseException) -> str:
    hint = getattr(error, "hint", None)
    code = getattr(error, "exit_code", None)
    lines = [f"{spec.eval.name}: the run did not complete (exit {code}): {error}"]
    if hint:
        lines.append(f"hint: {hint}")
    return "\n".join(lines)


_SESSION: Final = pytest.StashKey[Session]()


class CheckFailed(Exception):
    """A gate check that did not pass; its message is the whole report (no traceback)."""


# ------------------------------------------------------------------ hooks


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("taguru_eval", "taguru_eval retrieval gate")
    group.addoption(
        URL_OPTION,
        dest="taguru_url",
        metavar="URL",
        default=None,
        help=f"run the project's *{EVAL_SUFFIX} files (or those {TABLE} in pyproject.toml "
        "names) against the taguru server at URL, one test item per gate check",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(eval, context=None, thresholds=None, must_refuse=None, answers=None): "
        "the eval set the taguru_eval_run fixture runs (paths relative to the rootdir)",
    )
    url: str | None = config.getoption("taguru_url")
    configured = _table(config.rootpath)
    if url is None and configured is None:
        return  # not asked for: collect nothing, change nothing
    work = Path(tempfile.mkdtemp(prefix="taguru-eval-pytest-"))
    config.stash[_SESSION] = Session(url=url, configured=configured, work=work)
    if configured and config.args_source != pytest.Config.ArgsSource.ARGS:
        # No paths on the command line: the configured sets are collected wherever
        # they are, not only under testpaths.
        config.args.extend(
            str(spec.eval) for spec in configured if str(spec.eval) not in config.args
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None:
        import shutil

        shutil.rmtree(session.work, ignore_errors=True)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> EvalFile | None:
    session = parent.config.stash.get(_SESSION, None)
    if session is None or not file_path.name.endswith(".jsonl"):
        return None
    spec = session.spec_for(file_path.resolve())
    if spec is None:
        return None
    node: EvalFile = EvalFile.from_parent(parent, path=file_path, spec=spec)
    return node


@pytest.fixture
def taguru_eval_run(request: pytest.FixtureRequest) -> Run:
    """The :class:`~taguru_eval.api.Run` of the set named by the test's
    ``@pytest.mark.taguru_eval(eval=…, context=…)``, else of the first set
    ``[tool.taguru_eval]`` names; made once per session and shared with the
    gate's items. Skipped without ``--taguru-url``."""
    config = request.config
    marker = request.node.get_closest_marker(MARKER)
    session = config.stash.get(_SESSION, None)
    if marker is not None:
        entry = dict(marker.kwargs)
        if marker.args:
            entry.setdefault("eval", marker.args[0])
        spec = _spec(entry, config.rootpath, f"@pytest.mark.{MARKER}")
    elif session is not None and session.configured:
        spec = session.configured[0]
    else:
        raise pytest.UsageError(
            f"taguru_eval_run: name the eval set with @pytest.mark.{MARKER}(eval='x.eval.jsonl',"
            f" context='name'), or list it under evals in {TABLE} of pyproject.toml"
        )
    if session is None:
        pytest.skip(NO_URL)
    try:
        return session.run(spec)
    except CheckFailed as exc:
        pytest.fail(str(exc), pytrace=False)


# ------------------------------------------------------------------ nodes


class EvalFile(pytest.File):
    """One eval set; its items are the gate's checks, named before the set runs."""

    def __init__(self, *, spec: EvalSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec

    def collect(self) -> Iterator[pytest.Item]:
        for name, check in self._checks():
            yield GateCheck.from_parent(self, name=name, check=check)

    def _checks(self) -> list[tuple[str, Check]]:
        spec = self.spec
        if spec.thresholds is None:
            return [("run", Check("run"))]
        from taguru_eval.errors import TaguruEvalError
        from taguru_eval.inputs.thresholds import load_run_thresholds

        try:
            thresholds = load_run_thresholds(
                spec.thresholds,
                None,
                must_refuse=spec.must_refuse is not None,
                answers=spec.answers is not None,
            )
        except TaguruEvalError as exc:
            raise self.CollectError(str(exc)) from None
        per_case = sorted(
            set(thresholds.case_default).union(
                *(bounds.keys() for bounds in thresholds.case_overrides.values())
            )
        )
        checks = [(f"aggregate[{m}]", Check("aggregate", m)) for m in sorted(thresholds.aggregate)]
        checks.append(("corpus[stable]", Check("corpus", "corpus.stable")))
        checks += [(f"cases[{m}]", Check("case", m)) for m in per_case]
        if spec.must_refuse is not None:
            checks.append(("must-refuse", Check("flag", "must-refuse")))
        if spec.answers is not None:
            checks.append(("answers", Check("flag", "answers")))
        return checks


@dataclass(frozen=True)
class Check:
    """What one item checks: its scope (``aggregate``, ``corpus``, ``case``,
    ``flag`` or ``run``) and metric or flag-gate name."""

    scope: str
    name: str = ""

    def verify(self, run: Run) -> None:
        """Raise :class:`CheckFailed` with the report when the run fails this check."""
        block = run.doc.get("thresholds") or {}
        if self.scope == "run":
            return  # the run completed: all a set without a thresholds file asserts
        if self.scope == "flag":
            from taguru_eval.flag_gates import flag_gate_rows

            for row in flag_gate_rows(run.doc):
                if row.name == self.name and row.failed:
                    offenders = [f"  {case_id}: {verdict}" for case_id, verdict, _ in row.offenders]
                    raise CheckFailed(
                        "\n".join(
                            [f"{row.flag} gate failed: {row.counts}", *row.reasons, *offenders]
                        )
                    )
            return
        violated = [
            v
            for v in block.get("violations") or []
            if v.get("scope") == self.scope and v.get("metric") == self.name
        ]
        if not violated:
            return
        if self.scope != "case":
            raise CheckFailed("\n".join(f"{self.name}: {v.get('reason')}" for v in violated))
        raise CheckFailed(_grouped(self.name, violated))


def _grouped(metric: str, violated: Sequence[Mapping[str, Any]]) -> str:
    cases = {v.get("case_id") for v in violated}
    lines = [f"{metric}: {len(cases)} case(s) violate their bound"]
    lines += [f"  [case {v.get('case_id')}] {v.get('reason')}" for v in violated[:CASES_LISTED]]
    if len(violated) > CASES_LISTED:
        lines.append(f"  ... and {len(violated) - CASES_LISTED} more case-scoped violation(s)")
    return "\n".join(lines)


class GateCheck(pytest.Item):
    """One gate check of one eval set."""

    def __init__(self, *, check: Check, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check

    def setup(self) -> None:
        if self.config.stash[_SESSION].url is None:
            pytest.skip(NO_URL)

    def runtest(self) -> None:
        assert isinstance(self.parent, EvalFile)
        run = self.config.stash[_SESSION].run(self.parent.spec)
        self.check.verify(run)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        if isinstance(excinfo.value, CheckFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # The domain is the item's own name: pytest shows it after the file's
        # node id, reading dots before a ``[`` as ``::`` (so no dot goes there).
        return self.path, None, self.name
