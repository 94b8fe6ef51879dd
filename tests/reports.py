"""Run reports built without TensorFlow: placements as a log gives them, explained by why.py from
recorded facts, so requested, status, reason and group are what a real run would carry."""

from __future__ import annotations

from dataclasses import replace

from placement_cli import messages
from placement_cli.devices import parse_device
from placement_cli.i18n import Message
from placement_cli.model import Origin, Placement, PlacementFailure, Report
from placement_cli.model.facts import Facts, NodeFacts
from placement_cli.why import explain, merge_nodes

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU = "/job:localhost/replica:0/task:0/device:GPU:{}"
KERNELS = {
    "MatMul": frozenset({"CPU", "GPU"}),
    "Const": frozenset({"CPU", "GPU"}),
    "StringJoin": frozenset({"CPU"}),
    "VarHandleOp": frozenset({"CPU", "DEFAULT"}),
    "AssignAddVariableOp": frozenset({"CPU", "GPU"}),
    "AddN": frozenset({"CPU", "GPU"}),
    "Identity": frozenset({"CPU", "GPU"}),
}


def placed(node: str | None, op: str, device: str, line: int, kind: str = "placer") -> Placement:
    return Placement(node=node, op=op, device=device, spec=parse_device(device), kind=kind, line=line)


def _report(placements: list[Placement], facts: list[NodeFacts], available: tuple[str, ...], **extra) -> Report:
    known = Facts(nodes=merge_nodes(facts), available=available, kernels=KERNELS, graphs_known=True)
    return Report(placements=explain(placements, known), lines=len(placements), origin=Origin.RUN, **extra)


def as_run(report: Report) -> Report:
    """``report`` as a run's (what each op asked for is known), whatever it was read from."""
    return replace(report, origin=Origin.RUN)


def trace_report() -> Report:
    """A traced program on a machine with one GPU: long scoped names that differ only at the end or
    in the middle, a soft fallback, an op with no GPU kernel, a colocation, an eager op run in a loop,
    a node named like rich markup with an escape sequence, and a placement error."""
    names = [
        ("tower_0/gradients/dense/MatMul_grad/MatMul", "MatMul", GPU.format(0), "/gpu:0"),
        ("tower_0/gradients/dense/MatMul_grad/MatMul_1", "MatMul", GPU.format(0), "/gpu:0"),
        ("tower_1/gradients/dense/MatMul_grad/MatMul", "MatMul", CPU0, "/gpu:1"),
        ("tower_1/gradients/dense/MatMul_grad/MatMul_1", "MatMul", CPU0, "/gpu:1"),
        ("input_pipeline/parse_example/StringJoin", "StringJoin", CPU0, None),
        ("v", "VarHandleOp", CPU0, "/cpu:0"),
        ("optimizer/update_v/AssignAddVariableOp", "AssignAddVariableOp", CPU0, "/gpu:0"),
        ("[red]x\x1b[31m", "Identity", GPU.format(0), None),
    ]
    placements = [placed(n, op, dev, i + 1) for i, (n, op, dev, _) in enumerate(names)]
    placements += [placed(None, "_EagerConst", GPU.format(0), 20 + i, kind="eager") for i in range(3)]
    facts = [NodeFacts(n, op, req) for n, op, _, req in names]
    facts[6] = replace(facts[6], partners=("v",))
    error = PlacementFailure(kind="device_not_found", node="tower_2/MatMul", requested_device="/device:GPU:2",
                             message="Cannot assign a device for operation tower_2/MatMul: {{node tower_2/MatMul}} "
                                     "was explicitly assigned to /device:GPU:2 but available devices are [ "
                                     f"{CPU0}, {GPU.format(0)} ].",
                             available_devices=(CPU0, GPU.format(0)))
    return _report(placements, facts, (CPU0, GPU.format(0)),
                   title=Message(messages.TRACE, script="train[v2].py", code=0),
                   errors=(error,))


def tower_report() -> Report:
    """The guide's towers on two GPUs of which one exists, soft placement on: one group per tower."""
    placements, facts = [], []
    for t in range(2):
        group = f"tower {t} (/gpu:{t})"
        for name, op in ((f"MatMul{'_' + str(t) if t else ''}", "MatMul"), (f"Const_{2 * t}", "Const"),
                         (f"Const_{2 * t + 1}", "Const")):
            placements.append(placed(name, op, GPU.format(0) if t == 0 else CPU0, len(placements) + 1))
            facts.append(NodeFacts(name, op, f"/gpu:{t}", group=group))
    placements.append(placed("AddN", "AddN", CPU0, len(placements) + 1))
    facts.append(NodeFacts("AddN", "AddN", "/cpu:0", group=messages.REDUCE))
    return _report(placements, facts, (CPU0, GPU.format(0)), title="Guide towers on /gpu:0, /gpu:1 [soft]",
                   result=[[44.0, 56.0], [98.0, 128.0]])


def big_report(layers: int = 60) -> Report:
    """A model of four towers and ``layers`` layers each (a few hundred rows): more than a screen.
    Towers 2 and 3 asked for GPUs that do not exist and fell back; the input pipeline has no GPU kernel."""
    placements: list[Placement] = []
    facts: list[NodeFacts] = []
    for t in range(4):
        device = GPU.format(t) if t < 2 else CPU0
        for layer in range(layers):
            for op in ("MatMul", "Identity"):
                name = f"tower_{t}/model/layer_{layer}/{op}"
                placements.append(placed(name, op, device, len(placements) + 1))
                facts.append(NodeFacts(name, op, f"/gpu:{t}"))
    for i in range(5):
        name = f"input_pipeline/StringJoin_{i}"
        placements.append(placed(name, "StringJoin", CPU0, len(placements) + 1))
        facts.append(NodeFacts(name, "StringJoin"))
    return _report(placements, facts, (CPU0, GPU.format(0), GPU.format(1)),
                   title=Message(messages.TRACE, script="big_model.py", code=0))
