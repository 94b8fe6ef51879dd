"""Rich rendering of `placement cluster`: the tasks, the placements by job/task, variables, training."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from placement_cli.i18n import _
from placement_cli.model import ClusterEvent, ClusterReport, GpuMemory, WorkerSteps
from placement_cli.render.cost import cost_renderables
from placement_cli.render.table import View, clean, literal, report_group


def exit_said(code: int | None, ended: bool | None) -> str:
    if ended and code is None:  # the supervisor ended before it could say the code: its group was killed
        return _("ended by placement (SIGKILL)")
    if code is None:
        return _("not known") if ended is None else "-"
    if ended:
        return _("ended by placement (SIGKILL)")
    if code < 0:
        return _("killed (signal {number})").format(number=-code)
    return str(code)


def tasks_table(found: ClusterReport) -> Table:
    if found.run.isolated is None:
        isolation = _("whether it ran in a private network namespace is not known: the supervisor did not say")
    elif found.run.isolated:
        isolation = _("in a private network namespace: unreachable from outside this machine")
    else:
        isolation = _("listening on every interface, unauthenticated, while it ran")
    table = Table(title=literal(_("Cluster") + f" ({isolation})"), title_justify="left")
    for heading in (_("job"), _("task"), _("address"), _("pid"), _("exit code")):
        table.add_column(heading, overflow="fold")
    gpus = any(t.cuda_visible_devices is not None for t in found.run.tasks)
    if gpus:
        table.add_column("CUDA_VISIBLE_DEVICES", overflow="fold")
    for t in found.run.tasks:
        row: list[RenderableType] = [literal(t.job), str(t.task), literal(str(t.target).removeprefix("grpc://")),
               str(t.pid or "-"), exit_said(t.exit_code, t.ended_by_placement)]
        if gpus:
            row.append(literal(visible(t.cuda_visible_devices)))
        table.add_row(*row)
    if found.run.gpu_memory is not None:
        table.caption = literal(gpu_memory_line(found.run.gpu_memory))
        table.caption_justify = "left"
    return table


def visible(value: str | None) -> str:
    """A task's CUDA_VISIBLE_DEVICES as a cell: not set (every GPU), empty (none), or the list."""
    if value is None:
        return _("not set (every GPU)")
    return '""' + _(" (no GPU)") if value == "" else value


def gpu_memory_line(memory: GpuMemory) -> str:
    """How the cluster's processes shared a GPU, and who decided it (the user's
    TF_FORCE_GPU_ALLOW_GROWTH wins over the policy, as TensorFlow reads it over the ConfigProto)."""
    yours = memory.your_allow_growth
    if memory.policy == "growth" and memory.allow_growth:
        how = _("growth: each task takes GPU memory as it needs it ({how})").format(
            how=f"TF_FORCE_GPU_ALLOW_GROWTH={yours}" + _(", yours") if yours is not None
            else "TF_FORCE_GPU_ALLOW_GROWTH=true, gpu_options.allow_growth")
    elif memory.policy == "share":
        how = _("share: each task at most {percent:g}% of a GPU (per_process_gpu_memory_fraction {fraction:g})").format(
            percent=round((memory.memory_fraction or 0) * 100, 1), fraction=memory.memory_fraction or 0)
        if memory.allow_growth:  # only the user's variable makes a share grow
            how += _(", growing to it (your TF_FORCE_GPU_ALLOW_GROWTH={value})").format(value=yours)
    elif memory.allow_growth:  # whole asked, the user's variable says grow
        how = _("whole asked, but your TF_FORCE_GPU_ALLOW_GROWTH={value} wins: each task grows").format(value=yours)
    elif memory.policy == "growth":
        how = _("growth asked, but your TF_FORCE_GPU_ALLOW_GROWTH={value} wins (TensorFlow reads it over the "
                "ConfigProto): each task reserves nearly all of a GPU, and a second one on it finds none; unset it, "
                "or give --gpu-memory share").format(value=yours)
    else:
        how = _("whole: TensorFlow's default, each task reserves nearly all of a GPU (tasks cannot share one)")
        if yours is not None:
            how += f" (TF_FORCE_GPU_ALLOW_GROWTH={yours}" + _(", yours") + ")"
    ps = _("ps tasks on the GPU too") if memory.ps_on_gpu else _('ps tasks see no GPU (CUDA_VISIBLE_DEVICES="")')
    return _("GPU memory: {how}; {ps}").format(how=how, ps=ps)


def variables_table(found: ClusterReport) -> Table | None:
    if not found.variables:
        return None
    table = Table(title=_("Where each variable lives"), title_justify="left")
    table.add_column(_("variable"), overflow="fold")
    table.add_column(_("device"), overflow="fold")
    for name, device in found.variables.items():
        table.add_row(literal(name), literal(device or "-"))
    return table


def training_table(found: ClusterReport) -> Table:
    if found.api == "tf2":
        return _scheduled_table(found)
    table = Table(title=_("Training per worker") + f" ({found.mode})", title_justify="left")
    for heading in (_("worker"), _("steps"), _("first loss"), _("last loss"), _("global steps seen")):
        table.add_column(heading, overflow="fold")
    for w in found.workers:
        if w.losses is None:  # it never reported: unknown, not none
            table.add_row(f"worker/{w.task}", _steps_unknown(w), _("unknown"), _("unknown"), _("unknown"))
            continue
        losses = w.losses
        seen = w.global_steps or ()
        table.add_row(f"worker/{w.task}", str(len(losses)), f"{losses[0]:.4f}" if losses else "-",
                      f"{losses[-1]:.4f}" if losses else "-",
                      f"{seen[0]}..{seen[-1]}" if len(seen) > 1 else (str(seen[0]) if seen else "-"))
    return table


def _steps_unknown(worker: WorkerSteps) -> str:
    reported = worker.steps_reported
    if reported:
        return _("unknown (it said {steps} before it ended)").format(steps=reported)
    return _("unknown")


def _steps(worker: WorkerSteps) -> str:
    """A worker's steps, for the sentences: the count, or unknown."""
    if worker.losses is None and worker.steps is None:
        return _steps_unknown(worker)
    return str(worker.steps if worker.losses is None else len(worker.losses))


def _scheduled_table(found: ClusterReport) -> Table:
    table = Table(title=_("Steps per worker (scheduled by the coordinator)"),
                  title_justify="left")
    table.add_column(_("worker"))
    table.add_column(_("steps"), justify="right")
    for w in found.workers:
        table.add_row(f"worker/{w.task}", _("unknown") if w.steps is None else str(w.steps))
    return table


def difference(found: ClusterReport) -> str:
    """One sentence on async vs sync, read from what ran."""
    if found.api == "tf2":
        chief = found.run.result("chief/0")
        losses = chief.losses if chief is not None else ()
        ran = ", ".join(f"worker/{w.task}: {_steps(w)}" for w in found.workers)
        return _("tf2: the coordinator (/job:chief) scheduled each step's tf.function on whichever worker was free "
                 "(steps: {ran}); every step updated the variables on the ps at once, without waiting for the "
                 "others (async). Loss: {first} to {last}.").format(
            ran=ran, first=f"{losses[0]:.4f}" if losses else "-", last=f"{losses[-1]:.4f}" if losses else "-")
    workers = found.workers
    ran = ", ".join(f"worker/{w.task}: {_steps(w)}" for w in workers)
    last = max((s for w in workers for s in w.global_steps or ()), default="-")
    ops = dict(found.sync_ops)
    if found.sync:
        placed = ", ".join(f"{n} {op}" for op, n in ops.items()) or _("no accumulator op")
        if len(workers) == 1:
            return _("sync: SyncReplicasOptimizer placed {ops}; the ps applies one update per global step "
                     "once the one worker's gradient is in, and the worker takes a token before its next step "
                     "(steps it ran: {ran}; last global step seen: {last}).").format(ops=placed, ran=ran, last=last)
        return _("sync: SyncReplicasOptimizer placed {ops}; the ps applies one averaged update per global step "
                 "once {workers} gradients are in, and a worker takes a token before its next step "
                 "(steps each worker ran: {ran}; last global step seen: {last}).").format(
            ops=placed, workers=len(workers), ran=ran, last=last)
    if ops:
        return _("async, although accumulator ops were placed: {ops} (steps each worker ran: {ran}).").format(
            ops=", ".join(ops), ran=ran)
    return _("async: no accumulator or token queue was placed; each worker applies its own gradient on the ps "
             "as soon as it has it, so the global step counts every worker's steps "
             "(steps each worker ran: {ran}; last global step seen: {last}).").format(ran=ran, last=last)


def cluster_group(found: ClusterReport, view: View) -> Group:
    parts: list[RenderableType] = [tasks_table(found)]
    if found.report.placements:
        parts.append(report_group(found.report, view=view))
    variables = variables_table(found)
    if variables is not None:
        parts.append(variables)
    said = found.api == "tf1" and any(t.steps_reported for t in found.run.tasks)  # how far they got
    if found.run.results or said:
        parts.append(training_table(found))
        parts.append(Text(clean(difference(found))))
    for task, cost in found.costs or ():  # --time: each worker's own steps
        parts.append(Text(_("Times of {task}'s own steps").format(task=task), style="bold underline"))
        parts.extend(cost_renderables(cost, view))
    for task, why in found.timing_errors:
        parts.append(Text(_("No times from {task}: {why}").format(task=task, why=clean(why)), style="italic"))
    return Group(*parts)


def progress_line(event: ClusterEvent) -> str | None:
    """A cluster's start-up event as the line said on stderr (cluster, and the demo's cluster step)."""
    kind = event.event
    if kind == "isolation" and not event.isolated:
        return _("no private network namespace ({why}): the cluster's ports listen on every interface, "
                 "unauthenticated, while it runs").format(why=event.why)
    if kind == "retry":
        return _("a port was taken while the cluster started ({why}); starting again on new ports").format(
            why=event.why)
    if kind == "session":
        return _("{task}: session up, training").format(task=event.task)
    if kind == "ready":
        return _("{task} ready on {address} (pid {pid}, {seconds} s)").format(
            task=event.task, address=event.address, pid=event.pid, seconds=event.seconds)
    return None
