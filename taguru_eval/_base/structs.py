"""msgspec's validation errors, worded like every other decoding detail of the project.

``msgspec`` decodes the payloads too large or too frequent for the
field-by-field readers of :mod:`.jsonstrict` (compare's evaluation.json view,
the evidence package). Its messages put the path last (``Expected `int`, got
`float` - at `$.cases[0].recall```); the project's details put it first, as
:mod:`.jsonstrict` does (``cases[0].recall: expected `int`, got `float```).
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

_AT_PATH: Final = re.compile(r" - at `\$(?P<path>[^`]*)`$")


def validation_parts(exc: msgspec.ValidationError) -> tuple[str, str]:
    """``Expected `int`, got `float` - at `$.cases[0].recall``` ->
    ``("cases[0].recall", "expected `int`, got `float`")``."""
    text = str(exc)
    match = _AT_PATH.search(text)
    if match is None:
        return "", _lower_first(text)
    return match.group("path").removeprefix("."), _lower_first(text[: match.start()])


def validation_detail(exc: msgspec.ValidationError) -> str:
    """``{path}: {message}`` (just the message at the root)."""
    path, message = validation_parts(exc)
    return f"{path}: {message}" if path else message


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]
