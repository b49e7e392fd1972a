"""Peak memory of a run whose every search answers an endless body.

Each search (or evidence) answer has no end: ``Transfer-Encoding: chunked``
chunks of ``--chunk-kib`` until the client hangs up (``--framing close``: no
length at all; ``gzip``: chunked and gzip-encoded), so every call is refused at
the 256 MiB body cap. The run goes on with the next case; what a refused body leaves
behind adds up over the run. ``python -m taguru_eval run`` runs in a child
process (``--no-store``, ``--concurrency`` = the number of cases) and its peak
resident set comes from ``wait4``. Target (issue "Hardening, round 3"): 16
oversize bodies at ``--concurrency 16`` peak at most at 1.0 GiB. ``--tree DIR``
measures another checkout (say main before the change) interleaved, A B A B.

    python benchmarks/oversize.py [--cases 1,16] [--repeats 1] [--tree DIR]
        [--chunk-kib 16] [--framing chunked|close|gzip] [--assembly]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

from stub import route_of
from throughput import CONTEXT, stub_routes

PEAK_TARGET_MIB = 1024


async def _answer(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, chunk_bytes: int, framing: str
) -> None:
    routes = stub_routes()
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while True:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if length:
                await reader.readexactly(length)
            method, target, _ = head[0].split(" ", 2)
            route = route_of(method, target)
            if route.startswith("search") or route == "evidence":
                # chunked: endless chunks; close: no length, the body ends when the server hangs up.
                framed = b"Transfer-Encoding: chunked\r\n" if framing != "close" else b""
                if framing == "gzip":
                    framed += b"Content-Encoding: gzip\r\n"
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + framed + b"\r\n"
                )
                data = b"x" * chunk_bytes
                packer = zlib.compressobj(wbits=31) if framing == "gzip" else None
                while True:  # until the client refuses the body and hangs up
                    piece = (
                        data
                        if packer is None
                        else packer.compress(data) + packer.flush(zlib.Z_SYNC_FLUSH)
                    )
                    writer.write(
                        b"%x\r\n%s\r\n" % (len(piece), piece) if framing != "close" else piece
                    )
                    await writer.drain()
            body = routes.get(route, b'{"error":"no such route","code":"not_found"}')
            status = "200 OK" if route in routes else "404 Not Found"
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
    writer.close()


def _serve(ports: Any, chunk_bytes: int, framing: str) -> None:
    async def serve() -> None:
        server = await asyncio.start_server(
            lambda reader, writer: _answer(reader, writer, chunk_bytes, framing), "127.0.0.1", 0
        )
        ports.put(server.sockets[0].getsockname()[1])
        async with server:
            await asyncio.sleep(3600)

    asyncio.run(serve())


def _write_eval(path: Path, cases: int) -> Path:
    lines = [json.dumps({"taguru_eval": 1, "name": "oversize"})]
    lines += [
        json.dumps({"case_id": f"c{index}", "query": f"query {index}",
                    "expected_sources": [{"source": "doc.md"}]})
        for index in range(cases)
    ]  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _peak_mib(
    eval_path: Path, cases: int, url: str, work: Path, tree: str | None, more: list[str]
) -> float:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "taguru_eval", "run", "--eval", str(eval_path),
            "--context", CONTEXT, "--url", url, "--out", str(work / "evaluation.json"),
            "--no-store", "--concurrency", str(cases), "--quiet", *more]  # fmt: skip
    child = subprocess.Popen(
        argv, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert child.stderr is not None
    errors = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    document = work / "evaluation.json"
    if code != 0 or not document.is_file():
        raise SystemExit(f"run failed ({code}): {errors.decode()[-2000:]}")
    failed = json.loads(document.read_text(encoding="utf-8"))["cases"]
    refused = sum("cap" in json.dumps(case) for case in failed)
    if refused != cases:
        raise SystemExit(f"expected {cases} refused bodies, the artifact shows {refused}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="1,16", help="comma-separated case counts")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tree", help="another checkout's root, measured beside this one")
    parser.add_argument("--chunk-kib", type=int, default=16, help="the size of each chunk sent")
    parser.add_argument("--framing", choices=("chunked", "close", "gzip"), default="chunked")
    parser.add_argument("--assembly", action="store_true", help="runs with --assembly")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.cases.split(",")]
    trees: dict[str, str | None] = {"this tree": None}
    if args.tree:
        trees[f"--tree {args.tree}"] = args.tree
    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    server = context.Process(
        target=_serve, args=(ports, args.chunk_kib * 1024, args.framing), daemon=True
    )
    server.start()
    url = f"http://127.0.0.1:{ports.get(timeout=60)}"
    more = ["--assembly"] if args.assembly else []
    peaks: dict[tuple[str, int], list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch)
            for size in sizes:
                eval_path = _write_eval(root / f"eval-{size}.jsonl", size)
                for repeat in range(args.repeats):
                    for label, tree in trees.items():  # interleaved: A B A B
                        work = root / f"{size}-{repeat}-{len(peaks)}-{label[:4]}"
                        work.mkdir()
                        peak = _peak_mib(eval_path, size, url, work, tree, more)
                        peaks.setdefault((label, size), []).append(peak)
                        print(
                            f"  {label}: {size} oversize bodies: peak {peak:,.0f} MiB", flush=True
                        )
    finally:
        server.terminate()
        server.join(timeout=10)
    print(f"peak resident memory, every search an endless {args.framing} body (median):")
    for label in trees:
        figures = ", ".join(
            f"{size}: {statistics.median(peaks[(label, size)]):,.0f} MiB" for size in sizes
        )
        print(f"  {label}: {figures}")
    largest = max(sizes)
    peak = statistics.median(peaks[("this tree", largest)])
    verdict = "met" if peak <= PEAK_TARGET_MIB else "MISSED"
    target = f"target <= {PEAK_TARGET_MIB:,} MiB"
    print(f"  {largest} bodies at --concurrency {largest}: {target}: {verdict}")
    if args.tree:
        for size in sizes:
            ratio = statistics.median(peaks[("this tree", size)]) / statistics.median(
                peaks[(f"--tree {args.tree}", size)]
            )
            print(f"  {size} bodies: this tree / --tree = {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
