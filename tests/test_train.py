"""`placement train`: the cifar10 tower pattern trained for real on logical CPUs (four TensorFlow
runs in three start-ups, shared by every test through module fixtures), and its pure parts without TensorFlow."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from conftest import has_gpu, matmul_count, run_batch, run_cli
from placement_cli.cli import app
from placement_cli.devices import parse_device
from placement_cli.exceptions import UsageProblem
from placement_cli.i18n import english
from placement_cli.lessons.train import TrainSpec, check_split, expected_bytes, parameter_count, role_order
from placement_cli.model import Copy, GradientCheck, Placement, Report, Training, link_totals
from placement_cli.render.table import View
from placement_cli.render.training import role_table, training_group
from placement_cli.devices import crosses_memory

CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"
runner = CliRunner()


def _short(device: str) -> str:
    return device.rsplit("/", 1)[1].replace("device:", "")


@pytest.fixture(scope="module")
def trained() -> dict[str, Any]:
    """One run, asserted from many angles: two towers on /cpu:1, /cpu:2, --check and --copies."""
    proc = run_cli("train", "--json", "--check", "--copies")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def on_missing_gpus() -> Any:
    """The runs on GPUs that no machine here has (no logical CPUs asked for), in one start-up."""
    return run_batch(["train", "--gpus", "14-16", "--soft", "--check", "--dtype", "float64", "--batch", "66",
                      "--steps", "2"],
                     ["train", "--gpus", "14,15"])


@pytest.fixture(scope="module")
def soft_text(on_missing_gpus: Any) -> Any:
    """Towers asked on GPUs that no machine here has, with --soft: float64, three towers, tables."""
    return on_missing_gpus[0]


@pytest.fixture(scope="module")
def diverged() -> Any:
    """The issue's diverged run (--lr 100: NaN from about step 16) with one tower soft-placed on a GPU
    that no machine has: tower 0 on /cpu:1, tower 1 wherever soft placement put it."""
    return run_cli("train", "--lr", "100", "--steps", "30", "--soft", "--devices", "/cpu:1,/gpu:99", "--copies",
                   "--json")


def _strict(text: str) -> Any:
    """JSON as strict parsers (jq, JavaScript) read it: NaN and Infinity are not JSON."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.tf
def test_a_diverged_training_says_so_exits_1_and_writes_strict_json(diverged: Any) -> None:
    assert diverged.returncode == 1, diverged.stderr[-3000:]
    data = _strict(diverged.stdout)
    step = data["training"]["diverged_at_step"]
    assert isinstance(step, int) and 1 < step <= 30
    assert data["losses"][step - 1] is None and all(isinstance(x, float) for x in data["losses"][:step - 1])
    assert {"path": f".losses[{step - 1}]", "value": "NaN"} in data["non_finite"] or \
        {"path": f".losses[{step - 1}]", "value": "Infinity"} in data["non_finite"]
    assert len(data["losses"]) == 30 and data["steps"] == 30  # every step ran: the run itself did not fail
    assert "the training diverged: the loss is" in diverged.stderr and f"at step {step}" in diverged.stderr
    assert "try a smaller --lr than 100" in diverged.stderr and "Traceback" not in diverged.stderr


@pytest.mark.tf
def test_expected_bytes_count_the_towers_where_they_really_ran(diverged: Any) -> None:
    """A soft-placed tower is counted where it ran: beside the variables it copies nothing."""
    data = _strict(diverged.stdout)
    forward = {p["group"]: p["canonical"] for p in data["placements"] if p["group"].endswith(": forward")}
    variables = {p["canonical"] for p in data["placements"] if p["op"] == "VarHandleOp"}
    assert len(variables) == 1
    home = variables.pop()
    ran = (forward["tower 0: forward"], forward["tower 1: forward"])
    expected = data["training"]["expected_copy_bytes"]
    found = expected_bytes(TrainSpec(("/cpu:1", "/gpu:99"), lr=100, steps=30), 4, ran, home)
    assert expected["bytes"] == found.total
    if not has_gpu():  # /gpu:99 fell back to CPU:0, where the variables are: one tower of two copies
        assert ran[1] == home == CPU.format(0)
        assert "parameters down to 1 tower (of 2) and gradients back" in expected["terms"][0]["what"]
        # the sanity line matches what was traced (once it counted both towers: 15,528 B against 7,764 B)
        assert expected["bytes"] == data["copy_totals"]["per_step_bytes"] == 7764


@pytest.mark.tf
def test_towers_train_for_real_and_report_the_loss_per_step(trained: dict[str, Any]) -> None:
    assert trained["steps"] == 5 and len(trained["losses"]) == 5
    assert all(isinstance(x, float) and 0 < x < 10 for x in trained["losses"])
    assert trained["losses"][-1] < trained["losses"][0]  # it learns the synthetic teacher
    assert trained["result"] == trained["losses"]
    assert trained["errors"] == []
    t = trained["training"]
    assert t["devices"] == ["/cpu:1", "/cpu:2"] and t["variables_on"] == "/cpu:0" and t["batch"] == 64
    assert t["parameters"] == parameter_count(TrainSpec(("/cpu:1",))) == 570 and t["parameter_bytes"] == 2280


@pytest.mark.tf
def test_each_role_sits_where_the_pattern_puts_it(trained: dict[str, Any]) -> None:
    where: dict[str, Counter[str]] = {}
    for p in trained["placements"]:
        where.setdefault(p["group"], Counter())[_short(p["canonical"])] += 1
    assert set(where) == set(role_order(2))
    for role in ("variables", "input", "average_gradients", "apply_gradients", "loss", "init",
                 "tower 0: variable reads", "tower 1: variable reads"):
        assert set(where[role]) == {"CPU:0"}, role
    for i in (0, 1):
        for part in ("forward", "gradients"):
            assert set(where[f"tower {i}: {part}"]) == {f"CPU:{i + 1}"}
    assert set(where["check"]) == {"CPU:0", "CPU:1"}  # full batch on tower 0's device; its reads by the variables
    # every node once: as many placements as graph nodes, counted per device in the summary
    assert trained["summary"]["placements"] == len(trained["placements"])
    assert trained["summary"]["by_device"][CPU.format(1)] == sum(where[r]["CPU:1"] for r in where)


@pytest.mark.tf
def test_towers_variable_reads_say_they_are_colocated_with_their_variable(trained: dict[str, Any]) -> None:
    reads = [p for p in trained["placements"] if p["group"].endswith("variable reads")]
    assert len(reads) == 8 and {p["op"] for p in reads} == {"ReadVariableOp"}
    for p in reads:
        assert p["requested"] is None and p["status"] == "free"
        assert p["reason"].startswith("colocated with its variable model/")
        assert "(VarHandleOp) on CPU:0, not on its tower's device: every step copies" in p["reason"]
    others = [p for p in trained["placements"] if p["reason"] and p not in reads]
    if has_gpu():  # where a GPU exists, an op that asked for nothing and sits on a CPU says why
        assert all(p["requested"] is None and "/device:CPU:" in p["canonical"] for p in others)
    else:
        assert others == []  # nothing else needs a reason on logical CPUs


@pytest.mark.tf
def test_gradient_check_float32(trained: dict[str, Any]) -> None:
    check = trained["check"]
    assert check["passed"] is True and check["dtype"] == "float32"
    assert check["reference_device"] == "/cpu:1"
    assert check["tolerance"] == {"rel": 1e-5}
    assert 0 <= check["max_abs_diff"] < 1e-6 and check["max_rel_diff"] <= 1e-5
    assert [v["name"] for v in check["variables"]] == ["model/w1", "model/b1", "model/w2", "model/b2"]
    assert all(v["max_abs_gradient"] > 0 for v in check["variables"])  # not a comparison of zeros


@pytest.mark.tf
def test_copies_carry_bytes_that_add_up_to_the_sanity_line(trained: dict[str, Any]) -> None:
    copies = trained["copies"]
    assert len(copies) == 22  # per tower: 4 reads + 2 input shards down; 4 gradients + 1 loss up
    for c in copies:
        assert c["dtype"] in ("float32", "int32") and c["shape"] is not None
        import math
        size = 4 * math.prod(c["shape"])
        assert c["bytes"] == size, c
        assert c["producer"] and c["consumer"] and c["physical"] is False and c["computed"] is False
    reads = [c for c in copies if c["tensor"].endswith("ReadVariableOp")]
    assert {(_short(c["from"]), _short(c["to"])) for c in reads} == {("CPU:0", "CPU:1"), ("CPU:0", "CPU:2")}
    assert sum(c["bytes"] for c in reads) == 2 * 2280  # the weights, down to each tower
    gradients = [c for c in copies if "/gradients/" in c["tensor"]]
    assert sum(c["bytes"] for c in gradients) == 2 * 2280 and all(c["consumer"].startswith("average_gradients/")
                                                                   for c in gradients)
    expected = trained["training"]["expected_copy_bytes"]
    assert expected["bytes"] == 2 * 2280 * 2 + 64 * (24 * 4 + 4) + 2 * 4 == 15528
    totals = trained["copy_totals"]
    assert totals["per_step_bytes"] == sum(c["bytes"] for c in copies) == expected["bytes"]
    links = {(_short(t["from"]), _short(t["to"])): (t["copies"], t["bytes"]) for t in totals["links"]}
    assert links == {("CPU:0", "CPU:1"): (6, 5480), ("CPU:0", "CPU:2"): (6, 5480),
                     ("CPU:1", "CPU:0"): (5, 2284), ("CPU:2", "CPU:0"): (5, 2284)}


@pytest.mark.tf
def test_the_executed_graph_holds_the_real_matmuls(trained: dict[str, Any]) -> None:
    """Both constant folders are off for --copies: the traced step ran the towers' MatMuls (forward
    and gradient: 5 per tower), and nothing was folded into a constant (``__cf__``)."""
    executed = trained["executed_ops"]
    assert matmul_count(executed) == 10  # MatMul, or oneDNN's _MklMatMul and _MklNativeFusedMatMul
    assert executed["_Send"] == executed["_Recv"] == 22
    assert not any("__cf__" in c["tensor"] for c in trained["copies"])


@pytest.mark.tf
def test_soft_towers_on_missing_gpus_float64_tables(soft_text: Any) -> None:
    proc = soft_text
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "Traceback" not in out + proc.stderr
    assert "Tower training: 3 towers on /gpu:14, /gpu:15, /gpu:16" in out
    assert "Per role and device" in out and "tower 2: variable reads" in out
    assert "soft fallback" in out and "GPU:14 does not exist" in out
    assert "Loss per step" in out and "float64" in out
    assert "tolerance: relative <= 1e-12 (of each gradient's largest magnitude): passed" in out
    if not has_gpu():  # every tower fell back to CPU:0, beside the variables: no copy
        assert "where its tower runs too: no copy" in out
        assert "CPU:0 (asked for /gpu:14)" in out  # the check says where it really ran


@pytest.mark.tf
def test_missing_gpus_fail_clearly_with_exit_1(on_missing_gpus: Any) -> None:
    proc = on_missing_gpus[1]
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "Placement failed" in proc.stdout and "GPU:14" in proc.stdout and "--soft" in proc.stdout


@pytest.mark.parametrize(("args", "says"), [
    (["--towers", "0"], "--towers takes 1 to 32"),
    (["--towers", "33"], "--towers takes 1 to 32"),
    (["--steps", "10001"], "--steps takes 1 to 10000"),
    (["--batch", "100000000"], "--batch takes 1 to 65536"),
    (["--lr", "nan"], "not a learning rate"),
    (["--lr", "0"], "not a learning rate"),
    (["--devices", "/cpu:[red]1"], "/cpu:[red]1"),
    (["--gpus", "0", "--devices", "/gpu:1"], "not both"),
    (["--towers", "3", "--devices", "/cpu:1,/cpu:2"], "3 towers asked for but 2 devices given"),
    (["--batch", "64", "--towers", "3"], "does not split evenly over 3 towers"),
])
def test_bad_usage_is_exit_2_before_tensorflow_starts(args: list[str], says: str) -> None:
    result = runner.invoke(app, ["train", *args])
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert "Traceback" not in result.output


def test_uneven_batch_says_why_and_what_would_work() -> None:
    with pytest.raises(UsageProblem) as caught:
        check_split(64, 3)
    message = str(caught.value)
    assert "64 = 3 x 21 + 1" in message and "tf.split needs an even split" in message
    assert "plain average" in message and "--batch 63 or --batch 66" in message
    with pytest.raises(UsageProblem, match="--batch 4"):
        check_split(2, 4)
    check_split(66, 3)  # even: fine


def test_expected_bytes_formula() -> None:
    spec = TrainSpec(("/cpu:1", "/cpu:2", "/cpu:3"), batch=66, dtype="float64")
    found = expected_bytes(spec, 8)
    assert found.total == 2 * 570 * 8 * 3 + 66 * (24 * 8 + 4) + 3 * 8
    assert sum(b for _, b in found.terms) == found.total
    shared = expected_bytes(TrainSpec(("/cpu:0", "/cpu:1")), 4)  # tower 0 beside the variables copies nothing
    assert shared.total == 2 * 2280 + 32 * (24 * 4 + 4) + 4 == 7764


def test_expected_bytes_of_towers_sharing_a_device_send_the_parameters_there_once() -> None:
    """TensorFlow sends a tensor once to each device that reads it: three towers soft-placed on one
    GPU get one copy of the parameters, and each sends its own gradients, shard and loss."""
    gpu0 = "/job:localhost/replica:0/task:0/device:GPU:0"
    spec = TrainSpec(("/gpu:14", "/gpu:15", "/gpu:16"), batch=66)
    found = expected_bytes(spec, 4, (gpu0, gpu0, gpu0), CPU.format(0))
    assert found.total == 2280 * 1 + 2280 * 3 + 66 * (24 * 4 + 4) + 3 * 4
    assert [english(w).split(":")[0] for w, _ in found.terms] == ["parameters down to 1 tower device",
                                                         "gradients back from 3 towers", "input", "fetched loss"]
    beside = expected_bytes(spec, 4, (CPU.format(0),) * 3, CPU.format(0))  # all fell back beside the variables
    assert beside.total == 0
    assert expected_bytes(spec, 4).total == 2 * 2280 * 3 + 66 * (24 * 4 + 4) + 3 * 4  # as asked: three GPUs


def test_a_diverged_loss_is_shown_and_named_in_the_tables() -> None:
    training = Training(lesson="towers", devices=("/cpu:1",), batch=2, steps=3, lr=100, dtype="float32",
                        losses=(2.5, 6.5e35, float("nan")), parameters=6, parameter_bytes=24, input_bytes=8)
    text = _render(training_group(Report(title="t", training=training), View(fit=True)), 120)
    assert "6.500000e+35" in text and "nan" in text
    assert "the training diverged: the loss is nan at step 3 (1 of 3 steps not finite); try a smaller --lr than 100" \
        in " ".join(text.split())
    assert training.diverged_at == 3 and replace(training, losses=(2.5, 2.0)).diverged_at is None


def _placement(node: str, group: str, device: str, line: int) -> Placement:
    return Placement(node=node, op="MatMul", device=device, spec=parse_device(device), kind="placer", line=line,
                     status="as requested", requested=device, group=group)


def _render(renderable: Any, width: int = 100) -> str:
    console = Console(record=True, width=width, color_system=None)
    console.print(renderable, crop=False)  # as the commands print: a line too long shows as one
    return console.export_text()


def test_role_table_sums_the_middle_towers_of_a_big_run_unless_all() -> None:
    towers = 12
    placements = [_placement(f"tower_{i}/MatMul", f"tower {i}: forward", CPU.format(i + 1), i) for i in range(towers)]
    placements.append(_placement("v", "variables", CPU.format(0), 99))
    roles = role_order(towers)
    small = _render(role_table(placements, roles, View(screen_rows=10)))
    assert "towers 2-10: forward" in small and "tower 11: forward" in small and "tower 5:" not in small
    assert "towers 2-10 summed (--all shows each)" in small
    every = _render(role_table(placements, roles, View(screen_rows=10, all_rows=True)))
    assert "tower 5: forward" in every and "summed" not in every


def test_training_report_renders_literally_and_at_40_columns() -> None:
    consumer = "tower_0/gradients/tower_0/MatMul_grad/tuple/control_dependency_1"
    copies = (Copy("[red]x", CPU.format(0), CPU.format(1), "float32", (2, 3), 24, "[red]x", consumer, False),)
    training = Training(lesson="towers", devices=("/cpu:1",), batch=2, steps=2, lr=0.5, dtype="float32",
                        losses=(2.5, 2.0), parameters=6, parameter_bytes=24, input_bytes=8, variables_on="/cpu:0",
                        check=GradientCheck("float32", "/cpu:1", 1e-5, (("w", 1e-9, 1e-8, 0.1),)),
                        roles=("tower 0: forward",))
    report = Report(placements=(_placement("[red]x", "tower 0: forward", CPU.format(1), 1),), title="t",
                    copies=copies, training=training)
    for width in (40, 120):
        text = _render(training_group(report, View(fit=True)), width)
        assert "[red]x" in text and "24 B" in text and "passed" in text
        assert "not a memory copy" in text
        assert max(len(line) for line in text.splitlines()) <= width


def test_link_totals_and_memory_boundaries() -> None:
    a, b = CPU.format(0), CPU.format(1)
    copies = (Copy("x", a, b, bytes=8), Copy("y", a, b, bytes=4), Copy("z", b, a, bytes=None))
    totals = link_totals(copies)
    assert [(t.copies, t.bytes) for t in totals] == [(2, 12), (1, None)]
    assert crosses_memory(a, b) is False
    assert crosses_memory(a, "/job:localhost/replica:0/task:0/device:GPU:0") is True
    assert crosses_memory(a, "/job:worker/replica:0/task:1/device:CPU:0") is True
    gpu = "/job:localhost/replica:0/task:0/device:GPU:{}"
    assert crosses_memory(gpu.format(0), gpu.format(1)) is True
    assert crosses_memory(gpu.format(0), gpu.format(1), virtual_gpus=True) is False


def test_plain_copies_keep_their_json_shape() -> None:
    """Copies without sizes (trace's) keep the three keys they always had."""
    assert Copy("x", "a", "b").to_dict() == {"tensor": "x", "from": "a", "to": "b"}
