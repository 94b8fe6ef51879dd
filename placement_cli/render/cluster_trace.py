"""Rich rendering of `placement trace --cluster`: the tasks (with their placements counted) and the
variables the tasks' logs show, with the device each lives on."""

from __future__ import annotations

import signal
from collections import Counter
from typing import Any

from rich.console import RenderableType
from rich.table import Table

from placement_cli.i18n import _
from placement_cli.render.cluster import exit_said, visible
from placement_cli.render.table import literal

VARIABLE_OPS = frozenset({"VarHandleOp", "_VarHandlesOp", "VariableV2", "Variable"})


def tasks_table(tasks: Any, isolated: bool | None, report: Any) -> Table:
    if isolated:
        where = _("in a private network namespace: unreachable from outside this machine")
    elif isolated is None:
        where = _("whether they ran in a private network namespace is not known")
    else:
        where = _("no private network namespace: their servers, if any, listened on every interface, unauthenticated")
    per_task = Counter(f"{p.spec.job}/{p.spec.task}" for p in report.placements)
    table = Table(title=literal(_("Tasks") + f" ({where})"), title_justify="left")
    for heading in (_("task"), _("address"), _("pid"), _("exit code"), _("placements")):
        table.add_column(heading, overflow="fold")
    gpus = any(t.cuda_visible_devices is not None for t in tasks)
    if gpus:  # set by the user for every task, or per task by --split-gpus
        table.add_column("CUDA_VISIBLE_DEVICES", overflow="fold")
    for t in tasks:
        row: list[RenderableType] = [literal(f"{t.job}/{t.task}"), literal(str(t.target or "-").removeprefix("grpc://")),
               str(t.pid or "-"), _ended(t.exit_code, t.ended_by_placement), str(per_task.get(f"{t.job}/{t.task}", 0))]
        if gpus:
            row.append(literal(visible(t.cuda_visible_devices)))
        table.add_row(*row)
    return table


def _ended(code: int | None, ended: bool | None) -> str:
    if ended and code is not None and code < 0:
        try:
            how = signal.Signals(-code).name
        except ValueError:
            how = str(-code)
        return _("ended by placement ({signal})").format(signal=how)
    return exit_said(code, False if code is not None else ended)


def variables_table(report: Any) -> Table | None:
    """Each variable a task placed (graph nodes by name; eager creations counted per device)."""
    named: dict[str, set[str]] = {}
    eager: Counter[str] = Counter()
    for p in report.placements:
        if p.op not in VARIABLE_OPS or p.wrapper:
            continue
        if p.node:
            named.setdefault(p.node, set()).add(p.short)
        else:
            eager[p.short] += 1
    if not named and not eager:
        return None
    table = Table(title=_("Where the variables live"), title_justify="left")
    table.add_column(_("variable"), overflow="fold")
    table.add_column(_("device"), overflow="fold")
    for name, devices in sorted(named.items()):
        table.add_row(literal(name), literal(", ".join(sorted(devices))))
    for device, count in sorted(eager.items()):
        table.add_row(literal(_("{count} made eagerly (VarHandleOp)").format(count=count)), literal(device))
    return table
