"""When TensorFlow's own rule, not the program's pin, decides where an op runs, the report says which
rule (issue 27's cause items), and `check` judges it so: one script (tests/fixtures/tf_rules.py) traced
for real at two step counts, on 3 logical CPUs; the rest from saved reports, without TensorFlow."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES
from placement_cli.cli import app
from trace_helpers import TRACE, environment, run

SCRIPT = FIXTURES / "tf_rules.py"
CPU = "/job:localhost/replica:0/task:0/device:CPU:"
runner = CliRunner()
# Lessons of logical CPUs (a Session's device_count, absent /cpu:N, XLA on the CPU): on a GPU machine their
# TensorFlow processes see no GPU (conftest: cpu_devices), as an unpinned op would go to GPU:0 there.
pytestmark = [pytest.mark.tf, pytest.mark.cpu_devices("logical CPUs stand for the devices")]


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[dict[str, Any], Path]]:
    """The script traced with --json at 3 and at 30 eager steps: each report and where it was saved."""
    tmp = tmp_path_factory.mktemp("tf_rules")
    shutil.copy(SCRIPT, tmp / "prog.py")
    found = {}
    for steps in (3, 30):
        proc = run([*TRACE, "--json", "prog.py", str(steps)], tmp, timeout=600, env=environment(tmp))
        assert proc.returncode == 0, proc.stderr[-3000:]
        saved = tmp / f"steps{steps}.json"
        saved.write_bytes(proc.stdout)
        found[steps] = json.loads(proc.stdout), saved
    return found


def check(*args: object) -> tuple[int, str, str]:
    result = runner.invoke(app, ["check", "--no-config", *map(str, args)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def node(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in data["placements"] if p["node"] == name)


def test_an_eager_op_that_takes_a_resource_runs_with_it_and_that_is_no_fallback(traced: Any) -> None:
    data, saved = traced[3]
    moved = [p for p in data["placements"] if p["kind"] == "eager"
             and p["op"] in ("ReadVariableOp", "AssignAddVariableOp") and "total" not in (p["reason"] or "")]
    assert len(moved) == 6  # 3 steps, read and update each (the MirroredStrategy's reads: the next test)
    for p in moved:  # asked for CPU:0, ran on the variable's CPU:1, soft placement off: TensorFlow's rule
        assert p["canonical"] == CPU + "1" and p["requested"].endswith("CPU:0")
        assert p["status"] == "with its resource"
        assert p["reason"].startswith("with its variable weights on CPU:1: TensorFlow runs an eager op that takes a "
                                      "resource where the resource lives")
    code, out, _err = check(saved, "--no-fallback", "--json")
    summary = json.loads(out)["summary"]
    assert code == 1 and summary["soft_fallbacks"] == 2  # the cond's MatMul and the Session's far, no more
    assert not {"ReadVariableOp", "AssignAddVariableOp"} & set(json.loads(out)["failures"][0]["examples"])


def test_an_eager_op_s_wrapper_asked_what_its_op_asked(traced: Any) -> None:
    """The wrapper function of the eager updates under /CPU:0 (placer line `AssignAddVariableOp:
    (AssignAddVariableOp)`, placed once): its placement stands at TensorFlow's stdout copy, which names no
    thread, so it took no record and said `logged` (keras-io's loop: 22 VarHandleOp wrappers). Now its op's."""
    data, _saved = traced[3]
    wrappers = [p for p in data["placements"] if p["kind"] == "placer" and p["node"] == p["op"] == "AssignAddVariableOp"
                and "graph" not in p]
    assert wrappers and {p["status"] for p in wrappers} == {"with its resource"}, wrappers


def test_a_saved_report_says_which_placements_are_eager_ops_wrappers(traced: Any) -> None:
    """Run tables hide the single-op functions TensorFlow wraps eager ops in; the JSON did not say which
    placements those were, so a reader of it could not count what the tables show, and `check` of the
    saved report judged them as the program's placements (plumbing undercounted). Each says
    ``"wrapper": true``, and a report read back keeps it."""
    from placement_cli.rules import JUDGED_PLUMBING as PLUMBING_OPS

    data, saved = traced[3]
    wrappers = [p for p in data["placements"] if p.get("wrapper")]
    assert any(p["node"] == p["op"] == "AssignAddVariableOp" and "graph" not in p for p in wrappers), wrappers
    assert all(p["kind"] == "placer" and p["wrapper"] is True for p in wrappers)
    assert not any("wrapper" in p for p in data["placements"] if not p.get("wrapper"))  # only where true
    code, out, _err = check(saved, "--json", "--max-on", "CPU=100000")
    plumbing = sum(p["op"] in PLUMBING_OPS or bool(p.get("wrapper")) for p in data["placements"])
    assert code == 0 and json.loads(out)["summary"]["left_out"]["plumbing"] == plumbing


def test_eager_reads_of_mirrored_variables_run_with_each_component(traced: Any) -> None:
    data, _saved = traced[3]
    reads = {(p["canonical"], p["reason"].split(":")[0]) for p in data["placements"] if p["kind"] == "eager"
             and p["op"] == "ReadVariableOp" and p["requested"] and p["requested"].endswith("CPU:0")
             and p["reason"] and "total" in p["reason"]}
    assert reads == {(CPU + "1", "with its variable total on CPU"), (CPU + "2", "with its variable total/replica_1 on CPU")}
    assert not any(p["status"] == "soft fallback" and p["op"] == "ReadVariableOp" for p in data["placements"])


def test_an_xla_compiled_function_s_body_is_reported_and_gated(traced: Any) -> None:
    data, saved = traced[3]
    compiled = data["xla_compiled"]
    assert len(compiled) == 1 and compiled[0]["function"].startswith("__inference_compiled_")
    assert compiled[0]["device"] == CPU + "0" and compiled[0]["calls"] == 2  # eagerly, and inside calls_compiled
    ops = {op["node"]: op for op in compiled[0]["ops"]}
    assert ops["xla_mm"]["op"] == "MatMul" and ops["xla_mm"]["requested"].endswith("GPU:3") and ops["xla_mm"]["moved"]
    call = next(p for p in data["placements"] if p["op"] == compiled[0]["function"])
    assert "compiled by XLA" in call["reason"] and "xla_mm (MatMul) GPU:3" in call["reason"]
    assert not any(p["node"] == "xla_mm" for p in data["placements"])  # TensorFlow logged no line of its body
    nested = [p for p in data["placements"] if p["node"] == "PartitionedCall" and p["kind"] == "placer"]
    assert len(nested) == 1 and "compiled by XLA" in nested[0]["reason"]  # the call node in calls_compiled
    code, out, _err = check(saved, "--no-fallback", "--ignore", "^cond/|^far$")
    assert code == 1 and "ops of XLA-compiled functions run in a cluster on another device than they asked: 1" in out
    assert "xla_mm" in out
    assert check(saved, "--no-fallback", "--ignore", "^cond/|^far$|^xla_mm$")[0] == 0


def test_lowered_cond_and_while_branches_keep_their_requests(traced: Any) -> None:
    data, saved = traced[3]
    branch = next(p for p in data["placements"] if p["node"] and p["node"].endswith("/cond/mm_true"))
    assert branch["node"].startswith("cond/then/_") and branch["requested"].endswith("GPU:5")
    assert branch["status"] == "soft fallback" and branch["reason"].startswith("GPU:5 does not exist")
    body = next(p for p in data["placements"] if p["node"] and p["node"].endswith("/while/loopmul"))
    assert body["node"].startswith("while/body/_") and body["status"] == "free"
    for name in ("neg_first", "id_later"):  # a branch of a tf.cond inside the body: lowered twice (was: logged)
        nested = next(p for p in data["placements"] if p["node"] and p["node"].endswith(f"/while/cond/{name}"))
        assert nested["node"].startswith("while/body/_") and "/while/cond/" in nested["node"][len("while/body/_"):]
        assert (nested["status"], nested["requested"]) == ("free", None)
    code, out, _err = check(saved, "--no-fallback", "--ignore", "^far$|^xla_mm$")
    assert code == 1 and "mm_true" in out


def test_a_graph_node_with_a_resource_input_runs_with_it_and_that_is_no_fallback(traced: Any) -> None:
    """Before: `soft fallback`, reason "CPU:0 does not exist"; the placer's own line (Ignoring device
    specification ... reference connection ...) was shown to the user, never read."""
    data, saved = traced[3]
    read = node(data, "kept_read")
    assert read["requested"].endswith("CPU:0") and read["canonical"] == CPU + "1"
    assert read["status"] == "with its resource"
    assert read["reason"].startswith("with its reference input kept on CPU:1: TensorFlow's placer puts a node")
    (ignored,) = [r for r in data["ignored_requests"] if r["node"] == "kept_read"]
    assert (ignored["cause"], ignored["source"]) == ("reference_input", "kept")
    _code, out, _err = check(saved, "--no-fallback", "--ignore", "mm_true|^far$|^xla_mm$")
    assert "kept_read" not in out


def test_a_function_s_node_with_a_resource_input_runs_with_it_and_that_is_no_fallback(traced: Any) -> None:
    """Tester h1's t_res2.py: in a tf.function, under /cpu:0, a read and an update of a variable on CPU:1,
    soft placement off. Reported before as `soft fallback`, reason "unknown (CPU:0 exists and has a kernel
    for it)", failing check --no-fallback on a program TensorFlow ran; then as following the function's
    placeholder read_readvariableop_resource: the reason names the variable."""
    for steps in (3, 30):
        data, saved = traced[steps]
        for name in ("fn_read", "fn_update"):
            p = node(data, name)
            assert p["graph"].startswith("__inference_pinned_update_")
            assert p["requested"].endswith("CPU:0") and p["canonical"] == CPU + "1"
            assert p["status"] == "with its resource"
            assert p["reason"].startswith("with its variable weights (its resource input ") and " on CPU:1: " in p["reason"]
        assert node(data, "fn_value")["canonical"] == CPU + "0"
        _code, out, _err = check(saved, "--no-fallback", "--ignore", "mm_true|^far$|^xla_mm$")
        assert "fn_read" not in out and "fn_update" not in out


def test_a_session_s_reasons_name_its_own_devices(traced: Any) -> None:
    data, _saved = traced[3]
    far = node(data, "far")
    assert far["status"] == "soft fallback" and far["canonical"] == CPU + "0"
    assert far["reason"] == "CPU:2 does not exist (have: CPU:0)"  # the process has 3; the Session 1


def test_max_on_counts_distinct_placements_at_any_step_count(traced: Any) -> None:
    few, many = traced[3][1], traced[30][1]
    assert len(traced[30][0]["placements"]) > len(traced[3][0]["placements"]) + 50  # the log grows with the steps
    summaries = []
    for saved in (few, many):
        _code, out, _err = check(saved, "--max-on", "CPU:1=1000", "--json")
        summaries.append(json.loads(out)["summary"])
    assert summaries[0]["distinct"] == summaries[1]["distinct"]
    assert summaries[0]["distinct_by_device"] == summaries[1]["distinct_by_device"]
    assert summaries[0]["placements"] < summaries[1]["placements"]  # the logged ones, said apart
    on_cpu1 = summaries[0]["distinct_by_device"][CPU + "1"]
    verdicts = [check(saved, "--max-on", f"CPU:1={on_cpu1}")[0] for saved in (few, many)]
    assert verdicts == [0, 0]
    verdicts = [check(saved, "--max-on", f"CPU:1={on_cpu1 - 1}") for saved in (few, many)]
    assert [code for code, _out, _err in verdicts] == [1, 1]
    assert f"distinct placements on CPU:1: {on_cpu1} (" in verdicts[1][1]
    assert "logged: an eager op each time it runs" in verdicts[1][1]


def test_unknown_requests_are_said_by_what_they_are(traced: Any) -> None:
    _data, saved = traced[3]
    _code, out, _err = check(saved, "--no-fallback", "--json")  # the code: whatever this machine's devices make it
    kinds = json.loads(out)["summary"]["unknown_request_kinds"]
    assert kinds.get("eager_const", 0) > 0 and kinds.get("graph", 0) > 0  # _EagerConst; lowered control flow
    assert "eager" not in kinds  # one thread: every eager op of the program was recorded
    _code, out, _err = check(saved, "--no-fallback")
    assert "another thread" not in out
    assert "_EagerConst: " in out and "(constants TensorFlow makes from Python values" in out
