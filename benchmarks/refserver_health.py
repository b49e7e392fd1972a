"""How long ``GET /health`` takes on the reference server while a huge search runs.

Starts ``python -m taguru_eval serve DIR --port 0`` in a child process (so the
probe and the server do not share a GIL), then, each round: times ``/health``
on an idle server, and times it again, every 10 ms, while one legal search of
``--query-mib`` MiB (just under the 8 MiB body cap by default) is in flight.
Prints the medians of both side by side, the worst probe under load and the
search's own time. Issue 29's target: ``/health`` within 100 ms under that load
(it took 5.6 s when searches ran on the event loop). ``--tree DIR`` serves from
another checkout instead (e.g. the tree before the change) for a before/after.

    python benchmarks/refserver_health.py [--data data] [--rounds 5] [--query-mib 7.9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 100.0
SEED = "青嶺酒造の蔵元と仕込み水 "


def start_server(tree: Path, data: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    server = subprocess.Popen(
        [sys.executable, "-m", "taguru_eval", "serve", str(data), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tree,
        env=env,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if "listening on " not in line:
        server.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return server, line.split("listening on ")[1].split(" ")[0]


def first_context(client: httpx.Client) -> str:
    contexts = client.get("/contexts").json()["result"]["contexts"]
    if not contexts:
        raise SystemExit("the corpus folder serves no context")
    name: str = contexts[0]["name"]
    return name


def probe(client: httpx.Client) -> float:
    started = time.perf_counter()
    response = client.get("/health")
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        raise SystemExit(f"/health answered {response.status_code}")
    return elapsed


def one_round(url: str, context: str, query: str) -> tuple[float, float, float, float]:
    """(idle median, loaded median, loaded worst, search seconds) of one round."""
    with httpx.Client(base_url=url, timeout=60) as client, httpx.Client(base_url=url) as health:
        idle = statistics.median(probe(health) for _ in range(20))
        took: list[float] = []

        def big() -> None:
            started = time.perf_counter()
            response = client.post(f"/contexts/{context}/sources/search", json={"query": query})
            took.append(time.perf_counter() - started)
            if response.status_code != 200:
                raise SystemExit(f"search answered {response.status_code}: {response.text[:200]}")

        thread = threading.Thread(target=big)
        thread.start()
        time.sleep(0.3)  # let the body arrive so the probes meet a server at work
        loaded: list[float] = []
        while thread.is_alive():
            loaded.append(probe(health))
            time.sleep(0.01)
        thread.join()
    if not loaded:
        raise SystemExit("the search finished before any probe; raise --query-mib")
    return idle, statistics.median(loaded), max(loaded), took[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--query-mib", type=float, default=7.9)
    parser.add_argument("--tree", type=Path, default=ROOT)
    args = parser.parse_args()
    size = int(args.query_mib * 1024 * 1024)
    query = (SEED * (size // len(SEED.encode("utf-8")) + 1)).encode("utf-8")[:size]
    text = query.decode("utf-8", "ignore")
    server, url = start_server(args.tree.resolve(), args.data.resolve())
    try:
        with httpx.Client(base_url=url) as client:
            context = first_context(client)
        rounds = [one_round(url, context, text) for _ in range(args.rounds)]
    finally:
        server.terminate()
        server.wait(timeout=10)
    idle, loaded, worst, search = (
        statistics.median(column) for column in zip(*rounds, strict=True)
    )
    worst_of_all = max(r[2] for r in rounds)
    verdict = "met" if worst_of_all * 1000 <= TARGET_MS else "MISSED"
    print(f"tree {args.tree}; {args.rounds} rounds; query {len(query) / 2**20:.1f} MiB")
    print(f"/health idle      median {idle * 1000:8.2f} ms")
    print(f"/health loaded    median {loaded * 1000:8.2f} ms   (median of round medians)")
    print(f"/health loaded    worst  {worst * 1000:8.2f} ms   (median of round worsts)")
    print(f"/health loaded    worst  {worst_of_all * 1000:8.2f} ms   (worst of all rounds)")
    print(f"search itself     median {search:8.2f} s")
    print(f"target: every loaded probe within {TARGET_MS:.0f} ms: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
