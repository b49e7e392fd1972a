"""The replay comparison (support.replay) sees what it claims to see: key order,
number spelling and status; and blanks only the keys it names."""

from __future__ import annotations

from support.replay import MASKED, Answer, difference


def answer(body: str, status: int = 200) -> Answer:
    return Answer(status, body.encode("utf-8"))


def test_equal_documents_do_not_differ() -> None:
    body = '{"result":{"total":1,"hits":[{"score":0.5}]},"status":"ok","time":0.1}'
    assert difference(answer(body), answer(body)) is None


def test_key_order_is_a_difference() -> None:
    found = difference(answer('{"a":1,"b":2}'), answer('{"b":2,"a":1}'))
    assert found == "$: keys ['a', 'b'] != taguru's ['b', 'a']"


def test_a_nested_key_order_is_found_where_it_is() -> None:
    ours = '{"result":{"hits":[{"source":"a","paragraph":0}]}}'
    theirs = '{"result":{"hits":[{"paragraph":0,"source":"a"}]}}'
    found = difference(answer(ours), answer(theirs))
    assert found is not None and found.startswith("$.result.hits[0]: keys")


def test_a_number_is_compared_as_spelled() -> None:
    assert difference(answer('{"w":1.0}'), answer('{"w":1}')) == "$.w: 1.0 != taguru's 1"
    assert difference(answer('{"w":-0.0}'), answer('{"w":0.0}')) is not None


def test_list_order_and_length_are_differences() -> None:
    assert difference(answer('{"l":["a","b"]}'), answer('{"l":["b","a"]}')) is not None
    assert difference(answer('{"l":["a"]}'), answer('{"l":["a","b"]}')) is not None


def test_status_is_compared_first() -> None:
    assert difference(answer("{}", 200), answer("{}", 400)) == "status 200 != taguru's 400"


def test_clocks_are_blanked_where_they_are_named_and_nowhere_else() -> None:
    ours = '{"result":{"usage":{"reads":1,"last_read_epoch":5}},"status":"ok","time":0.25}'
    theirs = '{"result":{"usage":{"reads":1,"last_read_epoch":9}},"status":"ok","time":1e-06}'
    assert difference(answer(ours), answer(theirs)) is None
    # a usage counter is a value like any other
    counted = theirs.replace('"reads":1', '"reads":2')
    assert difference(answer(ours), answer(counted)) == "$.result.usage.reads: 1 != taguru's 2"
    # a masked name under another parent is compared
    assert difference(answer('{"x":{"footprint_bytes":1}}'), answer('{"x":{"footprint_bytes":2}}'))


def test_a_masked_key_still_holds_its_place() -> None:
    found = difference(answer('{"status":"ok","time":1}'), answer('{"time":1,"status":"ok"}'))
    assert found is not None


def test_every_masked_key_says_why() -> None:
    assert all(reason.strip() for reason in MASKED.values())
