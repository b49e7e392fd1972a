"""Start-up: what a command costs before it does its work (issue 30).

In the current environment (meant: every extra installed, ``notebooks``
included, which brings Jupyter), times whole processes, medians of ``--runs``
(default 7) taken in turn, A B A B, so a drift of the shared machine falls on
both sides of each ratio:

* ``python -c pass`` against ``python -m taguru_eval --version``;
  target: ``--version`` at most 3x a bare interpreter;
* ``python -c "import polars, pyarrow, httpx"`` against ``run`` up to its
  first request: from the moment the process is started until the reference
  server, served from this process on loopback, receives the first search of
  the eval lane (``POST /contexts/{name}/sources/search``; the preflight's
  reads come before it and are counted in). The run is then stopped (SIGTERM,
  its documented cancel). Target: at most 1.5x the three imports, which every
  run needs anyway.

``--cases N`` runs N demo-shaped cases instead of the bundled sake set, to see
what the eval file's size adds before the first request. ``--baseline DIR``
times the same two taguru_eval commands from another source tree (say a
``git worktree`` of main) alternately with this one, for before/after figures
side by side.

    python benchmarks/startup.py [--runs 7] [--cases N] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
FIRST_REQUEST_TIMEOUT_S = 300.0

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class FirstSearch:
    """The monotonic time the server received the first eval-lane search since ``reset``."""

    arrived: float | None = None
    seen: threading.Event = field(default_factory=threading.Event)

    def reset(self) -> None:
        self.arrived = None
        self.seen.clear()

    def wrap(self, app: App) -> App:
        """``app`` behind a note of the first search's arrival (plain ASGI, no private API)."""

        async def noted(scope: Scope, receive: Receive, send: Send) -> None:
            if (
                self.arrived is None
                and scope.get("type") == "http"
                and str(scope.get("path", "")).endswith("/sources/search")
            ):
                self.arrived = time.monotonic()
                self.seen.set()
            await app(scope, receive, send)

        return noted


class Server:
    """The reference server over ``data/`` on an ephemeral loopback port, in a thread."""

    def __init__(self, first: FirstSearch) -> None:
        import uvicorn

        from taguru_refserver import ServerState, create_app, load_corpus_dir
        from taguru_refserver.serve import bind_socket, socket_url

        state = ServerState()
        load_corpus_dir(state, DATA)
        self._sock = bind_socket("127.0.0.1", 0)
        self.url = socket_url(self._sock)
        app = first.wrap(create_app(state))
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise SystemExit("the reference server did not start")
            time.sleep(0.01)

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()


def environment(tree: Path | None) -> dict[str, str]:
    """This environment; with ``tree``, that source tree's taguru_eval first on the path."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TAGURU_")}
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    return env


def wall(command: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds from start to exit of ``command``, run in ``cwd`` (never a source
    tree: ``python -m`` puts the working directory ahead of PYTHONPATH); it must
    succeed."""
    start = time.perf_counter()
    completed = subprocess.run(
        command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    elapsed = time.perf_counter() - start
    if completed.returncode != 0:
        raise SystemExit(f"{command} exited {completed.returncode}: {completed.stderr[-500:]!r}")
    return elapsed


def to_first_search(
    command: list[str], env: dict[str, str], first: FirstSearch, work: Path
) -> float:
    """Seconds from starting the run until the server gets its first search; the run is
    then stopped."""
    first.reset()
    start = time.monotonic()
    process = subprocess.Popen(
        command, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        if not first.seen.wait(FIRST_REQUEST_TIMEOUT_S) or first.arrived is None:
            raise SystemExit(f"no search request within {FIRST_REQUEST_TIMEOUT_S} s: {command}")
        return first.arrived - start
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
        # 0/3: finished before the signal; 143: stopped by it, as documented.
        if process.returncode not in (0, 3, 143):
            raise SystemExit(f"the run exited {process.returncode}: {err[-500:]!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="counted runs of each command")
    parser.add_argument("--cases", type=int, default=0, help="demo-shaped cases (0: sake set)")
    parser.add_argument(
        "--baseline", type=Path, help="another source tree whose taguru_eval is timed alongside"
    )
    args = parser.parse_args(argv)

    python = sys.executable
    first = FirstSearch()
    server = Server(first)
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as scratch:
        work = Path(scratch)
        eval_path = DATA / "sake" / "eval.jsonl"
        if args.cases:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from synthetic import write_eval

            eval_path = write_eval(work / "eval.jsonl", args.cases)
        run = [
            python,
            "-m",
            "taguru_eval",
            "--eval",
            str(eval_path),
            "--context",
            "sake",
            "--url",
            server.url,
            "--out",
            str(work / "evaluation.json"),
            "--no-store",
            "--no-step-summary",
            "--quiet",
        ]
        trees: dict[str, Path | None] = {"": None}
        if args.baseline is not None:
            trees["baseline "] = args.baseline.resolve()
        plain = environment(None)
        steps: list[tuple[str, Callable[[], float]]] = [
            ("python -c pass", lambda: wall([python, "-c", "pass"], plain, work)),
            (
                'python -c "import polars, pyarrow, httpx"',
                lambda: wall([python, "-c", "import polars, pyarrow, httpx"], plain, work),
            ),
        ]
        for label, tree in trees.items():
            env = environment(tree)
            steps.append(
                (
                    f"{label}python -m taguru_eval --version",
                    lambda env=env: wall([python, "-m", "taguru_eval", "--version"], env, work),
                )
            )
            steps.append(
                (
                    f"{label}run to its first search",
                    lambda env=env: to_first_search(run, env, first, work),
                )
            )
        for _, measure in steps:  # warm-up: the file cache, the server's first answers
            measure()
        samples: dict[str, list[float]] = {name: [] for name, _ in steps}
        for _ in range(args.runs):
            for name, measure in steps:
                samples[name].append(measure())
    server.close()

    median = {name: statistics.median(values) for name, values in samples.items()}
    cases = f"{args.cases} demo-shaped cases" if args.cases else "the sake set (16 cases)"
    print(f"start-up, {args.runs} runs each in turn, {cases}, python {sys.version.split()[0]}")
    print(f"{'command':<52} {'median s':>9} {'min s':>8} {'max s':>8}")
    for name, values in samples.items():
        print(f"{name:<52} {median[name]:>9.3f} {min(values):>8.3f} {max(values):>8.3f}")
    print()
    failed = False
    for label in trees:
        version = median[f"{label}python -m taguru_eval --version"] / median["python -c pass"]
        first_request = (
            median[f"{label}run to its first search"]
            / median['python -c "import polars, pyarrow, httpx"']
        )
        for name, ratio, target in (
            (f"{label}--version / python -c pass", version, 3.0),
            (f"{label}run to first search / import polars, pyarrow, httpx", first_request, 1.5),
        ):
            verdict = "met" if ratio <= target else "MISSED"
            failed = failed or (not label and ratio > target)
            print(f"{name:<60} {ratio:>6.2f}x  (target <= {target}x: {verdict})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
