"""The console commands print to: a width that is never zero, characters the stream can encode."""

from __future__ import annotations

import codecs
import os
import sys
from typing import IO, Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment

from placement_cli.messages import LONE_SURROGATE

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


# The characters rich draws the reports' frames with: tables (HEAVY_HEAD), panels (ROUNDED), rules and
# the ellipsis of a cut name. A stream that encodes them gets them; any other gets rich's ASCII frames.
FRAMES = "".join(sorted(set(str(box.HEAVY_HEAD) + str(box.ROUNDED) + "─…") - {"\n", " "}))
# A code point of every kind: a codec that encodes these encodes any text (UTF-8/16/32, GB18030).
_EVERY_KIND = "\ufffd\U0001f600\u0e01\u05d0\u00e9\u4e2d\uac00"


def _encodes(stream: IO[str] | Any, text: str) -> bool:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(codecs.lookup(encoding).name)
    except (LookupError, UnicodeError):
        return False
    return True


def unicode_stream(stream: IO[str] | Any) -> bool:
    """True when the stream's encoding encodes any text (UTF-8, UTF-16, GB18030): JSON may be written
    as it is and nothing needs replacing. Decided by encoding, not by the codec's name."""
    return _encodes(stream, _EVERY_KIND)


def draws_frames(stream: IO[str] | Any) -> bool:
    """True when the stream encodes the box drawing of the reports' frames (UTF-8, GBK, GB18030)."""
    return _encodes(stream, FRAMES)


def shows(stream: IO[str] | Any, text: str) -> bool:
    """True when the stream encodes every character of ``text`` (a language's catalogue: Chinese on GBK)."""
    return _encodes(stream, text)


def tolerate_encoding(stream: IO[str] | Any) -> None:
    """On a stream that cannot encode every character (PYTHONIOENCODING=ascii, a legacy code page such
    as GBK or Big5 meeting an emoji in a node name), replace what it cannot encode instead of raising
    UnicodeEncodeError mid-report."""
    if unicode_stream(stream):
        return
    try:
        stream.reconfigure(errors="replace")  # type: ignore[union-attr]  # AttributeError: caught
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
    return _Console(file=stream, highlight=False, emoji=False, width=_width(stream), record=record)


class _Console(Console):
    """A console whose closed output (``| head -1``) is the BrokenPipeError the CLI's guard turns into
    the run's own exit code; rich's own handling exits 1 (SystemExit) whatever the run did."""

    @property
    def encoding(self) -> str:
        """rich draws ASCII borders for any codec whose name is not utf-*; a stream that can encode
        the frames (GBK, GB18030) gets the real ones."""
        return "utf-8" if draws_frames(self.file) else super().encoding

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
    """A renderable shown on a stream that cannot encode every character (PYTHONIOENCODING=ascii, GBK
    meeting an emoji): each character it cannot show becomes ``?`` once per cell it takes, so columns
    stay aligned (the stream's own replacement would give one ``?`` for two cells). A lone surrogate (a
    saved report's name may hold one), which no stream encodes, is shown as U+FFFD on a Unicode stream."""

    def __init__(self, renderable: Any) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        unicode = unicode_stream(console.file)
        encoding = getattr(console.file, "encoding", None) or "ascii"
        for segment in console.render(self.renderable, options):
            text = segment.text
            if text.isascii() or segment.control:
                yield segment
            elif unicode:
                yield segment if LONE_SURROGATE.search(text) is None else \
                    Segment(LONE_SURROGATE.sub("\ufffd", text), segment.style)
            else:
                yield Segment(_replaced(text, encoding), segment.style)


def _replaced(text: str, encoding: str) -> str:
    """``text`` with each character ``encoding`` lacks as ``?`` once per cell it takes."""
    try:
        text.encode(encoding)
        return text
    except (LookupError, UnicodeError):
        return "".join(c if c.isascii() or _encodes_char(c, encoding) else "?" * max(cell_len(c), 1) for c in text)


def _encodes_char(char: str, encoding: str) -> bool:
    try:
        char.encode(encoding)
    except (LookupError, UnicodeError):
        return False
    return True
