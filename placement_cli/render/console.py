"""The console commands print to: a width that is never zero, characters the stream can encode."""

from __future__ import annotations

import codecs
import os
import sys
from typing import IO, Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment

FILE_ROWS = 40  # not a terminal: a report of more rows than this is shown as a digest (--all: every row)
FILE_WIDTH = 80  # not a terminal, no COLUMNS: the width of panels and summary tables
MIN_WIDTH = 20  # narrower than this is not a real screen (COLUMNS=1): draw at this width
MIN_ROWS = 10


def _positive(value: str | None) -> int | None:
    value = (value or "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def is_terminal(stream: IO[str] | Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed or not a file
        return False


# What the reports print beyond ASCII: rich's box drawing (tables, panels, rules), the ellipsis, the
# Chinese of --lang zh and its full-width punctuation, the arrows and marks of the pictures.
SAMPLE = "─━│┃┌┐└┘├┤┬┴┼╭╮╰╯═║╔╗╚╝╠╣╦╩╬…→✓✗·设备放置软放置塔梯度平均副本共置，（）：；、“”"


def unicode_stream(stream: IO[str] | Any) -> bool:
    """True when the stream's encoding can encode what the reports print (UTF-8, GB18030, ...),
    decided by encoding it, not by the codec's name."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        SAMPLE.encode(codecs.lookup(encoding).name)
    except (LookupError, UnicodeError):
        return False
    return True


def tolerate_encoding(stream: IO[str] | Any) -> None:
    """On a stream that cannot encode every character (PYTHONIOENCODING=ascii, a legacy code page),
    replace what it cannot encode instead of raising UnicodeEncodeError mid-report."""
    if unicode_stream(stream):
        return
    try:
        stream.reconfigure(errors="replace")
    except (AttributeError, ValueError, OSError):
        pass


def _width(stream: IO[str] | Any) -> int:
    """COLUMNS when it is a positive number, else the terminal's width, else FILE_WIDTH.
    (COLUMNS=0 made rich draw at width 0: nothing at all.)"""
    columns = _positive(os.environ.get("COLUMNS"))
    if columns is None and is_terminal(stream):
        try:
            columns = os.get_terminal_size(stream.fileno()).columns or None
        except (AttributeError, ValueError, OSError):
            columns = None
    return max(columns or FILE_WIDTH, MIN_WIDTH)


def make_console(stream: IO[str] | None = None, record: bool = False) -> Console:
    """The console for reports on ``stream`` (stdout by default); ``record``: it also keeps what it
    printed, for --svg (what it writes to the stream is the same)."""
    stream = stream if stream is not None else sys.stdout
    tolerate_encoding(stream)
    return _Console(file=stream, highlight=False, width=_width(stream), record=record)


class _Console(Console):
    """A console whose closed output (``| head -1``) is the BrokenPipeError the CLI's guard turns into
    the run's own exit code; rich's own handling exits 1 (SystemExit) whatever the run did."""

    @property
    def encoding(self) -> str:
        """rich draws ASCII borders for any codec whose name is not utf-*; a stream that can encode
        what is printed (GB18030) gets the real ones."""
        return "utf-8" if unicode_stream(self.file) else super().encoding

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(32, "Broken pipe")


def screen_rows(stream: IO[str] | Any) -> int:
    """How many table rows fit a screen: the terminal's height (LINES when set), FILE_ROWS when
    the output is not a terminal."""
    if not is_terminal(stream):
        return FILE_ROWS
    lines = _positive(os.environ.get("LINES"))
    if lines is None:
        try:
            lines = os.get_terminal_size(stream.fileno()).lines or None
        except (AttributeError, ValueError, OSError):
            lines = None
    return max(lines or FILE_ROWS, MIN_ROWS)


class AsciiSafe:
    """A renderable shown on a stream that cannot encode every character (PYTHONIOENCODING=ascii):
    each character it cannot show becomes ``?`` once per cell it takes, so columns stay aligned."""

    def __init__(self, renderable: Any) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not options.ascii_only:
            yield self.renderable
            return
        for segment in console.render(self.renderable, options):
            text = segment.text
            if text.isascii() or segment.control:
                yield segment
            else:
                yield Segment(_ascii(text), segment.style)


def _ascii(text: str) -> str:
    return "".join(c if c.isascii() else "?" * max(cell_len(c), 1) for c in text)
