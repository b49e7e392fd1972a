"""Every input reader stops at its cap (issue 44, failure 5).

Before, ``/dev/zero`` or ``<(yes …)`` given as any input was read whole before
parsing: a ``MemoryError`` traceback under a 6 GB limit, the OOM killer
without one. Now each reader takes the cap of its kind
(:mod:`taguru_eval.contract`): a longer stream is refused with one line, exit
2, having read at most cap + 1 bytes; a regular file larger than its cap is
refused from its size, before a byte is read.

The 256 MiB kinds read the real ``/dev/zero`` through the real command line.
The 4 GiB kinds (eval.jsonl, an evaluation.json) are refused as a sparse file
one byte past the cap by the command line, and as ``/dev/zero`` at a cap made
small in the process (reading 4 GiB of zeros is 20 s and 4 GiB of memory).
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import DATA, PROJECT_ROOT

from taguru_eval import contract
from taguru_eval._base.filebytes import ReadCap, TooLarge, read_capped
from taguru_eval.cli.main import main

PREFIX = "taguru: evaluate: "
SAKE = DATA / "sake" / "eval.jsonl"
GOLDEN = DATA / "handbook" / "golden.csv"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taguru_eval", *args],
        capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(PROJECT_ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


# An unreachable URL: every input is read and refused before the first request.
RUN = ("run", "--eval", str(SAKE), "--context", "sake", "--url", "http://127.0.0.1:9",
       "--no-store")  # fmt: skip


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        ((*RUN, "--thresholds", "/dev/zero"), "a thresholds file"),
        ((*RUN, "--answers", "/dev/zero"), "an answers file"),
        ((*RUN, "--must-refuse", "/dev/zero"), "a must-refuse file"),
        ((*RUN, "--config", "/dev/zero"), "a config file"),
        (("compare", str(SAKE), str(SAKE), "--significance", "--tolerances", "/dev/zero"),
         "a tolerances file"),
    ],
    ids=["thresholds", "answers", "must-refuse", "config", "tolerances"],
)  # fmt: skip
def test_dev_zero_as_a_256_mib_input_is_one_line_exit_2(args: tuple[str, ...], kind: str) -> None:
    done = cli(*args)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert f"/dev/zero: longer than 256 MiB, the most {kind} may hold" in line


def test_dev_zero_as_a_golden_csv_is_one_line_exit_2(tmp_path: Path) -> None:
    done = cli("import-golden", "/dev/zero", "--eval-out", str(tmp_path / "eval.jsonl"))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert "cannot read /dev/zero: longer than 256 MiB, the most a golden CSV may hold" in line


@pytest.fixture
def past_four_gib(tmp_path: Path) -> Iterator[Path]:
    """A sparse file one byte longer than 4 GiB (no disk is used)."""
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as handle:
        handle.truncate(4 * 2**30 + 1)
    yield path


def test_an_eval_set_past_4_gib_is_refused_from_its_size(past_four_gib: Path) -> None:
    done = cli("run", "--eval", str(past_four_gib), "--context", "sake", "--url",
               "http://127.0.0.1:9", "--no-store")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"{PREFIX}cannot read {past_four_gib}: longer than 4 GiB, the most an eval set may hold"
    ]


def test_a_compare_side_past_4_gib_is_refused_from_its_size(
    past_four_gib: Path, tmp_path: Path
) -> None:
    done = cli("compare", str(past_four_gib), str(past_four_gib), "--out", str(tmp_path / "c"))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.endswith(
        f"{past_four_gib}: longer than 4 GiB, the most an evaluation.json may hold"
    )


SMALL = 1 << 20


def test_dev_zero_as_the_eval_set_stops_at_its_cap(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from taguru_eval.inputs import dataset

    monkeypatch.setattr(dataset, "EVAL_CAP", ReadCap(SMALL, contract.EVAL_CAP.kind))
    code = main(["run", "--eval", "/dev/zero", "--context", "sake", "--url",
                 "http://127.0.0.1:9", "--no-store"])  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{PREFIX}cannot read /dev/zero: longer than 1 MiB, the most an eval set may hold"
    ]


def test_dev_zero_as_a_compare_side_stops_at_its_cap(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from taguru_eval import store_artifact

    monkeypatch.setattr(store_artifact, "ARTIFACT_CAP", ReadCap(SMALL, "an evaluation.json"))
    code = main(["compare", "/dev/zero", str(SAKE), "--out", str(tmp_path / "changes.jsonl")])
    assert code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"{PREFIX}BASE reading /dev/zero: longer than 1 MiB, the most an evaluation.json may hold"
    )


class Endless(io.RawIOBase):
    """A stream that never ends, counting what was read from it."""

    def __init__(self) -> None:
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        size = len(buffer)
        buffer[:size] = b"y\n" * (size // 2) + b"y" * (size % 2)
        self.given += size
        return size


@pytest.mark.parametrize("limit", [0, 1, 4095, 1 << 20, (16 << 20) + 3])
def test_a_stream_is_read_to_cap_plus_one_byte_and_no_further(limit: int) -> None:
    stream = Endless()
    with pytest.raises(TooLarge) as refused:
        read_capped(stream, ReadCap(limit, "a test input"))  # type: ignore[arg-type]
    assert stream.given == limit + 1
    assert refused.value.strerror.startswith("longer than ")
    assert refused.value.errno is None


def test_a_stream_within_its_cap_is_read_whole() -> None:
    data = b"x" * 100_000
    assert read_capped(io.BytesIO(data), ReadCap(100_000, "a test input")) == data
    with pytest.raises(TooLarge):
        read_capped(io.BytesIO(data), ReadCap(99_999, "a test input"))
