"""Record citenexus's own ``content_tokens_v2`` on fixed inputs, as the vectors that
``tests/score/test_answer_tokens.py`` holds ``taguru_eval._base.answer_tokens`` to.

Not a benchmark: a recorder, kept here so the vectors can be re-recorded. It needs
the standard library and citenexus only, and never imports taguru_eval. Either from
the unpacked wheel, without citenexus's dependencies::

    pip download citenexus==0.13.1 --no-deps -d /tmp/cn
    (cd /tmp/cn && python -m zipfile -e citenexus-0.13.1-py3-none-any.whl x)
    python benchmarks/record_citenexus_tokens.py --unpacked /tmp/cn/x

or from a venv where ``pip install citenexus==0.13.1`` was run::

    /tmp/cnvenv/bin/python benchmarks/record_citenexus_tokens.py

It writes ``tests/data/citenexus_tokens_v2.json`` (``--out`` for another path): every
non-blank line of the handbook and sake demo documents, the demo eval sets' queries
and expected answers, hand-picked edge cases, and ``--random`` strings drawn with
``--seed`` from mixed scripts.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import types
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMOS = (ROOT / "data" / "handbook", ROOT / "data" / "sake")
OUT = ROOT / "tests" / "data" / "citenexus_tokens_v2.json"
VERSION = "0.13.1"

# Each one pins a rule that the demo sentences alone would leave untested.
EDGE_CASES = (
    "",
    " \t\n",
    "The",
    "what is the",
    "Straße STRASSE strasse",
    "ẞ",
    "Café Cafe\u0301 CAFÉ",
    "\u0301",
    "a\u0301\u0302b",
    "İstanbul ıi",
    "ǅemal ǈ",
    "ﬁle ﬀ Ⅻ ½ ² ①",
    "ＦＵＬＬ　ｗｉｄｔｈ　１２３",
    "ﾊﾝｶｸ ｶﾞｷﾞ",
    "ｶ\uff9e",
    "が か\u3099 か\u309a",
    "㍿ ㈱ ㌔",
    "東京tokyo東京",
    "tokyo東京",
    "2024年5月1日",
    "1897年に創業",
    "青嶺酒造は1897年に創業した",
    "東京",
    "東",
    "あ",
    "カタカナー",
    "ひらがなとカタカナと漢字",
    "々 〆 〇",
    "日本語、です。「引用」・（括弧）",
    "12a34",
    "a1b2",
    "٣٤٥ ١٢",
    "عربي ١٢٣",
    "١٢abc",
    "Ελληνικά ΣΊΣΥΦΟΣ",
    "Русский ЁЖ",
    "한국어 텍스트",
    "ภาษาไทย",
    "ລາວ",
    "ខ្មែរ",
    "မြန်မာ",
    "తెలుగు",
    "हिन्दी",
    "עברית",
    "ሰላም ethiopic",
    "ሰላም12",
    "12ሰላም abc",
    "ᚠᚢᚦ runic",
    "emoji 😀 ❤️ 👍🏽 1️⃣ 👨‍👩‍👧",
    "x\u200by zero\u200dwidth",
    "tab\there\u00a0nbsp\u3000ideographic",
    "hyphen-ated dot.ted under_score",
    "it's don't",
    "µ µm",
    "ªº",
    "\u0483\u0488",
    "𠀋𡈽 ext-B",
    "U.S.A. e.g.",
)

# (first, last) pools for the random strings: ASCII, Latin-1, combining marks,
# kana, CJK, fullwidth/halfwidth forms, other digits, CJK punctuation, emoji and
# the joiners and selectors that come with them. All assigned long before any
# Python this project runs on, so the recorded inputs mean the same on each.
POOLS = (
    (0x0020, 0x007E),
    (0x0009, 0x000D),
    (0x00A0, 0x00FF),
    (0x0300, 0x036F),
    (0x3041, 0x3096),
    (0x3099, 0x309F),
    (0x30A0, 0x30FF),
    (0x4E00, 0x9FFF),
    (0x3000, 0x303F),
    (0xFF01, 0xFF5E),
    (0xFF61, 0xFF9F),
    (0x0660, 0x0669),
    (0x2460, 0x2473),
    (0x1F300, 0x1F64F),
    (0x200B, 0x200D),
    (0xFE0F, 0xFE0F),
    (0x0391, 0x03C9),
    (0xAC00, 0xAC40),
)


def random_strings(seed: int, count: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(count):
        # Few pools per string, so script boundaries and long runs both occur.
        pools = rng.sample(POOLS, rng.randint(1, 4))
        length = rng.randint(0, 24)
        chars = []
        for _ in range(length):
            first, last = rng.choice(pools)
            chars.append(chr(rng.randint(first, last)))
        yield "".join(chars)


def demo_strings() -> Iterator[str]:
    for root in DEMOS:
        for path in sorted(root.rglob("*.md")):
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    yield line
        for name in ("eval.jsonl", "must_refuse.jsonl"):
            path = root / name
            if path.exists():
                for line in path.read_text(encoding="utf-8").splitlines():
                    yield from _answer_like(json.loads(line))


def _answer_like(case: dict[str, object]) -> Iterator[str]:
    """The query and every short expected string a golden answer could be."""
    if isinstance(case.get("query"), str):
        yield str(case["query"])
    for key in ("expected_concepts", "expected_labels", "cues"):
        values = case.get(key)
        if isinstance(values, list):
            yield from (v for v in values if isinstance(v, str))
    for key in ("expected_associations", "expected_citations"):
        values = case.get(key)
        if isinstance(values, list):
            for item in values:
                if isinstance(item, dict):
                    for field in ("subject", "label", "object", "quote", "section"):
                        if isinstance(item.get(field), str):
                            yield item[field]


def load_content_tokens_v2(unpacked: Path | None) -> Callable[[str], set[str]]:
    if unpacked is not None:
        # citenexus/__init__.py imports its whole client (lancedb, boto3, …).
        # Standing in empty packages for the parents lets the tokenizer and the
        # verifier load alone; they import nothing outside the standard library.
        for name in ("citenexus", "citenexus.lang", "citenexus.answer"):
            package = types.ModuleType(name)
            package.__path__ = [str(unpacked.joinpath(*name.split(".")))]
            sys.modules[name] = package
    verify = importlib.import_module("citenexus.answer.verify")
    function: Callable[[str], set[str]] = verify.content_tokens_v2
    return function


def installed_version(unpacked: Path | None) -> str:
    if unpacked is not None:
        metadata = next(unpacked.glob("citenexus-*.dist-info/METADATA"))
        for line in metadata.read_text(encoding="utf-8").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
        raise SystemExit(f"no Version in {metadata}")
    from importlib.metadata import version

    return version("citenexus")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unpacked", type=Path, help="the unpacked citenexus wheel")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--seed", type=int, default=20260811)
    parser.add_argument("--random", type=int, default=200, dest="count")
    args = parser.parse_args()

    found = installed_version(args.unpacked)
    if found != VERSION:
        raise SystemExit(f"citenexus {found} found, the vectors are of {VERSION}")
    content_tokens_v2 = load_content_tokens_v2(args.unpacked)

    seen: set[str] = set()
    cases = []
    for kind, inputs in (
        ("demo", demo_strings()),
        ("edge", iter(EDGE_CASES)),
        ("random", random_strings(args.seed, args.count)),
    ):
        for text in inputs:
            if text not in seen:
                seen.add(text)
                cases.append(
                    {"kind": kind, "input": text, "tokens": sorted(content_tokens_v2(text))}
                )

    head = {
        "citenexus": VERSION,
        "function": "citenexus.answer.verify.content_tokens_v2",
        "recorded_by": "benchmarks/record_citenexus_tokens.py",
        "python": sys.version.split()[0],
        "unidata_version": unicodedata.unidata_version,
        "seed": args.seed,
    }
    # One case a line, for readable diffs. Non-demo cases are ASCII-escaped so
    # that no editor or tool can NFC-normalize a lone combining mark away.
    lines = [json.dumps(c, ensure_ascii=c["kind"] != "demo") for c in cases]
    text = (
        json.dumps(head, ensure_ascii=False)[:-1] + ', "cases": [\n' + ",\n".join(lines) + "\n]}\n"
    )
    json.loads(text)
    args.out.write_text(text, encoding="utf-8")
    print(f"{len(cases)} cases written to {args.out}")


if __name__ == "__main__":
    main()
