"""Throughput and latency fidelity of run mode against a 50 ms stub server.

Starts the lean stub (``stub.py``: an asyncio protocol in a child process
that answers every route after a fixed 50 ms from pre-encoded bodies, so its
own CPU per request is small beside the client's), then runs the real
network phase of ``taguru_eval`` (preflight, the cases, the second context
read) over a synthetic 2,000-case eval set:

* throughput: passage calls per second at ``--concurrency 64`` against the
  ideal 64 / 0.050 s = 1,280 calls/s (target: at least 85 %);
* latency fidelity: p50 of ``latency.passage_ms`` at concurrency 64 vs 1
  (target: within 12 %);
* the ``--assembly`` lane: the same 2,000 cases as evidence calls (the stub
  answers ``POST …/evidence`` with a small, well-formed package) against the
  baseline search calls, and against search calls whose answer is padded to the
  evidence answer's size, interleaved run by run (target: the same share of
  the ideal rate — handling a package must add nothing beside the HTTP
  exchange). Each mode also reports the client's own CPU time per case, and
  the answer handling is timed in-process.

Every figure is the median of ``--repeats`` runs of the client's own engine
(aiohttp's client, on the run's event loop: uvloop's where it installs). Where the client's
CPU goes per call is ``profile_client.py``'s. The stub stops with the script (and by
itself after ``--stub-lifetime`` seconds).

    python benchmarks/throughput.py [--cases 2000] [--concurrency 64] [--repeats 5]
                                    [--modes baseline,assembly,padded] [--httpx-pool]
                                    [--bare] [--bare-busy-us 100]

``--httpx-pool`` adds run mode over httpx's own connection pool (a transport
handed in); ``--bare`` adds bare aiohttp (no taguru_eval)
against the same stub, the ceiling of the transport and the event loop;
``--bare-busy-us N`` measures what N µs of the client's own work per call
costs that ceiling.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stub import Stub

DELAY_S = 0.050
RATE_TARGET = 0.85
P50_TARGET = 0.12
CONTEXT = "bench"
PADDED = "bench-padded"
"""A context whose search answers are padded to the evidence answer's size."""

MODES = {
    "baseline": (CONTEXT, False),
    "assembly": (CONTEXT, True),
    "padded": (PADDED, False),
}
"""Measured mode -> (context, --assembly): ``padded`` is the baseline lane with a
search answer as large as the evidence answer (an ignored ``padding`` key)."""


def _search_page() -> dict[str, Any]:
    """The stub's ``sources/search`` payload: one hit."""
    return {
        "plan": {
            "contexts": [
                {
                    "context": CONTEXT,
                    "lanes": {
                        "bm25": {"ran": True},
                        "vector": {"ran": False, "reason": "no embedding provider is configured"},
                    },
                }
            ]
        },
        "hits": [
            {
                "source": "doc.md",
                "paragraph": 0,
                "score": 0.5,
                "text": "stub paragraph",
                "lanes": {"bm25": {"rank": 1, "score": 0.5}},
            }
        ],
    }


def _evidence_package() -> dict[str, Any]:
    """The stub's evidence payload: the same hit as one passage item, under the default budget."""
    passage_item = {
        "candidate_id": f"passage\u0000{CONTEXT}\u0000doc.md\u00000",
        "kind": "passage",
        "fused_rank": 1,
        "lane_ranks": [{"lane": "passage_bm25", "rank": 1}],
        "citation_refs": [],
        "bytes": 214,
        "estimated_tokens": 54,
        "passage": _search_page()["hits"][0],
    }
    return {
        "items": [passage_item],
        "citations": [],
        "budget": {
            "items_used": 1,
            "bytes_used": 218,
            "tokens_used": 55,
            "limits": {"max_items": 40, "max_bytes": 65536, "max_tokens": 4000},
        },
        "omitted": [],
        "omitted_total": 0,
        "omitted_by_reason": {},
        "plan": {
            "lanes": {
                "resolve": {"ran": True},
                "query": {"ran": False, "reason": "no 'labels' given"},
                "activate": {"ran": False, "reason": "no anchors resolved from 'origins'"},
                "passages": {"ran": True},
                "communities": {"ran": False, "reason": "include_communities was false"},
                "citations": {"ran": True},
            },
            "selection": {
                "dedup_dropped": 0,
                "contradiction_groups": 0,
                "diversity_tier_width": 10,
            },
            "reranker": {"configured": False, "ran": False},
        },
    }


def _envelope(result: object) -> bytes:
    return json.dumps({"result": result, "status": "ok", "time": 0.0}).encode()


def _padded_search_page() -> dict[str, Any]:
    """The search page with an ignored key making its answer the evidence answer's size."""
    missing = len(_envelope(_evidence_package())) - len(_envelope(_search_page()))
    return {**_search_page(), "padding": "." * (missing - len(', "padding": ""'))}


def stub_routes() -> dict[str, bytes]:
    """The stub's answer per route (``stub.route_of``): one small page each."""
    entry = {
        "name": CONTEXT,
        "description": "",
        "pinned": False,
        "loaded": True,
        "dice_floor": None,
        "semantic_floor": None,
        "stats": {},
        "usage": {"last_write_epoch": 0},
        "revision": {"graph": 1, "passages": 1, "config": 0},
        "schema_mode": None,
    }
    return {
        "health": b'{"status":"ok","version":"0.9.3"}',
        "entry": _envelope(entry),
        "embeddings": _envelope({"provider_model": None}),
        "sources_first": _envelope({"total": 1, "sources": ["doc.md"], "entries": []}),
        "sources_end": _envelope({"total": 1, "sources": [], "entries": []}),
        "search": _envelope(_search_page()),
        f"search:{PADDED}": _envelope(_padded_search_page()),
        "evidence": _envelope(_evidence_package()),
    }


def _write_eval(directory: Path, cases: int) -> Path:
    path = directory / "eval.jsonl"
    lines = [json.dumps({"taguru_eval": 1, "name": "throughput"})]
    lines.extend(
        json.dumps(
            {
                "case_id": f"c{index:05d}",
                "query": f"query {index}",
                "expected_sources": [{"source": "doc.md", "relevance": 1}],
            }
        )
        for index in range(cases)
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_hooks(latencies: list[int] | None = None) -> dict[str, Any]:
    """What the pipeline hands the network phase besides the cases (the case blocks'
    lane values rendered as each case finishes), so the phase measured is a run's;
    nothing for a tree from before them (``--tree``-style comparisons).
    ``latencies`` collects each case's passage latency as it finishes (a phase
    keeps no outputs)."""
    try:
        from taguru_eval.artifact.layout import LaneBlocks
    except ImportError:
        return {}
    blocks = LaneBlocks()
    if latencies is None:
        return {"on_finished": blocks.add}

    def finished(output: Any) -> None:
        blocks.add(output)
        latencies.append(output["passage"]["latency_ms"])

    return {"on_finished": finished}


@dataclass(frozen=True)
class Measured:
    """One run: passage-lane calls per second, p50 passage latency (ms), and the
    client's own CPU time per case (µs; the stub's CPU is not counted)."""

    rate: float
    p50_ms: float
    cpu_us: float


@dataclass(frozen=True)
class Variant:
    """What one measured line runs: the engine, or httpx's own pool under the client."""

    label: str
    httpx_pool: bool = False


ENGINE = Variant("engine")
VARIANTS = (ENGINE, Variant("httpx pool", httpx_pool=True))


def _measure(
    eval_path: Path,
    port: int,
    concurrency: int,
    variant: Variant = ENGINE,
    assembly: bool = False,
    context: str = CONTEXT,
) -> Measured:
    """One network phase over ``eval_path``, as ``variant`` runs it.

    With ``assembly`` the passage lane is the evidence call and its latency
    the evidence call's (``latency.passage_ms`` under ``--assembly``).
    """
    import httpx

    from taguru_eval.inputs.prepare import prepare_run
    from taguru_eval.options import RunOptions
    from taguru_eval.run import loop
    from taguru_eval.run.console import Console
    from taguru_eval.run.runner import network_phase
    from taguru_eval.score.stats import distribution

    options = RunOptions(
        eval_path=str(eval_path),
        context=context,
        url=f"http://127.0.0.1:{port}",
        concurrency=concurrency,
        assembly=assembly,
        no_store=True,
    )
    prepared = prepare_run(options, {})
    console = Console(stdout=io.StringIO(), stderr=io.StringIO())
    transport = (
        httpx.AsyncHTTPTransport(
            limits=httpx.Limits(max_connections=concurrency), trust_env=False, retries=0
        )
        if variant.httpx_pool
        else None
    )
    gc.collect()  # every run starts without the previous run's garbage
    cpu = time.process_time()
    collected: list[int] = []
    phase = loop.run(
        network_phase(prepared, console=console, transport=transport, **run_hooks(collected))
    )
    cpu = time.process_time() - cpu
    if hasattr(phase, "outputs"):  # a tree from before phases kept no outputs
        collected = [output["passage"]["latency_ms"] for output in phase.outputs]
    cases = len(collected)
    return Measured(
        rate=cases / phase.cases_elapsed_s,
        p50_ms=distribution(map(float, collected))["p50"] or 0.0,
        cpu_us=cpu / cases * 1e6,
    )


async def _bare_aiohttp_phase(
    port: int, calls: int, concurrency: int, busy_us: float = 0.0
) -> float:
    """Calls per second of aiohttp alone (no taguru_eval): ``concurrency`` workers
    each posting the search body, reading and JSON-decoding the answer, then
    keeping the event loop busy for ``busy_us`` (a stand-in for a client's own
    work per call)."""
    import aiohttp

    url = f"http://127.0.0.1:{port}/contexts/{CONTEXT}/sources/search"
    body = json.dumps({"query": "query 1", "limit": 10}).encode()
    headers = {"Content-Type": "application/json"}
    remaining = iter(range(calls))
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            for _ in remaining:
                async with session.post(url, data=body, headers=headers) as answer:
                    json.loads(await answer.read())
                if busy_us:
                    until = time.perf_counter() + busy_us / 1e6
                    while time.perf_counter() < until:
                        pass

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return calls / (time.monotonic() - started)


def _compare_variants(
    stub: Stub,
    big: Path,
    small: Path,
    concurrency: int,
    repeats: int,
    variants: list[Variant],
    ideal: float,
) -> None:
    """Each variant's call rate at ``concurrency`` and p50 there and at 1, the
    variants taking turns run by run (one order, then the reverse)."""
    runs: dict[str, list[tuple[Measured, float, float]]] = {v.label: [] for v in variants}
    for repeat in range(repeats):
        for variant in variants if repeat % 2 == 0 else variants[::-1]:
            stub.stats(reset=True)
            parallel = _measure(big, stub.port, concurrency, variant)
            hold = stub.stats(reset=True)["hold_ms"]["p50"]
            sequential = _measure(small, stub.port, 1, variant).p50_ms
            runs[variant.label].append((parallel, sequential, hold))
    for variant in variants:
        measured = runs[variant.label]
        rate = statistics.median(m.rate for m, _seq, _hold in measured)
        par = statistics.median(m.p50_ms for m, _seq, _hold in measured)
        seq = statistics.median(seq for _m, seq, _hold in measured)
        cpu = statistics.median(m.cpu_us for m, _seq, _hold in measured)
        rate_ok = rate / ideal >= RATE_TARGET
        p50_ok = par / seq - 1 <= P50_TARGET
        print(
            f"{variant.label:12s} {rate:6,.0f} calls/s = {rate / ideal:6.1%} of ideal | "
            f"p50 latency.passage_ms: {par:.0f} ms at {concurrency} vs "
            f"{seq:.0f} ms at 1 = {par / seq - 1:+.1%} | client CPU {cpu:.0f} µs/case | runs: "
            + ", ".join(f"{m.rate / ideal:.1%}" for m, _seq, _hold in measured)
            + f" | targets: >= {RATE_TARGET:.0%} {'met' if rate_ok else 'MISSED'}, "
            f"p50 <= +{P50_TARGET:.0%} {'met' if p50_ok else 'MISSED'}"
        )
        _print_cycle(concurrency, rate, statistics.median(hold for _m, _s, hold in measured))


def _print_cycle(concurrency: int, rate: float, hold_ms: float) -> None:
    """Where a slot's time goes: the stub's own hold (request arrival to answer
    written, its median) and the rest of the cycle (the loopback both ways and
    the client, from the answer's write to the next request's arrival)."""
    cycle_ms = concurrency / rate * 1000
    print(
        f"  a slot's cycle {cycle_ms:.2f} ms = the stub's hold {hold_ms:.2f} ms (p50) + "
        f"the exchange and the client {cycle_ms - hold_ms:.2f} ms"
    )
    sys.stdout.flush()


def _bare_aiohttp(stub: Stub, calls: int, concurrency: int, repeats: int, ideal: float) -> None:
    """The same stub at the same concurrency through bare aiohttp, as the ceiling
    the transport and the event loop allow on this machine."""
    rates = []
    holds = []
    for _ in range(repeats):
        stub.stats(reset=True)
        rates.append(asyncio.run(_bare_aiohttp_phase(stub.port, calls, concurrency)))
        holds.append(stub.stats(reset=True)["hold_ms"]["p50"])
    rate = statistics.median(rates)
    print(
        f"bare aiohttp (no taguru_eval, {calls} search calls): {rate:8,.0f} calls/s = "
        f"{rate / ideal:6.1%} of ideal | runs: " + ", ".join(f"{r / ideal:.1%}" for r in rates)
    )
    _print_cycle(concurrency, rate, statistics.median(holds))


def _bare_busy(
    port: int, calls: int, concurrency: int, repeats: int, ideal: float, busy_us: float
) -> None:
    """What ``busy_us`` of client work per call costs in call rate: bare aiohttp
    with and without it, run by run in alternation on the same stub."""
    rates: dict[float, list[float]] = {0.0: [], busy_us: []}
    for repeat in range(repeats):
        for busy in (0.0, busy_us) if repeat % 2 == 0 else (busy_us, 0.0):
            rates[busy].append(asyncio.run(_bare_aiohttp_phase(port, calls, concurrency, busy)))
    idle, busy_rate = (statistics.median(rates[key]) / ideal for key in (0.0, busy_us))
    print(
        f"bare aiohttp + {busy_us:.0f} µs of loop work per call: {busy_rate:6.1%} of ideal vs "
        f"{idle:6.1%} without ({(idle - busy_rate) * 100:+.1f} points) | runs: "
        + ", ".join(f"{r / ideal:.1%}" for r in rates[busy_us])
        + " vs "
        + ", ".join(f"{r / ideal:.1%}" for r in rates[0.0])
    )
    sys.stdout.flush()


def _decode_costs(repeats: int) -> tuple[float, float]:
    """Client-side handling of one answer body once received, in µs (medians):
    the search page (envelope, typed hits, locators) and the evidence package
    (envelope, package, scoring hits, evidence block and rows), timed alternately."""
    import timeit

    import httpx

    from taguru_eval.options import resolve_budget
    from taguru_eval.run.http import Reply, TaguruClient, parse_json
    from taguru_eval.run.lanes.evidence import (
        decode_package,
        evidence_block,
        evidence_rows,
        hits_from_items,
    )
    from taguru_eval.run.lanes.passage import _SearchPage, extract_served_hits, locator

    search = json.dumps({"result": _search_page(), "status": "ok", "time": 0.0})
    evidence = json.dumps({"result": _evidence_package(), "status": "ok", "time": 0.0})
    budget = resolve_budget(None, None, None)

    client = TaguruClient("http://bench.test", transport=httpx.MockTransport(httpx.Response))

    def baseline() -> None:
        payload = parse_json(search)["result"]  # type: ignore[index]
        reply = Reply(payload=payload, status=200, latency_ms=0, url="http://bench.test")
        _plan, hits = extract_served_hits(client.payload_as(reply, _SearchPage, "search"))
        [locator(hit) for hit in hits]

    def assembly() -> None:
        package = decode_package(parse_json(evidence)["result"], budget)  # type: ignore[index]
        hits_from_items(package.items, 10)
        evidence_block(package, 1)
        evidence_rows(package)

    number = 2000
    times: dict[str, list[float]] = {"baseline": [], "assembly": []}
    for _ in range(repeats * 5):
        for name, handle in (("baseline", baseline), ("assembly", assembly)):
            times[name].append(timeit.timeit(handle, number=number) / number * 1e6)
    return statistics.median(times["baseline"]), statistics.median(times["assembly"])


def _compare_modes(
    eval_path: Path, port: int, concurrency: int, repeats: int, modes: list[str], ideal: float
) -> None:
    """The modes' runs interleaved, medians side by side."""
    runs: dict[str, list[Measured]] = {mode: [] for mode in modes}
    for repeat in range(repeats):
        # One order, then the reverse: a machine whose load drifts favours no mode.
        for mode in modes if repeat % 2 == 0 else modes[::-1]:
            context, assembly = MODES[mode]
            runs[mode].append(_measure(eval_path, port, concurrency, ENGINE, assembly, context))

    def median(mode: str, field: str) -> float:
        return statistics.median(getattr(run, field) for run in runs[mode])

    sizes = {
        "baseline": len(_envelope(_search_page())),
        "assembly": len(_envelope(_evidence_package())),
        "padded": len(_envelope(_padded_search_page())),
    }
    print("modes (answer size; calls/s; p50 latency.passage_ms; client CPU):")
    for mode in modes:
        rate = median(mode, "rate")
        print(
            f"  {mode:9s} {sizes[mode]:5,d} B  {rate:6,.0f} calls/s = {rate / ideal:5.1%} of ideal"
            f"  p50 {median(mode, 'p50_ms'):3.0f} ms  {median(mode, 'cpu_us'):4.0f} µs/case"
        )
    for base in ("baseline", "padded"):
        if base in runs and "assembly" in runs:
            rate = median("assembly", "rate") / median(base, "rate")
            cpu = median("assembly", "cpu_us") / median(base, "cpu_us")
            print(f"  assembly / {base}: call rate {rate:.3f}, client CPU per case {cpu:.3f}")
    if "baseline" in runs and "assembly" in runs:
        search, evidence = _decode_costs(repeats)
        print(
            f"  answer handling per case (in-process, no network): search page {search:.1f} µs, "
            f"evidence package {evidence:.1f} µs"
        )
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sequential-cases", type=int, default=200)
    parser.add_argument("--stub-lifetime", type=float, default=900.0)
    parser.add_argument(
        "--httpx-pool", action="store_true", help="also measure httpx's own connection pool"
    )
    parser.add_argument("--modes", default="baseline,assembly,padded")
    parser.add_argument(
        "--bare", action="store_true", help="also measure bare aiohttp against the same stub"
    )
    parser.add_argument(
        "--bare-busy-us",
        type=float,
        default=0.0,
        help="also measure what this much loop work per call costs bare aiohttp",
    )
    args = parser.parse_args(argv)

    stub = Stub(DELAY_S, stub_routes(), lifetime_s=args.stub_lifetime)
    try:
        port = stub.port
        ideal = args.concurrency / DELAY_S
        with tempfile.TemporaryDirectory() as tmp:
            big = _write_eval(Path(tmp), args.cases)
            small_dir = Path(tmp) / "seq"
            small_dir.mkdir()
            small = _write_eval(small_dir, args.sequential_cases)
            print(
                f"stub: every route after {DELAY_S * 1000:.0f} ms; {args.cases} cases at "
                f"--concurrency {args.concurrency} (ideal {ideal:,.0f} calls/s); "
                f"median of {args.repeats} runs"
            )
            variants = [v for v in VARIANTS if args.httpx_pool or not v.httpx_pool]
            _compare_variants(stub, big, small, args.concurrency, args.repeats, variants, ideal)
            if args.bare:
                _bare_aiohttp(stub, args.cases, args.concurrency, args.repeats, ideal)
            if args.bare_busy_us > 0:
                _bare_busy(
                    port, args.cases, args.concurrency, args.repeats, ideal, args.bare_busy_us
                )
            modes = [mode for mode in args.modes.split(",") if mode]
            if modes:
                _compare_modes(big, port, args.concurrency, args.repeats, modes, ideal)
    finally:
        stub.stop()
    return 0


if __name__ == "__main__":
    started = time.monotonic()
    status = main()
    print(f"(benchmark took {time.monotonic() - started:.0f} s)")
    sys.exit(status)
