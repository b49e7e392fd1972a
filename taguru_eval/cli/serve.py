"""``python -m taguru_eval serve DIR``: the reference server in the foreground."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from taguru_eval._base.extras import load_extra
from taguru_eval._base.text import one_line, parse_decimal
from taguru_eval.cli.flags import scan_long_flags
from taguru_eval.errors import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_RUN_FAILED,
    InputError,
    RunError,
    error_lines,
)

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8248


@dataclass(frozen=True)
class ServeOptions:
    """``serve``'s command line."""

    corpus_dir: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    read_token: str | None = None
    vector_lane: bool = False
    reranker: bool = False
    ready_file: Path | None = None
    jitter: int | None = None


_FLAGS: Final = ("--host", "--port", "--token", "--read-token", "--ready-file", "--jitter")
JITTER_MAX: Final = 2**64 - 1
_SWITCHES: Final = ("--vector-lane", "--reranker")
PROGRAM: Final = "taguru_eval serve"
USAGE: Final = (
    "usage: python -m taguru_eval serve DIR [--host 127.0.0.1] [--port 8248] "
    "[--token T] [--read-token T] [--vector-lane] [--reranker] [--ready-file PATH] "
    "[--jitter SEED]"
)
HELP: Final = f"""{USAGE}

Serve every context folder under DIR (one sub-folder per context, named after it)
with a taguru-compatible HTTP API. An empty DIR serves nothing until contexts are
created over HTTP.

  --host HOST        address to bind (default 127.0.0.1, loopback only)
  --port PORT        port to bind (default 8248; 0 picks a free one)
  --token T          bearer token with read-write access
  --read-token T     bearer token with read-only access (enough for evaluate)
  --vector-lane      give every context the toy vector lane (model
                     refserver-toy-hash-v1; a context folder can opt in alone
                     with "vector_lane": true in its context.json)
  --reranker         configure the toy evidence reranker (refserver-toy-rerank-v1)
  --ready-file PATH  once the server answers, write PATH atomically: one JSON
                     line {{"url": "http://host:port", "pid": N}}; removed on
                     shutdown (wait for it with 'python -m taguru_eval wait
                     --ready-file PATH')
  --jitter SEED      order hits of equal score at random (seeded, 0..2^64-1),
                     afresh for every search, as a server with tied scores or
                     an approximate vector index does: the same query can get
                     another window each time (for 'run --repeat N')

Without a token, the server is open, as taguru is. Without --vector-lane the
vector lane reports "no embedding provider is configured", as taguru does
without a provider; without --reranker a requested rerank reports not_configured.
"""


def parse_args(argv: list[str]) -> ServeOptions | None:
    """The options of ``serve``; None for ``--help``. Raises ``InputError`` (exit 2)."""
    found = scan_long_flags(argv, _FLAGS, _SWITCHES, "serve")
    if found is None:
        return None
    values, switches, positional = found.values, found.switches, found.positionals
    if len(positional) != 1:
        raise InputError("serve needs exactly one DIR (the corpus folder)")
    port_text = values.get("--port", str(DEFAULT_PORT))
    port = parse_decimal(port_text, 65535)
    if port is None:
        raise InputError(f"--port must be an integer in 0..65535 (got {port_text!r})")
    host = values.get("--host", DEFAULT_HOST)
    if not host:
        raise InputError("--host must not be empty")
    ready_file = values.get("--ready-file")
    if ready_file == "":
        raise InputError("--ready-file must not be empty")
    jitter_text = values.get("--jitter")
    jitter = None if jitter_text is None else parse_decimal(jitter_text, JITTER_MAX)
    if jitter_text is not None and jitter is None:
        raise InputError(f"--jitter must be an integer in 0..2^64-1 (got {jitter_text!r})")
    return ServeOptions(
        corpus_dir=Path(positional[0]),
        host=host,
        port=port,
        token=values.get("--token") or None,
        read_token=values.get("--read-token") or None,
        vector_lane="--vector-lane" in switches,
        reranker="--reranker" in switches,
        ready_file=None if ready_file is None else Path(ready_file),
        jitter=jitter,
    )


def main(argv: list[str]) -> int:
    """Run ``serve``; 0 after a clean shutdown, 2 for a bad DIR or flag, 1 if binding
    fails or the ready file cannot be written."""
    try:
        options = parse_args(argv)
    except InputError as error:
        sys.stderr.write(error_lines(error, f"{PROGRAM}: {error}"))
        return EXIT_INPUT
    if options is None:
        print(HELP, end="")
        return EXIT_OK
    load_extra("server")
    from taguru_refserver.serve import serve_until_interrupted

    def announce(line: str) -> None:
        # The contexts are folder names: anything a file system allows.
        print(one_line(f"{PROGRAM}: {line}"), flush=True)

    try:
        serve_until_interrupted(
            options.corpus_dir,
            host=options.host,
            port=options.port,
            token=options.token,
            read_token=options.read_token,
            announce=announce,
            vector_lane=options.vector_lane,
            reranker=options.reranker,
            ready_file=options.ready_file,
            jitter=options.jitter,
        )
    except InputError as error:
        sys.stderr.write(error_lines(error, f"{PROGRAM}: {error}"))
        return EXIT_INPUT
    except RunError as error:
        sys.stderr.write(error_lines(error, f"{PROGRAM}: {error}"))
        return EXIT_RUN_FAILED
    except OSError as error:
        reason = error.strerror or str(error)
        print(
            one_line(f"{PROGRAM}: cannot listen on {options.host}:{options.port}: {reason}"),
            file=sys.stderr,
        )
        return EXIT_RUN_FAILED
    return EXIT_OK
