"""Line breaking for Chinese (and other wide) text: rich breaks lines only at spaces, so a sentence
of Chinese is one "word" to it and wraps at the first space that fits, leaving ragged half-empty
lines. Here a line may also break between two wide characters, never before a closing mark (，。）)
nor after an opening one (（“), and never inside a run of ASCII (an API name stays whole)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text

NO_LINE_START = frozenset("，。、；：？！）」』》】”’,.;:?!)]")
_OPEN = frozenset("（「『《【“‘")


def _wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")


def has_wide(text: str) -> bool:
    return any(_wide(ch) for ch in text)


def _units(text: str) -> Iterator[tuple[int, int, bool]]:
    """(start, end, is_space) of the pieces a line may break between."""
    pieces: list[list[int]] = []  # [start, end, space]
    i, n = 0, len(text)
    while i < n:
        j = i + 1
        if text[i].isspace():
            while j < n and text[j].isspace():
                j += 1
            pieces.append([i, j, 1])
            i = j
            continue
        if not _wide(text[i]):
            while j < n and not text[j].isspace() and not _wide(text[j]):
                j += 1
        while j < n and text[j] in NO_LINE_START:  # no line starts with a closing mark
            j += 1
        if pieces and not pieces[-1][2] and text[pieces[-1][1] - 1] in _OPEN:  # none ends with an opening one
            pieces[-1][1] = j
        else:
            pieces.append([i, j, 0])
        i = j
    for start, end, space in pieces:
        yield start, end, bool(space)


def break_offsets(text: str, width: int) -> list[int]:
    """Where to break ``text`` (one line) so that no line is wider than ``width`` cells."""
    width = max(1, width)
    offsets: list[int] = []
    column = 0
    for start, end, space in _units(text):
        size = cell_len(text[start:end])
        if space:
            column += size  # spaces at a break stay at the end of the line, and are dropped there
            continue
        if column and column + size > width:
            offsets.append(start)
            column = 0
        if size > width:  # longer than a line: cut where the cells run out
            position = start
            for piece in chop_cells(text[start:end], width)[:-1]:
                position += len(piece)
                offsets.append(position)
            column = cell_len(text[position:end])
        else:
            column += size
    return offsets


class _Wrapped:
    """A Text drawn at the width it is given, broken by ``break_offsets``, styles kept."""

    def __init__(self, text: Text) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.text.split("\n", allow_blank=True):
            if not line.plain:
                yield Segment.line()  # an empty Text would draw nothing, not an empty line
                continue
            for piece in line.divide(break_offsets(line.plain, options.max_width)):
                piece.rstrip()
                piece.no_wrap = True
                piece.end = "\n"
                yield piece

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        lines = self.text.plain.split("\n")
        return Measurement(1, min(options.max_width, max(cell_len(line) for line in lines)))


def wrapped(text: Text) -> RenderableType:
    """``text`` itself when it has no wide character (rich wraps it well), else wrapped as above."""
    return _Wrapped(text) if has_wide(text.plain) else text
