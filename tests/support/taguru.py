"""The real taguru server, the oracle of the differential tests.

The binary is never part of the repository: ``.ci/install-taguru`` builds
taguru 0.9.7 from crates.io into a cache folder and ``.ci/run`` exports its path
as ``TAGURU_BIN``; a developer may instead have a ``taguru`` 0.9.7 on ``PATH``.
Without one the differential tests skip with one line saying how to get it,
except where ``TAGURU_EVAL_REQUIRE_TAGURU=1`` (CI) turns the skip into a
failure: there they must run.

:class:`RealTaguru` starts ``taguru serve`` on a free loopback port with a fresh
data directory (and, when asked, a bearer token), and stops it again.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import pytest

TAGURU_VERSION = "0.9.7"
"""The release the package follows (ERRATA §3)."""

HOW_TO_GET_IT = (
    f"no taguru {TAGURU_VERSION} to test against: run .ci/install-taguru (needs cargo) and "
    f"set TAGURU_BIN to the path it prints, or put taguru {TAGURU_VERSION} on PATH"
)

LISTENING = "listening on "
"""The first line ``taguru serve`` prints on stdout, followed by ``host:port``."""

START_TIMEOUT_S = 30.0

_found: dict[str, Path | None] = {}


def _version_of(binary: Path) -> str | None:
    try:
        completed = subprocess.run(
            [str(binary), "version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return None
    return completed.stdout.strip() if completed.returncode == 0 else None


def taguru_binary() -> Path | None:
    """``TAGURU_BIN``, else a ``taguru`` on ``PATH``, when it reports 0.9.7."""
    key = os.environ.get("TAGURU_BIN", "") + os.pathsep + os.environ.get("PATH", "")
    if key not in _found:
        named = os.environ.get("TAGURU_BIN") or shutil.which("taguru")
        binary = Path(named) if named else None
        if binary is not None and _version_of(binary) != f"taguru {TAGURU_VERSION}":
            binary = None
        _found[key] = binary
    return _found[key]


def require_taguru() -> Path:
    """The binary, or skip the test (fail it where CI requires taguru)."""
    binary = taguru_binary()
    if binary is not None:
        return binary
    named = os.environ.get("TAGURU_BIN")
    reason = HOW_TO_GET_IT if not named else f"TAGURU_BIN={named} is not taguru {TAGURU_VERSION}"
    if os.environ.get("TAGURU_EVAL_REQUIRE_TAGURU") == "1":
        pytest.fail(f"{reason} (TAGURU_EVAL_REQUIRE_TAGURU=1: the differential tests must run)")
    pytest.skip(reason)


@dataclass
class RealTaguru:
    """One ``taguru serve`` on ``127.0.0.1:0`` over a fresh data directory.

    ``token`` turns authentication on (``TAGURU_API_TOKEN``); ``env`` adds more
    of the server's settings. The server's own log lines (stderr) are kept in
    ``log`` for a failing test to show.
    """

    binary: Path
    token: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    data_dir: Path | None = None
    log: list[str] = field(default_factory=list)
    _process: subprocess.Popen[str] | None = None
    _scratch: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> RealTaguru:
        self._scratch = tempfile.TemporaryDirectory(prefix="taguru-data-")
        self.data_dir = Path(self._scratch.name)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", self._scratch.name),
            "TAGURU_ADDR": "127.0.0.1:0",
            "TAGURU_DATA_DIR": str(self.data_dir / "data"),
            # A test that sends a wrong token on purpose must not be throttled
            # by the next one.
            "TAGURU_AUTH_FAIL_LIMIT_PER_MIN": "100000",
            "RUST_LOG": "warn",
            **self.env,
        }
        if self.token is not None:
            env["TAGURU_API_TOKEN"] = self.token
        self._process = subprocess.Popen(
            [str(self.binary), "serve"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=self.data_dir,
        )
        threading.Thread(target=self._drain_log, daemon=True).start()
        first = self._read_listening_line()
        self.url = "http://" + first.removeprefix(LISTENING).strip()
        return self

    def _drain_log(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        for line in self._process.stderr:
            self.log.append(line.rstrip("\n"))

    def _read_listening_line(self) -> str:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        found: list[str] = []

        def read() -> None:
            found.append(stdout.readline())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        line = found[0] if found else ""
        if not line.startswith(LISTENING):
            self.stop()
            raise RuntimeError(
                f"taguru serve did not start (stdout {line!r}); its log:\n" + "\n".join(self.log)
            )
        return line

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def __enter__(self) -> RealTaguru:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def populate(url: str, folder: Path, context: str | None = None, token: str | None = None) -> str:
    """Put one context folder (``serve``'s layout) into a server over its public
    write routes with ``taguru_eval.load``; returns the context name."""
    import taguru_eval

    env = {} if token is None else {"TAGURU_API_TOKEN": token}
    (loaded,) = taguru_eval.load(folder, url=url, context=context, env=env).contexts
    return loaded.name
