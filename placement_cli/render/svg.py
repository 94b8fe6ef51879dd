"""The tables as an SVG for slides: rich's export (public API only), redrawn in fonts every machine has
and with every run of text as wide as the cells it takes.

rich's ``export_svg`` gives each ``<text>`` a ``textLength`` of (characters x cell width): a Chinese
word or an emoji, two cells per character, is squeezed into half its cells and every border after it
drifts. Here each run is split where the character width changes (one cell, two cells) and each part
gets its own ``x`` and ``textLength`` = cells x cell width, so every glyph stays on rich's grid."""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING

from rich.cells import cell_len

if TYPE_CHECKING:
    from rich.console import Console

# Monospace fonts found offline on Linux, macOS and Windows, then ones with CJK glyphs (tables may be in
# Chinese), then the generic family. Wide characters take two cells in rich's layout, as in these fonts.
FONT_STACK = ('"DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, "Courier New", '
              '"Noto Sans Mono CJK SC", "Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Zen Hei Mono", '
              '"PingFang SC", "Microsoft YaHei", monospace')

_STYLE = re.compile(r"(<style\b[^>]*>)(.*?)(</style>)", re.DOTALL | re.IGNORECASE)
_FONT_FACE = re.compile(r"@font-face\s*\{[^{}]*\}", re.IGNORECASE)
_FONT_FAMILY = re.compile(r"(font-family\s*:)[^;}]*", re.IGNORECASE)
_TEXT = re.compile(r"<text\b([^>]*)>([^<]*)</text>")
_ATTR = re.compile(r'\s(x|textLength)="([^"]*)"')
# rich's clips: the whole terminal, and each line but the last (whose runs name a clip never defined)
_TERMINAL_CLIP = re.compile(r'(<clipPath id="([^"]+)-clip-terminal">\s*<rect\b[^>]*?\bheight=")([0-9.]+)(")')
_LINE_CLIP = re.compile(r'<clipPath id="([^"]+)-line-(\d+)">\s*<rect\b[^>]*?\by="([0-9.]+)"[^>]*?\bheight="([0-9.]+)"')
_LINE_USE = re.compile(r'url\(#([^)"]+)-line-(\d+)\)')
_LINE_HEIGHT = re.compile(r"line-height:\s*([0-9.]+)px")
_FONT_SIZE = re.compile(r"font-size:\s*([0-9.]+)px")


def render_svg(console: Console, title: str) -> str:
    """What ``console`` recorded (it must be made with ``record=True``), as SVG text; the recording is kept.
    The canvas is as wide as the widest line printed: output that is not a terminal keeps whole names
    past the console's width, and rich would crop the picture at that width."""
    recorded = console.export_text(clear=False, styles=False)
    widest = max((cell_len(line) for line in recorded.split("\n")), default=0)
    width = console.width
    console.width = max(width, widest)
    try:
        return unclip_last_line(fit_cells(offline(console.export_svg(title=title, clear=False))))
    finally:
        console.width = width


def offline(svg: str) -> str:
    """``svg`` without web fonts: its ``@font-face`` rules gone, every font-family FONT_STACK."""
    def restyle(match: re.Match[str]) -> str:
        css = _FONT_FACE.sub("", match.group(2))
        css = _FONT_FAMILY.sub(lambda m: f"{m.group(1)} {FONT_STACK}", css)
        return match.group(1) + css + match.group(3)

    return _STYLE.sub(restyle, svg)


def unclip_last_line(svg: str) -> str:
    """rich clips the terminal just under the last line's baseline (the underscores of
    ``TF_ENABLE_ONEDNN_OPTS=0``, the descenders of g and y were cut off) and gives that line a clip
    it never defines: the last line gets its clip, as tall as every other line's, and the terminal's
    clip reaches below it by as much as a line's glyphs go below their baseline."""
    line_height = _LINE_HEIGHT.search(svg)
    font_size = _FONT_SIZE.search(svg)
    terminal = _TERMINAL_CLIP.search(svg)
    if not (line_height and font_size and terminal):  # not the export this was written against: as it is
        return svg
    step, size = float(line_height.group(1)), float(font_size.group(1))
    uid = terminal.group(2)
    defined = {int(m.group(2)): m for m in _LINE_CLIP.finditer(svg) if m.group(1) == uid}
    used = sorted({int(m.group(2)) for m in _LINE_USE.finditer(svg) if m.group(1) == uid})
    missing = [n for n in used if n not in defined]
    width = re.search(r'\bwidth="([0-9.]+)"', terminal.group(0))
    clips = "".join(f'<clipPath id="{uid}-line-{n}"><rect x="0" y="{_number(n * step + 1.5)}" '
                    f'width="{width.group(1) if width else "100%"}" height="{_number(step + 0.25)}"/></clipPath>'
                    for n in missing)
    last = max(used, default=0)
    # the lowest a glyph of the last line reaches: its baseline (rich's: line x step + font size),
    # then a quarter of the font size (an underscore, a descender), under the line's own clip
    bottom = max(float(terminal.group(3)), last * step + 1.5 + step + 0.25, last * step + size * 1.25)
    svg = svg[:terminal.start(3)] + _number(bottom) + svg[terminal.end(3):]
    return svg.replace("</defs>", clips + "</defs>", 1) if clips else svg


def fit_cells(svg: str) -> str:
    """Every ``<text>`` with a ``textLength`` split where its characters change width, each part placed
    on its cells and as long as they are. The cell width is the one rich gives its ASCII runs (one cell a
    character); a rich that already measures in cells is left as it is."""
    widths: dict[float, int] = {}
    for match in _TEXT.finditer(svg):
        found, text = dict(_ATTR.findall(match.group(1))), html.unescape(match.group(2))
        if "textLength" in found and text and text.isascii():
            width = round(float(found["textLength"]) / len(text), 6)
            widths[width] = widths.get(width, 0) + 1
    cell = max(widths, key=widths.__getitem__) if widths else None
    return _TEXT.sub(lambda match: _fit(match, cell), svg)


def _fit(match: re.Match[str], cell: float | None) -> str:
    attrs, body = match.group(1), match.group(2)
    found = dict(_ATTR.findall(attrs))
    text = html.unescape(body)
    if "textLength" not in found or "x" not in found or not text:
        return match.group(0)
    try:
        cell = cell or float(found["textLength"]) / len(text)  # no ASCII run: rich's one cell a character
        x = float(found["x"])
    except ValueError:
        return match.group(0)
    parts = []
    for run in _runs(text):
        cells = cell_len(run)
        place = {"x": x, "textLength": cells * cell}
        placed = _ATTR.sub(lambda m: f' {m.group(1)}="{_number(place[m.group(1)])}"', attrs)  # noqa: B023
        if not cells:  # only zero-width characters (rich's own segment): drawn as they are, at x
            placed = re.sub(r'\stextLength="[^"]*"', "", placed)
        parts.append(f"<text{placed}>{_escape(run)}</text>")
        x += cells * cell
    return "".join(parts)


def _runs(text: str) -> list[str]:
    """``text`` cut where the cell width of its characters changes; a zero-width character (a combining
    mark) stays with the character before it (the first with the one after)."""
    runs: list[str] = []
    last = None
    for char in text:
        width = cell_len(char)
        if runs and (width == 0 or width == last):
            runs[-1] += char
        elif runs and last == 0:  # the run so far is only zero-width characters
            runs[-1] += char
            last = width
        else:
            runs.append(char)
            last = width
    return runs


def _escape(text: str) -> str:
    # as rich escapes it: markup characters as entities, spaces as no-break spaces (SVG collapses spaces)
    return html.escape(text, quote=False).replace(" ", "&#160;").replace("\xa0", "&#160;")


def _number(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".")
