"""A plain baseline run's evaluation.json, byte for byte, against a committed golden.

The goldens under ``tests/golden/`` were written by the code as it stood before
``--assembly`` existed (``TAGURU_EVAL_UPDATE_GOLDEN=1`` rewrites them). A run
over real loopback HTTP on the bundled sake corpus must produce the same bytes
once the values that differ from run to run are masked: ``generated_at``, the
server's port, the corpus load time (``last_write_epoch_*``), every
``latency_ms`` and the ``latency.*`` distributions.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import DATA, TEST_DATA
from support.run import run_args

from taguru_eval.cli.main import main
from taguru_refserver.serve import running_server

GOLDEN = TEST_DATA / "golden"
UPDATE = os.environ.get("TAGURU_EVAL_UPDATE_GOLDEN") == "1"

RUNS = {
    "baseline_sake": [],
    "baseline_sake_budget": ["--max-items", "3", "--max-bytes", "4096", "--max-tokens", "200"],
}

_LATENCY_BLOCK = re.compile(r'("latency\.[a-z_]+": \{)([^}]*)(\})')


def mask(text: str) -> str:
    """The artifact text with its run-to-run values replaced by fixed placeholders."""
    text = re.sub(r'"generated_at": "[^"]*"', '"generated_at": "<generated_at>"', text)
    text = re.sub(r'"url": "http://127\.0\.0\.1:\d+"', '"url": "http://127.0.0.1:<port>"', text)
    text = re.sub(r'"(last_write_epoch_(?:before|after))": \d+', r'"\1": <epoch>', text)
    text = re.sub(r'"latency_ms": \d+', '"latency_ms": <ms>', text)

    def numbers(match: re.Match[str]) -> str:
        body = re.sub(r'("(?!n")[a-z0-9]+": )[-0-9.e]+', r"\1<ms>", match.group(2))
        return match.group(1) + body + match.group(3)

    return _LATENCY_BLOCK.sub(numbers, text)


@pytest.fixture(scope="module")
def sake_server() -> Iterator[str]:
    with running_server(DATA) as url:
        yield url


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_baseline_run_is_byte_identical_to_the_golden(
    name: str, sake_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("TAGURU_ADDR", "TAGURU_API_TOKEN", "TAGURU_API_TOKENS", "TAGURU_CONFIG"):
        monkeypatch.delenv(key, raising=False)
    shutil.copy(DATA / "sake" / "eval.jsonl", tmp_path / "eval.jsonl")
    shutil.copy(DATA / "sake" / "thresholds.json", tmp_path / "thresholds.json")
    monkeypatch.chdir(tmp_path)
    args = [*run_args("eval.jsonl", "sake", sake_server)]
    args += ["--thresholds", "thresholds.json", "--no-store", *RUNS[name]]
    assert main(args) in (0, 3)
    produced = mask((tmp_path / "evaluation.json").read_text(encoding="utf-8"))
    golden = GOLDEN / f"{name}.evaluation.json"
    if UPDATE:
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(produced, encoding="utf-8")
    assert produced == golden.read_text(encoding="utf-8")


def test_the_mask_hides_only_run_to_run_values() -> None:
    text = (
        '"generated_at": "2026-01-01T00:00:00Z", "url": "http://127.0.0.1:4321", '
        '"last_write_epoch_after": 17, "latency_ms": 7, '
        '"latency.passage_ms": {"n": 3, "min": 1.0, "mean": 2.5}, '
        '"recall.mrr": {"n": 3, "min": 1.0}'
    )
    assert mask(text) == (
        '"generated_at": "<generated_at>", "url": "http://127.0.0.1:<port>", '
        '"last_write_epoch_after": <epoch>, "latency_ms": <ms>, '
        '"latency.passage_ms": {"n": 3, "min": <ms>, "mean": <ms>}, '
        '"recall.mrr": {"n": 3, "min": 1.0}'
    )


@pytest.mark.parametrize(
    "extra",
    [[], ["--assembly"], ["--max-items", "3"], ["--must-refuse", "must_refuse"]],
    ids=["baseline", "assembly", "budget", "must-refuse"],
)
def test_the_streamed_artifact_is_the_document_built_in_memory(
    extra: list[str], sake_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run streams evaluation.json case block by case block from lane values
    encoded as the cases finished; the bytes are those of the whole document
    built in memory from the same lane outputs and scores, and encoded at once."""
    from typing import Any

    from taguru_eval._base.text import encode_json
    from taguru_eval.artifact import build_artifact, layout
    from taguru_eval.pipeline import finish as pipeline

    outputs: list[Any] = []
    seen: dict[str, Any] = {}
    add = layout.LaneBlocks.add

    def kept(self: layout.LaneBlocks, output: Any) -> None:
        outputs.append(output)
        add(self, output)

    def recorded(name: str, function: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            seen[name] = (args, kwargs)
            return function(*args, **kwargs)

        return call

    monkeypatch.setattr(layout.LaneBlocks, "add", kept)
    monkeypatch.setattr(pipeline, "artifact_head", recorded("head", pipeline.artifact_head))
    monkeypatch.setattr(pipeline, "case_blocks", recorded("cases", pipeline.case_blocks))
    out = tmp_path / "evaluation.json"
    flags = [
        DATA / "sake" / "must_refuse.jsonl" if flag == "must_refuse" else flag for flag in extra
    ]
    args = [*run_args(DATA / "sake" / "eval.jsonl", "sake", sake_server)]
    assert main([*args, "--no-store", "--out", str(out), *map(str, flags)]) == 0

    (context, case_count, scores), head_options = seen["head"]
    _, case_options = seen["cases"]
    assert case_count == len(outputs) == 16
    doc = build_artifact(
        context,
        outputs,
        scores,
        catalog=head_options["catalog"],
        extra_top_level=head_options["extra_top_level"],
        case_extras=case_options["case_extras"],
    )
    assert out.read_bytes() == encode_json(doc, indent=2)
