"""A stored ``evaluation.json.zst`` is read as untrusted input, alike everywhere
(issue 44, "also seen").

Before, two concatenated zstd frames were refused by ``load_run`` and
``export`` (their JSON had trailing data) but accepted by ``report`` and
``compare`` (which read only the head), and a 43.6 KB file inflating to 1 GiB
of JSON took 4.3 GB in ``load_run``, ``report`` and ``export``. Now every
reader decompresses one frame, refuses whatever follows it, and stops once the
bytes pass the decompressed cap (1,024 times the file, at least 64 MiB): one
line naming the file, exit 2, for every command.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from support.paths import DATA, PROJECT_ROOT

import taguru_eval
from taguru_eval import api
from taguru_eval.analyst import ingest
from taguru_eval.compare import compare
from taguru_eval.errors import InputError
from taguru_eval.store_artifact import COMPRESSED_NAME, artifact_bytes, stored_artifact
from taguru_refserver.serve import running_server

EVAL = DATA / "sake" / "eval.jsonl"


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("frames")
    with running_server(DATA) as url:
        result = api.run(EVAL, "sake", url=url, out=work / "evaluation.json",
                         store=work / "runs", env={})  # fmt: skip
    assert result.path is not None
    return Path(result.path)


def compressed(data: bytes, path: Path) -> bytes:
    with pa.CompressedOutputStream(str(path), "zstd") as out:
        out.write(data)
    return path.read_bytes()


def two_frames(run: Path, tmp_path: Path) -> str:
    """The run's artifact followed by a second frame (a valid JSON document of its own)."""
    artifact = run / COMPRESSED_NAME
    artifact.write_bytes(artifact.read_bytes() + compressed(b'{"x": 1}', tmp_path / "x.zst"))
    return "bytes follow its zstd frame (a stored artifact is one frame)"


def bomb(run: Path, tmp_path: Path) -> str:
    """An artifact that inflates to 80 MiB of JSON from a few KB."""
    original = artifact_bytes(run / COMPRESSED_NAME)
    inflated = original[:1] + b" " * (80 << 20) + original[1:]
    data = compressed(inflated, tmp_path / "bomb.zst")
    (run / COMPRESSED_NAME).write_bytes(data)
    assert len(data) < (80 << 20) // 1024
    return f"longer than 64 MiB, the most a stored evaluation.json of {len(data):,} bytes"


def trailing_garbage(run: Path, tmp_path: Path) -> str:
    artifact = run / COMPRESSED_NAME
    artifact.write_bytes(artifact.read_bytes() + b"\x00garbage")
    return "bytes follow its zstd frame"


DAMAGES: dict[str, Callable[[Path, Path], str]] = {
    "two frames": two_frames,
    "a bomb": bomb,
    "trailing bytes": trailing_garbage,
}


@pytest.fixture(params=sorted(DAMAGES))
def damaged(request: pytest.FixtureRequest, stored: Path, tmp_path: Path) -> tuple[Path, str]:
    run = tmp_path / "runs" / "context=sake" / stored.name
    shutil.copytree(stored, run)
    return run, DAMAGES[request.param](run, tmp_path)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taguru_eval", *args],
        capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(PROJECT_ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_every_command_refuses_it_alike(damaged: tuple[Path, str], tmp_path: Path) -> None:
    run, words = damaged
    artifact = stored_artifact(run)
    commands = {
        "report": ("report", str(run), "-o", str(tmp_path / "r.html")),
        "compare": ("compare", str(run), str(run), "--out", str(tmp_path / "c.jsonl")),
        "export": ("export", str(run), "--trec", str(tmp_path / "trec"), "--eval", str(EVAL)),
        "ingest": ("ingest", str(run), "--store", str(tmp_path / "other")),
    }
    for name, args in commands.items():
        done = cli(*args)
        assert done.returncode == 2, (name, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1, (name, lines)
        assert str(artifact) in lines[0] and words in lines[0], (name, lines[0])
    assert not (tmp_path / "r.html").exists()
    assert not (tmp_path / "c.jsonl").exists()


def test_the_library_refuses_it_alike(damaged: tuple[Path, str], tmp_path: Path) -> None:
    run, words = damaged
    for read in (
        lambda: taguru_eval.load_run(run),
        lambda: compare(run, run),
        lambda: ingest.ingest(run, tmp_path / "other"),
    ):
        with pytest.raises(InputError) as refused:
            read()
        assert words in str(refused.value)


def test_a_stored_artifact_reads_back_whole(stored: Path) -> None:
    """The one-frame artifact the store writes reads back as written, in any chunking."""
    whole = artifact_bytes(stored / COMPRESSED_NAME)
    assert whole.startswith(b"{") and whole.rstrip().endswith(b"}")
    from taguru_eval.store_artifact import open_artifact

    with open_artifact(stored / COMPRESSED_NAME) as handle:
        pieces = io.BytesIO()
        while chunk := handle.read(7):
            pieces.write(chunk)
    assert pieces.getvalue() == whole
