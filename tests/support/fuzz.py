"""What the hypothesis fuzzers share: the example count, nasty strings, the one-line check."""

from __future__ import annotations

import os
import unicodedata

from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("TAGURU_EVAL_FUZZ_EXAMPLES", "200"))
"""Examples per property; ``benchmarks/fuzz_long.py`` sets it far higher than CI."""

NASTY_CHARACTERS = "\n\r\t\x00\x07\x1b\x7f\x85\u2028\u2029\ud800\udfff"

nasty_text = st.text(
    alphabet=st.one_of(st.characters(), st.sampled_from(NASTY_CHARACTERS)), max_size=10
)
"""Any code point (control characters and lone surrogates included), often a nasty one."""


def assert_one_printable_line(message: str) -> None:
    """No character that would break the line, move the cursor or fail to encode."""
    assert message
    bad = {"Cc", "Zl", "Zp", "Cs"}
    assert not [ch for ch in message if unicodedata.category(ch) in bad], repr(message)
    message.encode("utf-8")
