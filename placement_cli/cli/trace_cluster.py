"""`placement trace --cluster worker=N[,ps=M][,chief=1] SCRIPT`: the user's distributed program, one
process per task, then the placements of every task (the CLI's side; runtime.cluster.trace runs it)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from rich.rule import Rule

from placement_cli import messages, outputs
from placement_cli.cli import shown
from placement_cli.cli.funnel import say, signal_said
from placement_cli.cli.outcome import Json, Outcome, Verbatim
from placement_cli.clusterspec import from_file
from placement_cli.exceptions import UsageProblem
from placement_cli.filters import apply
from placement_cli.i18n import _
from placement_cli.i18n import shown as shown_message
from placement_cli.messages import one_line
from placement_cli.render.cluster_trace import tasks_table, variables_table
from placement_cli.render.json import cluster_traced_dict
from placement_cli.render.table import Hints, literal
from placement_cli.runtime import gpu_policy
from placement_cli.runtime.capture.fds import fresh_line
from placement_cli.runtime.cluster.trace import run_cluster_traced
from placement_cli.runtime.cluster.trace_spec import jobs_of_spec, parse_cluster


def trace_cluster(script: str, args: list[str], *, cluster: str | None, cluster_spec: str | None, filters: Any,
                  save_log: str | None, force: bool, log: bool, copies: bool, all_rows: bool, as_json: bool,
                  drawn: Any, split_gpus: bool = False, gpu_list: str | None = None,
                  chief_grace: float = 60.0) -> Outcome:
    if cluster is not None and cluster_spec is not None:
        raise UsageProblem(_("give --cluster or --cluster-spec, not both"))
    addresses = None
    if cluster_spec is not None:
        jobs, addresses = jobs_of_spec(from_file(cluster_spec))
    else:
        assert cluster is not None
        jobs = parse_cluster(cluster)
    visible, split_notes = gpu_policy.split_for_tasks(jobs, gpu_list) if split_gpus else ({}, [])
    saved, made = outputs.open_task_logs(outputs.task_log_folder(save_log), jobs, script, force) if save_log else ({}, [])
    for note in split_notes:
        say(note)
    try:
        traced = run_cluster_traced(script, args, jobs, addresses, stdout_fd=2 if as_json else 1, echo_log=log,
                                    saved=saved, copies=copies, visible=visible, grace=chief_grace)
    except UsageProblem as problem:  # no task ran (a port in use): the files made for them go again
        outputs.remove(made)
        if cluster_spec is not None:  # the port is the file's: named as its other mistakes are
            raise UsageProblem(f"{cluster_spec}: {problem}") from None
        raise
    for note in traced.notes:
        say(note)
    if traced.signalled is not None:  # every task had the signal; what they placed until then is reported
        say(signal_said(traced.signalled))
    if traced.problem is not None:
        say(shown_message(traced.problem))
        if traced.cause is not None and traced.cause.gpu_taken:
            say(shown_message(messages.GPU_TAKEN_TRACE_CLUSTER))
    if traced.output_closed:
        return Outcome(code=traced.exit_code, output_closed=True)
    name = one_line(script)
    narrowed = apply(traced.report, filters)
    output = _json(traced, narrowed) if as_json else _tables(traced, narrowed, name, all_rows)
    notices = shown.found_nothing(traced.report, name, copies)
    if not split_gpus:  # else each task had its own
        notices.extend(gpu_policy.shared_note(traced.report, len(traced.tasks)))
    if traced.isolated is False:
        notices.append(_("no private network namespace ({why}): the tasks' servers, if any, listened on every "
                         "interface, unauthenticated, while they ran").format(why=traced.isolation_note))
    return Outcome(code=traced.exit_code, output=output, pictures=drawn, graph=_graph(traced, filters),
                   notices=tuple(notices), keep_code=True, program_output=True)


def _graph(traced: Any, filters: Any) -> Any:
    """The pictures draw what the filters keep, each task's graph apart (its nodes named by task)."""

    return apply(traced.graph, filters).report


def _json(traced: Any, narrowed: Any) -> list[Any]:
    document = cluster_traced_dict(narrowed.report, traced.exit_code, narrowed, traced.tasks, traced.isolated,
                                   traced.problem, traced.cause)
    return [Json(document), *shown.no_match(narrowed)]


def _tables(traced: Any, narrowed: Any, name: str, all_rows: bool) -> Iterator[Any]:
    sys.stdout.flush()
    fresh_line(1)
    title = literal(_("placement: {script} exited with code {code}").format(script=name, code=traced.exit_code))
    yield Verbatim(Rule(title))
    yield tasks_table(traced.tasks, traced.isolated, traced.report)
    yield from shown.report_output(narrowed.report, as_json=False, all_rows=all_rows,
                                   hints=Hints(source="program"), filtered=narrowed)
    variables = variables_table(narrowed.report)
    if variables is not None:
        yield variables
