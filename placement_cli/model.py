"""Frozen result model shared by capture, parse and render."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from placement_cli.devices import DeviceSpec
from placement_cli.i18n import N_, Message

# A placement's status: JSON writes its English, tables show it in the chosen language.
AS_REQUESTED = Message(N_("as requested"))
FREE = Message(N_("free"))
SOFT_FALLBACK = Message(N_("soft fallback"))
LOGGED = Message(N_("logged"))  # parsed from a log: what was requested is unknown


@dataclass(frozen=True)
class Placement:
    """One op placed on one device, as the log reported it."""

    node: str | None
    op: str | None
    device: str
    spec: DeviceSpec
    kind: str  # "placer" | "eager" | "legacy"
    line: int
    requested: str | None = None
    status: str = LOGGED  # one of the statuses above
    reason: str | None = None  # a Message (messages.py), English as a string
    group: str | None = None  # the tower a node belongs to, a lesson's role (a Message), a name scope
    wrapper: bool = False  # a node of the single-op function TF 2.x wraps an eager op in (tables hide it)

    @property
    def canonical(self) -> str:
        return self.spec.canonical

    @property
    def short(self) -> str:
        return self.spec.short

    def to_dict(self, run: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "node": self.node,
            "op": self.op,
            "device": self.device,
            "canonical": self.canonical,
            "job": self.spec.job,
            "replica": self.spec.replica,
            "task": self.spec.task,
            "device_type": self.spec.device_type,
            "device_index": self.spec.device_index,
            "kind": self.kind,
            "line": self.line,
        }
        if run:
            data.update(requested=self.requested, status=self.status, reason=self.reason, group=self.group)
        return data


@dataclass(frozen=True)
class DeviceMapping:
    """One line of a ``Device mapping:`` block."""

    device: str
    description: str

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "description": self.description}


@dataclass(frozen=True)
class PlacementFailure:
    """A placement error TensorFlow reported."""

    # device_not_found | no_kernel | colocation | invalid_device_spec | unsatisfiable | run_failed (a run
    # stopped with an error whose wording the parser does not know: the message is TensorFlow's own)
    kind: str
    node: str | None
    requested_device: str | None
    message: str
    available_devices: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "node": self.node,
            "requested_device": self.requested_device,
            "message": self.message,
            "available_devices": list(self.available_devices),
        }


@dataclass(frozen=True)
class Copy:
    """One cross-device transfer in the executed graph: a _Send/_Recv pair (or, ``computed``, the
    traffic a collective op moves out of sight, worked out rather than seen)."""

    tensor: str  # a computed copy's: a Message
    source: str
    target: str
    dtype: str | None = None  # what is known only where the run was traced (train, mirrored --copies)
    shape: tuple[int, ...] | None = None
    bytes: int | None = None  # per step
    producer: str | None = None  # the original graph's producer and consumer (_Send's _src/_dst attrs)
    consumer: str | None = None
    physical: bool | None = None  # False: between logical devices sharing one memory; None: unknown
    computed: bool = False

    @property
    def detailed(self) -> bool:
        return self.dtype is not None or self.bytes is not None or self.computed

    @property
    def producer_node(self) -> str:
        """The node whose output was copied: the _Send's own record of it, else the tensor's op."""
        return self.producer or self.tensor.rsplit(":", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"tensor": self.tensor, "from": self.source, "to": self.target}
        if self.detailed:
            data.update(dtype=self.dtype, shape=None if self.shape is None else list(self.shape), bytes=self.bytes,
                        producer=self.producer, consumer=self.consumer, physical=self.physical,
                        computed=self.computed)
        return data


@dataclass(frozen=True)
class Edge:
    """One edge of a graph that ran: ``target`` reads an output of ``source`` (or, ``control``, only
    waits for it). Node names as the placer log names them."""

    source: str
    target: str
    control: bool = False


@dataclass(frozen=True)
class LinkTotal:
    """The copies of one step from one device to another."""

    source: str
    target: str
    copies: int
    bytes: int | None  # None: some copy's size is unknown
    computed: bool = False  # some of these bytes were worked out, not seen as _Send nodes

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "copies": self.copies, "bytes": self.bytes,
                "computed": self.computed}


def link_totals(copies: tuple[Copy, ...]) -> tuple[LinkTotal, ...]:
    """Copies and bytes per (from, to) link, in the order links first appear."""
    found: dict[tuple[str, str], list[Copy]] = {}
    for c in copies:
        found.setdefault((c.source, c.target), []).append(c)
    totals = []
    for (source, target), group in found.items():
        sizes = [c.bytes for c in group]
        total = None if any(b is None for b in sizes) else sum(b for b in sizes if b is not None)
        totals.append(LinkTotal(source, target, len(group), total, any(c.computed for c in group)))
    return tuple(totals)


def reason_counts(placements: Iterable[Placement]) -> list[tuple[str, int, list[str]]]:
    """Each reason given, how many placements have it, and the first few distinct names among them."""
    found: dict[str, tuple[int, list[str]]] = {}
    for p in placements:
        if p.reason:
            n, names = found.get(p.reason, (0, []))
            name = p.node or p.op or "?"
            if len(names) < 3 and name not in names:
                names.append(name)
            found[p.reason] = (n + 1, names)
    return sorted(((r, n, names) for r, (n, names) in found.items()), key=lambda t: (-t[1], t[0]))


@dataclass(frozen=True)
class GradientCheck:
    """The averaged tower gradient against the full-batch gradient on one device (``train --check``)."""

    dtype: str
    reference: str  # the device the full-batch gradient was computed on
    tolerance: float  # the largest relative difference allowed (of the gradient's largest magnitude)
    variables: tuple[tuple[str, float, float, float], ...]  # (variable, max abs diff, max rel diff, max |grad|)
    note: str | None = None

    @property
    def max_abs(self) -> float:
        diffs = [v[1] for v in self.variables]
        return math.nan if any(math.isnan(d) for d in diffs) else max(diffs, default=0.0)

    @property
    def max_rel(self) -> float:
        """The largest relative difference; NaN if any is NaN (max() would skip it by order)."""
        rels = [v[2] for v in self.variables]
        return math.nan if any(math.isnan(r) for r in rels) else max(rels, default=0.0)

    @property
    def passed(self) -> bool:
        return all(rel <= self.tolerance for _, _, rel, _ in self.variables)

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "reference_device": self.reference, "max_abs_diff": self.max_abs,
                "max_rel_diff": self.max_rel, "tolerance": {"rel": self.tolerance}, "passed": self.passed,
                "note": self.note,
                "variables": [{"name": n, "max_abs_diff": a, "max_rel_diff": r, "max_abs_gradient": g}
                              for n, a, r, g in self.variables]}


@dataclass(frozen=True)
class VariableCopies:
    """One model variable and the devices its copies (or its single self) live on."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    devices: tuple[str, ...]
    kind: str  # the variable's class: ResourceVariable, MirroredVariable, ...

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "devices": list(self.devices),
                "kind": self.kind}


@dataclass(frozen=True)
class ExpectedBytes:
    """What one step should copy between devices, from the model's sizes: the sanity line."""

    total: int
    terms: tuple[tuple[str, int], ...]  # (what, bytes) summing to total; what: messages.term
    formula: str  # a Message

    def to_dict(self) -> dict[str, Any]:
        return {"bytes": self.total, "formula": self.formula, "terms": [{"what": w, "bytes": b} for w, b in self.terms]}


@dataclass(frozen=True)
class Training:
    """What a training lesson (train, mirrored) set up and what its steps gave."""

    lesson: str  # "towers" | "mirrored"
    devices: tuple[str, ...]  # the towers' or replicas' devices, as asked
    batch: int  # global batch per step
    steps: int  # steps asked for
    lr: float
    dtype: str
    losses: tuple[float, ...] = ()  # one per step that ran
    parameters: int = 0
    parameter_bytes: int = 0
    input_bytes: int = 0  # one step's batch (features and labels)
    variables_on: str | None = None  # towers: where the variables live
    variables: tuple[VariableCopies, ...] = ()
    reduction: str | None = None  # mirrored: the cross-device ops' class; None: unknown
    reduction_source: str | None = None  # how it was chosen / read (a Message)
    mode: str | None = None  # mirrored: custom loop or Keras fit (a Message)
    check: GradientCheck | None = None
    expected: ExpectedBytes | None = None
    notes: tuple[str, ...] = ()  # Messages
    error: str | None = None  # what stopped the steps, when they did not all run
    roles: tuple[str, ...] = ()  # the groups of its placements, in the order tables show them
    replicas: tuple[str, ...] = ()  # mirrored: the replicas' devices as the strategy resolved them

    @property
    def complete(self) -> bool:
        return len(self.losses) == self.steps

    @property
    def diverged_at(self) -> int | None:
        """The first step (from 1) whose loss is not a finite number: the training diverged there."""
        return next((step for step, loss in enumerate(self.losses, 1) if not math.isfinite(loss)), None)

    def to_dict(self) -> dict[str, Any]:
        return {"lesson": self.lesson, "devices": list(self.devices), "batch": self.batch,
                "steps_requested": self.steps, "lr": self.lr,
                "dtype": self.dtype, "parameters": self.parameters, "parameter_bytes": self.parameter_bytes,
                "input_bytes": self.input_bytes, "variables_on": self.variables_on,
                "variables": [v.to_dict() for v in self.variables], "reduction": self.reduction,
                "reduction_source": self.reduction_source, "mode": self.mode,
                "expected_copy_bytes": None if self.expected is None else self.expected.to_dict(),
                "notes": list(self.notes), "error": self.error, "roles": list(self.roles),
                "replicas": list(self.replicas), "diverged_at_step": self.diverged_at}


@dataclass(frozen=True)
class Report:
    """Everything known about one log or one run."""

    placements: tuple[Placement, ...] = ()
    device_mapping: tuple[DeviceMapping, ...] = ()
    errors: tuple[PlacementFailure, ...] = ()
    lines: int = 0
    mapping_seen: bool = False
    counted: tuple[tuple[str, int], ...] | None = None  # per-device counts when placements were not kept
    # Only for runs (show, tower, ...):
    title: str | None = None  # a Message, English as a string
    result: Any = None
    log: str | None = None
    copies: tuple[Copy, ...] | None = None  # only when asked for (--copies)
    run_error: str | None = None  # the run raised this ("Class: TensorFlow's message") instead of a result
    # show, tower: the private TensorFlow APIs that were missing, and why (their reasons say unknown);
    # None where nobody kept count (then title, run_error and incomplete stay out of the JSON)
    incomplete: tuple[str, ...] | None = None
    training: Training | None = None  # train, mirrored: the setup, losses per step, the gradient check
    executed: tuple[tuple[str, int], ...] | None = None  # a traced step's executed op types and node counts
    # runs: the edges of the graphs that ran (Session graph, tf.function graphs), for the pictures; not in the JSON
    edges: tuple[Edge, ...] | None = None

    @property
    def by_device(self) -> dict[str, int]:
        if self.counted is not None:
            return dict(self.counted)
        return dict(Counter(p.canonical for p in self.placements))

    @property
    def placement_count(self) -> int:
        return sum(self.by_device.values())

    @property
    def failed(self) -> bool:
        """No result, and an error says why (a run that did not produce its result always has one)."""
        return self.result is None and (bool(self.errors) or self.run_error is not None)

    def to_dict(self, run: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "placements": [p.to_dict(run) for p in self.placements],
            "device_mapping": [m.to_dict() for m in self.device_mapping],
            "errors": [e.to_dict() for e in self.errors],
            "summary": {
                "lines": self.lines,
                "placements": self.placement_count,
                "by_device": dict(sorted(self.by_device.items())),
            },
        }
        if run:
            data["result"] = self.result
            data["log"] = self.log
            data["copies"] = None if self.copies is None else [c.to_dict() for c in self.copies]
            if self.copies is not None:
                totals = link_totals(self.copies)
                sizes = [t.bytes for t in totals]
                data["copy_totals"] = {"links": [t.to_dict() for t in totals],
                                       "per_step_bytes": None if None in sizes else sum(b or 0 for b in sizes)}
            if self.executed is not None:
                data["executed_ops"] = dict(self.executed)
            if self.training is not None:
                data["steps"] = len(self.training.losses)
                data["losses"] = list(self.training.losses)
                data["check"] = None if self.training.check is None else self.training.check.to_dict()
                data["training"] = self.training.to_dict()
        if run and self.incomplete is not None:  # show, tower: what ran, what stopped it, which facts were missing
            data.update(title=self.title, run_error=self.run_error, incomplete=list(self.incomplete))
        return data


@dataclass(frozen=True)
class TaskDevice:
    """One device a task of a running cluster reported (``placement inspect``)."""

    name: str  # as TensorFlow named it
    spec: DeviceSpec
    memory_limit: int | None  # bytes, where TensorFlow says

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "canonical": self.spec.canonical, "short": self.spec.short,
                "device_type": self.spec.device_type, "device_index": self.spec.device_index,
                "memory_limit": self.memory_limit}


@dataclass(frozen=True)
class TaskAnswer:
    """One task of a running cluster: whether it answered, and its devices."""

    job: str | None  # None: not known (nothing answered at a bare target)
    task: int | None
    target: str | None  # grpc://HOST:PORT where known
    answered: bool
    devices: tuple[TaskDevice, ...] = ()
    error: Any = None  # why it did not answer: a str, or an i18n.Message (English in JSON, translated in tables)

    @property
    def name(self) -> str:
        return "?" if self.job is None else f"/job:{self.job}/task:{self.task}"

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "task": self.task, "target": self.target, "answered": self.answered,
                "devices": [d.to_dict() for d in self.devices], "error": None if self.error is None else str(self.error)}


@dataclass(frozen=True)
class Inspection:
    """What ``placement inspect`` learned of a running cluster."""

    source: str  # the target, the cluster-spec file, or TF_CONFIG
    timeout: float
    tasks: tuple[TaskAnswer, ...]
    complete: bool  # every task answered and no task is known to be missing
    error: Any = None  # a str or an i18n.Message: what kept the answer incomplete, beyond the tasks' own errors
    lingering: bool = False  # a TensorFlow call outlived the timeout (its thread is left behind)

    @property
    def silent(self) -> tuple[TaskAnswer, ...]:
        return tuple(t for t in self.tasks if not t.answered)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "timeout_s": self.timeout, "tasks": [t.to_dict() for t in self.tasks],
                "complete": self.complete, "error": None if self.error is None else str(self.error),
                "summary": {"tasks": len(self.tasks), "answered": sum(t.answered for t in self.tasks),
                            "devices": sum(len(t.devices) for t in self.tasks)}}


# --- placement errors (the catalogue of failures, run for real) and devices (what TensorFlow sees) ---


@dataclass(frozen=True)
class SoftRun:
    """What one failure case did with soft placement on: where its ops went and its result, or the
    error it raised all the same."""

    placements: tuple[Placement, ...] = ()  # as explained for a run (requested, status, reason)
    result: Any = None
    error_class: str | None = None  # set: it failed with soft placement too
    message: str | None = None  # the first line of TensorFlow's message, when it failed

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"placements": [p.to_dict(run=True) for p in self.placements], "result": self.result}
        if self.error_class is not None:
            data.update(error_class=self.error_class, message=self.message)
        return data


@dataclass(frozen=True)
class FailureCase:
    """One case of ``placement errors``: what it pins where, and what TensorFlow did without and with
    soft placement (or why it was not run here)."""

    name: str
    description: Message | str  # English in JSON, the chosen language in tables
    requested: str  # the device it pins its op to
    ran: bool = False
    skip_reason: Message | str | None = None  # why it was not run (a str: a missing private API, untranslated)
    error_class: str | None = None  # the exception TensorFlow raised without soft placement
    error: PlacementFailure | None = None
    soft: SoftRun | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": str(self.description), "requested": self.requested,
                "ran": self.ran, "skip_reason": None if self.skip_reason is None else str(self.skip_reason),
                "error_class": self.error_class, "error": None if self.error is None else self.error.to_dict(),
                "soft": None if self.soft is None else self.soft.to_dict()}


@dataclass(frozen=True)
class FailureCatalogue:
    """What ``placement errors`` found: every case, and the private TensorFlow APIs that were missing."""

    cases: tuple[FailureCase, ...]
    incomplete: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"cases": [c.to_dict() for c in self.cases], "incomplete": list(self.incomplete)}


@dataclass(frozen=True)
class PhysicalDevice:
    """A device TensorFlow found on the machine (``tf.config.list_physical_devices``)."""

    name: str
    device_type: str
    gpu_name: str | None = None  # GPUs only, as the driver names them
    compute_capability: str | None = None  # GPUs only: "8.0"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "device_type": self.device_type}
        if self.device_type == "GPU":
            data.update(gpu_name=self.gpu_name, compute_capability=self.compute_capability)
        return data


@dataclass(frozen=True)
class LogicalDevice:
    """A device ``tf.device()`` can name (``tf.config.list_logical_devices``)."""

    name: str
    device_type: str
    canonical: str  # the full name; the name itself where it does not parse

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "device_type": self.device_type, "canonical": self.canonical}


@dataclass(frozen=True)
class Inventory:
    """What ``placement devices`` found: physical and logical devices, and the Device mapping a v1
    Session logged when it was created."""

    physical: tuple[PhysicalDevice, ...]
    logical: tuple[LogicalDevice, ...]
    device_mapping: tuple[DeviceMapping, ...] = ()
    mapping_logged: bool = False  # a Device mapping block was logged (a CPU-only one lists no device)

    @property
    def gpus(self) -> tuple[PhysicalDevice, ...]:
        return tuple(d for d in self.physical if d.device_type == "GPU")

    def to_dict(self) -> dict[str, Any]:
        return {"physical": [d.to_dict() for d in self.physical], "logical": [d.to_dict() for d in self.logical],
                "device_mapping": [m.to_dict() for m in self.device_mapping],
                "device_mapping_logged": self.mapping_logged}
# ---------------------------------------------------------------- placement cluster: a ps/worker run
# (one process per task; the supervisor's answer, then the report made of it)

_TASK_FIELDS = ("job", "task", "target", "pid", "exit_code", "ended_by_placement", "private_kib", "steps_reported")


@dataclass(frozen=True)
class ClusterTask:
    """One task of a cluster run, as its supervisor saw it (None: not known)."""

    job: str
    task: int
    target: str | None = None  # grpc://HOST:PORT
    pid: int | None = None
    exit_code: int | None = None  # negative: the signal that killed it
    ended_by_placement: bool | None = None  # placement killed it at the end (a server never stops itself)
    private_kib: int | None = None
    steps_reported: int | None = None  # TF1's workers: the steps it said it had run, by its heartbeats

    @property
    def name(self) -> str:
        return f"{self.job}/{self.task}"

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _TASK_FIELDS}


@dataclass(frozen=True)
class TaskTraining:
    """What one training task reported at its end (TF1: a worker; TF2: the coordinator)."""

    losses: tuple[float, ...] = ()
    global_steps: tuple[int, ...] = ()  # the global step each of its steps read
    variables: tuple[tuple[str, str], ...] = ()  # (variable, the device it lives on)
    copies: tuple[Copy, ...] = ()  # what its first step copied between tasks (--copies)
    edges: tuple[tuple[str, str, bool], ...] = ()  # its graph: (producer, consumer, control)


@dataclass(frozen=True)
class ClusterRun:
    """What the supervisor said: the tasks, each trainer's training, each task's log; problem when it failed."""

    isolated: bool | None = None  # None: not known (the supervisor ended before it said)
    isolation_note: str = ""
    tasks: tuple[ClusterTask, ...] = ()
    results: tuple[tuple[str, TaskTraining], ...] = ()  # by task name ("worker/0"), in task order
    logs: tuple[tuple[str, str], ...] = ()  # each task's stderr (glog: where its placements are)
    problem: Any = None  # a str or an i18n.Message, shown in the user's language; ``error`` is its English
    seconds: float | None = None
    start_method: str | None = None
    cluster: tuple[tuple[str, tuple[str, ...]], ...] = ()  # job -> addresses
    own_failure: bool = False  # placement's own supervisor failed (crashed, killed), not the cluster

    @property
    def error(self) -> str | None:
        return None if self.problem is None else str(self.problem)

    def result(self, task: str) -> TaskTraining | None:
        return next((training for name, training in self.results if name == task), None)

    def log(self, task: str) -> str | None:
        return next((text for name, text in self.logs if name == task), None)

    @property
    def workers(self) -> tuple[ClusterTask, ...]:
        return tuple(t for t in self.tasks if t.job == "worker")


@dataclass(frozen=True)
class WorkerSteps:
    """What one worker ran. None: not known (it never reported), which is not nothing (0)."""

    task: int
    steps: int | None
    losses: tuple[float, ...] | None = None  # TF1 only: TF2's losses are the coordinator's
    global_steps: tuple[int, ...] | None = None
    steps_reported: int | None = None  # where not known: what it said before it ended
    api: str = "tf1"
    known: bool = True  # its result came

    def to_dict(self) -> dict[str, Any]:
        if self.api == "tf2":
            if self.known:
                return {"task": self.task, "steps": self.steps}
            return {"task": self.task, "steps": None, "steps_reported": self.steps_reported}
        if not self.known:
            return {"task": self.task, "steps": None, "losses": None, "global_steps": None,
                    "steps_reported": self.steps_reported}
        return {"task": self.task, "steps": self.steps, "losses": list(self.losses or ()),
                "global_steps": list(self.global_steps or ())}


@dataclass(frozen=True)
class ClusterReport:
    """`placement cluster`: the run, its placements by task, and how the workers trained."""

    run: ClusterRun
    report: Report
    sync: bool
    steps: int
    api: str = "tf1"
    graph: Report | None = None  # for --dot and --graph-svg: node names qualified by the task they ran on
    scheduled: tuple[tuple[int, int], ...] = ()  # TF2: (worker task, steps the coordinator's log sent it)
    workers: tuple[WorkerSteps, ...] = ()
    sync_ops: tuple[tuple[str, int], ...] = ()  # SyncReplicasOptimizer's op types the graphs placed, counted

    @property
    def mode(self) -> str:
        return "sync" if self.sync else "async"

    @property
    def complete(self) -> bool:
        expected = 1 if self.api == "tf2" else len(self.run.workers)
        return self.run.error is None and bool(self.run.workers) and len(self.run.results) == expected

    @property
    def variables(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for _, training in self.run.results:
            found.update(training.variables)
        return dict(sorted(found.items()))

    def to_dict(self) -> dict[str, Any]:
        data = self.report.to_dict(run=True)
        data.update(
            mode=self.mode,
            api=self.api,
            steps_asked=self.steps,
            tasks=[t.to_dict() for t in self.run.tasks],
            isolated=self.run.isolated,
            variables=self.variables,
            workers=[w.to_dict() for w in self.workers],
            sync_ops=dict(self.sync_ops),
            complete=self.complete,
            error=self.run.error,
            seconds=self.run.seconds,
        )
        if self.api == "tf2":
            chief = self.run.result("chief/0")
            data.update(losses=None if chief is None else list(chief.losses),
                        global_steps=None if chief is None else list(chief.global_steps))
        return data
