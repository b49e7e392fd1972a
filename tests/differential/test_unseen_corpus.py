"""A corpus this repository has never seen (generated from a seed), put into a
fresh taguru with ``load``: both evaluators write the same artifact, in the
baseline, assembly and budget modes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.differential import Outcome, normalized_artifact, run_ours, run_taguru, without_hints
from support.taguru import RealTaguru, populate, require_taguru
from support.unseen import write_unseen_corpus

MODES = {
    "baseline": (),
    "assembly": ("--assembly",),
    "budgets": ("--max-items", "4", "--max-bytes", "1500"),
}


@pytest.mark.parametrize("seed", [7, 2026])
def test_an_unseen_corpus_gives_both_evaluators_the_same_artifact(
    seed: int, real_taguru: Callable[..., RealTaguru], tmp_path: Path
) -> None:
    corpus = write_unseen_corpus(tmp_path / "unseen", seed=seed)
    server = real_taguru()
    populate(server.url, corpus)
    for mode, flags in MODES.items():
        args = ["--eval", str(corpus / "eval.jsonl"), "--context", "unseen", "--url", server.url]
        theirs = run_taguru(require_taguru(), [*args, *flags], tmp_path / mode / "taguru")
        ours: Outcome = run_ours([*args, *flags], tmp_path / mode / "ours")
        assert theirs.exit_code == ours.exit_code == 0, (mode, theirs.stderr, ours.stderr)
        assert ours.stdout == theirs.stdout, mode
        assert without_hints(ours.stderr) == theirs.stderr, mode
        assert theirs.artifact is not None and ours.artifact is not None
        assert normalized_artifact(ours.artifact) == normalized_artifact(theirs.artifact), mode
