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

from support.differential import OUT, comparable_changes, run_compare, run_ours, run_taguru
from support.paths import DATA, TEST_DATA
from support.serde_number_oracle import OutOfRange, parse
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
    base, head = crafted_runs(folder, tokens)
    done = run_compare(binary, base, head, folder)
    assert done.exit_code == 0 and done.artifact is not None, done.stderr
    sides = {}
    for line in done.artifact.splitlines()[1:]:
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


def _compared_alike(base: Path, head: Path, folder: Path) -> str:
    """Both compares of BASE and HEAD: the same exit code, stdout and stderr, and
    changes.jsonl byte for byte but for the compare's own clock; its records."""
    theirs = run_compare(require_taguru(), base, head, folder / "taguru")
    ours = run_compare(None, base, head, folder / "ours")
    assert (ours.exit_code, ours.stdout, ours.stderr) == (0, theirs.stdout, theirs.stderr)
    assert theirs.artifact is not None and ours.artifact is not None
    assert comparable_changes(ours.artifact) == comparable_changes(theirs.artifact)
    return theirs.artifact.partition("\n")[2]


def test_compare_of_crafted_runs_is_byte_equal(tmp_path: Path) -> None:
    """Every crafted number goes through both compares alike."""
    base, head = crafted_runs(tmp_path / "runs", reading_tokens())
    records = _compared_alike(base, head, tmp_path)
    assert records.count('"kind":') == len(reading_tokens())


def test_the_demo_pair_compares_alike(
    real_taguru: Callable[..., RealTaguru], tmp_path: Path
) -> None:
    """The demo's baseline-vs-assembly pair (one budget), run by each tool and
    compared by each tool: one changes.jsonl whoever ran and whoever compared."""
    server = real_taguru()
    populate(server.url, DATA / "sake")
    budget = ["--max-items", "40", "--max-bytes", "65536", "--max-tokens", "1000"]
    args = ["--eval", str(DATA / "sake" / "eval.jsonl"), "--context", "sake", "--url",
            server.url, *budget]  # fmt: skip
    artifacts: dict[str, list[Path]] = {}
    for tool, run in (("taguru", lambda a, w: run_taguru(require_taguru(), a, w)),
                      ("ours", run_ours)):  # fmt: skip
        for mode in ([], ["--assembly"]):
            folder = tmp_path / f"{tool}{len(mode)}"
            assert run([*args, *mode], folder).exit_code == 0
            artifacts.setdefault(tool, []).append(folder / OUT)
    records = {
        tool: _compared_alike(base, head, tmp_path / f"compare-{tool}")
        for tool, (base, head) in artifacts.items()
    }
    # The artifacts differ only where the tools may (latencies, the clock, prose),
    # so the records are the same too.
    assert records["ours"] == records["taguru"]
    # A value only a two-rounding reader writes (ERRATA row 24's demo figure).
    assert "0.9134015924715544" in records["taguru"]
