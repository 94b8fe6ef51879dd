"""Rich renderables for the training lessons (train, mirrored): roles, losses, the gradient check,
and the bytes each step copies between devices. They return; the commands print."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from placement_cli import messages
from placement_cli.devices import short_name
from placement_cli.i18n import Wording, _, shown
from placement_cli.model import Copy, GradientCheck, Placement, Report, Training, link_totals
from placement_cli.model.fields import known_total
from placement_cli.render.cost import timed_renderables
from placement_cli.render.digest import digest_renderables
from placement_cli.render.parts import (
    counts_table,
    failure_panel,
    gpu_remedy,
    mapping_renderable,
    onednn_note,
    reasons_table,
    rows_table,
    shown_placements,
    table_rows,
)
from placement_cli.render.rows import MIDDLE, WRAP, Column, RowTable
from placement_cli.render.text import clean, literal
from placement_cli.render.view import View

LOSS_HEAD, LOSS_TAIL = 10, 5  # a long run's loss table: the first and last steps (--all: every one)


def size(n: int | None) -> str:
    """Bytes as ``15,528 B``; ``?`` when unknown."""
    return "?" if n is None else f"{n:,} B"


def _steps(n: int) -> str:
    return _("1 step") if n == 1 else _("{count} steps").format(count=n)


def setup_text(training: Training) -> Text:
    """One paragraph: where the towers (or replicas) run, and the run's sizes."""
    text = Text()
    if training.lesson == "towers":
        towers = ", ".join(_("{device} (tower {index})").format(device=clean(d), index=i)
                           for i, d in enumerate(training.devices))
        per = training.batch // max(len(training.devices), 1)
        text.append(_("towers: {towers}; variables, average_gradients and apply_gradients on {variables}.").format(
            towers=towers, variables=clean(training.variables_on)) + "\n")
        text.append(_("batch {batch} ({per} per tower), {dtype}, learning rate {lr}, {steps}; "
                      "{parameters} parameters ({size}).").format(
            batch=training.batch, per=per, dtype=training.dtype, lr=f"{training.lr:g}", steps=_steps(training.steps),
            parameters=f"{training.parameters:,}", size=size(training.parameter_bytes)))
    else:
        names = training.replicas or training.devices
        replicas = ", ".join(_("{device} (replica {index})").format(device=clean(d.short), index=i)
                             for i, d in enumerate(names))
        text.append(_("replicas: {replicas}; {mode}.").format(replicas=replicas, mode=clean(shown(training.mode)))
                    + "\n")
        per = training.batch // max(len(training.devices), 1)
        text.append(_("global batch {batch} ({per} per replica), {dtype}, learning rate {lr}, {steps}; "
                      "{parameters} parameters ({size}).").format(
            batch=training.batch, per=per, dtype=training.dtype, lr=f"{training.lr:g}", steps=_steps(training.steps),
            parameters=f"{training.parameters:,}", size=size(training.parameter_bytes)) + "\n")
        if training.reduction:
            reduction = clean(training.reduction)
        elif not training.replicas:
            reduction = _("none (the strategy was not made)")
        else:
            reduction = _("unknown (the strategy's private attribute could not be read)")
        text.append(_("all-reduce: "))
        text.append(reduction, style="bold")
        text.append(_(", from {source}.").format(source=clean(shown(training.reduction_source))))
    return text


def variables_table(training: Training, view: View) -> RowTable:
    """Each variable and the devices its copies live on (a MirroredVariable: one per replica)."""
    table = RowTable(_("Variables and where their copies live"), [
        Column(_("variable"), MIDDLE, min_width=12), Column(_("shape")), Column(_("kind")),
        Column(_("copies on"), WRAP, min_width=12)], fit=view.fit)
    for v in training.variables:
        table.add_row(clean(v.name), "[" + ", ".join(map(str, v.shape)) + "]", clean(v.kind),
                      ", ".join(clean(d.short) for d in v.devices) or "?")
    return table


def _ordered_by_role(placements: Sequence[Placement], roles: Sequence[Wording]) -> list[Placement]:
    rank = {r: i for i, r in enumerate(roles)}
    return sorted(placements, key=lambda p: (rank.get(p.group or "", len(rank)), p.line))


def role_table(placements: Sequence[Placement], roles: Sequence[Wording], view: View) -> RowTable:
    """Placements per role, and on which devices: the lesson's shape at a glance. A run with many
    towers shows the first two and the last one, and sums the rest (--all: every tower)."""
    counts: dict[Wording, Counter[str]] = {}
    for p in placements:
        counts.setdefault(p.group or messages.OTHER, Counter())[p.canonical] += 1
    order = [r for r in roles if r in counts] + sorted(r for r in counts if r not in roles)
    units = {role: found for role in order if (found := messages.unit(role)) is not None}
    towers = sorted({number for _template, number, _part in units.values()})
    fold = not view.all_rows and len(order) > view.screen_rows and len(towers) > 3
    folded = set(towers[2:-1]) if fold else set()
    table = RowTable(_("Per role and device"), [Column(_("role"), MIDDLE, min_width=12),
                                                Column(_("devices"), WRAP, min_width=12),
                                                Column(_("ops"), justify="right")], fit=view.fit)
    summed: dict[object, Counter[str]] = {}
    previous: object = None
    for role in order:
        template, number, part = units.get(role, (None, None, None))
        if number is not None and template is not None and number in folded:
            summed.setdefault(part, Counter()).update(counts[role])
            if number == max(folded):
                _role_row(table, messages.units_role(template, min(folded), max(folded), part), summed[part],
                          previous != "fold")
                previous = "fold"
            continue
        section = (template, number) if number is not None else role
        _role_row(table, role, counts[role], previous is not None and section != previous)
        previous = section
    if fold:
        table.caption = _("towers {first}-{last} summed (--all shows each)").format(first=min(folded), last=max(folded))
    return table


def _role_row(table: RowTable, role: Wording, counts: Counter[str], new_section: bool) -> None:
    ranked = sorted(counts.items(), key=lambda t: (-t[1], t[0]))
    if len(ranked) > 4:
        first = ", ".join(f"{clean(short_name(d))} {n}" for d, n in ranked[:3])
        devices = _("{shown}, {count} more devices {ops}").format(shown=first, count=len(ranked) - 3,
                                                                 ops=sum(n for _, n in ranked[3:]))
    else:
        devices = ", ".join(f"{clean(short_name(d))} {n}" for d, n in ranked)
    table.add_row(clean(shown(role)), devices, str(sum(counts.values())), new_section=new_section)


def loss_table(training: Training, view: View) -> RenderableType:
    losses = training.losses
    if not losses:
        return Text(_("No step ran: no loss to show."), style="italic")
    table = RowTable(_("Loss per step"), [Column(_("step"), justify="right"), Column(_("loss"), justify="right")], fit=view.fit)
    steps = list(enumerate(losses, 1))
    if not view.all_rows and len(steps) > LOSS_HEAD + LOSS_TAIL:
        for step, loss in steps[:LOSS_HEAD]:
            table.add_row(str(step), _loss(loss))
        table.add_row("…", f"({len(steps) - LOSS_HEAD - LOSS_TAIL} steps)", new_section=True)
        for i, (step, loss) in enumerate(steps[-LOSS_TAIL:]):
            table.add_row(str(step), _loss(loss), new_section=i == 0)
        table.caption = "--all shows every step; --json has them all"
    else:
        for step, loss in steps:
            table.add_row(str(step), _loss(loss))
    return table


def _loss(loss: float) -> str:
    """Six decimals; a loss that has blown up (1e35) in exponent notation, not 36 digits; nan, inf as such."""
    return f"{loss:.6f}" if not math.isfinite(loss) or abs(loss) < 1e6 else f"{loss:.6e}"


def diverged_message(training: Training) -> str | None:
    """One line when a loss is not a finite number (the training diverged), in the chosen language."""
    step = training.diverged_at
    if step is None:
        return None
    bad = sum(1 for loss in training.losses if not math.isfinite(loss))
    return _("the training diverged: the loss is {value} at step {step} ({count} of {ran} steps not finite); "
             "try a smaller --lr than {lr:g}").format(value=training.losses[step - 1], step=step, count=bad,
                                                     ran=len(training.losses), lr=training.lr)


def check_panel(check: GradientCheck, view: View) -> Panel:
    """The averaged tower gradient against the full-batch gradient: the pattern's proof in numbers."""
    verdict = _("passed") if check.passed else _("FAILED")
    body = Text()
    body.append(_("averaged tower gradients vs the full-batch gradient on {reference} ({dtype}):").format(
        reference=clean(check.reference), dtype=check.dtype) + "\n")
    body.append(_("max abs difference {abs}, max relative difference {rel}").format(
        abs=f"{check.max_abs:.3g}", rel=f"{check.max_rel:.3g}") + "\n")
    body.append(_("tolerance: relative <= {tolerance} (of each gradient's largest magnitude): ").format(
        tolerance=f"{check.tolerance:g}"))
    body.append(verdict, style="bold green" if check.passed else "bold red")
    if check.note:
        body.append(f"\n{clean(check.note)}", style="italic")
    table = RowTable(None, [Column(_("variable"), MIDDLE, min_width=8), Column(_("max abs diff"), justify="right"),
                            Column(_("max rel diff"), justify="right"), Column(_("max |gradient|"), justify="right")],
                     fit=view.fit)
    for name, diff, rel, scale in check.variables:
        table.add_row(clean(name), f"{diff:.3g}", f"{rel:.3g}", f"{scale:.3g}")
    return Panel(Group(body, table), title=_("Gradient check (--check)"), title_align="left",
                 border_style="green" if check.passed else "red")


def copies_renderables(report: Report, view: View) -> list[RenderableType]:
    """Every copy of one traced step with what it carries, the totals per link and per step, and the
    sanity line from the model's sizes."""
    copies = report.copies or ()
    training = report.training
    if not copies:
        return [Text(_("No copies between devices in the traced step: every op that exchanges tensors shares a "
                       "device."))]
    parts: list[RenderableType] = []
    if view.fits(len(copies)):
        parts.append(_copies_table(copies, view))
    else:
        parts.append(Text(_("{count} copies do not fit a screen: the totals per link follow "
                            "(--all lists every copy; --json has them all).").format(count=len(copies)),
                          style="italic"))
    totals = link_totals(copies)
    links = RowTable(_("Per link, one step"), [Column(_("from")), Column(_("to")), Column(_("copies"), justify="right"),
                                            Column(_("bytes"), justify="right")], fit=view.fit)
    for t in totals:
        links.add_row(clean(t.source.short), clean(t.target.short), str(t.copies),
                      size(t.bytes) + (_(" (partly computed)") if t.computed else ""))
    parts.append(links)
    total = known_total(c.bytes for c in copies)
    computed = sum(1 for c in copies if c.computed)
    seen = len(copies) - computed
    per_step = _("per step: {size} in 1 copy") if seen == 1 else _("per step: {size} in {count} copies")
    line = Text(per_step.format(size=size(total), count=seen), style="bold")
    if computed:
        more = (_(" and 1 computed transfer (see the note)") if computed == 1 else
                _(" and {count} computed transfers (see the note)"))
        line.append(more.format(count=computed), style="bold")
    parts.append(line)
    if training is not None and training.expected is not None:
        parts.append(_expected_line(training, total))
    if report.executed:
        nodes = sum(n for _, n in report.executed)
        ops = ", ".join(f"{n} {clean(op)}" for op, n in report.executed[:8])
        parts.append(Text(_("the traced step executed {nodes} nodes: {ops}").format(
            nodes=nodes, ops=ops + (", ..." if len(report.executed) > 8 else "")), style="dim"))
    for logical in _sharing_memory(copies):
        parts.append(Text(_("{devices} are logical devices sharing one memory: these bytes are what would cross "
                            "a device boundary (e.g. to a GPU), not a memory copy made here.").format(
            devices=", ".join(clean(d) for d in logical)), style="italic"))
    return parts


def _sharing_memory(copies: Sequence[Copy]) -> list[list[str]]:
    """The devices of the copies between logical devices of one memory, a list per process (task):
    devices of two tasks share none (their copies cross between processes)."""
    groups: dict[str, set[str]] = {}
    for c in copies:
        if c.physical is False:
            spec = c.source.spec
            task = "" if spec is None else f"{spec.job}/{spec.replica}/{spec.task}"
            groups.setdefault(task, set()).update((c.source.short, c.target.short))
    return [sorted(devices) for _task, devices in sorted(groups.items())]


def _expected_line(training: Training, total: int | None) -> Text:
    expected = training.expected
    assert expected is not None
    terms = " + ".join(f"{size(b)} {clean(shown(messages.term_label(w)))}" for w, b in expected.terms if b)
    text = Text(_("expected ({formula}): {terms} = {total}: ").format(
        formula=clean(shown(expected.formula)), terms=terms, total=size(expected.total)))
    if total is None:
        text.append(_("cannot compare (some sizes unknown)"), style="yellow")
    elif total == expected.total:
        text.append(_("matches"), style="bold green")
    else:
        text.append(_("differs by {size}").format(size=size(abs(total - expected.total))), style="bold yellow")
        text.append(_(" (copies the formula leaves out, or that did not happen: see the table)"))
    return text


def _copies_table(copies: Sequence[Copy], view: View) -> RowTable:
    table = RowTable(_("Copies between devices, one traced step (_Send/_Recv)"),
                     [Column(_("tensor"), MIDDLE, min_width=12), Column(_("consumer"), WRAP, min_width=10),
                      Column(_("from")), Column(_("to")), Column(_("dtype")), Column(_("shape")), Column(_("bytes"), justify="right")],
                     fit=view.fit)
    links: dict[tuple[str, str], int] = {}
    for c in copies:
        links.setdefault((c.source, c.target), len(links))
    previous = None
    for c in sorted(copies, key=lambda c: links[c.source, c.target]):
        link = (c.source, c.target)
        shape = "?" if c.shape is None else "[" + ", ".join(map(str, c.shape)) + "]"
        table.add_row(clean(shown(c.tensor)), clean(c.consumer) or "-", clean(c.source.short),
                      clean(c.target.short), clean(c.dtype) or "?", shape,
                      _("{size} (computed)").format(size=size(c.bytes)) if c.computed else size(c.bytes),
                      new_section=previous is not None and link != previous)
        previous = link
    return table


def training_renderables(report: Report, view: View) -> list[RenderableType]:
    """Everything `train` and `mirrored` show, in reading order."""
    training = report.training
    roles = training.roles if training else ()
    parts: list[RenderableType] = []
    if report.title:
        parts.append(literal(shown(report.title), "bold underline"))
    if training is not None:
        parts.append(setup_text(training))
        if training.lesson == "mirrored" and training.variables:
            parts.append(variables_table(training, view))
    mapping = mapping_renderable(report)
    if mapping is not None:
        parts.append(mapping)
    visible = shown_placements(report)
    if visible:
        parts.append(role_table(visible, roles, view))
        rows = table_rows(_ordered_by_role(visible, roles), fold_repeats=True)
        if view.fits(len(rows)):
            parts.append(rows_table(rows, fit=view.fit))
            parts.append(counts_table(report, view.filtered))
        else:
            parts.extend(digest_renderables(report, visible, len(rows), view=view))
    reasons = reasons_table(report, view.fit)
    if reasons is not None:
        parts.append(reasons)
    if training is not None:
        parts.append(loss_table(training, view))
        diverged = diverged_message(training)
        if diverged is not None:
            parts.append(Text(diverged, style="bold red"))
        if training.check is not None:
            parts.append(check_panel(training.check, view))
    if report.copies is not None:
        parts.extend(copies_renderables(report, view))
    parts.extend(timed_renderables(report, view))
    onednn = onednn_note(report)
    if onednn is not None:
        parts.append(onednn)
    if training is not None:
        parts.extend(Text(clean(shown(note)), style="italic") for note in training.notes)
    parts.extend(failure_panel(f, report.origin, view.hints) for f in report.errors)
    if training is not None and not training.complete and not report.errors:
        ran = len(training.losses)
        message = training.says if training.cause or training.error else _("no error was reported")
        said = _("{ran} of {steps} steps ran. TensorFlow says: {message}").format(ran=ran, steps=training.steps,
                                                                                 message=message)
        remedy = gpu_remedy(training.cause)
        parts.append(Panel(literal(f"{said}\n{remedy}" if remedy else said),
                           title=_("Training did not finish"), title_align="left", border_style="red"))
    return parts


def training_group(report: Report, view: View) -> Group:
    return Group(*training_renderables(report, view))
