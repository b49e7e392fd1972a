"""The answer check on one window: first matching rank per answer, both rules."""

from __future__ import annotations

from taguru_eval.run.lanes.answers import AnswerJudge

WINDOW = [
    "Rent is due on the first day of each month.",
    None,  # a cited locator: no text of its own
    "Ｔｈｉｒｔｙ DAYS after the lease ends.",
    "thirty days, again",
]


def test_the_first_matching_rank_of_each_answer_under_normalized() -> None:
    judge = AnswerJudge(("thirty days", "first day", "forty days"), "normalized")
    checks = judge.check(WINDOW)
    assert [(c["answer_index"], c["found"], c["rank"]) for c in checks] == [
        (0, True, 3),  # full-width and upper case fold to it; rank 4 is later
        (1, True, 1),
        (2, False, None),
    ]
    assert {c["match"] for c in checks} == {"normalized"}


def test_tokens_ignore_order_and_stopwords_but_never_pass_an_empty_set() -> None:
    judge = AnswerJudge(("days thirty", "the", "month each"), "tokens")
    checks = judge.check(WINDOW)
    assert [(c["found"], c["rank"]) for c in checks] == [(True, 3), (False, None), (True, 1)]


def test_an_empty_window_finds_nothing() -> None:
    checks = AnswerJudge(("x",), "normalized").check([])
    assert [(c["found"], c["rank"]) for c in checks] == [(False, None)]
