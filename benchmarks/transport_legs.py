"""Where a call's time goes between two processes: the legs of each exchange.

A 50 ms stub (``stub.py``'s protocol, here noting each request's arrival and
its answer's write on the system-wide monotonic clock, keyed by an ``id``
query parameter) and a bare client that notes when it sends and when it has
the answer, also on that clock. Each call then splits into:

* send → arrive: from the client starting the request to the stub reading it
  (the client's event loop writing it, loopback, the stub's loop noticing);
* hold: the stub's own 50 ms (plus its timer's lateness);
* write → answered: from the stub writing the answer to the client having
  the whole of it (loopback, the client's loop noticing, its parsing).

Two bare clients, each at ``--concurrency`` 1 and 64 (6,400 calls at 64,
the first tenth of every run left out as warm-up): aiohttp (a session, post,
read, ``json.loads``: what bare aiohttp means in ``throughput.py``) and a
plain ``asyncio.Protocol`` over 64 keep-alive connections (the same request
bytes written at once, the answer parsed from ``Content-Length``): the
ceiling of a client with no per-call machinery, which ``run/plainhttp.py``
brought taguru_eval's own calls close to.

    python benchmarks/transport_legs.py [--calls-per-slot 100] [--repeats 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import stub as stub_module
from throughput import DELAY_S, stub_routes

Times = dict[int, tuple[float, float]]


class _NotingConnection(stub_module._Connection):
    """The stub's protocol, noting (arrival, write) per request ``id``."""

    noted: ClassVar[Times] = {}
    answer = stub_module.response(stub_routes()["search"])

    def _answer(self, method: str, target: str, body: bytes) -> None:
        if target.startswith("/__legs"):
            assert self._transport is not None
            noted = {str(key): value for key, value in _NotingConnection.noted.items()}
            self._transport.write(stub_module.response(json.dumps(noted).encode()))
            _NotingConnection.noted = {}
            return
        call = int(target.rpartition("id=")[2])
        arrived = time.monotonic()
        asyncio.get_running_loop().call_later(DELAY_S, self._note_and_write, call, arrived)

    def _note_and_write(self, call: int, arrived: float) -> None:
        if self._transport is not None:
            self._transport.write(self.answer)
            _NotingConnection.noted[call] = (arrived, time.monotonic())


def _serve(ports: Any) -> None:
    async def serve() -> None:
        clock = stub_module._Clock()
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: _NotingConnection(DELAY_S, {}, {}, clock), "127.0.0.1", 0, backlog=2048
        )
        ports.put(server.sockets[0].getsockname()[1])
        async with server:
            await asyncio.sleep(3600)

    asyncio.run(serve())


_BODY = json.dumps({"query": "query 1", "limit": 10}).encode()
_PATH = "/contexts/bench/sources/search?id="


async def _aiohttp_calls(port: int, calls: int, concurrency: int) -> tuple[float, Times]:
    import aiohttp

    url = f"http://127.0.0.1:{port}{_PATH}"
    headers = {"Content-Type": "application/json"}
    remaining = iter(range(calls))
    noted: Times = {}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            for call in remaining:
                sent = time.monotonic()
                async with session.post(url + str(call), data=_BODY, headers=headers) as answer:
                    json.loads(await answer.read())
                noted[call] = (sent, time.monotonic())

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return calls / (time.monotonic() - started), noted


class _PlainClient(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = b""
        self.answer: asyncio.Future[bytes] | None = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buffer[:end].lower()
        at = head.find(b"content-length:") + len(b"content-length:")
        length = int(head[at:].split(b"\r\n", 1)[0])
        if len(self.buffer) < end + 4 + length:
            return
        body, self.buffer = self.buffer[end + 4 : end + 4 + length], self.buffer[end + 4 + length :]
        assert self.answer is not None
        self.answer.set_result(body)


async def _protocol_calls(port: int, calls: int, concurrency: int) -> tuple[float, Times]:
    loop = asyncio.get_running_loop()
    head = (
        f"POST {_PATH}{{}} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(_BODY)}\r\n\r\n"
    )
    remaining = iter(range(calls))
    noted: Times = {}

    async def worker() -> None:
        transport, client = await loop.create_connection(_PlainClient, "127.0.0.1", port)
        for call in remaining:
            sent = time.monotonic()
            client.answer = loop.create_future()
            transport.write(head.format(call).encode() + _BODY)
            json.loads(await client.answer)
            noted[call] = (sent, time.monotonic())
        transport.close()

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return calls / (time.monotonic() - started), noted


Client = Callable[[int, int, int], Awaitable[tuple[float, Times]]]
CLIENTS: dict[str, Client] = {"aiohttp": _aiohttp_calls, "protocol": _protocol_calls}


def _legs(client: Times, server: Times, calls: int) -> dict[str, list[float]]:
    legs: dict[str, list[float]] = {"send → arrive": [], "hold": [], "write → answered": []}
    for call, (sent, answered) in client.items():
        if call < calls // 10:
            continue
        arrived, written = server[call]
        legs["send → arrive"].append((arrived - sent) * 1000)
        legs["hold"].append((written - arrived) * 1000)
        legs["write → answered"].append((answered - written) * 1000)
    return legs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls-per-slot", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--concurrency", default="1,64")
    args = parser.parse_args(argv)
    context = multiprocessing.get_context("spawn")
    ports = context.Queue()
    server = context.Process(target=_serve, args=(ports,), daemon=True)
    server.start()
    port = ports.get(timeout=60)
    try:
        print(f"stub: every answer after {DELAY_S * 1000:.0f} ms; means (p50) in ms")
        for concurrency in (int(value) for value in args.concurrency.split(",")):
            calls = args.calls_per_slot * concurrency
            ideal = concurrency / DELAY_S
            for repeat in range(args.repeats):
                for name, client in CLIENTS.items():
                    rate, noted = asyncio.run(client(port, calls, concurrency))
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/__legs") as answer:
                        raw = json.loads(answer.read())
                    served = {int(key): (value[0], value[1]) for key, value in raw.items()}
                    legs = _legs(noted, served, calls)
                    cells = "  ".join(
                        f"{leg} {statistics.mean(values):6.3f} ({statistics.median(values):.3f})"
                        for leg, values in legs.items()
                    )
                    print(
                        f"c={concurrency:<3d} run {repeat + 1} {name:8s} "
                        f"{rate / ideal:6.1%} of ideal | {cells}"
                    )
                    sys.stdout.flush()
    finally:
        server.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
