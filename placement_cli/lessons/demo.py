"""`placement demo`: the guide's lessons in order, as data. Each step names the functions whose
source it shows; the runner records that those very functions ran (the shown code cannot drift)."""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from placement_cli import messages
from placement_cli.devices import short_name
from placement_cli.i18n import N_, Message
from placement_cli.lessons.cluster import build, plan, run
from placement_cli.lessons.costly import gradients
from placement_cli.lessons.guide import matmul, string_op, tower
from placement_cli.lessons.mirrored import MirroredSpec, mirrored
from placement_cli.lessons.train import TrainSpec, train
from placement_cli.messages import duration, quoted
from placement_cli.model import SOFT_FALLBACK, ClusterEvent, DemoOutcome, DemoStep, DemoSteps, StepTitle
from placement_cli.model.fields import known_total
from placement_cli.runtime import inventory, startup
from placement_cli.runtime.capture.fdcapture import capture_fds
from placement_cli.runtime.gpu_policy import grow_here
from placement_cli.runtime.startup import RunOptions

SOFT_CONFIG = "tf.compat.v1.ConfigProto(log_device_placement=True, allow_soft_placement=True)"
CPUS = 3  # logical CPUs made once, before TensorFlow starts: /cpu:0 plus two stand-ins for GPUs
VIRTUAL_GPUS = 2  # logical GPUs carved out of one physical GPU: the two GPUs the tower lessons are about
XLA_CPU = "/device:XLA_CPU:0"  # TensorFlow's second device type where no GPU exists (the kernel step)


@dataclass(frozen=True)
class Machine:
    """The devices the GPU lessons run on here: GPUs where they exist (one GPU split into two logical
    GPUs), else logical CPUs (said so); ``progress`` hears the cluster step's tasks start (a line each,
    so nobody stares at a silent screen)."""

    gpus: int  # physical GPUs
    progress: Callable[[ClusterEvent], None] | None = field(default=None, compare=False)
    xla: bool = False  # TensorFlow's XLA devices: chosen (see choose), then whether this TensorFlow made them

    @property
    def virtual_gpus(self) -> int | None:
        """Logical GPUs carved out of the one physical GPU (None: none carved, zero or several GPUs)."""
        return VIRTUAL_GPUS if self.gpus == 1 else None

    @property
    def logical_gpus(self) -> int:
        return self.virtual_gpus or self.gpus

    @property
    def towers(self) -> list[str]:
        return ["/gpu:0", "/gpu:1"] if self.logical_gpus >= 2 else ["/cpu:1", "/cpu:2"]

    @property
    def replicas(self) -> list[str]:
        """MirroredStrategy's replicas: two GPUs, else two logical CPUs (never a GPU mixed with a CPU)."""
        return ["/gpu:0", "/gpu:1"] if self.logical_gpus >= 2 else ["/cpu:0", "/cpu:1"]

    def options(self, **kwargs: Any) -> RunOptions:
        """Every step's run options: the same logical devices (a v1 Session makes its own: asked each time)."""
        return RunOptions(cpus=CPUS, virtual_gpus=self.virtual_gpus, **kwargs)

    @property
    def pinned(self) -> str:
        return self.towers[0]

    @property
    def second(self) -> str | None:
        """A second device type, whose kernels are not the CPU's: a GPU, else XLA_CPU (None: neither here)."""
        return "/gpu:0" if self.gpus else XLA_CPU if self.xla else None

    @property
    def missing(self) -> str:
        return f"/gpu:{max(self.logical_gpus, 2)}"  # the guide's /gpu:2, or the first index past the GPUs here


def choose(physical: Collection[str], keys: Collection[str]) -> Machine:
    """The demo's devices, chosen from the types of the physical devices TensorFlow found ("CPU",
    "GPU", ...) before it made any, for the steps ``keys``: GPUs where they exist, one GPU split into
    two logical GPUs, else logical CPUs; TensorFlow's XLA devices only where no GPU exists and the
    kernel step runs (its second device type). Beside a GPU they would be in every step's device lists
    and mappings (XLA_CPU:0, XLA_GPU:0), and an XLA_GPU device takes GPU memory of its own."""
    gpus = sum(kind == "GPU" for kind in physical)
    return Machine(gpus=gpus, xla=gpus == 0 and "kernel" in keys)


@dataclass(frozen=True)
class Step:
    key: str
    title: str
    explain: str
    code: tuple[tuple[Any, str], ...]  # (module, function name): the source shown, looked up when run
    run: Callable[[Machine], DemoOutcome]
    args: Callable[[Machine], dict[str, Any]] = lambda machine: {}

    def functions(self) -> list[Any]:
        return [getattr(module, name) for module, name in self.code]

    def parameters(self) -> frozenset[str]:
        """The names of the arguments the shown functions take."""
        return frozenset(name for f in self.functions() for name in inspect.signature(inspect.unwrap(f)).parameters)

    def source(self) -> str:
        return "\n\n".join(inspect.getsource(inspect.unwrap(f)).rstrip() for f in self.functions())


def _taught(result: Any, notice: str, fields: dict[str, Any], ran: tuple[str, ...] = ()) -> DemoOutcome:
    """A step that went as the lesson expects: its result and the fact to notice, its fields read from the result."""
    return DemoOutcome(result, Message(notice, **fields), ran=ran)


# --- the steps' runs: each calls a lesson, then reads the one fact to notice off its result ---

def _devices(machine: Machine) -> DemoOutcome:
    found = inventory.inventory(machine.options())  # through its module: run_step wraps it to see it ran
    logical = [short_name(d.canonical) for d in found.logical]
    carved = [short_name(d.canonical) for d in found.logical if d.device_type == "GPU"]
    if found.gpus and len(carved) > len(found.gpus):
        return _taught(found, N_("TensorFlow sees {gpus} GPU(s), split into {count} logical GPUs ({carved}) for the "
                                 "lessons about two GPUs; its logical devices: {names}."),
                       {"gpus": len(found.gpus), "count": len(carved), "carved": ", ".join(carved),
                        "names": ", ".join(logical)})
    if found.gpus:
        return _taught(found, N_("TensorFlow sees {gpus} GPU(s) and {count} logical devices: {names}."),
                       {"gpus": len(found.gpus), "count": len(logical), "names": ", ".join(logical)})
    cpus = [short_name(d.canonical) for d in found.logical if d.device_type == "CPU"]
    xla = [name for name in logical if name not in cpus]
    if xla:  # the kernel step's stand-in: not a piece of the CPU
        return _taught(found, N_("No GPU here: the CPU is split into {count} logical devices ({names}); the GPU steps "
                                 "run on them instead, and say so. {xla}: TensorFlow's XLA devices, a second device "
                                 "type with kernels of its own."),
                       {"count": len(cpus), "names": ", ".join(cpus), "xla": ", ".join(xla)})
    return _taught(found, N_("No GPU here: the CPU is split into {count} logical devices ({names}); "
                                          "the GPU steps run on them instead, and say so."),
                   {"count": len(logical), "names": ", ".join(logical)})


def _logging(machine: Machine) -> DemoOutcome:
    report = matmul(None, None, machine.options())
    shown = [p for p in report.placements if p.node in ("a", "b", "MatMul")]
    if report.result is None or not shown:
        return DemoOutcome(report, ok=False, problem="the matmul did not run")
    return _taught(report, N_("Nothing was pinned, yet the log names a device for every op: {where}."),
                   {"where": ", ".join(f"{p.node} -> {p.short}" for p in sorted(shown, key=lambda p: p.line))})


def _manual(machine: Machine) -> DemoOutcome:
    report = matmul(machine.pinned, "/cpu:0", machine.options())
    product = next((p for p in report.placements if p.op and "MatMul" in p.op), None)
    if report.result is None or product is None:
        return DemoOutcome(report, ok=False, problem="the pinned matmul did not run")
    inputs = sorted({p.short for p in report.placements if p.node in ("a", "b")})
    notice = (N_("a and b ran on {inputs} and MatMul on {device}, as pinned ({status}).") if machine.gpus else
              N_("a and b ran on {inputs} and MatMul on {device}, as pinned ({status}): a logical CPU standing "
                 "in for a GPU."))
    return _taught(report, notice,
                   {"inputs": ", ".join(inputs), "device": product.short, "status": product.status})


def _missing(machine: Machine) -> DemoOutcome:
    report = matmul(machine.missing, None, machine.options())
    if report.result is not None or not report.errors:
        return DemoOutcome(report, ok=False, problem=f"pinning to {machine.missing} did not fail")
    failure = report.errors[0]
    return _taught(report, N_("TensorFlow refused to run: {node} asked for {requested}, which does not "
                                        "exist ({kind}); it has {available}."),
                   {"node": failure.node or "?", "requested": machine.missing, "kind": failure.kind,
                    "available": ", ".join(d.short for d in failure.available_devices) or "?"})


def _soft(machine: Machine) -> DemoOutcome:
    report = matmul(machine.missing, None, machine.options(soft=True))
    fallen = [p for p in report.placements if p.status == SOFT_FALLBACK]
    if report.result is None or not fallen:
        return DemoOutcome(report, ok=False, problem="soft placement did not fall back")
    first = fallen[0]
    return _taught(report, N_("With soft placement the same graph runs: {node} fell back to {device} "
                                        "because {reason}."),
                   {"node": first.node, "device": first.short, "reason": first.reason})


def _kernel(machine: Machine) -> DemoOutcome:
    if machine.second is None:
        return DemoOutcome(notice=Message(NO_SECOND_TYPE), skipped=True)
    report = string_op(machine.second, machine.options(soft=True))
    fallen = next((p for p in report.placements if p.status == SOFT_FALLBACK and p.op == "AsString"), None)
    if report.result is None or fallen is None or not fallen.reason:
        return DemoOutcome(report, ok=False, problem=f"AsString pinned to {machine.second} did not fall back")
    stayed = sorted({p.short for p in report.placements if p.node and p.node.startswith("numbers")})
    return _taught(report, N_("{node} asked for {requested}, which has no kernel for {op}: soft placement ran it on "
                              "{device} ({reason}), while numbers stayed on {stayed}."),
                   {"node": fallen.node, "requested": short_name(machine.second), "op": fallen.op,
                    "device": fallen.short, "reason": fallen.reason, "stayed": ", ".join(stayed) or "?"})


NO_SECOND_TYPE = N_("Not run here: no GPU, and this TensorFlow makes no XLA devices (even with TF_XLA_FLAGS="
                    "--tf_xla_enable_xla_devices), so no second device type exists to lack a kernel.")


def _towers(machine: Machine, copies: bool = False) -> Any:
    return tower(machine.towers, "/cpu:0", machine.options(copies=copies))


def _tower(machine: Machine) -> DemoOutcome:
    report = _towers(machine)
    if report.result is None:
        return DemoOutcome(report, ok=False, problem="the towers did not run")
    where: dict[Any, str] = {}
    summed = "?"
    for p in report.placements:
        group = p.group
        if isinstance(group, Message) and group.template == messages.GUIDE_TOWER and p.op and "MatMul" in p.op:
            where[group.fields["number"]] = p.short
        elif group == messages.REDUCE and p.op == "AddN":
            summed = p.short
    towers = tuple(messages.tower_at(number, device) for number, device in sorted(where.items()))
    return _taught(report, N_("Each tower's MatMul ran where it was pinned ({towers}); AddN summed "
                                        "them on {device}."), {"towers": towers, "device": summed})


def _copies(machine: Machine) -> DemoOutcome:
    report = _towers(machine, copies=True)
    if report.result is None or report.copies is None:
        return DemoOutcome(report, ok=False, problem="the copies were not recorded")
    links = sorted({f"{c.source.short} -> {c.target.short}" for c in report.copies})
    return _taught(report, N_("{count} tensors crossed devices ({links}): each crossing is a _Send/_Recv "
                                        "pair TensorFlow added."),
                   {"count": len(report.copies), "links": ", ".join(links) or "-"})


def _cost(machine: Machine) -> DemoOutcome:
    """tensorflow#2441: the same tower gradients without and with colocate_gradients_with_ops, each timed."""
    timed = {"time": True, "time_steps": 5, "mode": "graph"}
    apart = gradients(machine.towers, False, machine.options(**timed))
    together = gradients(machine.towers, True, machine.options(**timed))
    if apart.cost is None or together.cost is None or apart.result is None or together.result is None:
        return DemoOutcome(apart, ok=False, problem=apart.timing_error or together.timing_error or "the gradients did not run")
    grads = {p.short for p in apart.placements if p.node and p.node.startswith("gradients/") and "MatMul" in (p.op or "")}
    where = min(grads) if len(grads) == 1 else "?"
    busy = {d.device.short: d.busy.mean for d in apart.cost.devices}
    busy_after = {d.device.short: d.busy.mean for d in together.cost.devices}

    def moved(cost: Any) -> str:
        total = known_total(t.bytes for t in cost.links)
        return "?" if total is None else f"{total:,} B"

    return _taught(apart, N_("Without colocate_gradients_with_ops both towers' gradients ran on {device}: "
                             "{before} crossed devices per step and {device} was busy {busy}. Colocated with "
                             "their forward ops, each tower's gradients ran on its own device: {after} per step, "
                             "{device} busy {busy_after}."),
                   {"device": where, "before": moved(apart.cost), "after": moved(together.cost),
                    "busy": duration(busy.get(where, 0.0)), "busy_after": duration(busy_after.get(where, 0.0))})


def _train(machine: Machine) -> DemoOutcome:
    report = train(TrainSpec(devices=tuple(machine.towers), batch=64, steps=3, lr=0.5, dtype="float32",
                             check=False), machine.options(mode="graph"))
    training = report.training
    if report.failed or training is None or not training.complete:
        return DemoOutcome(report, ok=False, problem="the tower training did not finish")
    return _taught(report, N_("The variables live on {variables}, the towers on {towers}; the loss went "
                                          "from {first:.4f} to {last:.4f} in {steps} steps."),
                   {"variables": training.variables_on, "towers": ", ".join(training.devices),
                    "first": training.losses[0], "last": training.losses[-1], "steps": len(training.losses)})


def _mirrored(machine: Machine) -> DemoOutcome:
    report = mirrored(MirroredSpec(devices=tuple(machine.replicas), batch=64, steps=3, lr=0.1, reduce="collective", fit=False),
                      machine.options(mode="eager"))
    training = report.training
    if report.failed or training is None or not training.complete:
        return DemoOutcome(report, ok=False, problem="the mirrored training did not finish")
    return _taught(report, N_("{replicas} replicas, one copy of every variable each; the gradients were "
                                          "summed with {reduction}; the loss went from {first:.4f} to {last:.4f}."),
                   {"replicas": len(training.replicas or training.devices), "reduction": training.reduction or "?",
                    "first": training.losses[0], "last": training.losses[-1]})


# the cluster step's run: 1 ps and 2 workers, each a process of its own, 3 async steps each
def _cluster_request() -> dict[str, Any]:
    """The cluster lesson's run, as `placement cluster --ps 1 --workers 2 --steps 3` makes it."""

    return plan(api="tf1", ps=1, workers=2, steps=3, sync=False, copies=False, addresses=None)


def _cluster(machine: Machine) -> DemoOutcome:
    request = _cluster_request()
    found = build(run(request, machine.progress or (lambda event: None)), sync=False, steps=request["steps"],
                  copies=False)
    workers = found.workers
    # the shown function runs in the workers' processes, out of the recorder's reach: their answers say it ran
    ran = ["_train"] if found.run.results else []
    if not found.complete or any(w.steps != request["steps"] for w in workers):
        return DemoOutcome(found, ok=False, problem=found.run.error or "the cluster did not finish its steps",
                       ran=tuple(ran))
    last = max((step for w in workers for step in w.global_steps or ()), default=0)
    where = sorted(set(found.variables.values()))
    return _taught(found, N_("{workers} workers, each a process with its own graph, trained against "
                                        "{ps} ps task: every variable lives on {variables} (replica_device_setter), "
                                        "the compute on each worker's own task; async, so the global step counts "
                                        "every worker's steps: {total} in all (the last value a worker read: {last})."),
                   {"workers": len(workers), "ps": request["ps"], "variables": ", ".join(where) or "?",
                    "last": last, "total": sum(w.steps or 0 for w in workers)}, ran=tuple(ran))


def _module(name: str) -> Any:
    return importlib.import_module(name)


class _Lazy:
    """A module imported when its function is first looked up (listing the steps needs no TensorFlow)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(_module(self.name), attr)

    def module(self) -> Any:
        return _module(self.name)


GUIDE = _Lazy("placement_cli.lessons.guide")
INVENTORY = _Lazy("placement_cli.runtime.inventory")
TRAIN = _Lazy("placement_cli.lessons.train")
COSTLY = _Lazy("placement_cli.lessons.costly")
MIRRORED = _Lazy("placement_cli.lessons.mirrored")
CLUSTER_TASKS = _Lazy("placement_cli.lessons.cluster_tasks")

STEPS: list[Step] = [
    Step("devices", N_("The devices TensorFlow sees"),
         N_("Before placing anything, ask TensorFlow which devices exist: physical ones, and the logical devices "
            "tf.device() can name."), ((INVENTORY, "inventory"),), _devices),
    Step("logging", N_("Logging device placement"),
         N_("With log_device_placement on, TensorFlow writes where every op runs. No op is pinned here: the "
            "placer chooses."), ((GUIDE, "matmul_graph"), (GUIDE, "_on")), _logging,
         lambda m: {"device": None, "inputs_on": None}),
    Step("manual", N_("Manual placement"),
         N_("tf.device() pins the ops made inside it: the inputs on the CPU, the matmul on another device."),
         ((GUIDE, "matmul_graph"), (GUIDE, "_on")), _manual, lambda m: {"device": m.pinned, "inputs_on": "/cpu:0"}),
    Step("missing", N_("Pinning to a device that does not exist"),
         N_("Pin the matmul to a GPU this machine does not have: without soft placement TensorFlow refuses, "
            "and the error says which devices exist."), ((GUIDE, "matmul_graph"), (GUIDE, "_on")), _missing,
         lambda m: {"device": m.missing, "inputs_on": None}),
    Step("soft", N_("Soft placement"),
         N_("The same graph with allow_soft_placement=True: TensorFlow moves what cannot run where it asked "
            "to a device that exists."), ((GUIDE, "matmul_graph"), (GUIDE, "_on")), _soft,
         lambda m: {"device": m.missing, "inputs_on": None, "config": SOFT_CONFIG}),
    Step("kernel", N_("An op without a kernel for its device"),
         N_("Each device type has kernels of its own: a string op has none on a GPU (or, where no GPU exists, on "
            "TensorFlow's XLA_CPU device). Pinned there with soft placement, it runs on the CPU instead."),
         ((GUIDE, "string_graph"),), _kernel,
         lambda m: {"device": m.second, "config": SOFT_CONFIG}),
    Step("towers", N_("Multi-tower graph on several devices"),
         N_("One matmul per device (a tower each), summed with tf.add_n on the CPU: the pattern of multi-GPU "
            "training."), ((GUIDE, "tower_graph"), (GUIDE, "_on")), _tower, lambda m: {"devices": m.towers, "reduce_on": "/cpu:0"}),
    Step("copies", N_("Copies between devices"),
         N_("Where an op's input lives on another device, TensorFlow inserts a _Send/_Recv pair: the tower graph's "
            "executed partitions list them."), ((GUIDE, "tower_graph"), (GUIDE, "_on")), _copies,
         lambda m: {"devices": m.towers, "reduce_on": "/cpu:0"}),
    Step("cost", N_("What a placement costs"),
         N_("One tf.gradients call made outside the towers' device scopes: without colocate_gradients_with_ops "
            "the backward ops of every tower land on one device (tensorflow#2441). Run both ways and timed, "
            "the copies and the busy time per step say what that placement costs."),
         ((COSTLY, "gradient_graph"),), _cost, lambda m: {"devices": m.towers, "colocate": False}),
    Step("train", N_("Training with towers (train)"),
         N_("The cifar10 multi-GPU pattern: variables on the CPU, a loss and gradients per tower, the gradients "
            "averaged and applied once."), ((TRAIN, "build"), (TRAIN, "tower_loss"), (TRAIN, "average_gradients")), _train,
         lambda m: {"devices": m.towers}),
    Step("mirrored", N_("MirroredStrategy (mirrored)"),
         N_("tf.distribute.MirroredStrategy copies every variable to each replica and all-reduces the gradients."),
         ((MIRRORED, "_custom_loop"),), _mirrored,
         lambda m: {"devices": m.replicas}),
    Step("cluster", N_("A ps/worker cluster (cluster)"),
         N_("Beyond one machine: a real cluster of TensorFlow gRPC servers, one process per task. "
            "replica_device_setter puts the variables on the ps task; each worker builds its own graph and "
            "trains between-graph."), ((CLUSTER_TASKS, "_train"),), _cluster,
         lambda m: {"request": _cluster_request()}),
]


_DIGITS = re.compile(r"[0-9]+")


def select(spec: str | None) -> list[int]:
    """Step numbers (1-based) from ``3``, ``3-5``, ``2,4`` or a mix; None: all. ValueError if malformed."""
    if spec is None:
        return list(range(1, len(STEPS) + 1))
    chosen: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        low, high = low.strip(), high.strip()
        # ASCII digits only: str.isdigit() takes "²" (which int() refuses) and "١" (which int() reads as 1)
        shown = quoted(part, 40)
        if not _DIGITS.fullmatch(low) or (dash and not _DIGITS.fullmatch(high)):
            raise ValueError(f"{shown} is not a step: give K, K-M or a comma-separated list (1-{len(STEPS)})")
        if max(len(low), len(high)) > 6:  # int() refuses 4,300 digits and more, in words about sys
            raise ValueError(f"{shown} is out of range: the steps are 1-{len(STEPS)}")
        first, last = int(low), int(high) if dash else int(low)
        if 1 <= last < first <= len(STEPS):
            raise ValueError(f"{shown} runs backwards: give the lower step first ({last}-{first})")
        if not 1 <= first <= last <= len(STEPS):
            raise ValueError(f"{shown} is out of range: the steps are 1-{len(STEPS)}")
        chosen += [k for k in range(first, last + 1) if k not in chosen]
    return chosen


def start(chosen: list[int]) -> Machine:
    """TensorFlow, started once for every step, on the devices chosen from those it finds (``choose``):
    logical CPUs and GPUs first (they cannot be added later), and TensorFlow's XLA devices where the
    kernel step needs them (its stand-in for a GPU where none exists)."""

    with capture_fds():
        keys = {STEPS[k - 1].key for k in chosen}
        machine = choose(startup.physical_devices(), keys)
        tf = startup.tensorflow(machine.options(xla=machine.xla))
        if "cluster" in keys and machine.gpus and machine.virtual_gpus is None:
            # its tasks are more processes on these GPUs (one GPU is split into logical GPUs of bounded size)

            grow_here(tf)
        made = machine.xla and bool(startup.xla_devices(tf))
    return replace(machine, xla=made)


def run_step(step: Step, machine: Machine) -> DemoOutcome:
    """Run one step; its shown functions are wrapped while it runs so the outcome records that they ran.
    An unexpected error is the step's failure (kept, not raised: the demo goes on and exits 1)."""
    ran: list[str] = []
    undo: list[Callable[[], None]] = []
    for holder, name in step.code:
        module = holder.module()
        original = getattr(module, name)

        @functools.wraps(original)
        def recorder(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
            if _name not in ran:
                ran.append(_name)
            return _original(*args, **kwargs)

        setattr(module, name, recorder)
        undo.append(functools.partial(setattr, module, name, original))
    try:
        outcome = step.run(machine)
    except Exception as exc:  # noqa: BLE001 - a lesson that breaks is reported as the step's failure
        outcome = DemoOutcome(ok=False, problem=f"{type(exc).__name__}: {exc}")
    finally:
        for restore in undo:
            restore()
    ran += [name for name in outcome.ran if name not in ran]  # + what ran in other processes
    missing = [name for _, name in step.code if name not in ran]
    if outcome.ok and missing and not outcome.skipped:
        return replace(outcome, ran=tuple(ran), ok=False, problem=f"the code shown did not run: {', '.join(missing)}")
    return replace(outcome, ran=tuple(ran))


def gpu_note(machine: Machine) -> str | None:
    """What stands in for the GPUs here, said plainly (None: two GPUs or more, nothing stands in)."""
    if machine.gpus >= 2:
        return None
    if machine.gpus == 1:
        return N_("One GPU here, split into two logical GPUs (/gpu:0, /gpu:1): the towers and MirroredStrategy's two "
                  "replicas run on them, both on the same physical GPU.")
    if machine.xla:
        return N_("No GPU here: the GPU steps run on logical CPUs (/cpu:1, /cpu:2; MirroredStrategy's two replicas "
                  "on /cpu:0, /cpu:1), the missing kernel on TensorFlow's XLA_CPU device, and say so; nothing "
                  "pretends a GPU exists.")
    return N_("No GPU here: the GPU steps run on logical CPUs (/cpu:1, /cpu:2; MirroredStrategy's two replicas "
              "on /cpu:0, /cpu:1) and say so; nothing pretends a GPU exists.")


def contents() -> DemoSteps:
    """`demo --list`: every step's number, key and title."""
    return DemoSteps(tuple(StepTitle(k, s.key, s.title) for k, s in enumerate(STEPS, 1)))


def run_steps(chosen: list[int], machine: Machine) -> Iterator[DemoStep]:
    """The chosen steps, each run when the one before was shown."""
    for k in chosen:
        step = STEPS[k - 1]
        outcome = run_step(step, machine)
        yield DemoStep(k, step.key, step.title, step.explain, step.source(), step.args(machine), outcome,
                       takes=step.parameters())
