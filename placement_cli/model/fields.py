"""A saved report's JSON values read as the model's fields: each as placement writes it, or an
error (TypeError, ValueError) that the reader turns into "not as placement writes it"."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, found {type(value).__name__}")
    return value


def optional_text(value: Any) -> str | None:
    return None if value is None else text(value)


def count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a count, found {value!r}")
    return value


def dimension(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a dimension, found {value!r}")
    return value


def optional_int(value: Any) -> int | None:
    return None if value is None else count(value)


def number(value: Any) -> float:
    """A float as the JSON has it; null: a number that was not finite (the document lists which)."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, found {value!r}")
    return float(value)


def known_total(values: Iterable[int | None]) -> int | None:
    """The sum of sizes, or None where any of them is unknown (a total that would hide a gap)."""
    found = list(values)
    return None if None in found else sum(v or 0 for v in found)
