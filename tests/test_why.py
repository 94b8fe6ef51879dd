"""Reasons from facts, without TensorFlow: GPU machines' cases written as the facts a GPU run records."""

from __future__ import annotations

from dataclasses import replace

from placement_cli.devices import parse_device
from placement_cli.model import (AS_REQUESTED, FREE, LOGGED, SOFT_FALLBACK, WITH_RESOURCE, Origin, Placement,
                                 reason_counts)
from placement_cli.tfrules import arg_name
from placement_cli.model.facts import Facts, NodeFacts, Span
from placement_cli.why import UNKNOWN, explain, has_kernel, merge_nodes
from placement_cli.i18n import english
from placement_cli.logparse import parse_text

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
KERNELS = {
    "MatMul": frozenset({"CPU", "GPU"}),
    "StringJoin": frozenset({"CPU"}),
    "VarHandleOp": frozenset({"CPU", "DEFAULT"}),
    "AssignAddVariableOp": frozenset({"CPU", "GPU"}),
    "Const": frozenset({"CPU", "GPU"}),
}


def nodes(*facts: NodeFacts) -> dict[tuple[str, str | None], NodeFacts]:
    return merge_nodes(facts)


def placed(node: str | None, op: str, device: str, line: int, kind: str = "placer") -> Placement:
    return Placement(node=node, op=op, device=device, spec=parse_device(device), kind=kind, line=line)

def _read(placements: tuple[Placement, ...] | list[Placement], log: str) -> tuple[Placement, ...]:
    """``placements`` as the parser reads them off ``log``: the same placements, each with the thread
    its line names (and a bare copy's glog twin), which the eager join goes by."""
    parsed = parse_text(log).placements
    assert parsed == tuple(placements)
    return parsed



def explained(facts: Facts, *placements: Placement) -> dict[str, Placement]:
    return {p.node or f"{p.op}@{p.line}": p for p in explain(placements, facts)}


def test_request_for_a_missing_device_names_what_exists() -> None:
    facts = Facts(nodes=nodes(NodeFacts("MatMul", "MatMul", "/device:GPU:2")), available=(CPU0, GPU0), kernels=KERNELS)
    p = explained(facts, placed("MatMul", "MatMul", CPU0, 1))["MatMul"]
    assert (p.status, p.requested) == (SOFT_FALLBACK, "/device:GPU:2")
    assert p.reason == "GPU:2 does not exist (have: CPU:0, GPU:0)"


def test_no_kernel_for_the_requested_type_from_the_registry_and_from_the_node() -> None:
    facts = Facts(nodes=nodes(NodeFacts("Join", "StringJoin", "/gpu:0"),
                              NodeFacts("IntMatMul", "MatMul", "/gpu:0", no_kernel=("GPU",))),
                  available=(CPU0, GPU0), kernels=KERNELS)
    found = explained(facts, placed("Join", "StringJoin", CPU0, 1), placed("IntMatMul", "MatMul", CPU0, 2))
    assert found["Join"].reason == "no GPU kernel registered for StringJoin"
    assert found["IntMatMul"].reason == "no GPU kernel for MatMul with this node's types"


def test_default_kernels_serve_gpus_but_not_cpus() -> None:
    assert has_kernel(KERNELS, "VarHandleOp", "GPU")
    assert not has_kernel({"Only": frozenset({"DEFAULT"})}, "Only", "CPU")
    assert not has_kernel(KERNELS, "StringJoin", "GPU")
    assert has_kernel(KERNELS, "__inference_f_12", "GPU")  # a function call: not ours to judge
    assert has_kernel(None, "StringJoin", "GPU")  # no registry known: no claim


def test_colocation_with_a_variable_explains_a_move() -> None:
    facts = Facts(nodes=nodes(NodeFacts("v", "VarHandleOp", "/cpu:0"),
                              NodeFacts("upd", "AssignAddVariableOp", "/gpu:0", partners=("v",))),
                  available=(CPU0, GPU0), kernels=KERNELS)
    found = explained(facts, placed("v", "VarHandleOp", CPU0, 1), placed("upd", "AssignAddVariableOp", CPU0, 2))
    assert found["v"].status == AS_REQUESTED and found["v"].reason is None
    assert found["upd"].reason == "colocated with v (VarHandleOp) on CPU:0"


def test_free_ops_on_a_cpu_beside_a_gpu_get_a_reason_or_unknown() -> None:
    facts = Facts(nodes=nodes(NodeFacts("v", "VarHandleOp"), NodeFacts("read", "ReadVariableOp", partners=("v",)),
                              NodeFacts("Join", "StringJoin"), NodeFacts("c", "Const"), NodeFacts("m", "MatMul")),
                  available=(CPU0, GPU0), kernels=KERNELS)
    found = explained(facts, placed("v", "VarHandleOp", CPU0, 1), placed("read", "ReadVariableOp", CPU0, 2),
                      placed("Join", "StringJoin", CPU0, 3), placed("c", "Const", CPU0, 4),
                      placed("m", "MatMul", GPU0, 5))
    assert found["read"].reason == "colocated with v (VarHandleOp) on CPU:0"
    assert found["Join"].reason == "no GPU kernel registered for StringJoin"
    assert found["c"].reason == UNKNOWN and found["c"].status == FREE
    assert found["m"].reason is None  # on the GPU: nothing to explain


def test_no_gpu_no_cpu_reasons() -> None:
    facts = Facts(nodes=nodes(NodeFacts("Join", "StringJoin")), available=(CPU0,), kernels=KERNELS)
    assert explained(facts, placed("Join", "StringJoin", CPU0, 1))["Join"].reason is None


def test_unrecorded_nodes_are_logged_not_guessed() -> None:
    facts = Facts(nodes={}, available=(CPU0, GPU0), kernels=KERNELS)
    found = explained(facts, placed("x", "MatMul", CPU0, 1), placed(None, "StringJoin", CPU0, 2, kind="eager"))
    assert found["x"].status == LOGGED and found["x"].requested is None and found["x"].reason == UNKNOWN
    assert found["StringJoin@2"].reason == "no GPU kernel registered for StringJoin"


def test_a_request_that_exists_and_has_a_kernel_is_unknown_when_nothing_explains_it() -> None:
    facts = Facts(nodes=nodes(NodeFacts("m", "MatMul", "/gpu:0")), available=(CPU0, GPU0), kernels=KERNELS)
    reason = explained(facts, placed("m", "MatMul", CPU0, 1))["m"].reason
    assert reason is not None and english(reason).startswith(UNKNOWN.english)


def test_nodes_of_many_graphs_keep_only_what_holds_for_all() -> None:
    merged = merge_nodes([NodeFacts("MatMul", "MatMul", "/gpu:0"), NodeFacts("MatMul", "MatMul", "/cpu:0"),
                          NodeFacts("MatMul", "MatMul", "/gpu:0"), NodeFacts("a", "Const"), NodeFacts("a", "Const"),
                          NodeFacts("x", "_Arg"), NodeFacts("x", "MatMul", "/cpu:1"),
                          NodeFacts("call", "StatefulPartitionedCall", partners=("v", "w"), no_kernel=("GPU",)),
                          NodeFacts("call", "StatefulPartitionedCall", partners=("w", "u"))])
    assert set(merged) == {("MatMul", "MatMul"), ("a", "Const"), ("x", "_Arg"), ("x", "MatMul"),
                           ("call", "StatefulPartitionedCall")}
    assert merged[("call", "StatefulPartitionedCall")] == NodeFacts("call", "StatefulPartitionedCall", partners=("w",))
    assert not merged[("MatMul", "MatMul")].request_known  # graphs disagree: unknown, not "asked for nothing"


def test_a_node_whose_graphs_disagree_is_logged_never_free() -> None:
    facts = Facts(nodes=merge_nodes([NodeFacts("MatMul", "MatMul", "/gpu:0"), NodeFacts("MatMul", "MatMul")]),
                  available=(CPU0,), kernels=KERNELS, complete=True)
    p = explained(facts, placed("MatMul", "MatMul", CPU0, 1))["MatMul"]
    assert (p.status, p.requested) == (LOGGED, None)
    merged = merge_nodes([NodeFacts("m", "MatMul", "/cpu:0"), NodeFacts("m", "MatMul")])
    again = NodeFacts.from_dict(merged[("m", "MatMul")].to_dict())
    assert not again.request_known  # and the facts file keeps it so


def test_inlined_function_bodies_are_found_under_their_call_node() -> None:
    facts = Facts(nodes=nodes(NodeFacts("StatefulPartitionedCall", "StatefulPartitionedCall", "/cpu:1"),
                              NodeFacts("dense/MatMul", "MatMul"), NodeFacts("dense/Relu", "Relu", "/cpu:0")),
                  available=(CPU0, CPU0.replace("CPU:0", "CPU:1")), kernels=KERNELS, graphs_known=True)
    found = explained(facts, placed("StatefulPartitionedCall/dense/MatMul", "MatMul", CPU0.replace("CPU:0", "CPU:1"), 1),
                      placed("StatefulPartitionedCall/dense/Relu", "Relu", CPU0, 2),
                      placed("Func/StatefulPartitionedCall/input/_0", "Identity", CPU0, 3))
    assert found["StatefulPartitionedCall/dense/MatMul"].requested == "/cpu:1"  # the call's device
    assert found["StatefulPartitionedCall/dense/Relu"].requested == "/cpu:0"  # its own device wins
    assert found["Func/StatefulPartitionedCall/input/_0"].status == LOGGED  # made by the inliner: unknown


def test_eager_wrapper_rows_are_marked_only_when_the_graphs_are_known() -> None:
    log = (placed("input", "_Arg", CPU0, 1), placed("_EagerConst", "_EagerConst", CPU0, 2),
           placed("output_RetVal", "_Retval", CPU0, 3), placed(None, "_EagerConst", CPU0, 4, kind="eager"),
           placed("Identity", "Identity", CPU0, 5))
    known = explained(Facts(nodes=nodes(NodeFacts("Identity", "Identity")), graphs_known=True), *log)
    assert known["_EagerConst"].wrapper and not known["Identity"].wrapper and not known["_EagerConst@4"].wrapper
    assert not any(p.wrapper for p in explained(Facts(), *log).values())


def test_reason_counts_group_and_sample() -> None:
    facts = Facts(nodes=nodes(*(NodeFacts(f"n{i}", "MatMul", "/gpu:3") for i in range(5))), available=(CPU0,), kernels=KERNELS)
    placements = explain([placed(f"n{i}", "MatMul", CPU0, i) for i in range(5)], facts)
    assert reason_counts(placements) == [("GPU:3 does not exist (have: CPU:0)", 5, ["n0", "n1", "n2"])]


def test_reason_counts_name_distinct_examples() -> None:
    reason = "GPU:2 does not exist (have: CPU:0)"
    placements = [replace(placed(f"n{i % 2}", "Const", CPU0, i), reason=reason) for i in range(6)]
    assert reason_counts(placements) == [(reason, 6, ["n0", "n1"])]



def test_run_tables_show_a_repeated_placement_once_with_its_count() -> None:
    from rich.console import Console

    from placement_cli.model import Report
    from placement_cli.render.table import placement_table

    eager = [placed(None, "__inference_step_13", CPU0, i, kind="eager") for i in range(1, 201)]
    report = Report(placements=explain([*eager, placed("m", "MatMul", CPU0, 300)], Facts(graphs_known=True)))
    console = Console(record=True, width=100, color_system=None)
    console.print(placement_table(replace(report, origin=Origin.RUN)))
    rows = [line for line in console.export_text().splitlines() if "__inference_step_13" in line]
    assert len(rows) == 1 and rows[0].rstrip(" │").endswith("200")
    console.print(placement_table(replace(report, origin=Origin.LOG)))  # parse tables keep every line
    assert sum("__inference_step_13" in line for line in console.export_text().splitlines()) == 200


CPU1 = CPU0.replace("CPU:0", "CPU:1")


def test_every_line_of_an_eager_span_carries_the_request_the_code_ran_under() -> None:
    """TF adds ops the code never named (a Reshape for a shaped constant), oneDNN renames others:
    what counts is which code was running when the line was written."""
    log = (placed("input", "_Arg", CPU1, 1), placed("_EagerConst", "_EagerConst", CPU1, 2),
           placed(None, "_EagerConst", CPU1, 3, kind="eager"), placed("shape", "_DeviceArg", CPU0, 4),
           placed("Reshape", "Reshape", CPU1, 5), placed(None, "Reshape", CPU1, 6, kind="eager"),
           placed(None, "_MklMatMul", CPU0, 7, kind="eager"),
           placed("x", "_Arg", CPU1, 8), placed("MatMul", "MatMul", CPU1, 9),
           placed(None, "__inference_f_5", CPU0, 10, kind="eager"), placed("after", "Const", CPU0, 11))
    facts = Facts(nodes=nodes(NodeFacts("MatMul", "MatMul", "/device:CPU:1")), available=(CPU0, CPU1),
                  kernels=KERNELS, complete=True, graphs_known=True,
                  spans=(Span(1, 6, "/cpu:1", "tower 0"), Span(7, 7, "/cpu:1", "tower 0"),
                         Span(8, 10, None, None, calls_function=True)))
    found = {p.line: p for p in explain(log, facts)}
    for line in (2, 3, 5, 6):
        assert (found[line].requested, found[line].status, found[line].group) == ("/cpu:1", AS_REQUESTED,
                                                                                  "tower 0")
    assert found[2].wrapper and found[5].wrapper and not found[3].wrapper  # the wrappers' rows, hidden in tables
    assert found[4].status == LOGGED and found[4].wrapper  # an argument: placed where its tensor lives
    assert found[7].status == SOFT_FALLBACK and english(found[7].reason).startswith(UNKNOWN.english)  # exists: kernels unchecked
    assert found[9].requested == "/device:CPU:1" and not found[9].wrapper  # a tf.function's body: graph facts
    assert found[10].status == FREE  # the call asked for no device
    assert found[11].status == FREE and found[11].group is None  # after the spans: graph facts again


def test_an_eager_span_for_a_missing_gpu_says_it_does_not_exist() -> None:
    facts = Facts(available=(CPU0,), kernels=KERNELS, complete=True, graphs_known=True,
                  spans=(Span(1, 2, "/gpu:2", "tower 0 (/gpu:2)"),))
    found = explain((placed(None, "_EagerConst", CPU0, 1, kind="eager"),
                     placed(None, "MatMul", CPU0, 2, kind="eager")), facts)
    assert len(found) == 2 and all(p.status == SOFT_FALLBACK and p.group == "tower 0 (/gpu:2)" for p in found)
    assert all(p.reason == "GPU:2 does not exist (have: CPU:0)" for p in found)


def test_a_placer_line_takes_the_request_of_its_own_graph_never_of_another_graph_s_node_of_that_name() -> None:
    """An eager matmul (its wrapper function's MatMul), then a tf.function whose MatMul asked for a
    GPU that does not exist, a second function with an unpinned MatMul and a Session graph whose
    MatMul asked for the CPU: four MatMuls of one name, each with its own graph's request."""
    pinned = {("x", "Placeholder"): NodeFacts("x", "Placeholder"), ("MatMul", "MatMul"): NodeFacts("MatMul", "MatMul", "/device:GPU:99"),
              ("Identity", "Identity"): NodeFacts("Identity", "Identity")}
    free = {("y", "Placeholder"): NodeFacts("y", "Placeholder"), ("MatMul", "MatMul"): NodeFacts("MatMul", "MatMul"),
            ("add", "AddV2"): NodeFacts("add", "AddV2")}
    session = {("p", "Placeholder"): NodeFacts("p", "Placeholder"),
               ("MatMul", "MatMul"): NodeFacts("MatMul", "MatMul", "/device:CPU:0")}
    graphs = (pinned, free, session)
    facts = Facts(nodes=merge_nodes(n for g in graphs for n in g.values()), available=(CPU0,), kernels=KERNELS,
                  graphs_known=True, graphs=graphs)
    log = (placed("a", "_Arg", CPU0, 1), placed("b", "_Arg", CPU0, 2), placed("MatMul", "MatMul", CPU0, 3),
           placed("product_RetVal", "_Retval", CPU0, 4), placed(None, "MatMul", CPU0, 5, kind="eager"),
           placed("x", "_Arg", CPU0, 6), placed("MatMul", "MatMul", CPU0, 7), placed("Identity", "Identity", CPU0, 8),
           placed("identity_RetVal", "_Retval", CPU0, 9), placed(None, "__inference_f_9", CPU0, 10, kind="eager"),
           placed("y", "_Arg", CPU0, 11), placed("MatMul", "MatMul", CPU0, 12), placed("add", "AddV2", CPU0, 13),
           placed("identity_RetVal", "_Retval", CPU0, 14),
           placed("MatMul", "MatMul", CPU0, 15), placed("p", "Placeholder", CPU0, 16))  # the Session's, right after
    rows = {p.line: p for p in explain(log, facts)}
    assert (rows[3].status, rows[3].requested, rows[3].wrapper) == (LOGGED, None, True)  # the eager op's wrapper
    assert (rows[7].status, rows[7].requested) == (SOFT_FALLBACK, "/device:GPU:99")
    assert (rows[12].status, rows[12].requested) == (FREE, None)
    assert (rows[15].status, rows[15].requested) == (AS_REQUESTED, "/device:CPU:0")
    assert sum(p.status == SOFT_FALLBACK for p in rows.values()) == 1
    # two graphs a line fits equally well, and they disagree: unknown, never one of them
    twin = {**pinned, ("MatMul", "MatMul"): NodeFacts("MatMul", "MatMul")}
    both = replace(facts, graphs=(pinned, twin), nodes=merge_nodes(n for g in (pinned, twin) for n in g.values()))
    again = {p.line: p for p in explain(log[5:9], both)}
    assert (again[7].status, again[7].requested) == (LOGGED, None)
    # where TensorFlow's INFO lines are hidden, the placer's lines come without the eager lines between
    # them; a wrapper function with no arguments (tf.print's StringFormat) right after a Session's graph
    quiet = (*[p for p in log if p.kind != "eager"], placed("StringFormat", "StringFormat", CPU0, 17),
             placed("output_RetVal", "_Retval", CPU0, 18))
    rows = {p.line: p for p in explain(quiet, facts)}
    assert (rows[3].status, rows[7].status, rows[12].status, rows[15].status) == (LOGGED, SOFT_FALLBACK, FREE,
                                                                                   AS_REQUESTED)
    assert (rows[16].status, rows[17].status) == (FREE, LOGGED)


def test_an_inlined_function_s_node_takes_the_request_of_the_function_it_came_from() -> None:
    """outer() calls inner(), whose MatMul asked for a missing GPU; outer's own MatMul and a Session
    graph's asked for nothing: the inlined body is found by all its nodes, not by one name."""
    inner = nodes(NodeFacts("x", "Placeholder"), NodeFacts("MatMul", "MatMul", "/device:GPU:99"),
                  NodeFacts("Identity", "Identity"))
    outer = nodes(NodeFacts("x", "Placeholder"), NodeFacts("PartitionedCall", "PartitionedCall"),
                  NodeFacts("MatMul", "MatMul"), NodeFacts("add", "AddV2"))
    session = nodes(NodeFacts("MatMul", "MatMul"), NodeFacts("p", "Placeholder"))
    graphs = (inner, outer, session)
    facts = Facts(nodes=merge_nodes(n for g in graphs for n in g.values()), available=(CPU0,), kernels=KERNELS,
                  graphs_known=True, graphs=graphs)
    log = (placed("x", "_Arg", CPU0, 1), placed("PartitionedCall/MatMul", "MatMul", CPU0, 2),
           placed("PartitionedCall/Identity", "Identity", CPU0, 3), placed("MatMul", "MatMul", CPU0, 4),
           placed("add", "AddV2", CPU0, 5), placed("add_RetVal", "_Retval", CPU0, 6))
    rows = {p.line: p for p in explain(log, facts)}
    assert (rows[2].status, rows[2].requested) == (SOFT_FALLBACK, "/device:GPU:99")
    assert (rows[3].status, rows[4].status, rows[5].status) == (FREE, FREE, FREE)


def test_onednn_native_eager_ops_claim_their_wrapper_too() -> None:
    """An eager op oneDNN renamed with either prefix (_Mkl, _MklNative) is the one its single-op
    wrapper function ran: the wrapper's placer line is plumbing, not a node of the program."""
    for eager_op in ("_MklMatMul", "_MklNativeMatMul"):
        found = explain([placed("MatMul", "MatMul", CPU0, 1), placed(None, eager_op, CPU0, 2, kind="eager")],
                        Facts(graphs_known=True))
        assert [p.wrapper for p in found] == [True, False], eager_op


def _eager_log(*lines: tuple[int | None, str, str]) -> tuple[str, list[Placement]]:
    """(thread id or None for a line without absl's prefix, op, device) -> the log and its eager placements."""
    text, placements = [], []
    for i, (thread, op, device) in enumerate(lines, start=1):
        prefix = f"I0000 00:00:1795232759.847888 {thread:>8} execute.cc:1775] " if thread is not None else ""
        text.append(f"{prefix}Executing op {op} in device {device}")
        placements.append(placed(None, op, device, i, kind="eager"))
    return "\n".join(text) + "\n", placements


def test_eager_ops_take_their_own_threads_records_in_order() -> None:
    xla = "/job:localhost/replica:0/task:0/device:XLA_CPU:0"
    log, placements = _eager_log((7, "_EagerConst", CPU0), (7, "_MklMatMul", CPU0), (9, "Relu", CPU0),
                                 (7, "AsString", CPU0), (9, "Relu", CPU0), (7, "Abs", CPU0))
    recorded = {"pairs": [["MatMul", CPU0], ["AsString", xla], ["Abs", ""]], "threads": {"7": [0, 1, 2]}}
    facts = Facts(available=(CPU0, xla), kernels={"AsString": frozenset({"CPU"}), "MatMul": frozenset({"CPU", "XLA_CPU"})},
                  graphs_known=True, eager=recorded)
    found = explain(_read(placements, log), facts)
    assert [(p.op, p.requested, p.status) for p in found] == [
        ("_EagerConst", None, LOGGED),  # made by C++ from a Python value: no record, unknown
        ("_MklMatMul", CPU0, AS_REQUESTED),  # oneDNN's name for the program's MatMul
        ("Relu", None, LOGGED),  # another thread, with no records: unknown, never thread 7's
        ("AsString", xla, SOFT_FALLBACK),
        ("Relu", None, LOGGED),
        ("Abs", None, FREE),
    ]
    assert found[3].reason == "no XLA_CPU kernel registered for AsString"
    assert [p.thread for p in _read(placements, log)] == [7, 7, 9, 7, 9, 7]  # the parser read each line's thread


def test_eager_lines_without_records_are_skipped_only_where_certain() -> None:
    # Neg failed after it was logged (as a dataset loop's last IteratorGetNext does): no record
    log, placements = _eager_log((7, "Abs", CPU0), (7, "Neg", CPU0), (7, "Abs", CPU0), (7, "Sqrt", CPU0))
    recorded = {"pairs": [["Abs", "/device:GPU:1"], ["Sqrt", ""]], "threads": {"7": [0, 0, 1]}}
    found = explain(_read(placements, log), Facts(available=(CPU0,), graphs_known=True, eager=recorded))
    assert [(p.op, p.status) for p in found] == [("Abs", SOFT_FALLBACK), ("Neg", LOGGED), ("Abs", SOFT_FALLBACK),
                                                 ("Sqrt", FREE)]
    assert found[0].reason == "GPU:1 does not exist (have: CPU:0)"
    # two Abs lines, one Abs record: which line it belongs to cannot be told, so neither gets it
    log, placements = _eager_log((7, "Abs", CPU0), (7, "Abs", CPU0), (7, "Neg", CPU0))
    recorded = {"pairs": [["Abs", "/device:GPU:1"], ["Neg", ""]], "threads": {"7": [0, 1]}}
    found = explain(_read(placements, log), Facts(available=(CPU0,), graphs_known=True, eager=recorded))
    assert [p.status for p in found] == [LOGGED, LOGGED, FREE]
    # a record with no line (not a subsequence): one to one up to the first disagreement only
    log, placements = _eager_log((7, "Abs", CPU0), (7, "Neg", CPU0))
    recorded = {"pairs": [["Abs", ""], ["Sqrt", ""], ["Neg", ""]], "threads": {"7": [0, 1, 2]}}
    found = explain(_read(placements, log), Facts(available=(CPU0,), graphs_known=True, eager=recorded))
    assert [p.status for p in found] == [FREE, LOGGED]


def test_eager_lines_without_a_thread_id_join_only_one_recording_thread() -> None:
    log, placements = _eager_log((None, "Abs", CPU0), (None, "Neg", CPU0))
    one = {"pairs": [["Abs", CPU0], ["Neg", ""]], "threads": {"7": [0, 1]}}
    found = explain(_read(placements, log), Facts(available=(CPU0,), graphs_known=True, eager=one))
    assert [p.status for p in found] == [AS_REQUESTED, FREE]
    two = {**one, "threads": {"7": [0, 1], "8": [1]}}
    found = explain(_read(placements, log), Facts(available=(CPU0,), graphs_known=True, eager=two))
    assert [p.status for p in found] == [LOGGED, LOGGED]
    garbled = {"pairs": [["Abs"]], "threads": {"x": [5]}}  # facts from a broken recorder: nothing joined
    found = explain(_read(placements, log), Facts(available=(CPU0,), graphs_known=True, eager=garbled))
    assert [p.status for p in found] == [LOGGED, LOGGED]


def test_a_wrapper_takes_the_request_of_its_own_threads_eager_op() -> None:
    prefix = "I0000 00:00:1795232759.847888 {:>8} {}] "
    log = "".join(prefix.format(thread, where) + text + "\n" for thread, where, text in (
        (9, "placer.cc:162", f"Abs: (Abs): {CPU0}"),  # thread 9's wrapper, whose own eager line never came
        (7, "placer.cc:162", f"Abs: (Abs): {CPU0}"),
        (7, "execute.cc:1775", f"Executing op Abs in device {CPU0}")))
    placements = (placed("Abs", "Abs", CPU0, 1), placed("Abs", "Abs", CPU0, 2), placed(None, "Abs", CPU0, 3, kind="eager"))
    recorded = {"pairs": [["Abs", "/device:GPU:1"]], "threads": {"7": [0]}}
    found = explain(_read(placements, log), Facts(available=(CPU0,), graphs_known=True, eager=recorded))
    assert [(p.status, p.wrapper) for p in found] == [(LOGGED, True), (SOFT_FALLBACK, True), (SOFT_FALLBACK, False)]


def test_a_wrapper_whose_placement_stands_at_its_bare_copy_takes_its_threads_eager_op() -> None:
    """trace's log holds TensorFlow's stdout copy of each placer line (no thread named) before its glog
    twin; the placement stands at the bare copy. The wrapper then had no thread and took no record: its
    request unknown though its eager op's was recorded (keras-io's loop: 22 VarHandleOp wrappers)."""
    prefix = "I0000 00:00:1795232759.847888 {:>8} {}] "
    log = f"Abs: (Abs): {CPU0}\n" + "".join(prefix.format(7, where) + text + "\n" for where, text in (
        ("placer.cc:162", f"Abs: (Abs): {CPU0}"), ("execute.cc:1775", f"Executing op Abs in device {CPU0}")))
    placements = (placed("Abs", "Abs", CPU0, 1), placed(None, "Abs", CPU0, 3, kind="eager"))
    recorded = {"pairs": [["Abs", "/device:GPU:1"]], "threads": {"7": [0]}}
    read = _read(placements, log)
    assert [(p.line, p.twin, p.thread) for p in read] == [(1, 2, 7), (3, None, 7)]  # at its bare copy, its twin's thread
    found = explain(read, Facts(available=(CPU0,), graphs_known=True, eager=recorded))
    assert [(p.status, p.wrapper) for p in found] == [(SOFT_FALLBACK, True), (SOFT_FALLBACK, False)]


def test_wrappers_whose_bare_copies_came_together_take_the_eager_op_their_twin_came_before() -> None:
    """MirroredStrategy's cross-replica assign_add (and any eager op on one copy after another): TF's
    stdout copies of both wrappers' placer lines come before their glog twins, and the twins come each
    just before its own eager op. The CPU:1 wrapper took the CPU:0 op's record (its bare copy comes
    before that op) and said `soft fallback` from CPU:0; each wrapper's place is where its twin came.
    The same for a read of the copy on CPU:1 under a CPU:0 scope: with its resource, never a fallback."""
    prefix = "I0000 00:00:1795232759.847888 {:>8} {}] "
    cpu1 = "/job:localhost/replica:0/task:0/device:CPU:1"
    for op, second_scope in (("AssignAddVariableOp", "/device:CPU:1"), ("ReadVariableOp", "/device:CPU:0")):
        log = f"{op}: ({op}): {CPU0}\n{op}: ({op}): {cpu1}\n" + "".join(
            prefix.format(7, where) + text + "\n" for where, text in (
                ("placer.cc:162", f"{op}: ({op}): {CPU0}"), ("execute.cc:1775", f"Executing op {op} in device {CPU0}"),
                ("execute.cc:1775", f"Executing op _EagerConst in device {cpu1}"),
                ("placer.cc:162", f"{op}: ({op}): {cpu1}"), ("execute.cc:1775", f"Executing op {op} in device {cpu1}")))
        placements = (placed(op, op, CPU0, 1), placed(op, op, cpu1, 2), placed(None, op, CPU0, 4, kind="eager"),
                      placed(None, "_EagerConst", cpu1, 5, kind="eager"), placed(None, op, cpu1, 7, kind="eager"))
        recorded = {"pairs": [[op, "/device:CPU:0", CPU0, "VarHandleOp", "v"],
                              [op, second_scope, cpu1, "VarHandleOp", "v/replica_1"]], "threads": {"7": [0, 1]}}
        found = explain(_read(placements, log), Facts(available=(CPU0, cpu1), graphs_known=True, eager=recorded))
        second = AS_REQUESTED if second_scope.endswith("CPU:1") else WITH_RESOURCE
        assert [(p.status, p.requested, p.wrapper) for p in found] == [
            (AS_REQUESTED, "/device:CPU:0", True), (second, second_scope, True), (AS_REQUESTED, "/device:CPU:0", False),
            (LOGGED, None, False), (second, second_scope, False)], op


def test_a_node_named_after_its_op_takes_no_record_of_a_later_eager_op_of_that_type() -> None:
    """MirroredStrategy's multi-device iterator: a function of RemoteCall, NoOp and Identity is placed and
    never logged as executed; a later eager Identity (under /CPU:0) is no op of its: only an op its thread
    runs right after a wrapper's lines is the wrapper's (the Identity said `soft fallback` otherwise)."""
    prefix = "I0000 00:00:1795232759.847888 {:>8} {}] "
    cpu1 = "/job:localhost/replica:0/task:0/device:CPU:1"
    log = f"Identity: (Identity): {cpu1}\n" + "".join(prefix.format(7, where) + text + "\n" for where, text in (
        ("placer.cc:162", f"Identity: (Identity): {cpu1}"), ("execute.cc:1775", f"Executing op Abs in device {CPU0}"),
        ("execute.cc:1775", f"Executing op Identity in device {CPU0}")))
    placements = (placed("Identity", "Identity", cpu1, 1), placed(None, "Abs", CPU0, 3, kind="eager"),
                  placed(None, "Identity", CPU0, 4, kind="eager"))
    recorded = {"pairs": [["Abs", ""], ["Identity", "/device:CPU:0"]], "threads": {"7": [0, 1]}}
    found = explain(_read(placements, log), Facts(available=(CPU0, cpu1), graphs_known=True, eager=recorded))
    assert [p.status for p in found] == [LOGGED, FREE, AS_REQUESTED]


def test_a_py_function_is_recorded_after_the_eager_ops_it_ran() -> None:
    log, placements = _eager_log((7, "EagerPyFunc", CPU0), (7, "Mul", CPU0), (7, "IteratorGetNext", CPU0),
                                 (7, "Abs", CPU0))
    recorded = {"pairs": [["Mul", ""], ["EagerPyFunc", CPU0], ["Abs", "/device:GPU:1"]], "threads": {"7": [0, 1, 2]}}
    found = explain(_read(placements, log), Facts(available=(CPU0,), graphs_known=True, eager=recorded))
    # the py_function's own request is left unknown; the failed IteratorGetNext has no record
    assert [p.status for p in found] == [LOGGED, FREE, LOGGED, SOFT_FALLBACK]


def test_lowered_cond_and_while_branches_take_their_branch_graph_s_requests() -> None:
    """tf.cond's then-branch (a MatMul pinned to a missing GPU) and else-branch both hold cond/Identity;
    lowered, their nodes are cond/then/_0/..., cond/else/_1/..., while/body/_3/...: each branch is found
    by all its nodes; the switches TensorFlow adds (cond/pivot_t/_4) stay unknown."""
    then = nodes(NodeFacts("cond/mm", "MatMul", "/device:GPU:5"), NodeFacts("cond/Identity", "Identity"))
    other = nodes(NodeFacts("cond/id", "Identity"), NodeFacts("cond/Identity", "Identity"))
    body = nodes(NodeFacts("while/mul", "Mul"), NodeFacts("while/Identity", "Identity"))
    outer = nodes(NodeFacts("a", "Placeholder"), NodeFacts("cond", "StatelessIf"),
                  NodeFacts("cond/Identity", "Identity"), NodeFacts("while", "While", "/device:CPU:0"))
    graphs = (then, other, body, outer)
    facts = Facts(nodes=merge_nodes(n for g in graphs for n in g.values()), available=(CPU0,), kernels=KERNELS,
                  graphs_known=True, graphs=graphs)
    log = (placed("a", "_Arg", CPU0, 1), placed("cond/pivot_t/_4", "Identity", CPU0, 2),
           placed("Func/cond/then/_0/input/_5", "Identity", CPU0, 3), placed("cond/then/_0/cond/mm", "MatMul", CPU0, 4),
           placed("cond/then/_0/cond/Identity", "Identity", CPU0, 5), placed("cond/else/_1/cond/id", "Identity", CPU0, 6),
           placed("cond/else/_1/cond/Identity", "Identity", CPU0, 7), placed("while/body/_3/while/mul", "Mul", CPU0, 8),
           placed("while/body/_3/while/Identity", "Identity", CPU0, 9), placed("cond/Identity", "Identity", CPU0, 10))
    rows = {p.line: p for p in explain(log, facts)}
    assert (rows[4].status, rows[4].requested) == (SOFT_FALLBACK, "/device:GPU:5")
    assert str(rows[4].reason).startswith("GPU:5 does not exist")
    assert (rows[5].status, rows[6].status, rows[7].status, rows[10].status) == (FREE, FREE, FREE, FREE)
    assert (rows[8].status, rows[8].requested) == (AS_REQUESTED, "/device:CPU:0")  # the while node's request
    assert (rows[2].status, rows[3].status) == (LOGGED, LOGGED)  # TensorFlow's own nodes: unknown


def test_a_branch_lowered_inside_another_body_takes_its_innermost_call_s_request() -> None:
    """The TF guide's fizzbuzz: a tf.cond inside a tf.while_loop's body is lowered twice, its nodes named
    while/body/_1/while/cond/else/_59/while/cond/mod; the If node they take their request from,
    while/cond, is a node of the body graph, not of the outer one. Before: logged, ? (only the outer
    graph was searched for the call node). So for a tf.function inlined in an inlined one."""
    outer = nodes(NodeFacts("while", "StatelessWhile", "/device:CPU:0"), NodeFacts("loop", "While"),
                  NodeFacts("StatefulPartitionedCall", "StatefulPartitionedCall", "/device:CPU:0"))
    body = nodes(NodeFacts("while/mul", "Mul"), NodeFacts("while/cond", "StatelessIf"))
    then = nodes(NodeFacts("while/cond/mm", "MatMul", "/device:GPU:5"), NodeFacts("while/cond/Identity", "Identity"))
    other = nodes(NodeFacts("while/cond/mod", "FloorMod"), NodeFacts("while/cond/Identity", "Identity"))
    free_body = nodes(NodeFacts("loop/sub", "Sub"), NodeFacts("loop/cond", "If"))
    free_branch = nodes(NodeFacts("loop/cond/add", "AddV2"), NodeFacts("loop/cond/neg", "Neg"))
    middle = nodes(NodeFacts("PartitionedCall", "PartitionedCall"), NodeFacts("m", "Mul"))
    inner = nodes(NodeFacts("x", "Exp"), NodeFacts("y", "Log"))
    graphs = (outer, body, then, other, free_body, free_branch, middle, inner)
    facts = Facts(nodes=merge_nodes(n for g in graphs for n in g.values()), available=(CPU0,), kernels=KERNELS,
                  graphs_known=True, graphs=graphs)
    names = (("while/body/_1/while/mul", "Mul"), ("while/body/_1/while/cond/then/_2/while/cond/mm", "MatMul"),
             ("while/body/_1/while/cond/then/_2/while/cond/Identity", "Identity"),
             ("while/body/_1/while/cond/else/_3/while/cond/mod", "FloorMod"),
             ("while/body/_1/while/cond/else/_3/while/cond/Identity", "Identity"),
             ("loop/body/_4/loop/sub", "Sub"), ("loop/body/_4/loop/cond/then/_5/loop/cond/add", "AddV2"),
             ("loop/body/_4/loop/cond/then/_5/loop/cond/neg", "Neg"), ("StatefulPartitionedCall/m", "Mul"),
             ("StatefulPartitionedCall/PartitionedCall/x", "Exp"), ("StatefulPartitionedCall/PartitionedCall/y", "Log"),
             ("while/body/_1/while/cond/else/_3/while/cond/pivot_f/_6", "Identity"))
    rows = {p.node: p for p in explain(tuple(placed(n, op, CPU0, i) for i, (n, op) in enumerate(names, 1)), facts)}

    def said(name: str) -> tuple[str, str | None]:
        return str(rows[name].status), rows[name].requested

    assert said("while/body/_1/while/mul") == (AS_REQUESTED, "/device:CPU:0")
    assert said("while/body/_1/while/cond/then/_2/while/cond/mm") == (SOFT_FALLBACK, "/device:GPU:5")
    for name in ("while/body/_1/while/cond/then/_2/while/cond/Identity", "while/body/_1/while/cond/else/_3/while/cond/mod",
                 "while/body/_1/while/cond/else/_3/while/cond/Identity", "StatefulPartitionedCall/PartitionedCall/x"):
        assert said(name) == (AS_REQUESTED, "/device:CPU:0"), name  # the outermost call's request, through the If
    for name in ("loop/body/_4/loop/sub", "loop/body/_4/loop/cond/then/_5/loop/cond/add"):
        assert said(name) == (FREE, None), name  # nothing asked at any level
    assert said("while/body/_1/while/cond/else/_3/while/cond/pivot_f/_6")[0] == LOGGED  # TensorFlow's own


def test_an_eager_op_s_wrapper_is_one_also_where_a_tf_function_has_a_node_of_its_name() -> None:
    """The keras-io training loop: an eager Cast's wrapper function (x, Cast, y_RetVal, then `Executing op
    Cast`) was taken for train_step's own node Cast, shown as a row and counted twice with its eager op.
    A block the log ties to the function (its `graph`) stays the function's; so does one whose next eager
    line runs another op."""
    step = nodes(NodeFacts("Cast", "Cast"), NodeFacts("NoOp", "NoOp"), NodeFacts("x", "Placeholder"))
    facts = Facts(nodes=step, available=(CPU0,), kernels=KERNELS, graphs_known=True, graphs=(step,),
                  graph_names=("train_step",))
    in_step = "__inference_train_step_9"
    log = (placed("x", "_Arg", CPU0, 1), placed("Cast", "Cast", CPU0, 2), placed("y_RetVal", "_Retval", CPU0, 3),
           placed(None, "Cast", CPU0, 4, kind="eager"),  # the wrapper of an eager Cast
           replace(placed("x", "_Arg", CPU0, 5), graph=in_step), replace(placed("Cast", "Cast", CPU0, 6), graph=in_step),
           replace(placed("NoOp", "NoOp", CPU0, 7), graph=in_step), placed(None, in_step, CPU0, 8, kind="eager"),
           placed("NoOp", "NoOp", CPU0, 9), placed(None, "Abs", CPU0, 10, kind="eager"),  # not NoOp's own line
           placed("Cast", "Cast", CPU0, 11), placed(None, "Abs", CPU0, 12, kind="eager"),
           placed(None, "Cast", CPU0, 13, kind="eager"))  # a later Cast does not make line 11 its wrapper
    rows = {p.line: p for p in explain(log, facts)}
    assert rows[2].wrapper and rows[2].status == LOGGED  # not train_step's Cast's request: no record of its own
    assert [line for line, p in rows.items() if p.wrapper] == [2]


def test_a_function_s_arguments_are_found_by_the_names_tensorflow_gives_them() -> None:
    """keras fit's initialize_variables: its captured variables' placeholders are AssignVariableOp/resource,
    AssignVariableOp_1/resource ..., its _Arg lines assignvariableop_resource ...; no recorded graph had
    those names, so the block was taken for an eager op's wrapper, and its AssignVariableOp (a later
    eager AssignVariableOp "executing" it) hidden as plumbing, its request unknown."""
    assert arg_name("AssignVariableOp/resource") == "assignvariableop_resource"
    assert (arg_name("dense/Kernel:0"), arg_name("_x"), arg_name("123"), arg_name("")) == \
        ("dense_kernel_0", "x", "unknown", "unknown")
    init = nodes(NodeFacts("AssignVariableOp/resource", "Placeholder"), NodeFacts("AssignVariableOp_1/resource", "Placeholder"),
                 NodeFacts("1", "Placeholder"), NodeFacts("2", "Placeholder"),
                 NodeFacts("AssignVariableOp", "AssignVariableOp", "/device:CPU:0"), NodeFacts("AssignVariableOp_1", "AssignVariableOp"))
    facts = Facts(nodes=init, available=(CPU0,), kernels=KERNELS, graphs_known=True, graphs=(init,), graph_names=("init",))
    call = "__inference_init_7"
    log = (*(replace(placed(name, "_Arg", CPU0, line), graph=call) for line, name in enumerate(
               ("assignvariableop_resource", "assignvariableop_1_resource", "unknown", "unknown_0"), 1)),
           replace(placed("AssignVariableOp", "AssignVariableOp", CPU0, 5), graph=call),
           replace(placed("AssignVariableOp_1", "AssignVariableOp", CPU0, 6), graph=call),
           placed(None, call, CPU0, 7, kind="eager"), placed(None, "AssignVariableOp", CPU0, 8, kind="eager"))
    rows = {p.line: p for p in explain(log, facts)}
    assert (rows[5].status, rows[5].requested, rows[5].wrapper) == (AS_REQUESTED, "/device:CPU:0", False)
    assert (rows[6].status, rows[6].wrapper) == (FREE, False)


def test_a_session_s_graph_is_explained_with_the_session_s_devices() -> None:
    """Three CPUs in the process, one in the Session (device_count): /cpu:2 does not exist for it."""
    graph = nodes(NodeFacts("far", "Const", "/device:CPU:2"))
    cpus = tuple(f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(3))
    facts = Facts(nodes=graph, available=(*cpus, GPU0), kernels=KERNELS, graphs_known=True, graphs=(graph,),
                  graph_devices=((CPU0,),))
    (row,) = explain((placed("far", "Const", CPU0, 1),), facts)
    assert (row.status, str(row.reason)) == (SOFT_FALLBACK, "CPU:2 does not exist (have: CPU:0)")
    free = nodes(NodeFacts("c", "Const"))  # a GPU in the process, none in the Session: no "on a CPU" reason
    (row,) = explain((placed("c", "Const", CPU0, 1),), replace(facts, nodes=free, graphs=(free,)))
    assert (row.status, row.reason) == (FREE, None)
    (row,) = explain((placed("c", "Const", CPU0, 1),), replace(facts, nodes=free, graphs=(free,), graph_devices=()))
    assert row.reason is not None  # the process's devices, where the Session's are not known


def test_an_eager_op_with_a_resource_input_runs_with_its_resource() -> None:
    """Recorded: ReadVariableOp under /CPU:0 whose variable lives on CPU:1; it ran on CPU:1. An
    AssignAddVariableOp that ran elsewhere than both is a fallback as before."""
    cpu1 = "/job:localhost/replica:0/task:0/device:CPU:1"
    prefix = "I0000 00:00:1795232759.847888     7 execute.cc:1775] "
    log = (f"{prefix}Executing op ReadVariableOp in device {cpu1}\n{prefix}Executing op ReadVariableOp in device "
           f"{cpu1}\n{prefix}Executing op AssignAddVariableOp in device {CPU0}\n")
    placements = (placed(None, "ReadVariableOp", cpu1, 1, kind="eager"), placed(None, "ReadVariableOp", cpu1, 2, kind="eager"),
                  placed(None, "AssignAddVariableOp", CPU0, 3, kind="eager"))
    recorded = {"pairs": [["ReadVariableOp", CPU0, cpu1, "VarHandleOp", "weights"],
                          ["ReadVariableOp", CPU0, cpu1, "AnonymousIteratorV3", ""],
                          ["AssignAddVariableOp", "/device:GPU:1", cpu1, "VarHandleOp", "weights"]],
                "threads": {"7": [0, 1, 2]}}
    rows = explain(_read(placements, log), Facts(available=(CPU0, cpu1), graphs_known=True, eager=recorded))
    assert [str(p.status) for p in rows] == ["with its resource", "with its resource", "soft fallback"]
    assert str(rows[0].reason).startswith("with its variable weights on CPU:1: TensorFlow runs an eager op")
    assert str(rows[1].reason).startswith("with its resource (AnonymousIteratorV3) on CPU:1")
