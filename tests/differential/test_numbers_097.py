"""Numbers read as taguru 0.9.7 reads them (ERRATA row 24), against the real binary.

taguru's ``evaluate compare`` writes every per-case value it read back out
(``sides``) with the shortest digits of the double it got, so a compare of
crafted files shows exactly how it reads each number. The readings of
:func:`reading_tokens` are kept in ``tests/data/serde_numbers_097.json`` for the
offline tests (``tests/_base/test_serde_numbers.py``); here they are taken
again and must not have changed, and both compares must write the same bytes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

from support.paths import DATA, TEST_DATA
from support.serde_number_oracle import OutOfRange, parse
from support.side_by_side import changes_view, ours, taguru
from support.taguru import RealTaguru, populate, require_taguru

from taguru_eval._base.serde_numbers import read_number

RECORDED = TEST_DATA / "serde_numbers_097.json"
HEAD_VALUE = "-1e300"
"""Every crafted case's HEAD value: far from any BASE value, so each case is recorded."""


def reading_tokens() -> list[str]:
    """Numbers spelt as writers spell them, most of them read with two roundings."""
    rng = random.Random(97)

    def digits(count: int) -> str:
        return "".join(rng.choice("0123456789") for _ in range(count))

    tokens = ["0.9134015924715543", "-0", "-0.0", "0e999999999", "-1e-99999999999", "4.9e-324",
              "2.4703282292062328e-324", "2.2250738585072011e-308", "1.0000000596046449",
              "18446744073709551616.5", "18446744073709551619.4", "-18446744073709551617.3e-5",
              "123456789012345678901234567890", "0.1000000000000000055511151231257827"]  # fmt: skip
    tokens += ["0." + digits(17) for _ in range(120)]
    tokens += ["0.9" + digits(15) for _ in range(60)]
    tokens += [f"{rng.randint(1, 9)}.{digits(rng.randint(15, 22))}e{rng.randint(-330, 300)}"
               for _ in range(50)]  # fmt: skip
    tokens += [str(rng.randint(1, 9)) + digits(rng.randint(20, 24)) for _ in range(20)]
    tokens += [f"{rng.random()!r}"[:-1] + digits(3) for _ in range(40)]
    readable = []
    for token in tokens:
        try:
            parse(token)
        except OutOfRange:
            continue
        readable.append(token)
    return readable


def crafted_runs(folder: Path, tokens: list[str]) -> tuple[Path, Path]:
    """BASE holds each token as one case's recall@k; HEAD holds :data:`HEAD_VALUE`."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for side, values in (("base", tokens), ("head", [HEAD_VALUE] * len(tokens))):
        cases = ",".join(
            f'{{"case_id":"n{index:04d}","recall":{{"recall_at_k":{value},"mrr":0.0,"ndcg":0.0}}}}'
            for index, value in enumerate(values)
        )
        path = folder / f"{side}.json"
        path.write_text(f'{{"taguru_evaluation":1,"cases":[{cases}]}}', encoding="utf-8")
        paths.append(path)
    return paths[0], paths[1]


def taguru_readings(binary: Path, folder: Path, tokens: list[str]) -> list[tuple[str, float]]:
    """How taguru reads each of ``tokens``: its compare's BASE side of each case."""
    crafted_runs(folder, tokens)
    done = taguru(binary, ["compare", "base.json", "head.json", "--out", "changes.jsonl"], folder)
    assert done.code == 0, done.stderr
    sides = {}
    for line in (folder / "changes.jsonl").read_text(encoding="utf-8").splitlines()[1:]:
        record = json.loads(line)
        sides[record["case_id"]] = record["metrics"][0]["sides"]["base"]
    return [(token, sides[f"n{index:04d}"]) for index, token in enumerate(tokens)]


def test_taguru_reads_numbers_as_recorded(tmp_path: Path) -> None:
    tokens = reading_tokens()
    readings = taguru_readings(require_taguru(), tmp_path, tokens)
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))["readings"]
    assert json.dumps(readings) == json.dumps(recorded)
    for token, value in readings:
        assert json.dumps(read_number(token)) == json.dumps(value), token
    assert sum(float(token) != value for token, value in readings) >= 50


def test_compare_of_crafted_runs_is_byte_equal(tmp_path: Path) -> None:
    """Every crafted number goes through both compares: changes.jsonl and stdout agree."""
    tokens = reading_tokens()
    for side in ("taguru", "ours"):
        crafted_runs(tmp_path / side, tokens)
    args = ["compare", "base.json", "head.json", "--out", "changes.jsonl"]
    theirs = taguru(require_taguru(), args, tmp_path / "taguru")
    mine = ours(args, tmp_path / "ours")
    assert mine == theirs
    assert changes_view(tmp_path / "ours" / "changes.jsonl") == changes_view(
        tmp_path / "taguru" / "changes.jsonl"
    )


def test_the_demo_pair_compares_alike(
    real_taguru: Callable[..., RealTaguru], tmp_path: Path
) -> None:
    """The demo's baseline-vs-assembly pair (one budget), run by each tool and
    compared by each tool, in both directions: four changes.jsonl, one text."""
    server = real_taguru()
    populate(server.url, DATA / "sake")
    budget = ["--max-items", "40", "--max-bytes", "65536", "--max-tokens", "1000"]
    binary = require_taguru()
    (tmp_path / "eval.jsonl").write_text(
        (DATA / "sake" / "eval.jsonl").read_text(encoding="utf-8"), encoding="utf-8"
    )
    runs = {}
    for tool, run in (("taguru", lambda a: taguru(binary, a, tmp_path)),
                      ("ours", lambda a: ours(a, tmp_path))):  # fmt: skip
        for mode in ("baseline", "assembly"):
            out = f"{tool}-{mode}.json"
            assembly = ["--assembly"] if mode == "assembly" else []
            done = run(["--eval", "eval.jsonl", "--context", "sake", "--url", server.url,
                        "--out", out, *budget, *assembly])  # fmt: skip
            assert done.code == 0, done.stderr
            runs[tool, mode] = out
    written = {}
    for maker in ("taguru", "ours"):
        base, head = runs[maker, "baseline"], runs[maker, "assembly"]
        for reader, run in (("taguru", lambda a: taguru(binary, a, tmp_path)),
                            ("ours", lambda a: ours(a, tmp_path))):  # fmt: skip
            out = f"changes-{maker}-{reader}.jsonl"
            done = run(["compare", base, head, "--out", out])
            assert done.code == 0, done.stderr
            written[maker, reader] = (done.stdout.replace(out, "#"), changes_view(tmp_path / out))
        assert written[maker, "ours"] == written[maker, "taguru"]
    # The artifacts differ only in what each tool may write differently, so the
    # changes do too: their records are the same.
    assert written["ours", "taguru"][1][1:] == written["taguru", "taguru"][1][1:]
    # A value only a two-rounding reader writes (ERRATA row 24's demo figure).
    records = "\n".join(written["taguru", "taguru"][1][1:])
    assert "0.9134015924715544" in records
