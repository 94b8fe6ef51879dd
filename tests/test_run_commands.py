"""`show` and `tower` in real TensorFlow, many commands sharing one start-up (tests/lesson_driver.py):
runs that fail say so in TensorFlow's words, eager rows carry what the code asked for, one tower is
not called a sum, --copies runs the guide's matmuls, and every private TensorFlow API, missing, gives
the same answers or `unknown` (said once on stderr), never a wrong one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import gpu_count, is_matmul
from placement_cli.runtime.private import APIS
from processes import patience

pytestmark = pytest.mark.tf

DRIVER = Path(__file__).parent / "lesson_driver.py"
RESULT = [[22.0, 28.0], [49.0, 64.0]]
TOWER_RESULT = [[44.0, 56.0], [98.0, 128.0]]
CPU = "/job:localhost/replica:0/task:0/device:CPU:"
PLUMBING = {"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval"}
GPUS = gpu_count()
gpu2_missing = pytest.mark.skipif(GPUS > 2, reason="asserts what happens when /gpu:2 does not exist")


@pytest.fixture(scope="module")
def driven() -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(DRIVER)], capture_output=True, timeout=patience(900),
                          env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-3000:]
    return json.loads(proc.stdout)


def ran(driven: dict[str, Any], *args: str, api: str | None = None) -> dict[str, Any]:
    """One command's run: its exit code, stderr, and its JSON document as ``report``."""
    found = next(r for r in driven["runs"] if r["args"] == list(args) and r["api"] == api)
    return {**found, "report": json.loads(found["stdout"]) if found["stdout"].strip() else None}


def rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    return report["placements"]


# Item 1: a run that does not produce its result exits 1 and says why, in TensorFlow's words.

def test_an_eager_request_for_an_unknown_task_fails_loudly_with_tensorflows_message(driven: dict[str, Any]) -> None:
    run = ran(driven, "show", "--mode", "eager", "--device", "/job:ps/task:3/cpu:0")
    assert run["exit_code"] == 1
    report = run["report"]
    assert report["result"] is None
    assert report["errors"] and "/job:ps/replica:0/task:3/device:CPU:0 unknown device" in report["errors"][0]["message"]
    assert report["run_error"].startswith("InvalidArgumentError: ")


@gpu2_missing
def test_a_missing_gpu_fails_with_exit_1_and_names_what_exists(driven: dict[str, Any]) -> None:
    run = ran(driven, "show", "--device", "/gpu:2")
    assert run["exit_code"] == 1 and run["report"]["result"] is None
    error = run["report"]["errors"][0]
    assert error["kind"] == "device_not_found" and error["requested_device"] == "/device:GPU:2"
    assert f"{CPU}0" in error["available_devices"] and not any(d.endswith("GPU:2") for d in error["available_devices"])


@gpu2_missing
def test_eager_missing_gpu_reports_the_eager_wording(driven: dict[str, Any]) -> None:
    run = ran(driven, "show", "--mode", "eager", "--device", "/gpu:2")
    assert run["exit_code"] == 1
    error = run["report"]["errors"][0]
    assert error["message"].startswith("Could not satisfy device specification") and error["kind"] == "device_not_found"


# The guide's lessons, as they are.

def test_inputs_on_cpu_is_the_guides_second_example(driven: dict[str, Any]) -> None:
    nodes = {p["node"]: p for p in rows(ran(driven, "show", "--inputs-on", "/cpu:0")["report"])}
    assert nodes["a"]["requested"] == "/device:CPU:0" and nodes["a"]["status"] == "as requested"
    assert nodes["MatMul"]["requested"] is None and nodes["MatMul"]["status"] == "free"


@gpu2_missing
def test_soft_placement_marks_each_fallback_and_says_why(driven: dict[str, Any]) -> None:
    report = ran(driven, "show", "--device", "/gpu:2", "--soft")["report"]
    assert report["result"] == RESULT
    for p in rows(report):
        assert p["status"] == "soft fallback" and not p["canonical"].endswith("GPU:2")
        assert p["reason"].startswith("GPU:2 does not exist (have: CPU:0")


def test_towers_on_logical_cpus_each_on_its_own_device(driven: dict[str, Any]) -> None:
    report = ran(driven, "tower", "--devices", "/cpu:1,/cpu:2")["report"]
    assert report["result"] == TOWER_RESULT
    where = {p["node"]: (p["group"], p["canonical"], p["status"]) for p in rows(report)}
    assert where["MatMul"] == ("tower 0 (/cpu:1)", f"{CPU}1", "as requested")
    assert where["MatMul_1"] == ("tower 1 (/cpu:2)", f"{CPU}2", "as requested")
    assert where["AddN"] == ("reduce", f"{CPU}0", "as requested")
    assert "device:CPU:2" in report["log"]  # the log itself proves it
    assert "summed on /cpu:0" in report["title"]


def test_soft_towers_fall_back_only_where_the_gpu_is_missing_and_say_why(driven: dict[str, Any]) -> None:
    report = ran(driven, "tower", "--gpus", "0-3", "--soft")["report"]
    assert report["result"] == [[88.0, 112.0], [196.0, 256.0]]
    towers = [p for p in rows(report) if p["group"] != "reduce"]
    assert len(towers) == 12
    for p in towers:
        index = int(p["requested"].rsplit(":", 1)[1])
        if index < GPUS:
            assert p["status"] == "as requested"
        else:
            assert p["status"] == "soft fallback" and f"GPU:{index} does not exist" in p["reason"]


# Item 3: every eager row carries what the code asked for.

@pytest.mark.parametrize("device", ["/cpu:1", "/cpu:0"])
def test_eager_rows_carry_the_request_of_the_code_that_ran_them(driven: dict[str, Any], device: str) -> None:
    report = ran(driven, "show", "--mode", "eager", "--device", device)["report"]
    assert report["result"] == RESULT
    eager = [p for p in rows(report) if p["kind"] == "eager" and not p["op"].startswith("__inference_")]
    assert "Reshape" in {p["op"] for p in eager} and any(is_matmul(p["op"]) for p in eager)  # Reshape: TF adds it for a shape
    for p in eager:
        assert (p["requested"], p["status"]) == (device, "as requested"), p
    calls = [p for p in rows(report) if p["kind"] == "eager" and p["op"].startswith("__inference_")]
    assert calls and all(p["status"] == "free" for p in calls)  # the tf.function was called outside any tf.device
    body = [p for p in rows(report) if p["kind"] == "placer" and is_matmul(p["op"])]
    assert body and all(p["status"] == "as requested" for p in body)  # the function's body asked for it too
    named = [p for p in rows(report) if p["op"] not in PLUMBING and p["op"] != "Identity"
             and not p["op"].startswith("__inference_")]
    assert named and all(p["status"] != "free" for p in named)  # nothing the code pinned is called free


@gpu2_missing
@pytest.mark.parametrize("args", [pytest.param(("show", "--mode", "eager", "--device", "/gpu:2", "--soft"),
                                               marks=gpu2_missing),
                                  pytest.param(("tower", "--mode", "eager", "--soft"),  # towers on /gpu:2, /gpu:3
                                               marks=pytest.mark.skipif(GPUS > 2, reason="/gpu:2 exists here"))])
def test_eager_ops_pinned_to_missing_gpus_are_soft_fallbacks_with_a_reason(driven: dict[str, Any],
                                                                           args: tuple[str, ...]) -> None:
    report = ran(driven, *args)["report"]
    pinned = [p for p in rows(report) if p["kind"] == "eager" and (p["requested"] or "").startswith("/gpu:")]
    assert len(pinned) >= (7 if args[0] == "show" else 14)  # constants, the reshapes TF adds, matmuls
    for p in pinned:
        assert p["status"] == "soft fallback" and "does not exist" in p["reason"], p
        if args[0] == "tower":
            assert p["group"] == f"tower {int(p['requested'][-1]) - 2} ({p['requested']})"
    if args[0] == "tower":
        (add,) = [p for p in rows(report) if p["kind"] == "eager" and p["op"] == "AddN"]
        assert (add["group"], add["requested"], add["status"]) == ("reduce", "/cpu:0", "as requested")


# Item 4: one tower is not a sum.

@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_one_tower_says_nothing_was_summed(driven: dict[str, Any], mode: str) -> None:
    args = ("tower", "--devices", "/cpu:0", "--reduce-on", "/gpu:3")
    run = ran(driven, *((*args[:1], "--mode", "eager", *args[1:]) if mode == "eager" else args))
    report = run["report"]
    assert run["exit_code"] == 0 and report["result"] == RESULT
    assert "one tower" in report["title"] and "summed on" not in report["title"] and "/gpu:3" not in report["title"]
    assert not any(p["group"] == "reduce" or p["op"] == "AddN" for p in rows(report))
    assert {p["group"] for p in rows(report)} == {"tower 0 (/cpu:0)"}


# Item 5: --copies runs the guide's matmuls (no optimizer folds them into constants).

def test_copies_are_of_the_matmuls_the_executed_graph_ran(driven: dict[str, Any]) -> None:
    report = ran(driven, "tower", "--devices", "/cpu:1,/cpu:2", "--copies")["report"]
    assert report["result"] == TOWER_RESULT
    copies = {(c["tensor"], c["from"], c["to"]) for c in report["copies"]}
    assert copies == {("MatMul", f"{CPU}1", f"{CPU}0"), ("MatMul_1", f"{CPU}2", f"{CPU}0")}
    executed = executed_graph(driven, "tower", "--devices", "/cpu:1,/cpu:2", "--copies")
    matmuls = {(n["name"], n["device"]) for n in executed if is_matmul(n["op"])}
    assert matmuls == {("MatMul", f"{CPU}1"), ("MatMul_1", f"{CPU}2")}
    assert not any("__cf__" in n["name"] for n in executed)  # nothing constant-folded


def executed_graph(driven: dict[str, Any], *args: str) -> list[dict[str, str]]:
    """The nodes of the graph a --copies run executed (name, op, device), as TensorFlow partitioned it."""
    return driven["partitions"][" ".join([*args, "--cpus", "3", "--json"])]


# --time: the guide's towers measured, each timed node on the device the executed graph gave it, each copy
# the size the traced step's stats gave it.

def test_a_timed_tower_puts_each_op_where_the_executed_graph_ran_it(driven: dict[str, Any]) -> None:
    args = ("tower", "--devices", "/cpu:1,/cpu:2", "--copies", "--time", "--time-steps", "3")
    run = ran(driven, *args)
    assert run["exit_code"] == 0, run["stderr"]
    report = run["report"]
    cost = report["cost"]
    assert report["result"] == TOWER_RESULT and cost["steps"] == 3 and cost["warmup"] == 2 and cost["step"] is None
    executed = {n["name"]: n["device"] for n in executed_graph(driven, *args)}
    timed = {o["node"]: o["device"] for o in cost["ops"]}
    assert {"MatMul", "MatMul_1", "AddN"} <= set(timed)
    assert all(timed[node] == executed[node] for node in timed if node in executed), (timed, executed)
    assert {o["node"]: o["status"] for o in cost["ops"]}["AddN"] == "as requested"
    stats = {(c["producer"], c["consumer"]): c["bytes"] for c in report["copies"]}  # the traced step's stats
    measured = {(c["producer"], c["consumer"]): c["bytes"] for c in cost["copies"]}
    assert measured == stats and set(measured.values()) == {16}  # 2x2 float32 each
    assert {d["device"][-5:] for d in cost["devices"]} == {"CPU:0", "CPU:1", "CPU:2"}
    assert cost["plain_wall_us"]["mean"] > 0 and cost["overhead_us"] is not None
    assert "profiler_session.cc" not in report["log"] and "save_profile.cc" not in report["log"]  # placement's own


def test_a_timed_eager_run_times_the_op_on_its_device(driven: dict[str, Any]) -> None:
    run = ran(driven, "show", "--mode", "eager", "--device", "/cpu:1", "--time", "--time-steps", "2")
    assert run["exit_code"] == 0, run["stderr"]
    cost = run["report"]["cost"]
    assert cost["steps"] == 2
    matmuls = [o for o in cost["ops"] if is_matmul(o["op"]) and o["graph"] is None]
    assert matmuls and all(o["device"] == f"{CPU}1" for o in matmuls if o["device"] is not None)
    assert any(o["device"] == f"{CPU}1" for o in matmuls)


# Item 2 (and issue 8): each private TensorFlow API missing in turn: right, or unknown, never wrong.

def _unknown(p: dict[str, Any]) -> bool:
    return p["status"] == "logged" or (p["reason"] or "").startswith("unknown")


def _kernel_of_its_types(api: str, p: dict[str, Any], q: dict[str, Any]) -> bool:
    """Without the kernel registry whether an op has a kernel of a device type at all is unknown; the node's
    own check still says it has none for its types (on a GPU machine: StringJoin asked for the GPU)."""
    if api != "kernel_registry" or (p["requested"], p["status"]) != (q["requested"], q["status"]):
        return False
    registered = re.fullmatch(r"no (\w+) kernel registered for (\S+)", q["reason"] or "")
    return registered is not None and p["reason"] == f"no {registered[1]} kernel for {registered[2]} with this node's types"


def _key(p: dict[str, Any]) -> tuple[Any, ...]:
    op = re.sub(r"_\d+$", "", p["op"]) if p["op"].startswith("__inference_") else p["op"]  # a function per trace
    return p["kind"], p["node"], op, p["canonical"], p["group"]


def _outcomes(report: dict[str, Any]) -> dict[tuple[Any, ...], set[tuple[Any, ...]]]:
    found: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
    for p in rows(report):
        found.setdefault(_key(p), set()).add((p["requested"], p["status"], p["reason"]))
    return found


RUN_ARGS = [("show", "--device", "/cpu:0"), ("show", "--device", "/gpu:2", "--soft"),
            ("show", "--mode", "eager", "--device", "/cpu:1"), ("tower", "--mode", "eager", "--soft"),
            ("tower", "--devices", "/cpu:1,/cpu:2", "--copies")]


@pytest.mark.parametrize("api", sorted(APIS))
@pytest.mark.parametrize("args", RUN_ARGS, ids=" ".join)
def test_each_private_api_missing_gives_the_same_answer_or_unknown(driven: dict[str, Any], api: str,
                                                                   args: tuple[str, ...]) -> None:
    base, run = ran(driven, *args), ran(driven, *args, api=api)
    assert run["exit_code"] == base["exit_code"] == 0
    assert run["report"]["result"] == base["report"]["result"]
    assert run["report"]["copies"] == base["report"]["copies"]  # copies of run commands use public APIs only
    expected = _outcomes(base["report"])
    became_unknown = False
    for p in rows(run["report"]):
        key = _key(p)
        assert key in expected, p  # the same placements (a rerun logs no eager wrappers: a subset)
        if (p["requested"], p["status"], p["reason"]) not in expected[key]:
            assert _unknown(p), (p, expected[key])
            became_unknown = True
    said = [line for line in run["stderr"].splitlines() if line.startswith("placement:")]
    if became_unknown or run["report"]["incomplete"]:
        assert api in " ".join(run["report"]["incomplete"])
        assert len(said) == 1 and api in said[0] and "incomplete" in said[0]
    else:
        assert said == []


def test_requests_never_depend_on_private_apis(driven: dict[str, Any]) -> None:
    """The reproduced defect: without the kernel lookup, `show --device /cpu:0` said free for all three ops."""
    for api in ("kernel_lookup", "kernel_registry"):
        report = ran(driven, "show", "--device", "/cpu:0", api=api)["report"]
        assert [(p["requested"], p["status"]) for p in rows(report)] == [("/device:CPU:0", "as requested")] * 3


def test_without_function_graphs_a_function_body_is_unknown_not_free(driven: dict[str, Any]) -> None:
    report = ran(driven, "show", "--mode", "eager", "--device", "/cpu:1", api="func_graph")["report"]
    placed = [p for p in rows(report) if p["kind"] == "placer" and p["op"] not in PLUMBING]
    assert placed and all(p["status"] in ("logged", "as requested") for p in placed)  # never "free"
    assert any(p["node"] == "MatMul" and p["status"] == "logged" for p in placed)  # the body: unknown
    eager = [p for p in rows(report) if p["kind"] == "eager" and is_matmul(p["op"])]
    assert eager and all(p["status"] == "as requested" for p in eager)  # what the code asked needs no private API


@pytest.mark.parametrize("api", sorted(APIS))
def test_the_errors_catalogue_without_each_private_api(driven: dict[str, Any], api: str) -> None:
    base, run = ran(driven, "errors"), ran(driven, "errors", api=api)
    assert run["exit_code"] == 0
    cases = {c["name"]: c for c in base["report"]["cases"]}
    for case in run["report"]["cases"]:
        was = cases[case["name"]]
        if not case["ran"] and was["ran"]:  # not runnable without this API: said, not faked
            assert api == "set_device" and case["name"] == "colocation-conflict"
            assert "_set_device" in case["skip_reason"] and case["error"] is None
            continue
        assert (case["ran"], case["error_class"]) == (was["ran"], was["error_class"])
        assert (case["error"] or {}).get("kind") == (was["error"] or {}).get("kind")
        if case["soft"] and case["soft"].get("placements"):
            assert case["soft"]["result"] == was["soft"]["result"]
            for p, q in zip(case["soft"]["placements"], was["soft"]["placements"]):
                assert (p["requested"], p["status"], p["reason"]) == (q["requested"], q["status"], q["reason"]) \
                    or _unknown(p) or _kernel_of_its_types(api, p, q)
    if run["report"]["incomplete"]:
        said = [line for line in run["stderr"].splitlines() if line.startswith("placement:")]
        assert len(said) == 1 and api in said[0]
    if api == "set_device":
        assert not {c["name"]: c for c in run["report"]["cases"]}["colocation-conflict"]["ran"]
        assert run["report"]["incomplete"]


def test_nothing_is_missing_on_this_tensorflow(driven: dict[str, Any]) -> None:
    for run in driven["runs"]:
        if run["api"] is None:
            assert not (json.loads(run["stdout"]).get("incomplete") or []), run["args"]
            assert "incomplete" not in run["stderr"]
