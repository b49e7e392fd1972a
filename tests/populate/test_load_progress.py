"""Progress on a long load: run mode's display (a bar on a terminal, a line every
10 s elsewhere) counting items — sources, associations, alias pairs — as the
requests that carry them are answered."""

from __future__ import annotations

import io
import json
from itertools import count
from pathlib import Path

import pytest

import taguru_eval
from taguru_eval.run.console import CaseProgress
from taguru_refserver.serve import running_server

SOURCES = 3_000
ASSOCIATIONS = 1_500


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus of a few thousand small sources, with associations between them."""
    folder = tmp_path_factory.mktemp("generated") / "big"
    (folder / "docs").mkdir(parents=True)
    (folder / "context.json").write_text('{"description": "generated"}', encoding="utf-8")
    for index in range(SOURCES):
        (folder / "docs" / f"{index:05d}.md").write_text(
            f"# Part {index}\n\nitem{index} belongs to group{index % 17}.\n", encoding="utf-8"
        )
    lines = [
        json.dumps(
            {
                "subject": f"item{index}",
                "label": "belongs to",
                "object": f"group{index % 17}",
                "weight": 1.0,
                "source": f"docs/{index:05d}.md",
                "paragraph": 1,
            }
        )
        for index in range(ASSOCIATIONS)
    ]
    (folder / "associations.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_a_long_load_writes_a_progress_line_per_ten_seconds(generated: Path) -> None:
    stream = io.StringIO()
    ticks = count(0, 10)  # every reading of the clock is 10 s after the last
    shown = CaseProgress(stream, terminal=False, clock=lambda: float(next(ticks)), unit="item")
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        shown(done, total)

    with running_server(None) as url:
        result = taguru_eval.load(generated, url=url, progress=progress)
    total = SOURCES + ASSOCIATIONS
    assert seen == [(1000, total), (2000, total), (3000, total), (total, total)]
    assert result.contexts[0].sources == SOURCES
    assert stream.getvalue().splitlines() == [
        f"  1000/{total} item(s) (22%), 0.00 item/s, elapsed 00:10, left ?",
        f"  2000/{total} item(s) (44%), 100.00 item/s, elapsed 00:20, left 00:25",
        f"  3000/{total} item(s) (66%), 100.00 item/s, elapsed 00:30, left 00:15",
        f"  {total}/{total} item(s) (100%) done in 40.0 s, average 87.50 item/s over the whole run",
    ]


def test_on_a_terminal_the_bar_counts_items(generated: Path) -> None:
    stream = io.StringIO()
    with running_server(None) as url:
        taguru_eval.load(
            generated, url=url, progress=CaseProgress(stream, terminal=True, unit="item")
        )
    final = stream.getvalue().rsplit("\r", 1)[-1]
    assert f"{SOURCES + ASSOCIATIONS}/{SOURCES + ASSOCIATIONS}" in final
    assert "item/s" in final
