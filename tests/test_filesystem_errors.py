"""A full temporary directory or a file-size limit is one line, exit 1, and the
checkpoint stays (issue 44, failure 4).

Before, the lane values' spill file (``artifact/layout.py``) raised
``OSError: [Errno 28]`` through the network phase: a 50-line traceback. A
100,000-case run spills hundreds of MB, so a small ``$TMPDIR`` on a CI runner
is enough. Each test runs the real command line in a child process against the
reference server, with a small tmpfs as ``TMPDIR`` (root only: skipped where
it cannot be mounted) or ``RLIMIT_FSIZE`` set in the child.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.paths import DATA, PROJECT_ROOT

from taguru_eval.cli.main import main
from taguru_eval.resume import BATCH_ENV, partial_dir
from taguru_refserver.serve import running_server

PREFIX = "taguru: evaluate: "
CASES = 600


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server(DATA) as url:
        yield url


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``eval.jsonl``: the sake demo's cases cycled to :data:`CASES`, each its own id."""
    monkeypatch.chdir(tmp_path)
    header, *lines = (DATA / "sake" / "eval.jsonl").read_text(encoding="utf-8").splitlines()
    cases = [json.loads(line) for line in lines]
    out = [header]
    for n in range(CASES):
        case = dict(cases[n % len(cases)])
        case["case_id"] = f"{case['case_id']}-{n}"
        out.append(json.dumps(case, ensure_ascii=False))
    Path("eval.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")
    return tmp_path


@pytest.fixture
def small_tmpfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 64 KiB tmpfs (root with CAP_SYS_ADMIN only)."""
    mount = tmp_path_factory.mktemp("small-tmp")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def run_child(
    url: str, *, tmpdir: str, limit: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(PROJECT_ROOT),
           "TMPDIR": tmpdir, BATCH_ENV: "20"}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "taguru_eval", "run", "--eval", "eval.jsonl", "--context", "sake",
         "--url", url, "--store", "runs", "--quiet"],
        capture_output=True, text=True, env=env, preexec_fn=limit, timeout=300,
    )  # fmt: skip


def assert_one_line_and_resumable(
    done: subprocess.CompletedProcess[str], expected: str, url: str
) -> None:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == expected
    assert not Path("evaluation.json").exists()
    # The checkpoint is kept: --resume (with room) continues it.
    (checkpoint,) = partial_dir("runs", "sake").iterdir()
    assert list(checkpoint.glob("batch-*.msgpack"))
    code = main(["run", "--eval", "eval.jsonl", "--context", "sake", "--url", url, "--store",
                 "runs", "--resume", "--quiet"])  # fmt: skip
    assert code == 0
    doc = json.loads(Path("evaluation.json").read_text(encoding="utf-8"))
    assert len(doc["cases"]) == CASES
    assert doc["inputs"]["resumed"] == 2


def test_a_full_temporary_directory_is_one_line_and_keeps_the_checkpoint(
    server: str, workdir: Path, small_tmpfs: Path
) -> None:
    done = run_child(server, tmpdir=str(small_tmpfs))
    assert_one_line_and_resumable(
        done,
        f"{PREFIX}writing a temporary file in {small_tmpfs}: No space left on device "
        "(os error 28); set TMPDIR to a directory with room",
        server,
    )


def limit_file_size() -> None:
    # Well under the spill file of 600 cases, above each 20-case checkpoint batch.
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))


def test_a_file_size_limit_is_one_line_and_keeps_the_checkpoint(server: str, workdir: Path) -> None:
    tmpdir = tempfile.gettempdir()
    done = run_child(server, tmpdir=tmpdir, limit=limit_file_size)
    assert_one_line_and_resumable(
        done,
        f"{PREFIX}writing a temporary file in {tmpdir}: File too large (os error 27); "
        "set TMPDIR to a directory with room",
        server,
    )
