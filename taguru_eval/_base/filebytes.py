"""Reading a file whole, a path holding a NUL byte reported as taguru reports it.

Only a library caller can pass such a path (argv cannot hold one). Python's
``open`` raises ``ValueError`` for it; Rust's std::io, which taguru reads its
files with, answers an I/O error worded :data:`NUL_IN_PATH`. :func:`file_bytes`
raises that as an :class:`OSError`, so every reader's ``cannot read {path}: …``
wording (``errors.os_error_text``) covers it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

NUL_IN_PATH: Final = "file name contained an unexpected NUL byte"


def file_bytes(path: str | Path) -> bytes:
    """``Path(path).read_bytes()``, a NUL byte in ``path`` an :class:`OSError`."""
    try:
        return Path(path).read_bytes()
    except ValueError:
        if "\0" not in os.fspath(path):
            raise
        raise OSError(None, NUL_IN_PATH) from None
