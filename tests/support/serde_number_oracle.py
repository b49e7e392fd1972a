"""Test oracle: serde_json's default number parser, one character at a time.

An independent port, for the tests only, of the steps serde_json 1.0 takes
without its ``float_roundtrip`` feature (``de.rs``: ``parse_integer``,
``parse_number``, ``parse_decimal``, ``parse_exponent``, ``parse_long_integer``,
``parse_decimal_overflow``, ``parse_exponent_overflow``, ``f64_from_parts``),
in the order the parser meets the characters. ``taguru_eval._base.serde_numbers``
takes the same steps a whole token (or column) at a time; the property tests
hold the two to each other. Python integers stand in for ``u64``/``i32`` and
every overflow check is spelled out.
"""

from __future__ import annotations

U64_MAX = 2**64 - 1
I32_MAX = 2**31 - 1
I32_MIN = -(2**31)
POW10 = [float(10**k) for k in range(309)]  # int -> float rounds correctly


class OutOfRange(ValueError):
    """serde's ``number out of range``."""


class _Reader:
    def __init__(self, token: str) -> None:
        self.text = token
        self.at = 0

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def eat(self) -> str:
        char = self.peek()
        self.at += 1
        return char


def _overflows(accumulated: int, digit: int, limit: int) -> bool:
    return accumulated * 10 + digit > limit


def parse(token: str) -> float:
    """The f64 serde_json reads from one JSON number ``token`` (raises OutOfRange)."""
    reader = _Reader(token)
    positive = True
    if reader.peek() == "-":
        reader.eat()
        positive = False
    first = reader.eat()
    if not first.isdigit():
        raise ValueError(f"not a JSON number: {token!r}")
    significand = int(first)
    if first != "0":
        while reader.peek().isdigit():
            digit = int(reader.peek())
            if _overflows(significand, digit, U64_MAX):
                return _long_integer(reader, positive, significand)
            reader.eat()
            significand = significand * 10 + digit
    return _number(reader, positive, significand)


def _number(reader: _Reader, positive: bool, significand: int) -> float:
    char = reader.peek()
    if char == ".":
        return _decimal(reader, positive, significand, 0)
    if char in ("e", "E"):
        return _exponent(reader, positive, significand, 0)
    _end(reader)
    # An integer: u64 or i64, widened to f64 by ``as`` (one rounding); ``-0`` is -0.0.
    value = float(significand)
    return value if positive else -value


def _long_integer(reader: _Reader, positive: bool, significand: int) -> float:
    exponent = 0
    while reader.peek().isdigit():
        reader.eat()
        exponent += 1
    if reader.peek() == ".":
        return _decimal(reader, positive, significand, exponent)
    if reader.peek() in ("e", "E"):
        return _exponent(reader, positive, significand, exponent)
    return _from_parts(reader, positive, significand, exponent)


def _decimal(reader: _Reader, positive: bool, significand: int, before: int) -> float:
    reader.eat()  # the "."
    after = 0
    while reader.peek().isdigit():
        digit = int(reader.peek())
        if _overflows(significand, digit, U64_MAX):
            while reader.peek().isdigit():  # every further digit is ignored
                reader.eat()
            if reader.peek() in ("e", "E"):
                return _exponent(reader, positive, significand, before + after)
            return _from_parts(reader, positive, significand, before + after)
        reader.eat()
        significand = significand * 10 + digit
        after -= 1
    if after == 0:
        raise ValueError("no digit after the decimal point")
    if reader.peek() in ("e", "E"):
        return _exponent(reader, positive, significand, before + after)
    return _from_parts(reader, positive, significand, before + after)


def _exponent(reader: _Reader, positive: bool, significand: int, starting: int) -> float:
    reader.eat()  # the "e"
    positive_exponent = True
    if reader.peek() in ("+", "-"):
        positive_exponent = reader.eat() == "+"
    first = reader.eat()
    if not first.isdigit():
        raise ValueError("no digit in the exponent")
    exponent = int(first)
    while reader.peek().isdigit():
        digit = int(reader.eat())
        if _overflows(exponent, digit, I32_MAX):
            if significand != 0 and positive_exponent:
                raise OutOfRange("exponent overflows")
            while reader.peek().isdigit():
                reader.eat()
            _end(reader)
            return 0.0 if positive else -0.0
        exponent = exponent * 10 + digit
    total = starting + exponent if positive_exponent else starting - exponent
    return _from_parts(reader, positive, significand, min(max(total, I32_MIN), I32_MAX))


def _from_parts(reader: _Reader, positive: bool, significand: int, exponent: int) -> float:
    _end(reader)
    value = float(significand)
    while True:
        magnitude = abs(exponent)
        if magnitude < len(POW10):
            if exponent >= 0:
                value *= POW10[magnitude]
                if value == float("inf"):
                    raise OutOfRange("overflow")
            else:
                value /= POW10[magnitude]
            break
        if value == 0.0:
            break
        if exponent >= 0:
            raise OutOfRange("overflow")
        value /= 1e308
        exponent += 308
    return value if positive else -value


def _end(reader: _Reader) -> None:
    if reader.at != len(reader.text):
        raise ValueError(f"trailing characters in {reader.text!r}")
