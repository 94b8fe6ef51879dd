"""Text helpers of every renderer: log text made safe to show, labels padded by display width,
results as the tables write them."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text

from placement_cli.messages import clean

__all__ = ["clean", "format_result", "literal", "pad_left"]


def literal(text: str | None, style: str = "") -> Text:
    """Text shown exactly as written (``[red]`` stays ``[red]``)."""
    return Text(clean(text) or "-", style=style)

def pad_left(label: str, width: int) -> str:
    """``label`` right-aligned in ``width`` cells (a Chinese character takes two)."""
    return " " * max(width - cell_len(label), 0) + label


def format_result(result: object) -> str:
    if isinstance(result, list):
        return "[" + ", ".join(format_result(x) for x in result) + "]"
    if isinstance(result, float) and result.is_integer():
        return str(int(result))
    if isinstance(result, str):  # a string tensor's value: quoted, so "1" is not read as the number 1
        return repr(result)
    return str(result)
