"""Reading an input file as UTF-8 text, with the one wording every loader reports.

eval.jsonl, the must-refuse file and a golden CSV are all read whole: an
unreadable file is ``cannot read {path}: {OS error}``, bytes that are not
UTF-8 are ``cannot read {path}: stream did not contain valid UTF-8 (line N,
byte B: reason)`` — an :class:`~taguru_eval.errors.InputError` (exit 2)
naming the file and the line.
"""

from __future__ import annotations

from pathlib import Path

from taguru_eval.errors import InputError, os_error_text


def read_utf8(path: str | Path, shown: str) -> tuple[bytes, str]:
    """``(raw bytes, text)`` of ``path``; ``shown`` names it in messages."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {shown}: {os_error_text(exc)}", path=shown) from None
    try:
        return raw, raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"cannot read {shown}: stream did not contain valid UTF-8 "
            f"(line {line}, byte {exc.start}: {exc.reason})",
            path=shown,
            line=line,
        ) from None
