"""Which graph each placer line of a log was placed in, which function a call node ran, and which eager
op each of TensorFlow's single-op wrapper functions stood for: the log's structure, read against the
graphs recorded beside it (why.py's reasons need it)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from placement_cli.model import Placement
from placement_cli.model.facts import Facts, NodeFacts
from placement_cli.model.kinds import PlacementKind
from placement_cli.model.ops import onednn_base
from placement_cli.tfrules import arg_name, function_traces

# Nodes that call function graphs: a tf.function call, and tf.cond/tf.while_loop/tf.switch_case (their
# branches are traced function graphs). TensorFlow inlines the first as ``<call>/<name>`` and lowers the
# others' branches to ``<node>/then/_N/<name>`` (else, cond, body, branchK): lower_if_op.cc and co.

CALL_OPS = ("StatefulPartitionedCall", "PartitionedCall", "If", "StatelessIf", "While", "StatelessWhile", "Case",
             "StatelessCase")
_CALL_NODE = re.compile(r"(?:Stateful)?PartitionedCall(?:_\d+)?")  # tf.function call nodes' default names
_BRANCH = re.compile(r"then|else|cond|body|branch\d+")
_LOWERED = re.compile(r"_\d+")


def calls_in(name: str) -> Iterator[tuple[str, str, str, bool]]:
    """Each (call prefix, call node, name inside the called graph, lowered) a placer node's name can be
    read as, outermost first: ``PartitionedCall/x`` -> (PartitionedCall, PartitionedCall, x, False); a
    lowered branch, ``cond/then/_0/cond/mm`` -> (cond/then/_0, cond, cond/mm, True): only a call node
    a recorded graph has makes it one."""
    parts = name.split("/")
    for i in range(len(parts) - 1):
        if _CALL_NODE.fullmatch(parts[i]):
            yield "/".join(parts[: i + 1]), "/".join(parts[: i + 1]), "/".join(parts[i + 1:]), False
        elif 0 < i < len(parts) - 2 and _BRANCH.fullmatch(parts[i]) and _LOWERED.fullmatch(parts[i + 1]):
            yield "/".join(parts[: i + 2]), "/".join(parts[:i]), "/".join(parts[i + 2:]), True


_ARGS = frozenset({"_Arg", "_DeviceArg"})
_UNIQUE = re.compile(r"(.+)_\d+")  # TensorFlow's suffix that keeps a function's argument names apart
_RETVALS = frozenset({"_Retval", "_DeviceRetval"})


def graph_blocks(placements: tuple[Placement, ...], graphs: tuple[Mapping[tuple[str, str | None], NodeFacts], ...],
                  session_runs: tuple[int, ...] = (), graph_names: tuple[str | None, ...] = ()
                  ) -> tuple[dict[int, frozenset[int] | None], dict[int, int]]:
    """Which recorded graphs each placer line can come from, by line. The placer logs one graph's
    nodes together: a run of placer lines, ended by an eager line, by a name the run already had,
    by a node that none of the graphs the run could be so far has, or where a wrapper function's
    node (named after its op type, in no recorded graph) meets a recorded graph's node (where
    TensorFlow's INFO lines are hidden, the log's placer lines come without the eager lines between
    them). A run holds only the nodes
    of the graphs it is given (an argument, ``_Arg``, is one of the graph's placeholders; TF's own
    nodes no graph has, and return values, fit any); an empty set: a graph placement did not
    record (an eager op's wrapper function), whose nodes take no recorded graph's facts. A run that only
    Session graphs fit takes the graph of the next Session run among them (``session_runs``: TensorFlow
    places a Session's graph at its first run), so two Sessions' graphs with the same names keep apart;
    a run of a tf.function's lines (``Placement.graph``, ``__inference_NAME_N``) takes, among the graphs it
    fits, the recorded graphs named NAME: the k-th trace of NAME in the log, the k-th recorded, where
    both count the same."""
    names = [{name for name, _ in graph} for graph in graphs]
    args = [{arg_name(name) for name, op in graph if op == "Placeholder"} for graph in graphs]  # as TF names them
    sessions = set(session_runs)
    queue = list(session_runs)
    traced = function_traces(placements, graph_names)
    everywhere = set().union(*names) if names else set()
    calls = [{name for name, op in graph if op in CALL_OPS} for graph in graphs]
    any_call = set().union(*calls) if calls else set()

    def fits(p: Placement) -> frozenset[int] | None:
        name = p.node or ""
        if p.op in _RETVALS:
            return None
        if p.op in _ARGS:  # a placeholder's name, or the argument TensorFlow made of it (AssignVariableOp/resource:
            unique = _UNIQUE.fullmatch(name)  # assignvariableop_resource; a second one: ..._resource_0)
            return frozenset(i for i, known in enumerate(names) if name in known or name in args[i]
                             or (unique is not None and unique.group(1) in args[i]))
        found = {i for i, graph in enumerate(graphs) if (name, p.op) in graph}
        callers = [caller for _prefix, caller, _rest, lowered in calls_in(name) if not lowered or caller in any_call]
        found.update(i for i, known in enumerate(calls) if any(c in known for c in callers))
        if not found and name not in everywhere and not callers:
            return None  # a node TensorFlow added (no graph has its name): any graph may hold it
        return frozenset(found)

    found: dict[int, frozenset[int] | None] = {}
    runs: dict[int, int] = {}
    function: list[str | None] = [None]  # the tf.function of the run's lines, where the log says
    block: list[int] = []
    seen: set[str] = set()
    fit: frozenset[int] | None = None
    count = [0]

    def close() -> None:
        mine = fit
        named = traced.get(function[0]) if block and mine and len(mine) > 1 else None
        if named and mine is not None and mine & named:
            mine = mine & named
        if block and mine and mine <= sessions:  # a Session's graph: the next Session run among them
            first = next((i for i, g in enumerate(queue) if g in mine), None)
            if first is not None:
                mine = frozenset((queue.pop(first),))
        for line in block:
            found[line] = mine
            runs[line] = count[0]
        count[0] += 1
        block.clear()
        seen.clear()

    for p in sorted(placements, key=lambda p: p.line):
        if p.kind != PlacementKind.PLACER:
            close()
            fit = None
            continue
        mine = fits(p)
        name = p.node or ""
        own = name == p.op and "/" not in name  # named after its op type: a wrapper function's node, maybe
        if name in seen or (fit and mine is not None and not fit & mine):
            close()
            fit = None
        elif fit and mine is None and own:  # no recorded graph has it: an eager op's wrapper begins
            close()
            fit = frozenset()
        elif fit is not None and not fit and mine and not own:  # a recorded graph's own node ends a wrapper
            close()
            fit = None
        fit = mine if fit is None else fit if mine is None else fit & mine
        function[0] = p.graph
        block.append(p.line)
        seen.add(p.node or "")
    close()
    return found, runs


def callees(placements: tuple[Placement, ...], graphs: tuple[Mapping[tuple[str, str | None], NodeFacts], ...],
             blocks: Mapping[int, frozenset[int] | None], runs: Mapping[int, int]) -> dict[tuple[int, str], frozenset[int]]:
    """For each run of placer lines and each function call TF inlined in it (``<call node>/<name>``
    nodes), the recorded graphs other than the caller's that hold every such node of that call:
    the called function's body, found by all its nodes, not by one name."""
    found: dict[tuple[int, str], frozenset[int]] = {}
    for p in placements:
        if p.kind != PlacementKind.PLACER or not p.node or p.line not in runs:
            continue
        for prefix, _caller, rest, _lowered in calls_in(p.node):
            own = blocks.get(p.line) or frozenset()
            holders = frozenset(g for g, graph in enumerate(graphs) if (rest, p.op) in graph and g not in own)
            if not holders:  # a node TF made while inlining, or renamed: it says nothing of the callee
                continue
            key = (runs[p.line], prefix)
            found[key] = found[key] & holders if key in found else holders
    return {key: graphs_ for key, graphs_ in found.items() if graphs_}


def wrapper_lines(ordered: list[Placement], facts: Facts,
                   blocks: Mapping[int, frozenset[int] | None]) -> dict[int, int]:
    """Placer lines of the single-op functions TF 2.x wraps eager ops in: a node named after its
    op type that no recorded graph placed there has, and that the log then shows executing eagerly
    (each with the line of that eager op). One that recorded tf.functions have too (a Cast, a NoOp) is
    one where the log ties it to no function (no ``graph``) and the very next eager line runs its op.
    ``ordered``: the placements in the order they were written (a bare copy where its glog twin came)."""
    wrappers: dict[int, int] = {}
    waiting: dict[str, list[int]] = {}
    shadowed: list[tuple[str, int]] = []  # such nodes since the last eager line
    names = facts.graph_names
    for p in ordered:
        fit = blocks.get(p.line)
        unrecorded = (p.node, p.op) not in facts.nodes if fit is None else not fit
        if p.kind == PlacementKind.PLACER and p.node and p.node == p.op and unrecorded:
            waiting.setdefault(p.node, []).append(p.line)
        elif p.kind == PlacementKind.PLACER and p.node and p.node == p.op and p.graph is None and fit \
                and all(i < len(names) and names[i] for i in fit):
            shadowed.append((p.node, p.line))
        elif p.kind == PlacementKind.EAGER and p.op:
            ops = (p.op, onednn_base(p.op) or p.op)  # (a oneDNN op's base, or the op again: popped once)
            for name in ops:
                wrappers.update(dict.fromkeys(waiting.pop(name, ()), p.line))
            wrappers.update((line, p.line) for name, line in shadowed if name in ops)
            shadowed.clear()
    return wrappers


def next_eager(ordered: list[Placement]) -> dict[int, int]:
    """Placer line -> the first eager line after it written by its thread, where both name the thread:
    TensorFlow places an eager op's wrapper function just before it runs the op, in the same thread.
    ``ordered``: the placements in the order they were written (a bare copy where its glog twin came)."""
    found: dict[int, int] = {}
    waiting: dict[int, list[int]] = {}
    for p in ordered:
        if p.thread is not None and p.kind == PlacementKind.PLACER:
            waiting.setdefault(p.thread, []).append(p.line)
        elif p.thread is not None and p.kind == PlacementKind.EAGER:
            found.update(dict.fromkeys(waiting.pop(p.thread, ()), p.line))
    return found
