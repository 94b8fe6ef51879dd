"""`placement mirrored`: MirroredStrategy trained for real on two logical CPUs (three TensorFlow runs in
one start-up, shared by every test through module fixtures), and its pure parts without TensorFlow."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import MATMUL_OPS, read_dot, run_batch, run_cli
from placement_cli.cli import app
from placement_cli.devices import parse_device
from placement_cli.lessons.mirrored import (MirroredSpec, expected_bytes, parameter_count, ring_copies,
                                            step_placements, strip_calls, _role)
from placement_cli.model import Origin, Placement, Report, Training

# MirroredStrategy over logical CPUs (--devices /cpu:0,/cpu:1): where its inputs, labels and sums are
# made is the CPU machine's answer (a GPU machine makes unpinned ones on GPU:0, and its lesson is
# tools/gpu_check.sh's). On a GPU machine its TensorFlow processes see no GPU (conftest: cpu_devices).
pytestmark = pytest.mark.cpu_devices("MirroredStrategy over logical CPUs")

CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"
GRADIENT_BYTES = 101_770 * 4  # 784*128 + 128 + 128*10 + 10 parameters, float32
runner = CliRunner()


def _short(device: str) -> str:
    return device.rsplit("/", 1)[1].replace("device:", "")


@pytest.fixture(scope="module")
def fit_dot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the Keras fit run draws its graph (--dot)."""
    return tmp_path_factory.mktemp("fit") / "fit.dot"


@pytest.fixture(scope="module")
def runs(fit_dot: Path) -> Any:
    """The runs on the default two logical CPUs, in one TensorFlow start-up."""
    return run_batch(["mirrored", "--json", "--copies"],
                     ["mirrored", "--json", "--copies", "--fit", "--reduce", "one-device", "--dot", str(fit_dot)],
                     ["mirrored", "--reduce", "nccl", "--steps", "1"])


@pytest.fixture(scope="module")
def loop(runs: Any) -> dict[str, Any]:
    """The default: a custom loop over /cpu:0, /cpu:1 with MirroredStrategy's own all-reduce."""
    proc = runs[0]
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def fit(runs: Any) -> dict[str, Any]:
    proc = runs[1]
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.tf
def test_replicas_and_where_each_variables_copies_live(loop: dict[str, Any]) -> None:
    t = loop["training"]
    assert t["replicas"] == [CPU.format(0), CPU.format(1)]
    assert [v["name"] for v in t["variables"]] == ["sequential/dense/kernel", "sequential/dense/bias",
                                                   "sequential/dense_1/kernel", "sequential/dense_1/bias"]
    for v in t["variables"]:
        assert v["kind"] == "MirroredVariable" and v["devices"] == [CPU.format(0), CPU.format(1)]
    assert [v["shape"] for v in t["variables"]] == [[784, 128], [128], [128, 10], [10]]
    assert t["parameters"] == parameter_count() == 101_770


@pytest.mark.tf
def test_the_default_all_reduce_is_a_ring_collective(loop: dict[str, Any]) -> None:
    t = loop["training"]
    assert t["reduction"] == "CollectiveAllReduce (RING)"
    assert "MirroredStrategy's default" in t["reduction_source"]
    assert loop["executed_ops"]["CollectiveReduceV2"] == 2  # one per replica, gradients packed


@pytest.mark.tf
def test_placements_are_grouped_per_replica(loop: dict[str, Any]) -> None:
    where: dict[str, Counter[str]] = {}
    for p in loop["placements"]:
        where.setdefault(p["group"], Counter())[_short(p["canonical"])] += 1
    for k in (0, 1):
        for part in ("forward", "gradients", "all_reduce", "apply"):
            assert set(where[f"replica {k}: {part}"]) == {f"CPU:{k}"}, (k, part, where.get(f"replica {k}: {part}"))
    assert where["replica 0: forward"]["CPU:0"] == where["replica 1: forward"]["CPU:1"]  # the same model twice
    assert set(where["reduce_loss (strategy.reduce)"]) == {"CPU:0"}
    adds = [p for p in loop["placements"] if p["group"] == "reduce_loss (strategy.reduce)" and p["op"] == "AddN"]
    assert len(adds) == 1  # strategy.reduce: one AddN on CPU:0
    second = [p for p in loop["placements"] if (p["node"] or "").startswith("replica_1/")]
    assert second and all(p["group"].startswith("replica 1:") for p in second)


@pytest.mark.tf
def test_losses_per_step_and_keras_fit_gives_the_same_ones(loop: dict[str, Any], fit: dict[str, Any]) -> None:
    assert loop["steps"] == 3 and len(loop["losses"]) == 3
    assert all(0 < x < 10 for x in loop["losses"])
    assert fit["losses"] == pytest.approx(loop["losses"], rel=1e-5)  # same data, weights and SGD
    assert fit["training"]["mode"] == "Keras fit"
    assert fit["training"]["reduction"] == "ReductionToOneDevice"


@pytest.mark.tf
def test_collective_bytes_are_computed_and_marked(loop: dict[str, Any]) -> None:
    computed = [c for c in loop["copies"] if c["computed"]]
    assert [(_short(c["from"]), _short(c["to"]), c["bytes"]) for c in computed] == \
        [("CPU:0", "CPU:1", GRADIENT_BYTES), ("CPU:1", "CPU:0", GRADIENT_BYTES)]
    seen = [c for c in loop["copies"] if not c["computed"]]
    assert not any(c["bytes"] > 1000 for c in seen)  # the gradients never show as a _Send
    labels = [c for c in seen if c["dtype"] == "int32" and c["shape"] == [32]]
    assert [(_short(c["from"]), _short(c["to"]), c["bytes"]) for c in labels] == [("CPU:0", "CPU:1", 128)]
    expected = loop["training"]["expected_copy_bytes"]["bytes"]
    assert expected == 2 * GRADIENT_BYTES + 4 + 128
    assert abs(loop["copy_totals"]["per_step_bytes"] - expected) <= 16
    assert any("computed" in note for note in loop["training"]["notes"])


@pytest.mark.tf
def test_one_device_reduction_shows_every_gradient_byte(fit: dict[str, Any]) -> None:
    copies = fit["copies"]
    assert not any(c["computed"] for c in copies)
    up = sum(c["bytes"] for c in copies if _short(c["from"]) == "CPU:1" and "gradient_tape" in c["tensor"])
    down = sum(c["bytes"] for c in copies if _short(c["to"]) == "CPU:1" and c["dtype"] == "float32")
    assert up == down == GRADIENT_BYTES  # replica 1's gradients to CPU:0, the sums back
    expected = fit["training"]["expected_copy_bytes"]["bytes"]
    assert expected == 2 * GRADIENT_BYTES + 4  # fit's dataset puts each shard on its replica: no labels sent
    assert abs(fit["copy_totals"]["per_step_bytes"] - expected) <= 16


@pytest.mark.tf
def test_nccl_on_cpus_is_the_lesson_not_a_crash(runs: Any) -> None:
    proc = runs[2]
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "all-reduce: NcclAllReduce, from --reduce nccl" in proc.stdout
    # TensorFlow's own words, in a failure panel, and the lesson they teach
    assert "No OpKernel was registered to support Op 'NcclAllReduce'" in proc.stdout
    assert "failed" in proc.stdout or "did not finish" in proc.stdout
    assert "between GPUs only" in proc.stdout
    assert "GPUs only" in proc.stdout and "--reduce collective" in proc.stdout


@pytest.mark.parametrize(("args", "says"), [
    (["--replicas", "0"], "--replicas takes 1 to 16"),
    (["--steps", "5000"], "--steps takes 1 to 1000"),
    (["--batch", "10000"], "--batch takes 1 to 8192"),
    (["--reduce", "ring"], "ring"),
    (["--batch", "63"], "does not split evenly over 2 replicas"),
    (["--devices", "/cpu:0,/device:CPU:0"], "are the same device"),
    (["--replicas", "3", "--gpus", "0,1"], "3 replicas asked for but 2 devices given"),
])
def test_bad_usage_is_exit_2_before_tensorflow_starts(args: list[str], says: str) -> None:
    result = runner.invoke(app, ["mirrored", *args])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output


@pytest.mark.tf
def test_a_stale_tf_config_is_ignored_and_named() -> None:
    """TF_CONFIG=garbage made MirroredStrategy fail ("Expecting value", "No device satisfies")."""
    proc = run_cli("mirrored", "--steps", "1", "--json", env={"TF_CONFIG": "garbage"}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(json.loads(proc.stdout)["losses"]) == 1
    assert "TF_CONFIG is set (garbage) and ignored: `placement mirrored` runs on this machine alone" in proc.stderr
    assert proc.stderr.count("TF_CONFIG") == 2  # one line: "TF_CONFIG is set ... (cluster and inspect read TF_CONFIG)"


@pytest.mark.parametrize("as_json", [True, False])
def test_a_diverged_mirrored_training_says_so_and_exits_1(monkeypatch: pytest.MonkeyPatch, as_json: bool) -> None:
    """A huge --lr: losses like 2.9, 7590, ..., 4.8e34, then NaN (measured: step 12 of 20 at --lr 100).
    The lesson is replaced by its report, so no TensorFlow starts."""
    def diverging(spec: MirroredSpec, options: Any) -> Report:
        losses = (2.93, 7590.3, 4.77e34, float("nan"), float("inf"))
        training = Training(lesson="mirrored", devices=spec.devices, batch=spec.batch, steps=len(losses), lr=spec.lr,
                            dtype="float32", losses=losses, parameters=parameter_count(),
                            parameter_bytes=parameter_count() * 4, input_bytes=0)
        return Report(title="MirroredStrategy", result=list(losses), training=training, origin=Origin.RUN)

    monkeypatch.setattr("placement_cli.lessons.mirrored.mirrored", diverging)
    result = runner.invoke(app, ["mirrored", "--lr", "100", "--steps", "5", *(["--json"] if as_json else [])])
    assert result.exit_code == 1, result.output
    assert "the training diverged: the loss is nan at step 4 (2 of 5 steps not finite); try a smaller --lr than 100" \
        in result.stderr
    if as_json:
        def refuse(constant: str) -> None:
            raise ValueError(f"{constant} is not JSON")

        data = json.loads(result.stdout, parse_constant=refuse)
        assert data["losses"] == data["result"] == [2.93, 7590.3, 4.77e34, None, None]
        assert data["training"]["diverged_at_step"] == 4
        assert {"path": ".losses[4]", "value": "Infinity"} in data["non_finite"]
        assert {"path": ".result[3]", "value": "NaN"} in data["non_finite"]
    else:
        assert "the training diverged" in result.stdout and "4.770000e+34" in result.stdout


def test_the_one_json_writer_writes_strict_json_and_says_which_numbers_were_not_finite() -> None:
    """Every command's JSON goes through render.json.dumps (reports, the notebook's to_json, cluster,
    errors, devices, demo): NaN and Infinity, which no strict parser reads, become null, each named."""
    from placement_cli.render.json import dumps

    data = {"losses": [1.0, float("nan")], "check": {"max_rel_diff": float("inf")}, "by_device": {"a/b": -float("inf")},
            "fine": [1, 2.5, None]}
    text = dumps(data)
    assert "NaN" not in text.replace('"NaN"', "") and "Infinity" not in text.replace('"Infinity"', "").replace(
        '"-Infinity"', "")
    back = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert back["losses"] == [1.0, None] and back["check"]["max_rel_diff"] is None and back["fine"] == [1, 2.5, None]
    assert back["non_finite"] == [{"path": ".losses[1]", "value": "NaN"},
                                  {"path": ".check.max_rel_diff", "value": "Infinity"},
                                  {"path": '.by_device["a/b"]', "value": "-Infinity"}]
    assert "non_finite" not in json.loads(dumps({"losses": [1.0]}))  # only when something was not finite
    assert json.loads(dumps({float("nan"): 1, 2.5: 2})) == {"nan": 1, "2.5": 2}  # keys are text in JSON
    assert data["losses"][1] != data["losses"][1]  # the caller's data is left as it was


def test_ring_copies_add_up_to_two_n_minus_one_gradients() -> None:
    replicas = tuple(CPU.format(i) for i in range(3))
    copies = ring_copies(replicas, 1001)
    assert sum(c.bytes for c in copies) == 2 * 2 * 1001
    assert [(c.source, c.target) for c in copies] == [(replicas[0], replicas[1]), (replicas[1], replicas[2]),
                                                      (replicas[2], replicas[0])]
    assert all(c.computed and c.physical is False for c in copies)
    assert ring_copies(replicas[:1], 1001) == []


def test_expected_bytes_per_mode() -> None:
    two = (CPU.format(0), CPU.format(1))
    assert expected_bytes(MirroredSpec(two), two).total == 2 * GRADIENT_BYTES + 4 + 32 * 4
    assert expected_bytes(MirroredSpec(two, fit=True), two).total == 2 * GRADIENT_BYTES + 4
    away = (CPU.format(1), CPU.format(2))  # neither replica on CPU:0: both get their labels sent
    assert expected_bytes(MirroredSpec(away), away).total == 2 * GRADIENT_BYTES + 4 + 2 * 32 * 4


def _placed(node: str, op: str, device: str, line: int, requested: str | None = None) -> Placement:
    return Placement(node=node, op=op, device=device, spec=parse_device(device), kind="placer", line=line,
                     requested=requested)


def test_roles_from_names_devices_and_inlined_calls() -> None:
    replica_of = {CPU.format(0): 0, CPU.format(1): 1}
    step = {"forward/MatMul", "gradient_tape/replica_1/forward/MatMul/MatMul", "all_reduce/CollectiveReduceV2_1",
            "apply/update_1/AssignSubVariableOp", "reduce_loss/AddN", "Identity", "x"}
    placements = (
        _placed("Identity", "Identity", CPU.format(0), 1),  # another function's, before the step: setup
        _placed("forward/MatMul", "MatMul", CPU.format(0), 10),
        _placed("Identity", "Identity", CPU.format(1), 11, CPU.format(1)),
        _placed("gradient_tape/replica_1/forward/MatMul/MatMul", "MatMul", CPU.format(1), 12),
        _placed("all_reduce/CollectiveReduceV2_1", "CollectiveReduceV2", CPU.format(1), 13, CPU.format(1)),
        _placed("apply/update_1/AssignSubVariableOp", "AssignSubVariableOp", CPU.format(1), 14),
        _placed("x", "_Arg", CPU.format(0), 15),
        _placed("reduce_loss/AddN", "AddN", CPU.format(0), 16),
    )
    steps = step_placements(placements, step)
    roles = [_role(p, i in steps, replica_of) for i, p in enumerate(placements)]
    assert roles == ["setup (variables, data; eager)", "replica 0: forward", "replica 1: other",
                     "replica 1: gradients", "replica 1: all_reduce", "replica 1: apply",
                     "train step: arguments, results, other", "reduce_loss (strategy.reduce)"]
    assert strip_calls("StatefulPartitionedCall/StatefulPartitionedCall_1/sgd/AddN") == "sgd/AddN"


@pytest.mark.tf
def test_missing_replica_devices_fail_with_tensorflows_error_not_a_hang() -> None:
    """MirroredStrategy takes devices that do not exist; soft placement would then put both replicas
    on one CPU, where their collective all-reduce waits forever. placement asks TensorFlow first."""
    proc = run_cli("mirrored", "--gpus", "14,15", timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "Placement failed (device_not_found)" in proc.stdout and "GPU:14" in proc.stdout
    assert "none (the strategy was not made)" in proc.stdout


@pytest.mark.tf
def test_keras_fit_graph_joins_the_inlined_function_bodies(fit: dict[str, Any], fit_dot: Path) -> None:
    """Keras inlines its train function into the step, and the placer logs the body under the call's
    name (``StatefulPartitionedCall/.../MatMul``) while the recorded graph names it ``.../MatMul``: the
    DOT stood those nodes alone (12 edges for about 300 nodes, a column thousands of pixels tall)."""
    text = fit_dot.read_text()
    dot = read_dot(text)
    nodes = {nid: n["name"] for nid, n in dot["nodes"].items()}
    ops = dict(re.findall(r'(n\d+) \[label="[^"\n]*?\\n([^"]*)"', text))
    inlined = {nid for nid, name in nodes.items() if re.match(r"(.*/)?StatefulPartitionedCall(_\d+)?/", name)}
    assert len(inlined) > 50, sorted(nodes.values())[:20]
    joined = {nid for a, b, _ in dot["edges"] for nid in (a, b)}
    assert len(joined & inlined) >= 0.9 * len(inlined), sorted(nodes[n] for n in inlined - joined)
    assert len(dot["edges"]) >= len(nodes)  # a graph, not a column of boxes
    consumers = {b for _, b, attrs in dot["edges"] if "dashed" not in attrs}
    matmuls = {nid for nid in inlined if ops.get(nid) in MATMUL_OPS}
    assert matmuls and matmuls <= consumers  # every MatMul of the body reads its inputs
    assert fit["placements"]  # the same run's report
