"""The graph that ran, coloured by the device each node was placed on: Graphviz DOT text, and an SVG
that needs nothing installed (one lane per device, nodes by depth). Renderers return text.

Nodes are the placements the tables show (TensorFlow's plumbing, _Arg/_Retval, the single-op
functions eager ops are wrapped in and the input/output nodes TensorFlow adds where it inlines a
function, is left out, and the picture says how many). Edges are the recorded graphs' producer ->
consumer edges between those nodes; an edge whose ends sit on different devices is a copy, labelled
with its bytes per step when --copies measured them. A function TensorFlow inlined into its caller is
logged under the call's name (``StatefulPartitionedCall/mul``, a lowered branch ``cond/then/_0/mul``)
while its recorded graph names the node ``mul``: its edges are drawn under each such call.
"""

from __future__ import annotations

import colorsys
import html
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len, set_cell_size

from placement_cli.devices import short_name, try_parse
from placement_cli.i18n import _, shown
from placement_cli.model import Report
from placement_cli.render.text import clean

# One colour per device, in the order devices sort; distinct on white, readable under black text.
PALETTE = ("#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69", "#fccde5", "#ffed6f",
           "#bc80bd", "#ccebc5", "#d9d9d9", "#e5c494")
CROSSING = "#c0392b"  # edges between devices
# Where TensorFlow inlined a function body, the scope its nodes are logged under: a call node
# (``StatefulPartitionedCall``, ``model/PartitionedCall_2``) or a lowered tf.cond/tf.while_loop
# branch (``cond/then/_0``, ``while/body/_9``).
_INLINED_SCOPE = re.compile(r"(?:^|/)(?:(?:Stateful)?PartitionedCall(?:_\d+)?|(?:then|else|body|cond)/_\d+)$")
# The nodes the inliner adds in place of the body's _Arg/_Retval (Func/<call>/input/_0, ...): plumbing.
_INLINED_PLUMBING = re.compile(r"Func/.+/(?:input|output|input_control_node|output_control_node)/_\d+")


@dataclass(frozen=True)
class Node:
    name: str
    op: str
    device: str  # canonical
    depth: int


@dataclass(frozen=True)
class Link:
    source: str
    target: str
    control: bool
    crossing: bool
    bytes: int | None  # per step, when --copies measured the copy
    shared: bool = False  # another edge already carries this tensor's one copy to the same device
    physical: bool | None = None  # False: between logical devices sharing one memory (nothing really copied)


@dataclass(frozen=True)
class Picture:
    """What both pictures draw."""

    title: str
    devices: tuple[str, ...]
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    hidden: int  # plumbing placements left out
    unnamed: int  # eager ops: placed one by one, in no graph, so in no picture
    edges_known: bool  # False: the run kept no graph edges (a parsed log, an eager op)

    def colour(self, device: str) -> str:
        return colour_of(self.devices, device)

    @staticmethod
    def short(device: str) -> str:
        """CPU:1 for a local device, ps/0 CPU:0 for a remote one, an unreadable name as it is."""

        return short_name(device)


def colour_of(devices: tuple[str, ...], device: str) -> str:
    """A device's colour among ``devices`` (in device_order): every picture colours a device alike."""
    index = devices.index(device)
    if len(devices) <= len(PALETTE):
        return PALETTE[index]
    # more devices than the palette has colours: hues spread evenly, light enough for black text
    red, green, blue = colorsys.hls_to_rgb(index / len(devices), 0.78, 0.6)
    return f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"


def picture(report: Report) -> Picture:
    """The nodes, their devices and depths, and the edges between them."""
    nodes: dict[str, tuple[str, str]] = {}
    hidden = unnamed = 0
    for p in report.placements:
        if not p.node:
            unnamed += 1
            continue
        if p.plumbing or _INLINED_PLUMBING.fullmatch(p.node):
            hidden += 1
            continue
        nodes.setdefault(p.node, (p.op or "?", p.canonical))
    sizes, virtual = _measured_copies(report)
    links: dict[tuple[str, str], Link] = {}
    scopes = _inlined_scopes(nodes)
    for e in sorted(report.edges or (), key=lambda e: (e.source, e.target, e.control)):
        ends = [(e.source, e.target)] if e.source in nodes and e.target in nodes else []
        ends += [(_inlined(scope, e.source), _inlined(scope, e.target))
                 for scope in sorted(scopes.get(e.source, set()) & scopes.get(e.target, set()))]
        for source, target in ends:
            if source == target:
                continue
            crossing = nodes[source][1] != nodes[target][1]
            key = (source, target)
            if key not in links or (links[key].control and not e.control):
                size = sizes.get((source, nodes[target][1])) if crossing and not e.control else None
                same = crossing and not e.control and (source, nodes[target][1]) in virtual
                links[key] = Link(source, target, e.control, crossing, size, physical=False if same else None)
    # one tensor crosses to one device once a step, however many nodes there read it: its bytes are
    # drawn on one edge, the others say they share that copy
    carried: set[tuple[str, str]] = set()
    for key, link in list(links.items()):
        if link.bytes is not None:
            where = (link.source, nodes[link.target][1])
            if where in carried:
                links[key] = Link(link.source, link.target, link.control, link.crossing, None, shared=True,
                                  physical=link.physical)
            carried.add(where)
    depth = depths(list(nodes), [(link.source, link.target) for link in links.values()])
    devices = tuple(sorted({where[1] for where in nodes.values()}, key=device_order))
    return Picture(title=shown(report.title) or "placement", devices=devices,
                   nodes=tuple(Node(n, op, device, depth[n]) for n, (op, device) in nodes.items()),
                   links=tuple(links.values()), hidden=hidden, unnamed=unnamed,
                   edges_known=report.edges is not None)


def _inlined_scopes(nodes: dict[str, tuple[str, str]]) -> dict[str, set[str]]:
    """A function body's own node name -> the scopes it was inlined under, by the drawn nodes' names
    (``StatefulPartitionedCall/a/mul``: ``a/mul`` under ``StatefulPartitionedCall``); nested calls
    give a node one scope per call. A cluster's picture names nodes ``TASK: node`` (edges too): the
    task stays on both sides (``worker/0: a/mul`` under ``worker/0: StatefulPartitionedCall``)."""
    scopes: dict[str, set[str]] = defaultdict(set)
    for name in nodes:
        task, sep, bare = name.rpartition(": ")  # a node name has no ":"; a task label ends with ": "
        parts = bare.split("/")
        for i in range(1, len(parts)):
            scope = "/".join(parts[:i])
            if _INLINED_SCOPE.search(scope):
                scopes[task + sep + "/".join(parts[i:])].add(task + sep + scope)
    return scopes


def _inlined(scope: str, name: str) -> str:
    """``name`` (maybe ``TASK: name``) as logged inside ``scope`` (which holds the same task)."""
    return f"{scope}/{name.rpartition(': ')[2]}"


def device_order(device: str) -> tuple[Any, ...]:
    """Lanes in the order people count devices: by job, replica, task, type, then index as a number
    (CPU:2 before CPU:10); a name that does not parse goes last, by its text."""

    spec = try_parse(device)
    if spec is None:
        return (1, device)
    return (0, spec.job or "", spec.replica or 0, spec.task or 0, spec.device_type or "",
            -1 if spec.device_index is None else spec.device_index, device)


def _measured_copies(report: Report) -> tuple[dict[tuple[str, str], int], set[tuple[str, str]]]:
    """Per (producer node, target device) of the copies --copies measured: bytes per step, and the
    keys of those between logical devices of one memory (nothing really moved)."""
    sizes: dict[tuple[str, str], int] = {}
    same_memory: set[tuple[str, str]] = set()
    for c in report.copies or ():
        if c.computed:
            continue
        target = c.target.spec
        key = (c.producer_node, target.canonical if target else str(c.target))
        if c.bytes is not None:
            sizes[key] = sizes.get(key, 0) + c.bytes
        if c.physical is False:
            same_memory.add(key)
    return sizes, same_memory


def depths(names: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Each node's depth: the longest path to it from a node with no inputs; then each node with no
    inputs moves to just before its first consumer. Nodes on a cycle (a v1 while loop's back edge)
    follow their predecessors already placed, in name order."""
    preds: dict[str, list[str]] = defaultdict(list)
    succs: dict[str, list[str]] = defaultdict(list)
    for a, b in edges:
        preds[b].append(a)
        succs[a].append(b)
    waiting = {n: len(preds[n]) for n in names}
    depth: dict[str, int] = {}
    ready = [n for n in names if waiting[n] == 0]
    while True:
        while ready:
            n = ready.pop()
            depth[n] = max((depth[p] + 1 for p in preds[n] if p in depth), default=0)
            for s in succs[n]:
                waiting[s] -= 1
                if waiting[s] == 0:
                    ready.append(s)
        left = sorted(n for n in names if n not in depth)
        if not left:
            break
        ready.append(left[0])  # break the cycle at the first name left
        waiting[left[0]] = 0
    for n in names:  # a source (a constant, a variable) sits just before its first consumer, not all in column 0
        if not preds[n] and succs[n]:
            depth[n] = max(0, min(depth[s] for s in succs[n]) - 1)
    return depth


def _size(count: int) -> str:
    return f"{count:,} B"


def _label(link: Link) -> str:
    """A crossing edge's label: a data edge is a copy (with its bytes when measured); a control edge
    only orders the two nodes."""
    if link.control:
        return _("control")
    if link.shared:
        return _("same copy")  # its bytes are on the edge that carries the tensor there
    label = _("copy") + ("" if link.bytes is None else f" {_size(link.bytes)}")
    return label + (" " + _("(one memory: nothing moved)") if link.physical is False else "")


# ----------------------------------------------------------------------------------------------- DOT

def dot_string(text: str) -> str:
    """A DOT double-quoted string showing ``text`` literally: backslashes (else \\N, \\G... would
    expand), quotes and newlines escaped, other control characters replaced."""
    text = clean(text).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n") + '"'


def render_dot(report: Report) -> str:
    """Graphviz DOT: one cluster per device, nodes filled with their device's colour, edges between
    devices red and bold, labelled ``copy`` and the bytes when measured."""
    pic = picture(report)
    ids = {n.name: f"n{i}" for i, n in enumerate(pic.nodes)}
    out = ["digraph placement {",
           f"  label={dot_string(pic.title + _note(pic))};",
           '  labelloc="t"; rankdir="LR"; compound=true;',
           '  node [shape="box", style="filled,rounded", fontname="monospace", fontsize=10];',
           '  edge [color="#888888"];']
    for i, device in enumerate(pic.devices):
        colour = pic.colour(device)
        out.append(f"  subgraph cluster_{i} {{")
        out.append(f'    label={dot_string(pic.short(device))}; tooltip={dot_string(device)}; color="{colour}"; penwidth=2;')
        for n in pic.nodes:
            if n.device == device:
                out.append(f'    {ids[n.name]} [label={dot_string(n.name + chr(10) + n.op)}, '
                           f'tooltip={dot_string(n.name)}, fillcolor="{colour}"];')
        out.append("  }")
    for link in pic.links:
        attrs = []
        if link.crossing:
            attrs += [f'color="{CROSSING}"', 'penwidth=2', f"label={dot_string(_label(link))}", f'fontcolor="{CROSSING}"']
        if link.control:
            attrs.append('style="dashed"')
        out.append(f"  {ids[link.source]} -> {ids[link.target]}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    out.append("}")
    return "\n".join(out) + "\n"


def _note(pic: Picture) -> str:
    notes = []
    if pic.hidden:
        notes.append(_("{count} TensorFlow plumbing nodes (_Arg, _Retval, inlined calls' inputs and outputs, "
                       "eager wrappers) not drawn").format(count=pic.hidden))
    if pic.unnamed:
        notes.append(_("{count} eager ops not drawn (they run one by one, outside any graph)").format(
            count=pic.unnamed))
    if not pic.nodes:  # placements left out above are counted there: only say there is no graph node
        notes.append(_("no graph node to draw") if pic.hidden or pic.unnamed else
                     _("nothing was placed: no graph to draw"))
    if not pic.edges_known:
        notes.append(_("edges unknown: this report kept no graph"))
    return "".join("\n" + n for n in notes)


# ------------------------------------------------------------------------------------ lane SVG

NODE_W, NODE_H, COL_GAP, ROW_GAP = 150, 30, 40, 8
LANE_HEAD, LANE_PAD, TOP = 22, 10, 60
LEFT = 10
FONT_SIZE, TITLE_SIZE = 11, 15
# The widest a text's cell may be drawn, in ems: a sans-serif's average glyph is about 0.55 em (bold
# about 0.6); capitals and digits run wider, a wide character (two cells) one em.
EM_PER_CELL, EM_PER_CELL_BOLD = 0.62, 0.68


def render_graph_svg(report: Report) -> str:
    """One horizontal lane per device; a node's column is its depth, nodes of one lane and depth stack
    downwards. Edges inside a lane are thin grey; edges between devices are the copies, red, with bytes."""
    pic = picture(report)
    rows: dict[tuple[str, int], int] = defaultdict(int)
    spot: dict[str, tuple[int, int]] = {}
    for n in sorted(pic.nodes, key=lambda n: (n.depth, n.name)):
        spot[n.name] = (n.depth, rows[(n.device, n.depth)])
        rows[(n.device, n.depth)] += 1
    lane_rows = {d: max([r for (dev, _d), r in rows.items() if dev == d], default=1) for d in pic.devices}
    notes = _note(pic).split("\n")[1:]
    lane_top: dict[str, int] = {}
    y = max(TOP, 48 + 14 * len(notes))  # under the title and its notes
    for d in pic.devices:
        lane_top[d] = y
        y += LANE_HEAD + lane_rows[d] * (NODE_H + ROW_GAP) + LANE_PAD
    columns = max((n.depth for n in pic.nodes), default=0) + 1
    # as wide as its nodes, and as its title, notes and lane names (a short graph must not cut them)
    texts = [text_width(clean(pic.title), TITLE_SIZE, bold=True), *(text_width(n, FONT_SIZE) for n in notes),
             *(text_width(pic.short(d), FONT_SIZE, bold=True) for d in pic.devices)]
    width = max(LEFT * 2 + columns * (NODE_W + COL_GAP), LEFT * 2 + max(texts, default=0))
    height = y + 10
    device_of = {n.name: n.device for n in pic.nodes}

    def box(name: str) -> tuple[int, int]:
        col, row = spot[name]
        return (LEFT + col * (NODE_W + COL_GAP),
                lane_top[device_of[name]] + LANE_HEAD + row * (NODE_H + ROW_GAP))

    e = html.escape
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Liberation Sans, Arial, '
           f'Noto Sans CJK SC, Microsoft YaHei, sans-serif" font-size="{FONT_SIZE}">'),
           f'<title>{e(clean(pic.title))}</title>',
           ('<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#888"/></marker>'
           f'<marker id="copy" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
           f'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{CROSSING}"/></marker></defs>'),
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{LEFT}" y="20" font-size="{TITLE_SIZE}" font-weight="bold">{e(clean(pic.title))}</text>']
    for i, line in enumerate(notes):
        out.append(f'<text x="{LEFT}" y="{38 + 14 * i}" fill="#555">{e(line)}</text>')
    for d in pic.devices:
        top = lane_top[d]
        h = LANE_HEAD + lane_rows[d] * (NODE_H + ROW_GAP)
        out.append(f'<g class="lane" data-device="{e(d)}">'
                   f'<rect x="2" y="{top}" width="{width - 4}" height="{h}" fill="{pic.colour(d)}" '
                   'fill-opacity="0.18" stroke="#999"/>'
                   f'<text x="{LEFT}" y="{top + 15}" font-weight="bold">{e(pic.short(d))}</text>'
                   f'<title>{e(d)}</title></g>')
    for link in sorted(pic.links, key=lambda link: link.crossing):  # copies drawn last, on top
        x1, y1 = box(link.source)
        x2, y2 = box(link.target)
        x1, y1, y2 = x1 + NODE_W, y1 + NODE_H // 2, y2 + NODE_H // 2
        if link.crossing:
            label = _label(link)
            dash = ' stroke-dasharray="4 3"' if link.control else ""
            kind = "control" if link.control else "copy"
            out.append(f'<g class="{kind}" data-from="{e(clean(link.source))}" data-to="{e(clean(link.target))}">'
                       f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{CROSSING}" stroke-width="2"{dash} '
                       'marker-end="url(#copy)"/>'
                       f'<text x="{x1 + (x2 - x1) // 4}" y="{y1 + (y2 - y1) // 4 - 3}" fill="{CROSSING}" '
                       f'text-anchor="middle">{e(label)}</text></g>')
        else:
            dash = ' stroke-dasharray="4 3"' if link.control else ""
            out.append(f'<line class="edge" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#888"{dash} '
                       'marker-end="url(#arrow)"/>')
    for n in pic.nodes:
        x, y = box(n.name)
        short = cut_cells(clean(n.name.rsplit("/", 1)[-1]), 22)  # the whole name is the node's title (hover)
        out.append(f'<g class="node" data-device="{e(n.device)}"><title>{e(clean(n.name))} ({e(clean(n.op))})</title>'
                   f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="5" fill="{pic.colour(n.device)}" '
                   'stroke="#333"/>'
                   f'<text x="{x + 5}" y="{y + 12}">{e(short)}</text>'
                   f'<text x="{x + 5}" y="{y + 25}" fill="#444" font-size="9">{e(cut_cells(clean(n.op), 28))}</text></g>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def text_width(text: str, size: int, *, bold: bool = False) -> int:
    """Pixels ``text`` may take at ``size`` px: an upper bound by its cells, so nothing is cut."""
    return round(cell_len(text) * size * (EM_PER_CELL_BOLD if bold else EM_PER_CELL)) + 1


def cut_cells(text: str, cells: int) -> str:
    """``text`` in at most ``cells`` cells (a Chinese character or an emoji takes two), cut with an ellipsis."""
    if cell_len(text) <= cells:
        return text
    return set_cell_size(text, cells - 1).rstrip() + "\N{HORIZONTAL ELLIPSIS}"
