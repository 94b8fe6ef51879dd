"""A table drawn straight into segments: linear in its rows (50,000 rows in a fraction of a second,
where a rich Table measures and wraps every cell), with columns that are never cut, cut in the
middle, or wrapped."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from rich import box as boxes
from rich.cells import cell_len, get_character_cell_size
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from placement_cli.messages import one_line
from placement_cli.render.wrap import NO_LINE_START

KEEP = "keep"  # never cut (devices, statuses, counts): the row overflows the screen instead
MIDDLE = "middle"  # cut in the middle, keeping the distinguishing tail of a node name
WRAP = "wrap"  # wrapped onto more lines (reasons)


@dataclass(frozen=True)
class Column:
    header: str
    fit: str = KEEP
    min_width: int = 0
    justify: str = "left"
    style: Callable[[str], str | None] | None = None  # the style of a cell, from its text (None: none)
    quiet: str | None = None  # a value not worth a field of its own in the stacked layout ("1" time)


def _is_ascii_width(text: str) -> bool:
    return text.isascii() and text.isprintable()


def _head(text: str, cells: int) -> str:
    if _is_ascii_width(text):
        return text[:cells]
    used = 0
    for i, char in enumerate(text):
        used += get_character_cell_size(char)
        if used > cells:
            return text[:i]
    return text


def _tail(text: str, cells: int) -> str:
    if cells <= 0:
        return ""
    if _is_ascii_width(text):
        return text[-cells:]
    used = 0
    for i in range(len(text) - 1, -1, -1):
        used += get_character_cell_size(text[i])
        if used > cells:
            return text[i + 1:]
    return text


def cut_middle(text: str, width: int, ellipsis: str = "…") -> str:
    """``text`` in at most ``width`` cells, its middle replaced by ``ellipsis``: the start and, at a
    ``/`` where possible, the longer end survive (``tower_1/gradients/…/MatMul_grad/MatMul_1``)."""
    if cell_len(text) <= width:
        return text
    budget = width - cell_len(ellipsis)
    if budget < 2:
        return _tail(text, width)
    tail = _tail(text, budget - budget // 3)
    slash = tail.find("/")
    if 0 < slash <= len(tail) // 4:
        tail = tail[slash:]  # start the tail at a scope boundary when that costs little
    head = _head(text, budget - cell_len(tail))
    slash = head.rfind("/")
    if slash >= 0 and slash >= len(head) * 2 // 3:
        head = head[: slash + 1]  # end the head at a scope boundary when that costs little
    return f"{head}{ellipsis}{tail}"


def fit_widths(natural: Sequence[int], columns: Sequence[Column], max_width: int, overhead: int) -> list[int]:
    """Column widths for a table at most ``max_width`` wide (``overhead``: the cells its borders and
    gaps take): only MIDDLE and WRAP columns give way, the widest first (water-filling) and none below
    its minimum; KEEP columns never do."""
    widths = list(natural)
    excess = sum(widths) + overhead - max_width
    shrink = [i for i, c in enumerate(columns) if c.fit != KEEP]
    if excess <= 0 or not shrink:
        return widths
    floor = {i: min(natural[i], max(columns[i].min_width, cell_len(columns[i].header))) for i in shrink}

    def level_width(i: int, level: int) -> int:
        return max(floor[i], min(natural[i], level))

    def saved(level: int) -> int:
        return sum(natural[i] - level_width(i, level) for i in shrink)

    low, high = 0, max(natural[i] for i in shrink)
    while low < high:  # the highest level that still saves enough
        mid = (low + high + 1) // 2
        if saved(mid) >= excess:
            low = mid
        else:
            high = mid - 1
    for i in shrink:
        widths[i] = level_width(i, low)
    surplus = saved(low) - excess
    for i in shrink:  # hand back what the level saved beyond the excess
        if surplus <= 0:
            break
        if widths[i] == low and widths[i] < natural[i]:
            widths[i] += 1
            surplus -= 1
    return widths


def _cut_column(cells: list[str], width: int, ellipsis: str) -> list[str]:
    """Every cell of a MIDDLE column cut to ``width``. Names that the usual cut would show alike are
    cut elsewhere, at the split of head and tail that tells them apart, when one does."""
    cut = [cut_middle(c, width, ellipsis) if cell_len(c) > width else c for c in cells]
    groups: dict[str, set[str]] = {}
    for full, shown in zip(cells, cut):
        groups.setdefault(shown, set()).add(full)
    better: dict[str, str] = {}
    budget = width - cell_len(ellipsis)
    for names in groups.values():
        if len(names) > 1 and budget > 1:
            better.update(_distinct_cuts(sorted(names), budget, ellipsis))
    return [better.get(full, shown) for full, shown in zip(cells, cut)] if better else cut


def _distinct_cuts(names: list[str], budget: int, ellipsis: str) -> dict[str, str]:
    """One split of head and tail (the nearest to a third of head) that cuts every name differently."""
    splits = sorted(range(budget + 1), key=lambda h: abs(h - budget // 3))
    for head in splits:
        cuts = {n: _head(n, head) + ellipsis + _tail(n, budget - head) if cell_len(n) > budget + 1 else n
                for n in names}
        if len(set(cuts.values())) == len(names):
            return cuts
    return {}


def _wrap(text: str, width: int, ellipsis: str = "…") -> list[str]:
    """Words onto lines of at most ``width`` cells; a word longer than a line (a node name in a list
    of examples) is cut in the middle rather than broken across lines."""
    if cell_len(text) <= width:
        return [text]
    words = [w if cell_len(w) <= width or not w.isascii() else cut_middle(w, width, ellipsis)
             for w in text.split(" ")]
    if text.isascii():
        lines = textwrap.wrap(" ".join(words), width, break_long_words=False, break_on_hyphens=False) or [""]
    else:
        lines = _wrap_cells(words, width)
    return [line if cell_len(line) <= width else _head(line, width) for line in lines]


def _wrap_cells(words: list[str], width: int) -> list[str]:
    """Words onto lines by their width in cells (textwrap counts characters): Chinese text, which
    has no spaces, breaks between any two wide characters; ASCII runs inside it stay whole."""
    tokens: list[str] = []
    for i, word in enumerate(words):
        if i:
            tokens.append(" ")
        tokens += re.findall(r"[\x00-\x7f]+|.", word)
    lines: list[str] = []
    line: list[str] = []
    for token in tokens:
        if line and cell_len("".join(line) + token) > width:
            carry = []
            if token[0] in NO_LINE_START and len(line) > 1:  # "）" or "，" never starts a line
                carry = [line.pop()]
            lines.append("".join(line).rstrip())
            line = [] if token == " " and not carry else [*carry, token]  # noqa: S105 - a word, not a secret
        else:
            line.append(token)
    last = "".join(line).rstrip()
    return [*lines, last] if last.strip() else lines or [""]


@dataclass(frozen=True)
class _Frame:
    """How cells are joined into lines: a box around padded cells, or plain gaps (narrower)."""

    left: str
    gap: str
    right: str
    padding: int  # spaces each side of a cell

    def overhead(self, columns: int) -> int:
        return cell_len(self.left) + cell_len(self.right) + cell_len(self.gap) * (columns - 1) + 2 * self.padding * columns


@dataclass
class RowTable:
    """A titled table of text cells with horizontal rules between sections. ``fit``: give way to the
    console's width (a terminal); otherwise every cell is shown whole and lines may be longer."""

    title: str | None
    columns: list[Column]
    rows: list[tuple[str, ...]] = field(default_factory=list)
    sections: set[int] = field(default_factory=set)  # indices of rows that start a new section
    caption: str | None = None
    fit: bool = True

    def add_row(self, *cells: str, new_section: bool = False) -> None:
        joined = "".join(cells)
        if "\n" in joined or "\t" in joined:  # a name holding a line break or a tab: a row is one line
            cells = tuple(map(one_line, cells))
        if new_section and self.rows:
            self.sections.add(len(self.rows))
        self.rows.append(cells)

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def natural_widths(self) -> list[int]:
        widths = [cell_len(c.header) for c in self.columns]
        for i in range(len(self.columns)):
            seen: set[str] = set()
            for row in self.rows:
                text = row[i]
                if text not in seen:
                    seen.add(text)
                    if len(text) > widths[i] or not _is_ascii_width(text):
                        widths[i] = max(widths[i], cell_len(text))
        return widths

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        natural = self.natural_widths()
        n = len(natural)
        full = sum(natural) + _boxed(boxes.HEAVY_HEAD).overhead(n)
        inline = [i for i, c in enumerate(self.columns) if c.fit != WRAP]
        compact = _compact(boxes.HEAVY_HEAD).overhead(len(inline))
        least = sum(fit_widths([natural[i] for i in inline], [self.columns[i] for i in inline], 0, compact)) + compact
        return Measurement(min(least, full), full)

    def _layout(self, natural: list[int], max_width: int, box: boxes.Box) -> tuple[_Frame, list[int], list[int]] | None:
        """A layout that fits: boxed; boxed with the wrapped columns (reasons) on lines of their own
        under each row; the same without the box. The first that cuts no name, else the one that leaves
        names the most room. None: none fits (then each row is a block of lines)."""
        everything = list(range(len(self.columns)))
        inline = [i for i in everything if self.columns[i].fit != WRAP]
        notes = len(inline) < len(everything) and any(self.columns[i].fit == MIDDLE for i in inline)
        tries = [(_boxed(box), everything)] + ([(_boxed(box), inline)] if notes else []) + \
            [(_compact(box), everything)] + ([(_compact(box), inline)] if notes else [])
        best: tuple[int, tuple[_Frame, list[int], list[int]]] | None = None
        for frame, shown in tries:
            columns = [self.columns[i] for i in shown]
            overhead = frame.overhead(len(shown))
            widths = fit_widths([natural[i] for i in shown], columns, max_width, overhead)
            if sum(widths) + overhead > max_width:
                continue
            if all(w == natural[i] for w, i in zip(widths, shown)):
                return frame, shown, widths
            room = sum(w for w, c in zip(widths, columns) if c.fit == MIDDLE)
            if best is None or room > best[0]:
                best = (room, (frame, shown, widths))
        return best[1] if best else None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        ellipsis = "~" if options.ascii_only else "…"
        box = boxes.HEAVY_HEAD.substitute(options)
        natural = self.natural_widths()
        frame, shown, widths = _boxed(box), list(range(len(self.columns))), natural
        if self.fit:
            layout = self._layout(natural, options.max_width, box)
            if layout is None:
                yield from self._stacked(console, options)
                return
            frame, shown, widths = layout
        columns = [self.columns[i] for i in shown]
        notes = [i for i, c in enumerate(self.columns) if i not in shown]  # WRAP columns under each row
        n = len(shown)
        cells = [[row[i] for row in self.rows] for i in shown]
        wrapped: dict[int, list[list[str]]] = {}
        for k, column in enumerate(columns):
            if widths[k] < natural[shown[k]]:
                if column.fit == MIDDLE:
                    cells[k] = _cut_column(cells[k], widths[k], ellipsis)
                elif column.fit == WRAP:
                    wrapped[k] = [_wrap(c, widths[k], ellipsis) for c in cells[k]]
        plain = console.color_system is None or console.no_color
        if self.title:
            yield Text(self.title, style="" if plain else "italic")
        boxed = frame.padding > 0
        padded = [w + 2 for w in widths]
        if boxed:
            yield Segment(box.get_top(padded) + "\n")
        header = [_pad(c.header, w, c.justify) for c, w in zip(columns, widths)]
        bold = None if plain else console.get_style("bold")
        yield from _line(_Frame(box.head_left, box.head_vertical, box.head_right, 1) if boxed else frame,
                         header, [bold] * n)
        head_rule = box.get_row(padded, "head") if boxed else "  ".join(box.head_row_horizontal * w for w in widths)
        yield Segment(head_rule + "\n")
        rule = (box.get_row(padded, "row") if boxed else "  ".join(box.row_horizontal * w for w in widths)) + "\n"
        inner = sum(widths) + frame.overhead(n) - cell_len(frame.left) - cell_len(frame.right)  # between the edges
        note_width = max(inner - 2 * frame.padding - 2, 8)
        styles_of = [None if plain else column.style for column in columns]
        parsed: dict[str | None, Style | None] = {}
        pad = " " * frame.padding
        left, gap, right = frame.left + pad, pad + frame.gap + pad, pad + frame.right + "\n"
        for r in range(len(self.rows)):
            if r in self.sections:
                yield Segment(rule)
            texts = [cells[k][r] for k in range(n)]
            lines = 1 + max((len(wrapped[k][r]) - 1 for k in wrapped), default=0)
            for line in range(lines):
                row = []
                for k, column in enumerate(columns):
                    if k in wrapped:
                        parts = wrapped[k][r]
                        text = parts[line] if line < len(parts) else ""
                    else:
                        text = texts[k] if line == 0 else ""
                    row.append(_pad(text, widths[k], column.justify))
                if plain:
                    yield Segment(left + gap.join(row) + right)
                    continue
                styles = []
                for k, style_of in enumerate(styles_of):
                    name = style_of(texts[k]) if style_of and texts[k] else ""
                    if name not in parsed:
                        parsed[name] = console.get_style(name) if name else None
                    styles.append(parsed[name])
                yield from _line(frame, row, styles)
            for i in notes:
                if self.rows[r][i]:
                    for text in _wrap(f"{self.columns[i].header}: {self.rows[r][i]}", note_width, ellipsis):
                        if frame.right:
                            yield Segment(left + _pad("  " + text, inner - 2 * frame.padding, "left") + right)
                        else:
                            yield Segment(f"{left}  {text}\n")
        if boxed:
            yield Segment(box.get_bottom(padded) + "\n")
        if self.caption:
            yield Text(self.caption, style="" if plain else "dim")

    def _stacked(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """Too narrow for the columns (COLUMNS=40): each row as a block, its first cut-in-the-middle
        column on a line of its own, then the other columns as ``header value`` fields, never cut."""
        width = options.max_width
        ellipsis = "~" if options.ascii_only else "…"
        plain = console.color_system is None or console.no_color
        bold = None if plain else console.get_style("bold")
        if self.title:
            yield Text(self.title, style="" if plain else "italic")
        lead = next((i for i, c in enumerate(self.columns) if c.fit == MIDDLE), 0)
        leads = [row[lead] for row in self.rows]
        heads = [_wrap(t, width, ellipsis) for t in leads] if self.columns[lead].fit == WRAP else \
            [[t] for t in _cut_column(leads, width, ellipsis)]
        rule = ("-" if options.ascii_only else "\u2500") * width
        for r, row in enumerate(self.rows):
            if r in self.sections:
                yield Segment(rule + "\n")
            for text in heads[r]:  # the row's name, then its fields indented under it
                yield Segment(text, bold)
                yield Segment("\n")
            fields = [f"{c.header} {row[i]}" for i, c in enumerate(self.columns)
                      if i != lead and c.fit != WRAP and row[i] and row[i] != c.quiet]
            line = " "
            for item in fields:
                if cell_len(line) > 1 and cell_len(line) + 2 + cell_len(item) > width:
                    yield Segment(line + "\n")
                    line = " "
                line += (", " if cell_len(line) > 1 else " ") + item
            yield Segment(line + "\n")
            for i, column in enumerate(self.columns):
                if column.fit == WRAP and row[i] and i != lead:
                    for text in _wrap(f"{column.header}: {row[i]}", max(width - 2, 1), ellipsis):
                        yield Segment(f"  {text}\n")
        if self.caption:
            yield Text(self.caption, style="" if plain else "dim")


def _boxed(box: boxes.Box) -> _Frame:
    return _Frame(box.mid_left, box.mid_vertical, box.mid_right, 1)


def _compact(box: boxes.Box) -> _Frame:
    return _Frame("", "  ", "", 0)


def _pad(text: str, width: int, justify: str) -> str:
    gap = width - (len(text) if _is_ascii_width(text) else cell_len(text))
    return f"{' ' * gap}{text}" if justify == "right" else f"{text}{' ' * gap}"


def _line(frame: _Frame, cells: list[str], styles: list[Style | None]) -> Iterator[Segment]:
    pad = " " * frame.padding
    yield Segment(frame.left + pad)
    for i, (cell, style) in enumerate(zip(cells, styles)):
        if i:
            yield Segment(pad + frame.gap + pad)
        yield Segment(cell, style) if style else Segment(cell)
    yield Segment(pad + frame.right + "\n")
