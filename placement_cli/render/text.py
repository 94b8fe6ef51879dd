"""Text helpers of every renderer: log text made safe to show, labels padded by display width,
results as the tables write them."""

from __future__ import annotations

from collections.abc import Iterator

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.text import Text

from placement_cli.messages import clean

__all__ = ["KeptTail", "clean", "format_result", "literal", "pad_left"]


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


class KeptTail:
    """A line whose end (``text[start:]``: a count with its words, "(33 placements)") wraps as one word,
    so a narrow screen or a pipe never leaves "(33" on one line and "placements)" on the next."""

    _MARKS = "\u00b7\u2022~#"  # a non-blank stand-in for the end's blanks while the line is wrapped

    def __init__(self, text: str, start: int) -> None:
        self.text, self.start = text, start

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        mark = next((m for m in self._MARKS if m not in self.text), None)
        if mark is None:
            yield Text(self.text)
            return
        joined = Text(self.text[: self.start] + self.text[self.start :].replace(" ", mark))
        for line in joined.wrap(console, options.max_width):
            yield Text(line.plain.replace(mark, " "))
