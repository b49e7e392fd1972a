"""Atomic writes: a regular file is replaced whole; anything else at the path is written through."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from taguru_eval._base.files import (
    WriteFailed,
    write_all_atomic,
    write_bytes_atomic,
)


def _fifo_with_reader(path: Path) -> int:
    """A FIFO at ``path`` and its read end, opened without waiting for a writer."""
    os.mkfifo(path)
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK)


def test_a_fifo_is_written_through_not_replaced(tmp_path: Path) -> None:
    # As /dev/null or /dev/stdout would be: a rename would leave a regular file there.
    fifo = tmp_path / "out.fifo"
    reader = _fifo_with_reader(fifo)
    try:
        write_bytes_atomic(fifo, b'{"a": 1}\n')
        assert os.read(reader, 1024) == b'{"a": 1}\n'
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.fifo"]


def test_a_set_writes_through_its_fifo_and_replaces_its_files(tmp_path: Path) -> None:
    fifo, regular = tmp_path / "run.fifo", tmp_path / "qrels.trec"
    regular.write_bytes(b"old\n")
    reader = _fifo_with_reader(fifo)
    try:
        write_all_atomic([(fifo, b"through\n"), (regular, b"new\n")])
        assert os.read(reader, 1024) == b"through\n"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert regular.read_bytes() == b"new\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["qrels.trec", "run.fifo"]


def test_a_set_that_cannot_be_written_leaves_every_file_as_it_was(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "missing" / "b.json"
    first.write_bytes(b"old\n")
    with pytest.raises(WriteFailed) as info:
        write_all_atomic([(first, b"new\n"), (second, b"new\n")])
    assert info.value.path == second
    assert first.read_bytes() == b"old\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.json"]


@pytest.mark.parametrize("writer", ["bytes", "chunks", "set"])
def test_a_symlinked_output_is_written_where_the_link_points(tmp_path: Path, writer: str) -> None:
    """The link stays a link (two hops here) and the file it names is replaced whole."""
    (tmp_path / "runs").mkdir()
    named = tmp_path / "runs" / "latest.json"
    named.write_bytes(b"old\n")
    hop = tmp_path / "hop.json"
    hop.symlink_to(named)
    link = tmp_path / "evaluation.json"
    link.symlink_to(hop)
    if writer == "bytes":
        write_bytes_atomic(link, b"new\n")
    elif writer == "chunks":
        write_bytes_atomic(link, iter([b"ne", b"w\n"]))
    else:
        write_all_atomic([(link, b"new\n")])
    assert link.is_symlink() and hop.is_symlink()
    assert named.read_bytes() == b"new\n" and not named.is_symlink()
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "evaluation.json",
        "hop.json",
        "runs",
    ]
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == ["latest.json"]


def test_a_dangling_link_is_written_as_the_file_it_names(tmp_path: Path) -> None:
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "made.json")
    write_bytes_atomic(link, b"x\n")
    assert link.is_symlink() and (tmp_path / "made.json").read_bytes() == b"x\n"
