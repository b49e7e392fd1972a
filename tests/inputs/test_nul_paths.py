"""A path holding a NUL byte, which only a library caller can pass (argv cannot).

Python's ``open`` raises ``ValueError`` for it; every reader of a whole input
file reports it as the OS error taguru's Rust reader gives (``file name
contained an unexpected NUL byte``), in the reader's own wording and exception type.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from taguru_eval._base.filebytes import NUL_IN_PATH, ReadCap, file_bytes
from taguru_eval.api import read_artifact
from taguru_eval.compare.load import read_view
from taguru_eval.errors import InputError
from taguru_eval.inputs.config import ConfigError, parse_config_file
from taguru_eval.inputs.dataset import load_eval
from taguru_eval.inputs.must_refuse import load_must_refuse
from taguru_eval.inputs.thresholds import load_thresholds

NUL_PATH = "eval\0.jsonl"


@pytest.mark.parametrize(
    ("load", "error", "prefix"),
    [
        (lambda path: load_eval(path), InputError, "cannot read eval\\u{0}.jsonl: "),
        (lambda path: load_must_refuse(path), InputError, "cannot read eval\\u{0}.jsonl: "),
        (
            lambda path: load_thresholds(path, [], None),
            InputError,
            "cannot read eval\\u{0}.jsonl: ",
        ),
        (
            lambda path: parse_config_file(path),
            ConfigError,
            "taguru: cannot read config eval\\u{0}.jsonl: ",
        ),
        (lambda path: read_artifact(path), InputError, "cannot read eval\\u{0}.jsonl: "),
        (lambda path: read_view(path), InputError, "reading eval\\u{0}.jsonl: "),
    ],
    ids=["eval.jsonl", "must-refuse", "thresholds", "config", "evaluation.json", "compare"],
)
def test_a_nul_byte_in_a_path_is_the_loaders_own_error(
    load: Callable[[str], object], error: type[Exception], prefix: str
) -> None:
    with pytest.raises(error) as raised:
        load(NUL_PATH)
    assert str(raised.value).startswith(prefix + NUL_IN_PATH)


def test_only_a_nul_byte_is_turned_into_an_os_error(tmp_path: Path) -> None:
    target = tmp_path / "data.bin"
    target.write_bytes(b"\x00\x01")
    cap = ReadCap(16, "a test file")
    assert file_bytes(target, cap) == b"\x00\x01"
    assert file_bytes(str(target), cap) == b"\x00\x01"
    with pytest.raises(OSError, match="unexpected NUL byte"):
        file_bytes(tmp_path / "a\0b", cap)
