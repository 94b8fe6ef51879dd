"""`placement diff`: a node is its graph (the tf.function that holds it, TensorFlow's trace counter
dropped) and its name, not a bare name; the task is where it went, not who it is (hand-made logs in
TF 2.21's wording, as test_diff's: no TensorFlow)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from placement_cli.cli import app
from placement_cli.compare import compare
from placement_cli.logparse import engine, parallel, parse_paths
from placement_cli.logparse.saved import read_tallied

runner = CliRunner()
CPU, GPU0 = (f"/job:localhost/replica:0/task:0/device:{d}" for d in ("CPU:0", "GPU:0"))
W0, W1, PS0 = ("/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0",
               "/job:ps/replica:0/task:0/device:CPU:0")


def placed(node: str, op: str, device: str, thread: int = 2368) -> str:
    """TF 2.21's two copies of one placement (the stdout copy, then the glog copy of ``thread``)."""
    return f"{node}: ({op}): {device}\nI0000 00:00:1795233561.662419 {thread:>8} placer.cc:162] {node}: ({op}): {device}\n"


def executed(op: str, device: str = CPU, thread: int = 2368) -> str:
    return f"I0000 00:00:1795233568.753412 {thread:>8} execute.cc:1775] Executing op {op} in device {device}\n"


def function(name: str, mm: str, add: str = CPU) -> str:
    """A tf.function's body placed as it is first called, then the call (TF 2.21's order)."""
    return (placed("x", "_Arg", CPU) + placed("MatMul", "MatMul", mm) + placed("add", "AddV2", add)
            + placed("identity_RetVal", "_Retval", CPU) + executed(name))


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def diff_json(*args: str, expect: int) -> dict[str, Any]:
    result = runner.invoke(app, ["diff", "--json", *args])
    assert result.exit_code == expect, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def saved(tmp_path: Path, log: str) -> str:
    """``parse --json`` of a log, saved as a user saves it."""
    result = runner.invoke(app, ["parse", "--json", log])
    assert result.exit_code == 0, result.stderr
    return write(tmp_path, Path(log).stem + ".json", result.stdout)


def moves(data: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted((r["graph"], r["node"], r["from"], r["to"]) for r in data["moved"])


def test_two_functions_matmuls_that_swap_devices_are_two_moves(tmp_path: Path) -> None:
    """Issue 27.1: each tf.function has its own MatMul; pooled by bare name the swap was "Same
    placements", exit 0. Logs and the reports saved from them alike."""
    old = write(tmp_path, "old.log", function("__inference_f_9", CPU) + function("__inference_g_14", GPU0))
    new = write(tmp_path, "new.log", function("__inference_f_9", GPU0) + function("__inference_g_14", CPU))
    for a, b in ((old, new), (saved(tmp_path, old), saved(tmp_path, new))):
        data = diff_json(a, b, expect=1)
        assert moves(data) == [("f", "MatMul", CPU, GPU0), ("g", "MatMul", GPU0, CPU)]
        assert data["summary"]["moved"] == 2 and data["added"] == data["removed"] == []
    table = runner.invoke(app, ["diff", old, new], env={"COLUMNS": "160"})
    assert table.exit_code == 1 and "f: MatMul" in table.stdout and "g: MatMul" in table.stdout, table.stdout
    report = parse_paths([old])
    assert {p.node: p.graph for p in report.placements if p.graph == "__inference_g_14"} == {
        "x": "__inference_g_14", "MatMul": "__inference_g_14", "add": "__inference_g_14",
        "identity_RetVal": "__inference_g_14"}
    saved_report = json.loads(Path(saved(tmp_path, old)).read_text())
    assert {p["graph"] for p in saved_report["placements"] if p["kind"] == "placer"} == {
        "__inference_f_9", "__inference_g_14"}


def test_a_function_is_known_by_its_own_threads_next_call(tmp_path: Path) -> None:
    """Lines of another thread (here an eager op's wrapper, placed while f's body was being placed)
    belong to what their own thread runs next, not to f."""
    text = (placed("x", "_Arg", CPU) + placed("MatMul", "MatMul", CPU)
            + placed("MatMul", "MatMul", GPU0, thread=77) + executed("MatMul", GPU0, thread=77)
            + executed("__inference_f_9"))
    report = parse_paths([write(tmp_path, "threads.log", text)])
    assert sorted((p.node, p.canonical, p.graph) for p in report.placements if p.kind == "placer") == [
        ("MatMul", CPU, "__inference_f_9"), ("MatMul", GPU0, None), ("x", CPU, "__inference_f_9")]


def test_the_trace_counter_is_not_identity(tmp_path: Path) -> None:
    """Issue 27.2: one more function traced anywhere renumbers every later one: the same placements
    with other counters are the same; two traces of one function (a retrace for a new signature) are
    matched in trace order."""
    old = write(tmp_path, "old.log", function("__inference_f_9", CPU) + function("__inference_step_17", GPU0)
                + function("__inference_step_23", CPU) + executed("__inference_step_17"))
    new = write(tmp_path, "new.log", function("__inference_warmup_4", CPU) + function("__inference_f_12", CPU)
                + function("__inference_step_20", GPU0) + function("__inference_step_31", CPU)
                + executed("__inference_step_20"))
    data = diff_json(old, new, expect=1)  # warmup is new: only that
    assert data["moved"] == data["removed"] == []
    assert {(r["graph"], r["node"]) for r in data["added"]} == {("warmup", n) for n in ("x", "MatMul", "add",
                                                                                       "identity_RetVal")} | {
        (None, None)}  # and its one call
    renumbered = write(tmp_path, "renumbered.log", function("__inference_f_40", CPU)
                       + function("__inference_step_41", GPU0) + function("__inference_step_52", CPU)
                       + executed("__inference_step_41"))
    assert diff_json(old, renumbered, expect=0)["summary"]["unchanged"] == 16
    for a, b in ((old, renumbered), (saved(tmp_path, old), saved(tmp_path, renumbered))):
        assert diff_json(a, b, expect=0)["summary"]["same"] is True
    swapped = write(tmp_path, "swapped.log", function("__inference_f_40", CPU)
                    + function("__inference_step_41", CPU) + function("__inference_step_52", GPU0)
                    + executed("__inference_step_41"))
    assert moves(diff_json(old, swapped, expect=1)) == [("step", "MatMul", GPU0, CPU),
                                                        ("step#2", "MatMul", CPU, GPU0)]


def test_a_move_between_tasks_is_a_move(tmp_path: Path) -> None:
    """Issue 27.3: one between-graph session's log, a node moved worker/0 -> ps/0."""
    old = write(tmp_path, "old.log", placed("w", "VarHandleOp", PS0) + placed("mm", "MatMul", W0))
    new = write(tmp_path, "new.log", placed("w", "VarHandleOp", PS0) + placed("mm", "MatMul", PS0))
    data = diff_json(old, new, expect=1)
    assert moves(data) == [(None, "mm", W0, PS0)] and data["added"] == data["removed"] == []


def test_two_workers_copies_of_one_graph_stay_apart(tmp_path: Path) -> None:
    """Every worker of a between-graph cluster places its own copy of one graph (same names): a move
    of one worker's node is paired with that worker's, the other copy stays."""
    old = write(tmp_path, "old.log", placed("mm", "MatMul", W0) + placed("mm", "MatMul", W1))
    new = write(tmp_path, "new.log", placed("mm", "MatMul", W1) + placed("mm", "MatMul", PS0))
    data = diff_json(old, new, expect=1)
    assert moves(data) == [(None, "mm", W0, PS0)] and data["summary"]["unchanged"] == 1
    wider = write(tmp_path, "wider.log", placed("mm", "MatMul", "/job:worker/replica:0/task:1/device:GPU:0")
                  + placed("mm", "MatMul", "/job:worker/replica:0/task:0/device:GPU:0"))
    # both workers moved to their own GPU: each within its task, never worker/0's CPU to worker/1's GPU
    assert moves(diff_json(old, wider, expect=1)) == [
        (None, "mm", W0, "/job:worker/replica:0/task:0/device:GPU:0"),
        (None, "mm", W1, "/job:worker/replica:0/task:1/device:GPU:0")]


@pytest.mark.parametrize("chunk", [4096, 1 << 20])
def test_a_split_log_knows_each_function_as_one_pass_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           chunk: int) -> None:
    """A big log counted in two halves (``diff``'s speed) settles a function whose body the boundary
    cuts with its call in the other half, as reading it in one pass does."""
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(engine, "CHUNK", chunk)
    on_cpu, on_gpu = ("".join(placed(f"layer_{i}/MatMul", "MatMul", d) for i in range(n)) for d, n in ((CPU, 600),
                                                                                                     (GPU0, 200)))
    old = write(tmp_path, "old.log", on_cpu + executed("__inference_f_3") + on_gpu + executed("__inference_g_4"))
    new = write(tmp_path, "new.log", on_gpu + executed("__inference_g_7") + on_cpu + executed("__inference_f_8"))
    swapped = write(tmp_path, "swapped.log", on_cpu + executed("__inference_g_3") + on_gpu + executed("__inference_f_4"))
    one_pass = compare(read_tallied(old), read_tallied(new)), compare(read_tallied(old), read_tallied(swapped))
    monkeypatch.setattr(parallel, "SPLIT_MIN", 1)
    assert parallel.split_tally(old) is not None
    split = compare(read_tallied(old), read_tallied(new)), compare(read_tallied(old), read_tallied(swapped))
    assert one_pass == split
    assert split[0].same and split[0].unchanged == 802
    assert sum(c.count for c in split[1].moved) == 400 and split[1].unchanged == 2  # the two calls


def test_gradient_functions_are_known_without_their_counters(tmp_path: Path) -> None:
    """A tf.function recorded for a gradient runs as ``__forward_f_N``, its gradient as
    ``__inference___backward_f_A_B`` (the forward's counter inside): both are functions, and every
    counter is dropped, in graphs and in eager calls alike, in logs and saved reports."""
    def run(fwd: str, bwd: str) -> str:
        return (placed("MatMul", "MatMul", CPU) + executed(fwd)
                + placed("gradients/MatMul_grad/MatMul", "MatMul", CPU) + executed(bwd))

    old = write(tmp_path, "old.log", run("__forward_f_30", "__inference___backward_f_18_31"))
    new = write(tmp_path, "new.log", run("__forward_f_50", "__inference___backward_f_38_51"))
    parsed = json.loads(runner.invoke(app, ["parse", "--json", old]).stdout)
    assert {p["graph"] for p in parsed["placements"] if p["node"]} == {"__forward_f_30",
                                                                         "__inference___backward_f_18_31"}
    for a, b in ((old, new), (saved(tmp_path, old), saved(tmp_path, new))):
        data = diff_json(a, b, expect=0)
        assert data["summary"]["same"] is True and data["summary"]["unchanged"] == 4
    moved = write(tmp_path, "moved.log", run("__forward_f_7", "__inference___backward_f_3_8").replace(
        "gradients/MatMul_grad/MatMul: (MatMul): " + CPU, "gradients/MatMul_grad/MatMul: (MatMul): " + GPU0))
    assert moves(diff_json(old, moved, expect=1)) == [("__backward_f", "gradients/MatMul_grad/MatMul", CPU, GPU0)]


def test_function_identity_drops_every_counter() -> None:
    from placement_cli.logparse.functions import function_identity

    assert function_identity("__inference_step_17") == "step"
    assert function_identity("__inference_f_2_10") == "f_2"  # a user's name keeps its digits
    assert function_identity("__forward_f_30") == "__forward_f"
    assert function_identity("__inference___backward_f_18_31") == "__backward_f"
    assert function_identity("__backward_f_18") == "__backward_f"
    assert function_identity("__inference___forward___backward_f_18_40_44") == "__forward___backward_f"
    assert function_identity("__inference_<lambda>_9") == "<lambda>"
    assert function_identity("MatMul") == "MatMul" and function_identity("__inference_") == "__inference_"


def test_a_report_saved_before_graphs_were_recorded_is_matched_by_name(tmp_path: Path) -> None:
    """A report saved by an earlier placement names no graph: against a log that does, nodes are matched
    by name alone (as that report was made), never all "only in OLD" and "only in NEW"."""
    log = write(tmp_path, "today.log", function("__inference_f_9", CPU) + function("__inference_g_14", GPU0))
    old = json.loads(Path(saved(tmp_path, log)).read_text())
    for p in old["placements"]:
        p.pop("graph", None)
    before = write(tmp_path, "before.json", json.dumps(old))
    data = diff_json(before, log, expect=0)
    assert data["summary"]["unchanged"] == 10 and data["added"] == data["removed"] == []
    assert data["summary"]["matched_by_name_only"] is True


def test_matching_by_name_alone_is_said(tmp_path: Path) -> None:
    """Matched by name alone, "Same placements" is weaker than by graph and name: a note says so (and JSON's
    summary), naming the side without graphs; by graph and name, no note and no key."""
    log = write(tmp_path, "today.log", function("__inference_f_9", CPU) + function("__inference_g_14", GPU0))
    old = json.loads(Path(saved(tmp_path, log)).read_text())
    for p in old["placements"]:
        p.pop("graph", None)
    before = write(tmp_path, "before.json", json.dumps(old))
    result = runner.invoke(app, ["diff", before, log])
    assert result.exit_code == 0
    said = " ".join(result.stderr.split())
    assert f"{before} names no node's graph" in said and "matched by name alone" in said
    plain = runner.invoke(app, ["diff", "--json", saved(tmp_path, log), log])
    assert "matched by name alone" not in plain.stderr
    assert "matched_by_name_only" not in json.loads(plain.stdout)["summary"]


def test_a_trace_counter_one_side_gives_another_function_is_not_matched_by_its_digits(tmp_path: Path) -> None:
    """Both traces of f placed alike, their counters shifted: OLD's f traces are 48 and 49, NEW's 38 and
    48. ``__inference_f_48`` is OLD's first trace and NEW's second: its calls are matched as f's and
    f#2's (every call the same), never as one record both sides hold, which left OLD's 49 and NEW's 38
    as "only in OLD" and "only in NEW" (exit 1 for the same placements). Logs and saved reports alike."""
    old = write(tmp_path, "old.log", function("__inference_f_48", CPU) + function("__inference_f_49", GPU0))
    new = write(tmp_path, "new.log", function("__inference_f_38", CPU) + function("__inference_f_48", GPU0))
    for a, b in ((old, new), (saved(tmp_path, old), saved(tmp_path, new)), (old, saved(tmp_path, new))):
        data = diff_json(a, b, expect=0)
        assert data["summary"]["unchanged"] == 10 and data["added"] == data["removed"] == [], data
    moved = write(tmp_path, "moved.log", function("__inference_f_38", CPU)
                  + function("__inference_f_48", GPU0).replace("Executing op __inference_f_48 in device " + CPU,
                                                               "Executing op __inference_f_48 in device " + GPU0))
    data = diff_json(old, moved, expect=1)  # f#2's call moved to GPU:0 (its body stayed)
    assert [(r["op"], r["from"], r["to"]) for r in data["moved"]] == [("__inference_f_48", CPU, GPU0)]
    assert data["summary"]["unchanged"] == 9 and data["added"] == data["removed"] == []


def test_a_sessions_graph_is_not_matched_with_a_functions_by_name(tmp_path: Path) -> None:
    """A log of a Session's graph names no tf.function because it ran none: against a log (or a saved
    report) whose MatMul is f's, its MatMul is another node. It was matched by name alone (f's MatMul on
    GPU:0 counted as the Session's, "1 on the same devices") with a note calling the log "a report saved
    before placement recorded graphs"."""
    session = write(tmp_path, "session.log", placed("x", "Const", CPU) + placed("MatMul", "MatMul", GPU0))
    functions = write(tmp_path, "functions.log", function("__inference_f_9", GPU0))
    for a, b in ((session, functions), (functions, session), (saved(tmp_path, session), functions),
                 (session, saved(tmp_path, functions))):
        result = runner.invoke(app, ["diff", "--json", a, b])
        assert result.exit_code == 1 and "matched by name alone" not in result.stderr, result.stderr
        data = json.loads(result.stdout)
        assert data["summary"]["unchanged"] == 0 and "matched_by_name_only" not in data["summary"]
        session_rows = data["removed"] if a.startswith(session[:-4]) else data["added"]
        assert {(r["graph"], r["node"]) for r in session_rows} == {(None, "x"), (None, "MatMul")}


def test_a_saved_reports_names_may_hold_any_character(tmp_path: Path) -> None:
    """A saved report may hold any string: a NUL in a node's or a graph's name split the comparison's
    records (internal error, KeyError, exit 3); a lone surrogate in a graph's name could not be encoded
    (UnicodeEncodeError, exit 3). They are names like any other: matched, moved and shown (a lone
    surrogate in JSON as itself, its \\u escape; it was three U+FFFD, a name the report never held)."""
    log = write(tmp_path, "run.log", function("__inference_f_9", CPU) + placed("mm", "MatMul", GPU0))
    report = json.loads(Path(saved(tmp_path, log)).read_text())
    for name, graph, shown in (("a\0b", "__inference_f\0g_9", "f\0g"), ("a\0b", "__inference_\ud800_9", "\ud800"),
                               ("x\udfffy", "__inference_g\udc80_3", "g\udc80"), ("\0", None, None)):
        old = json.loads(json.dumps(report))
        for p in old["placements"]:
            if p["node"] == "MatMul":
                p["node"] = name
                p["graph"] = graph
        before = write(tmp_path, "before.json", json.dumps(old))
        assert diff_json(before, before, expect=0)["summary"]["unchanged"] == 6
        data = diff_json(before, log, expect=1)
        assert data["summary"]["unchanged"] == 5
        assert [(r["graph"], r["node"]) for r in data["removed"]] == [(shown, name)]
        assert [(r["graph"], r["node"]) for r in data["added"]] == [("f", "MatMul")]
        for p in old["placements"]:
            if p["node"] == name:
                p["device"] = p["canonical"] = GPU0
                p["device_type"] = "GPU"
        after = write(tmp_path, "after.json", json.dumps(old))
        data = diff_json(before, after, expect=1)
        assert [(r["graph"], r["node"], r["from"], r["to"]) for r in data["moved"]] == [(shown, name, CPU, GPU0)]
        assert data["summary"]["unchanged"] == 5
        table = runner.invoke(app, ["diff", before, after])
        assert table.exit_code == 1, table.stderr


def test_a_lone_surrogate_in_a_big_diffs_names_comes_back_as_given(tmp_path: Path) -> None:
    """A saved report's node or graph name holding a lone surrogate (JSON's ``"\\ud800"``), among more
    rows than fit one written batch: ``diff --json`` was an internal error (UnicodeEncodeError, exit 3)
    once the rows were written a batch at a time (an op's name), and the table view's too; a name came
    back as three U+FFFD. Every row reads back with the names as the reports hold them; the table shows
    the surrogate as U+FFFD."""
    from placement_cli.render.json import BATCH

    log = write(tmp_path, "run.log", placed("mm", "MatMul", CPU))
    report = json.loads(Path(saved(tmp_path, log)).read_text())
    model = report["placements"][0]
    odd = {3: ("x\ud800y", None), BATCH + 2: ("\udfff", "g\udbff"), BATCH + 9: ("q\"\\\ud83d", "\udc80")}
    sides = {}
    for side, prefix in (("old", "o"), ("new", "n")):
        names = [odd.get(i, (f"{prefix}{i}", None)) if side == "old" else (f"{prefix}{i}", None)
                 for i in range(BATCH + 20)]
        report["placements"] = [{**model, "node": node, "graph": graph, "op": "M\ud800" if i == 3 else model["op"]}
                                for i, (node, graph) in enumerate(names)]
        sides[side] = write(tmp_path, f"{side}.json", json.dumps(report))
    data = diff_json(sides["old"], sides["new"], expect=1)
    assert data["summary"]["removed"] == data["summary"]["added"] == BATCH + 20
    removed = {(r["node"], r["graph"]) for r in data["removed"]}
    assert set(odd.values()) <= removed and len(removed) == BATCH + 20
    assert [r["op"] for r in data["removed"] if r["node"] == "x\ud800y"] == ["M\ud800"]
    table = runner.invoke(app, ["diff", "--all", sides["old"], sides["new"]])
    assert table.exit_code == 1, table.stderr
    assert "x\ufffdy" in table.stdout


def test_each_row_names_the_op_its_own_placements_ran(tmp_path: Path) -> None:
    """A group's rows named one op for all its devices: oneDNN's ``_MklMatMul`` on CPU:0 and plain
    ``MatMul`` on GPU:0 moved as "_MklMatMul CPU:0 -> GPU:0"; two Sessions' ``x`` (a Const and a
    Placeholder) only in NEW were one row "x Const, count 2". Each row now says the op of the
    placements it stands for."""
    old = write(tmp_path, "old.log", executed("MatMul") * 5)
    new = write(tmp_path, "new.log", executed("_MklMatMul") * 3 + executed("MatMul", GPU0) * 2
                + placed("x", "Const", CPU) + placed("x", "Placeholder", CPU))
    data = diff_json(old, new, expect=1)
    assert [(r["op"], r["from"], r["to"], r["count"]) for r in data["moved"]] == [("MatMul", CPU, GPU0, 2)]
    assert sorted((r["node"], r["op"], r["count"]) for r in data["added"]) == [("x", "Const", 1),
                                                                             ("x", "Placeholder", 1)]
    assert data["summary"]["unchanged"] == 3


def test_a_trace_is_found_among_thousands_without_reading_them_all() -> None:
    """A function retraced every step has thousands of trace counters: each of its records looked its
    counter up by reading the list (``in``, ``index``): with 20,000 traces a side, diff took 40 times
    as long as parse --summary. The sorted counters are bisected: a few reads each."""
    from placement_cli.logparse.functions import function_key, trace_counters

    class Counters(list[int]):
        reads = 0

        def __getitem__(self, index: Any) -> Any:
            Counters.reads += 1
            return super().__getitem__(index)

        def __contains__(self, item: object) -> bool:
            raise AssertionError("every counter read to find one")

        def index(self, *args: Any) -> int:
            raise AssertionError("every counter read to find one")

    traces = trace_counters(f"__inference_step_{n}" for n in range(10, 40010, 2))
    traces["step"] = Counters(traces["step"])
    assert function_key("__inference_step_10", traces) == "step"
    assert function_key("__inference_step_20008", traces) == "step#10000"
    assert function_key("__inference_step_40008", traces) == "step#20000"
    assert function_key("__inference_step_11", traces) == "step"  # a counter this side never traced
    assert Counters.reads <= 4 * 17


def test_a_saved_report_names_the_op_that_moved_as_its_log_does(tmp_path: Path) -> None:
    """Two Sessions' graphs each place a node ``n``, a Const on CPU:0 and an Identity on GPU:0; in NEW
    the Identity is on CPU:0 too. Two logs say "n Identity moved" (the Const's equal records stay
    first); a saved report against a log said "n Const moved": its records are spelled apart from a
    log's, so they were paired device by device, and CPU:0's op read Const. Every kind now keeps what
    stays per op and device first."""
    old = write(tmp_path, "old.log", placed("n", "Const", CPU) + placed("n", "Identity", GPU0))
    new = write(tmp_path, "new.log", placed("n", "Const", CPU) + placed("n", "Identity", CPU))
    for a, b in ((old, new), (saved(tmp_path, old), new), (old, saved(tmp_path, new)),
                 (saved(tmp_path, old), saved(tmp_path, new))):
        data = diff_json(a, b, expect=1)
        assert [(r["node"], r["op"], r["from"], r["to"]) for r in data["moved"]] == [("n", "Identity", GPU0, CPU)]
        assert data["summary"]["unchanged"] == 1


@pytest.mark.parametrize("split", [False, True])
def test_two_sessions_nodes_that_swap_devices_are_two_moves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            split: bool) -> None:
    """Two Sessions whose graphs both hold ``MatMul`` (the k-th Session to place it), swapped between
    two runs (CPU:1 <-> CPU:2): diff said "Same placements" with exit 0, their multisets being equal. The
    second Session's node is ``#2`` (as a retraced function's is ``f#2``), in logs, saved reports and
    both mixed, read in one pass or in halves; one Session's repeats are still one node."""
    cpu1, cpu2 = CPU.replace("CPU:0", "CPU:1"), CPU.replace("CPU:0", "CPU:2")
    if split:
        monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
        monkeypatch.setattr(engine, "CHUNK", 4096)
        monkeypatch.setattr(parallel, "SPLIT_MIN", 1)

    def run(first: str, second: str) -> str:
        filler = "".join(placed(f"s{i}/x", "Const", CPU) for i in range(40))  # enough to be split
        return filler + placed("MatMul", "MatMul", first) + placed("a", "Const", first) + \
            placed("MatMul", "MatMul", second) + placed("a", "Const", second)

    old = write(tmp_path, "old.log", run(cpu1, cpu2))
    new = write(tmp_path, "new.log", run(cpu2, cpu1))
    for a, b in ((old, new), (saved(tmp_path, old), new), (old, saved(tmp_path, new)),
                 (saved(tmp_path, old), saved(tmp_path, new))):
        data = diff_json(a, b, expect=1)
        assert sorted((r["graph"] or "", r["node"], r["from"], r["to"]) for r in data["moved"]) == [
            ("", "MatMul", cpu1, cpu2), ("", "a", cpu1, cpu2), ("#2", "MatMul", cpu2, cpu1), ("#2", "a", cpu2, cpu1)
        ], (a, b)
        assert data["summary"]["unchanged"] == 40
    same = diff_json(old, saved(tmp_path, old), expect=0)
    assert same["summary"]["unchanged"] == 44
    table = runner.invoke(app, ["diff", old, new])
    assert table.exit_code == 1 and "#2: MatMul" in table.stdout


def test_a_node_named_empty_is_a_node_not_eager_ops(tmp_path: Path) -> None:
    """A saved report may name a graph node "" (hand-made, or another tool's): its move was shown as
    "(eager ops) MatMul" and its JSON row said ``"node": null``, an eager op's, in every kind of row.
    It is the node "" (its own row, never counted with eager ops)."""
    many = "".join(placed(f"s/n{i}", "Const", CPU) for i in range(45))  # more rows than the digest's 40
    log = write(tmp_path, "run.log", placed("mm", "MatMul", CPU) + placed("c", "Const", CPU) + many)
    report = json.loads(Path(saved(tmp_path, log)).read_text())
    for p in report["placements"]:
        if p["node"] == "mm":
            p["node"] = ""
    before = write(tmp_path, "before.json", json.dumps(report))
    for p in report["placements"]:
        if p["node"] == "" or p["node"].startswith("s/"):
            p.update(device=GPU0, canonical=GPU0, device_type="GPU")
    after = write(tmp_path, "after.json", json.dumps(report))
    data = diff_json(before, after, expect=1)
    assert next((r["node"], r["from"], r["to"]) for r in data["moved"]) == ("", CPU, GPU0)
    only = diff_json(before, log, expect=1)  # "" only in OLD, mm only in NEW
    assert [r["node"] for r in only["removed"]] == [""] and [r["node"] for r in only["added"]] == ["mm"]
    renamed = write(tmp_path, "renamed.log", placed("c", "Const", CPU) + many.replace("s/n", "t/n"))
    for args in ((before, after), (before, log), (before, renamed)):
        for every in (["--all"], []):  # every row, and the digest of a report longer than a screen
            table = runner.invoke(app, ["diff", *every, *args])
            assert table.exit_code == 1 and "eager ops" not in table.stdout, table.stdout


def test_eager_threads_wrappers_are_one_node_whatever_their_order(tmp_path: Path) -> None:
    """Eager ops of two threads (MirroredStrategy's replicas, a data pipeline) wrap their ops in
    single-op functions whose nodes share names (``a``, ``z_RetVal``) and are logged in whatever order the
    threads ran: a log and its own saved report said "2 moved" once Sessions' nodes were told apart by
    order. Where a side ran eager ops, its nodes of no tf.function stay one node (a multiset of devices);
    a side that ran none holds only Sessions' graphs, told apart by order."""
    cpu1, cpu2 = CPU.replace("CPU:0", "CPU:1"), CPU.replace("CPU:0", "CPU:2")
    log = write(tmp_path, "threads.log", function("__inference_f_3", CPU)
                + placed("a", "_Arg", cpu1, 11) + placed("a", "_Arg", cpu2, 22) + placed("z_RetVal", "_Retval", cpu2, 22)
                + placed("z_RetVal", "_Retval", cpu1, 11) + executed("Mul", cpu2, 22) + executed("Mul", cpu1, 11))
    assert diff_json(log, saved(tmp_path, log), expect=0)["summary"]["unchanged"] == 11
    other = write(tmp_path, "other.log", function("__inference_f_3", CPU)  # the threads the other way round
                  + placed("a", "_Arg", cpu2, 22) + placed("a", "_Arg", cpu1, 11) + placed("z_RetVal", "_Retval", cpu1, 11)
                  + placed("z_RetVal", "_Retval", cpu2, 22) + executed("Mul", cpu1, 11) + executed("Mul", cpu2, 22))
    for a, b in ((log, other), (saved(tmp_path, log), saved(tmp_path, other))):
        assert diff_json(a, b, expect=0)["summary"]["unchanged"] == 11


def test_a_sessions_node_one_side_places_twice_is_one_row(tmp_path: Path) -> None:
    """Two Sessions of OLD place ``x`` on CPU:0, NEW's none: told apart by order (``#2``), then one node
    again, as NEW has no such Sessions to pair them with: one row, count 2, not two rows of one; the
    same where the log ran an eager op (no Session's numbers), and in a saved report."""
    filler = "".join(placed(f"s{i}/c", "Const", CPU) for i in range(5))
    for eager in ("", executed("AddV2")):
        old = write(tmp_path, "old.log", filler + placed("x", "Const", CPU) + placed("x", "Const", CPU) + eager)
        new = write(tmp_path, "new.log", filler + placed("y", "Const", CPU) + eager)
        for a in (old, saved(tmp_path, old)):
            data = diff_json(a, new, expect=1)
            assert [(r["node"], r["device"], r["count"]) for r in data["removed"]] == [("x", CPU, 2)], (eager, a)
            assert [(r["node"], r["count"]) for r in data["added"]] == [("y", 1)]
            table = runner.invoke(app, ["diff", a, new])
            assert table.exit_code == 1 and table.stdout.count(" x ") + table.stdout.count(" x\n") <= 1, table.stdout


@pytest.mark.parametrize("ascii_only", [False, True])
def test_rows_written_from_their_lines_are_the_rows_own_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            ascii_only: bool) -> None:
    """A big diff's one-sided rows are written straight from the records' lines, a batch at a time: each
    batch's bytes are those of the rows as dicts through the JSON writer, whatever the batch mixes
    (nodes of no tf.function and a function's, TF 2.x's and the guide era's records, a node placed
    twice; in saved reports, names in other scripts and characters JSON escapes)."""
    import io

    from placement_cli.collector import paused
    from placement_cli.render import json as rendered

    monkeypatch.setattr(rendered, "BATCH", 7)

    def run(prefix: str) -> str:
        text = ""
        for i in range(60):
            text += placed(f"{prefix}{i}/mm", "MatMul", GPU0) + f"{prefix}{i}/old: {CPU}\n"
            if i % 9 == 0:
                text += function(f"__inference_f{prefix}{i}_{i + 3}", GPU0)
            if i % 13 == 0:
                text += placed(f"{prefix}{i}/twice", "Const", CPU) * 2
        return text

    logs = [write(tmp_path, f"{name}.log", run(name)) for name in ("a", "b")]

    def edited(log: str, suffixes: tuple[str, ...], graph_end: str) -> str:
        report = json.loads(Path(saved(tmp_path, log)).read_text())
        for p in report["placements"]:
            if p["node"] is not None:  # the same name the same way (a node placed twice stays one node)
                p["node"] += suffixes[sum(map(ord, p["node"])) % len(suffixes)]
            if p.get("graph") and sum(map(ord, p["node"] or "")) % 3 == 0:
                p["graph"] += graph_end  # (a newline: where a record's line would end)
        return write(tmp_path, f"{Path(log).stem}_{len(suffixes)}.json", json.dumps(report))

    escaped = [edited(log, ("/\u4e2d", "/caf\u00e9", '/q"uote', "/ctl\x01", ""), "") for log in logs]
    newlines = [edited(log, ("", "", "", "", "/new\nline", "\n", "\nfirst"), "\n") for log in logs]
    for pair in (logs, escaped, newlines):
        result = compare(*(read_tallied(path) for path in pair))
        assert len(result.added) > 100 and any(c.graph for c in result.added)
        assert any(c.count == 2 for c in result.added)
        texts = []
        for lazy in (True, False):
            out = io.StringIO()
            with paused():
                rendered.write(result.to_dict(lazy=lazy), out, ascii_only=ascii_only)
            texts.append(out.getvalue())
        assert texts[0] == texts[1], pair


def test_a_function_called_late_in_a_log_is_still_known(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """diff reads a log whose first bytes name no tf.function as one that runs none (at a count's speed)
    until it executes one, then reads it again line by thread: a body placed after thousands of plain
    lines still belongs to its function, in a plain file and a compressed one (read by thread at once),
    and what reading a file says (it is compressed) is said once."""
    import gzip

    from placement_cli.logparse import saved as saved_module

    monkeypatch.setattr(saved_module, "FUNCTIONS_HEAD", 4096)  # (8 MiB of plain lines, as a test's few)
    plain = "".join(placed(f"s{i}/c", "Const", CPU) + executed("AddV2") for i in range(3000))
    for compressed in (False, True):
        paths = []
        for name, mm in (("old", CPU), ("new", GPU0)):
            text = (plain + function("__inference_f_7", mm)).encode()
            path = tmp_path / (f"{name}.log.gz" if compressed else f"{name}.log")
            path.write_bytes(gzip.compress(text) if compressed else text)
            paths.append(str(path))
        result = runner.invoke(app, ["diff", "--json", *paths])
        assert result.exit_code == 1, result.stderr
        assert moves(json.loads(result.stdout)) == [("f", "MatMul", CPU, GPU0)], compressed
        for path in paths:
            assert result.stderr.count(f"{path}: gzip-compressed") == compressed, result.stderr
    plain_only = write(tmp_path, "plain.log", plain.replace("s1/", "forward/"))  # the word alone runs nothing
    assert diff_json(plain_only, plain_only, expect=0)["summary"]["unchanged"] == 6000  # and 3000 eager ops
