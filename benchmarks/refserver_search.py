"""Search calls per second the reference server sustains on loopback.

Starts ``python -m taguru_eval serve DIR --port 0`` in a child
process (so client and server do not share a GIL), then sends
``POST /contexts/{ctx}/sources/search`` with the queries of every context's
``eval.jsonl`` round-robin from ``--concurrency`` keep-alive connections for
``--calls`` requests. Prints calls/s and the p50/p95 latency; the server must
not be the bottleneck of the client benchmarks (target: at least 500 calls/s
on a 2-core machine).

    python benchmarks/refserver_search.py [--data data] [--calls 3000] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
TARGET_CALLS_PER_SECOND = 500.0


def workload(data: Path) -> list[tuple[str, str]]:
    """(context, query) pairs from each context folder's eval.jsonl (header line skipped)."""
    pairs: list[tuple[str, str]] = []
    for folder in sorted(p for p in data.iterdir() if p.is_dir()):
        eval_file = folder / "eval.jsonl"
        if not eval_file.is_file():
            continue
        for line in eval_file.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if isinstance(record, dict) and isinstance(record.get("query"), str):
                pairs.append((folder.name, record["query"]))
    if not pairs:
        raise SystemExit(f"no eval.jsonl queries under {data}")
    return pairs


async def hammer(
    url: str, pairs: list[tuple[str, str]], calls: int, concurrency: int
) -> tuple[float, list[float]]:
    latencies: list[float] = []
    counter = iter(range(calls))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=35) as client:

        async def worker() -> None:
            for index in counter:
                context, query = pairs[index % len(pairs)]
                started = time.perf_counter()
                response = await client.post(
                    f"/contexts/{context}/sources/search", json={"query": query, "limit": 10}
                )
                latencies.append(time.perf_counter() - started)
                if response.status_code != 200:
                    raise SystemExit(f"search answered {response.status_code}: {response.text}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return elapsed, latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    pairs = workload(args.data)
    server = subprocess.Popen(
        [sys.executable, "-m", "taguru_eval", "serve", str(args.data), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if "listening on " not in line:
            raise SystemExit(f"server did not start: {line!r}")
        url = line.split("listening on ")[1].split(" ")[0]
        asyncio.run(hammer(url, pairs, min(200, args.calls), args.concurrency))  # warm-up
        elapsed, latencies = asyncio.run(hammer(url, pairs, args.calls, args.concurrency))
    finally:
        server.terminate()
        server.wait(timeout=10)
    latencies.sort()
    rate = args.calls / elapsed
    p50 = latencies[len(latencies) // 2] * 1000
    p95 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))] * 1000
    verdict = "ok" if rate >= TARGET_CALLS_PER_SECOND else "BELOW TARGET"
    print(
        f"refserver search: {rate:.0f} calls/s over {args.calls} calls at concurrency "
        f"{args.concurrency} (p50 {p50:.2f} ms, p95 {p95:.2f} ms) — target "
        f"{TARGET_CALLS_PER_SECOND:.0f}: {verdict}"
    )
    return 0 if rate >= TARGET_CALLS_PER_SECOND else 1


if __name__ == "__main__":
    sys.exit(main())
