"""The ``--answer-match tokens`` rule: a golden answer is found in a passage's text
when the answer's content tokens are a non-empty subset of the text's.

Tokens are exactly those of citenexus 0.13.1's
``citenexus.answer.verify.content_tokens_v2``: its Unicode tokenizer
``citenexus.tokenize.tokenize_v2`` minus its 44-word English stopword list. Not
its ``content_tokens`` (v1), which is what citenexus's own ``evaluate`` uses for
"expected answer supported": v1 keeps only ``[a-z0-9]+`` runs, so a Japanese
answer has no tokens at all and could never be found. This is a reimplementation,
so that scoring does not pull in citenexus and its dependencies;
``tests/score/test_answer_tokens.py`` holds it to citenexus's own function through
the vectors recorded by ``benchmarks/record_citenexus_tokens.py``.

The rules reproduced: the text is NFKC-normalized, case-folded (``str.casefold``,
so ``ß`` matches ``ss``) and NFKC-normalized again. Word characters are Unicode
letters, numbers and marks (general category L*, N*, M*); anything else ends a
run. A run also ends where a character's script differs from the run's script;
ASCII digits and the combining-mark blocks are "common" and join any run, and a
run of common characters alone takes the script of the first scripted character
that joins it (so in "は1897年" the digits bigram with は). A run in a script outside
citenexus's range table is dropped; a run in a script written without spaces
(Han, hiragana, katakana, Thai, Lao, Khmer, Myanmar) of two or more characters
becomes its character bigrams; any other run is one token.
Categories, NFKC and case folding come from the running Python's
``unicodedata``, as they do in citenexus, so both agree on any one Python.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_right
from itertools import pairwise
from typing import Final

CITENEXUS_VERSION: Final = "0.13.1"

_COMMON: Final = "common"
_UNKNOWN: Final = "unknown"

# citenexus's script table, grouped by script so it can be checked against its
# source one script at a time. Ranges must never overlap (asserted below): the
# lookup is a binary search over range starts. Code points outside every range
# are "unknown" and tokenize to nothing, as in citenexus.
_RANGES_BY_SCRIPT: Final[dict[str, tuple[tuple[int, int], ...]]] = {
    "arabic": (
        (0x0600, 0x06FF),
        (0x0750, 0x077F),
        (0x0870, 0x08FF),
        (0xFB50, 0xFDFF),
        (0xFE70, 0xFEFF),
        (0x10EFD, 0x10EFF),
    ),
    "armenian": ((0x0531, 0x058F),),
    "bengali": ((0x0980, 0x09FF),),
    # Combining marks are "common" so that they stay inside the run of their base.
    _COMMON: (
        (0x0300, 0x036F),
        (0x1AB0, 0x1AFF),
        (0x1DC0, 0x1DFF),
        (0x20D0, 0x20F0),
        (0xFE00, 0xFE0F),
        (0xFE20, 0xFE2F),
    ),
    "cyrillic": (
        (0x0400, 0x052F),
        (0x1C80, 0x1C8F),
        (0x1D2B, 0x1D2B),
        (0x1D78, 0x1D78),
        (0x2DE0, 0x2DFF),
        (0xA640, 0xA69F),
    ),
    "devanagari": ((0x0900, 0x097F), (0xA8E0, 0xA8FF)),
    "georgian": ((0x10A0, 0x10FF), (0x1C90, 0x1CBF), (0x2D00, 0x2D2F)),
    "greek": (
        (0x0370, 0x03FF),
        (0x1D26, 0x1D2A),
        (0x1F00, 0x1FFF),
        (0xAB65, 0xAB65),
        (0x10140, 0x1018B),
    ),
    "gujarati": ((0x0A80, 0x0AFF),),
    "gurmukhi": ((0x0A00, 0x0A7F),),
    "han": (
        (0x2E80, 0x2EFF),
        (0x3005, 0x3007),
        (0x3400, 0x4DBF),
        (0x4E00, 0x9FFF),
        (0xF900, 0xFAFF),
        (0x20000, 0x2A6DF),
        (0x2A700, 0x2EBEF),
        (0x30000, 0x323AF),
    ),
    "hangul": (
        (0x1100, 0x11FF),
        (0x302E, 0x302F),
        (0x3130, 0x318F),
        (0xA960, 0xA97F),
        (0xAC00, 0xD7A3),
        (0xD7B0, 0xD7FF),
    ),
    "hebrew": ((0x0591, 0x05F4), (0xFB1D, 0xFB4F)),
    "hiragana": ((0x3040, 0x309F), (0x1B001, 0x1B11F), (0x1B132, 0x1B132), (0x1B150, 0x1B152)),
    "kannada": ((0x0C80, 0x0CFF),),
    "katakana": (
        (0x30A0, 0x30FF),
        (0x31F0, 0x31FF),
        (0x1AFF0, 0x1B000),
        (0x1B120, 0x1B122),
        (0x1B155, 0x1B155),
        (0x1B164, 0x1B167),
    ),
    "khmer": ((0x1780, 0x17FF),),
    "lao": ((0x0E80, 0x0EFF),),
    "latin": (
        (0x0041, 0x005A),
        (0x0061, 0x007A),
        (0x00AA, 0x00AA),
        (0x00BA, 0x00BA),
        (0x00C0, 0x02AF),
        (0x1D00, 0x1D25),
        (0x1D6B, 0x1D77),
        (0x1D79, 0x1D9A),
        (0x1E00, 0x1EFF),
        (0x2184, 0x2184),
        (0x2C60, 0x2C7F),
        (0xA720, 0xA7FF),
        (0xAB30, 0xAB64),
        (0xAB66, 0xAB68),
        (0xFF21, 0xFF3A),
        (0xFF41, 0xFF5A),
        (0x1DF00, 0x1DF2A),
    ),
    "malayalam": ((0x0D00, 0x0D7F),),
    "myanmar": ((0x1000, 0x109F), (0xA9E0, 0xA9FF), (0xAA60, 0xAA7F)),
    "oriya": ((0x0B00, 0x0B7F),),
    "sinhala": ((0x0D80, 0x0DFF),),
    "tamil": ((0x0B80, 0x0BFF), (0x11FC0, 0x11FF1)),
    "telugu": ((0x0C00, 0x0C7F),),
    "thai": ((0x0E00, 0x0E7F),),
}

_TABLE: Final = tuple(
    sorted(
        (first, last, script)
        for script, ranges in _RANGES_BY_SCRIPT.items()
        for first, last in ranges
    )
)
_FIRSTS: Final = tuple(first for first, _, _ in _TABLE)
assert all(a[1] < b[0] for a, b in pairwise(_TABLE)), "ranges overlap"

# Scripts written without spaces between words: one run would otherwise be a
# whole sentence, and no shorter answer could ever be a subset of it.
_BIGRAM_SCRIPTS: Final = frozenset(
    {"han", "hiragana", "katakana", "thai", "lao", "khmer", "myanmar"}
)

_STOPWORDS: Final = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "may",
        "much",
        "no",
        "not",
        "of",
        "on",
        "or",
        "shall",
        "should",
        "that",
        "the",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    }
)
assert len(_STOPWORDS) == 44, "citenexus pins exactly 44 stopwords"

_WORD_CATEGORIES: Final = frozenset("LNM")


def _script(ch: str) -> str:
    # Only ASCII digits are common outright; other digits (Arabic-Indic, Thai, …)
    # belong to their block's script, as in citenexus.
    if "0" <= ch <= "9":
        return _COMMON
    cp = ord(ch)
    i = bisect_right(_FIRSTS, cp) - 1
    if i >= 0 and cp <= _TABLE[i][1]:
        return _TABLE[i][2]
    return _UNKNOWN


def _add_run(run: list[str], script: str, out: set[str]) -> None:
    if not run or script == _UNKNOWN:
        return
    if script in _BIGRAM_SCRIPTS and len(run) > 1:
        out.update(run[i] + run[i + 1] for i in range(len(run) - 1))
    else:
        out.add("".join(run))


def content_tokens(text: str) -> frozenset[str]:
    """citenexus 0.13.1's ``content_tokens_v2(text)``, as a frozenset."""
    # Case folding can leave text unnormalized, hence NFKC on both sides of it.
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    out: set[str] = set()
    run: list[str] = []
    # A run of only "common" characters (digits) has no script yet: it takes
    # the script of the first scripted character that joins it.
    run_script = _COMMON
    for ch in folded:
        if unicodedata.category(ch)[0] not in _WORD_CATEGORIES:
            _add_run(run, run_script, out)
            run, run_script = [], _COMMON
            continue
        script = _script(ch)
        if script != _COMMON and run_script not in (_COMMON, script):
            _add_run(run, run_script, out)
            run, run_script = [], _COMMON
        run.append(ch)
        if run_script == _COMMON:
            run_script = script
    _add_run(run, run_script, out)
    return frozenset(out - _STOPWORDS)


def tokens_found(answer: str, text: str) -> bool:
    """Whether ``answer`` is found in ``text``: its content tokens are a non-empty
    subset of the text's. An answer of stopwords, punctuation or an unknown script
    alone has no tokens and is never found."""
    wanted = content_tokens(answer)
    return bool(wanted) and wanted <= content_tokens(text)
