"""Reading an input file, with the one wording every loader reports.

eval.jsonl, the must-refuse file and a golden CSV are all read whole, up to
their cap (:mod:`taguru_eval.contract`: one longer, a ``/dev/zero``, is
``cannot read {path}: longer than 4 GiB, the most an eval set may hold``): an
unreadable file is ``cannot read {path}: {OS error}``, bytes that are not
UTF-8 are ``cannot read {path}: stream did not contain valid UTF-8 (line N,
byte B: reason)``, a JSONL line that is not JSON is ``{path}: line N: not
JSON: …`` — each an :class:`~taguru_eval.errors.InputError` (exit 2) naming
the file and the line.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from taguru_eval._base import jsonstrict as js
from taguru_eval._base.filebytes import ReadCap, file_bytes
from taguru_eval._base.text import split_lines, trim
from taguru_eval.errors import InputError, os_error_text


def read_bytes(path: str | Path, shown: str, cap: ReadCap) -> bytes:
    """The file's bytes, at most ``cap`` of them; ``shown`` names it in the message."""
    try:
        return file_bytes(path, cap)
    except OSError as exc:
        raise InputError(f"cannot read {shown}: {os_error_text(exc)}", path=shown) from None


def decode_utf8(raw: bytes, shown: str) -> str:
    """``raw`` as UTF-8 text, or the error naming the line and byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"cannot read {shown}: stream did not contain valid UTF-8 "
            f"(line {line}, byte {exc.start}: {exc.reason})",
            path=shown,
            line=line,
        ) from None


def read_utf8(path: str | Path, shown: str, cap: ReadCap) -> tuple[bytes, str]:
    """``(raw bytes, text)`` of ``path``, at most ``cap`` bytes of it."""
    raw = read_bytes(path, shown, cap)
    return raw, decode_utf8(raw, shown)


def jsonl_values(text: str, label: str) -> Iterator[tuple[int, object]]:
    """``(1-based line, parsed value)`` of every non-blank line (trimmed of
    Unicode White_Space), in order; the first line that is not JSON fails."""
    for index, raw_line in enumerate(split_lines(text)):
        line_no = index + 1
        line_text = trim(raw_line)
        if not line_text:
            continue
        try:
            value = js.loads(line_text)
        except js.JsonSyntaxError as exc:
            raise InputError(
                f"{label}: line {line_no}: not JSON: {exc}",
                path=label,
                line=line_no,
                hint=js.BOM_HINT if line_text.startswith(js.BOM) else None,
            ) from None
        yield line_no, value


def read_header(
    value: object,
    label: str,
    line_no: int,
    *,
    fields: Sequence[str],
    stamp_key: str,
    stamp: int,
    kind: str,
) -> str | None:
    """A stamped header line (closed object, ``stamp_key`` equal to ``stamp``,
    optional ``name``): the name, or the error naming the file, line and field."""
    try:
        obj = js.read_closed_object(value, (), tuple(fields), required=(stamp_key,))
        found = js.read_u64(obj[stamp_key], (stamp_key,))
        name = js.read_optional(obj.get("name"), ("name",), js.read_str)
    except js.JsonShapeError as exc:
        raise InputError(
            f"{label}: line {line_no}: not a valid {kind} header: {exc.detail}",
            path=label,
            line=line_no,
            field=exc.field or None,
        ) from None
    if found != stamp:
        raise InputError(
            f"{label}: line {line_no}: {stamp_key} must be {stamp}, got {found}",
            path=label,
            line=line_no,
            field=stamp_key,
        )
    return name
