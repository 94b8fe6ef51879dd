"""The tables as an SVG for slides: rich's export, with fonts every machine has instead of a web font."""

from __future__ import annotations

import re
from typing import Any

from rich._export_format import CONSOLE_SVG_FORMAT

# Monospace fonts found offline on Linux, macOS and Windows, then ones with CJK glyphs (tables may be in
# Chinese), then the generic family. Wide characters take two cells in rich's layout, as in these fonts.
FONT_STACK = ('"DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, "Courier New", '
              '"Noto Sans Mono CJK SC", "Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Zen Hei Mono", '
              '"PingFang SC", "Microsoft YaHei", monospace')

_FONT_FACE = re.compile(r"\s*@font-face\s*\{\{.*?\}\}", re.S)
_MATRIX_FONT = re.compile(r"(-matrix \{\{\s*font-family:)[^;]*;")
_TITLE_FONT = re.compile(r"(-title \{\{.*?font-family:)[^;]*;", re.S)
_URL = re.compile(r"url\(\s*[\"']?https?:", re.I)


def offline_format(template: str = CONSOLE_SVG_FORMAT) -> str:
    """rich's SVG template without its web-font ``@font-face`` rules, drawing in FONT_STACK."""
    found = _FONT_FACE.sub("", template)
    found = _MATRIX_FONT.sub(lambda m: f"{m.group(1)} {FONT_STACK};", found)
    found = _TITLE_FONT.sub(lambda m: f"{m.group(1)} {FONT_STACK};", found)
    if _URL.search(found):  # a rich whose template this no longer matches: refuse rather than link the web
        raise RuntimeError("rich's SVG template changed: it still links a web font")
    return found


def render_svg(console: Any, title: str) -> str:
    """What ``console`` recorded (it must be made with ``record=True``), as SVG text; the recording is kept.
    The canvas is as wide as the widest line printed: output that is not a terminal keeps whole names
    past the console's width, and rich would crop the picture at that width."""
    from rich.segment import Segment  # noqa: PLC0415

    with console._record_buffer_lock:  # noqa: SLF001 - rich keeps the recording there, and exports it
        lines = list(Segment.split_lines(console._record_buffer))  # noqa: SLF001
    widest = max((Segment.get_line_length(line) for line in lines), default=0)
    width = console.width
    console.width = max(width, widest)
    try:
        return console.export_svg(title=title, code_format=offline_format(), clear=False)
    finally:
        console.width = width
