"""`placement check`: every rule passing and failing, exit codes, plumbing, the TOML config, inputs
(logs of two TensorFlow versions, saved reports, standard input) and hostile values."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, LOGS
from placement_cli.cli import app
from placement_cli.devices import parse_device
from placement_cli.exceptions import RuleError
from placement_cli.logparse import parse_paths
from placement_cli.model import AS_REQUESTED, Copy, Placement, Report
from placement_cli.rules import Rules, assert_holds, judge, rules_from
from processes import patience

runner = CliRunner()
CHECK = FIXTURES / "check"
TRACE = CHECK / "moved_ops_copies.json"  # placement trace --copies --json samples/moved_ops.py, as it printed it
TRAIN = CHECK / "train_copies.json.gz"  # placement train --towers 2 --steps 1 --copies --json, gzipped
TF1 = LOGS / "tf1.x" / "distributed_xla.log"  # ps/0, worker/0, worker/1 CPUs and an XLA_GPU
TF2 = LOGS / "tf2.21" / "eager_logical_cpus.log"  # eager ops and functions on CPU:0..2, with _Arg/_Retval
TF0 = LOGS / "tf0.x" / "guide_towers.log"


@pytest.fixture(autouse=True)
def outside_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs in a folder of its own, with no pyproject.toml above it (tmp_path's parents have none)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")


def check(*args: str, stdin: str | bytes | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["check", *map(str, args)], input=stdin)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def check_json(*args: str, expect: int, stdin: str | bytes | None = None) -> dict:
    code, out, err = check(*args, "--json", stdin=stdin)
    assert code == expect, (out, err)
    return json.loads(out)


def rules_failed(data: dict) -> list[str]:
    return [f["rule"] for f in data["failures"]]


# --- the rules ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("dev", "count"), [("CPU", 3), ("ps/0", 1), ("worker/1", 1), ("/job:worker", 2),
                                            ("XLA_GPU:0", 1), ("worker/0 CPU:0", 1)])
def test_max_on_counts_a_type_a_device_or_a_task_in_a_tf1_log(dev: str, count: int) -> None:
    assert check_json(TF1, "--max-on", f"{dev}={count}", expect=0)["passed"] is True
    data = check_json(TF1, "--max-on", f"{dev}={count - 1}", expect=1)
    assert data["passed"] is False
    [failure] = data["failures"]
    assert failure["rule"] == f"--max-on {dev}={count - 1}"
    assert failure["message"] == f"placements on {dev}: {count}, at most {count - 1} allowed"
    assert len(failure["examples"]) == count


def test_max_on_in_a_tf2_log_names_at_most_five_examples() -> None:
    data = check_json(TF2, "--allow-placement-errors", "--max-on", "CPU:1=0", "--max-on", "CPU:2=5", expect=1)
    assert rules_failed(data) == ["--max-on CPU:1=0"]
    assert data["failures"][0]["examples"] == ["_EagerConst", "MatMul", "_MklMatMul"]  # eager ops: their op
    assert data["summary"]["rules"] == ["--max-on CPU:1=0", "--max-on CPU:2=5"]
    assert data["summary"]["failed"] == 1


def test_examples_are_five_distinct_nodes_at_most() -> None:
    data = check_json(TRAIN, "--max-on", "CPU:0=0", expect=1)
    examples = data["failures"][0]["examples"]
    assert len(examples) == 5 == len(set(examples))


def test_expect_every_matching_node_on_a_device() -> None:
    assert check_json(TF0, "--expect", "^matmul_1$=GPU:3", "--expect", "^Const=GPU", expect=0)["passed"]
    data = check_json(TF0, "--expect", "^(MatMul|AddN)=GPU:2", expect=1)
    [failure] = data["failures"]
    assert failure["message"] == "nodes matching ^(MatMul|AddN) not on GPU:2: 2 of 3"
    assert failure["examples"] == ["MatMul_1", "AddN"]


def test_expect_that_matches_no_node_fails_rather_than_passing_unseen() -> None:
    data = check_json(TF0, "--expect", "^tower_9/=GPU:0", expect=1)
    assert data["failures"] == [{"rule": "--expect ^tower_9/=GPU:0", "message": "no node matches ^tower_9/",
                                 "examples": []}]


def test_expect_splits_at_the_last_equals_sign(tmp_path: Path) -> None:
    log = tmp_path / "eq.log"
    log.write_text("ab: (Const): /job:localhost/replica:0/task:0/device:GPU:0\n")  # TensorFlow's names have no =
    assert check_json(log, "--expect", "^[=a]b$=GPU:0", expect=0)["summary"]["rules"] == ["--expect ^[=a]b$=GPU:0"]
    assert check_json(log, "--expect", "^[=a]b$=CPU", expect=1)["failures"][0]["examples"] == ["ab"]


def test_no_fallback_on_a_saved_trace_report() -> None:
    data = check_json(TRACE, "--no-fallback", expect=1)
    assert data["failures"] == [{"rule": "--no-fallback",
                                 "message": "soft fallbacks (ops placed elsewhere than they asked): 3",
                                 "examples": ["pinned", "AssignAddVariableOp", "ReadVariableOp"]}]
    assert data["summary"]["soft_fallbacks"] == 3
    passed = check_json(TRAIN, "--no-fallback", expect=0)
    assert passed["passed"] and passed["summary"]["soft_fallbacks"] == 0


def test_no_fallback_on_a_run_report_of_eager_ops_only_says_why_not_to_use_trace(tmp_path: Path) -> None:
    data = json.loads(TRACE.read_text())
    data["placements"] = [p for p in data["placements"] if p["kind"] == "eager"]  # all "logged": no request known
    saved = tmp_path / "eager.json"
    saved.write_text(json.dumps(data))
    code, out, err = check(saved, "--no-fallback")
    assert (code, out) == (2, "")
    assert "--no-fallback cannot judge" in err and "an eager op" in err and "trace --json" not in err


def test_no_fallback_on_a_bare_log_cannot_be_judged() -> None:
    code, out, err = check(TF2, "--no-fallback")
    assert code == 2 and out == ""
    assert "--no-fallback needs a report that knows what each op asked for" in err
    assert "records only where ops went" in err and "Traceback" not in err


def test_max_copy_bytes_from_a_report_with_copies() -> None:
    data = check_json(TRAIN, "--max-copy-bytes", "15528", expect=0)  # the train run's copy_totals.per_step_bytes
    assert data["passed"]
    data = check_json(TRAIN, "--max-copy-bytes", "15527", expect=1)
    [failure] = data["failures"]
    assert failure["message"] == "bytes copied between devices per step: 15528, at most 15527 allowed"
    assert 0 < len(failure["examples"]) <= 5


@pytest.mark.parametrize(("source", "why"), [(TF1, "has none"), (TRACE, "does not say how big 1 of its 1 copies are")])
def test_max_copy_bytes_without_copies_or_their_sizes_cannot_be_judged(source: Path, why: str) -> None:
    code, out, err = check(source, "--max-copy-bytes", "100")
    assert code == 2 and out == ""
    assert why in err


def test_ignore_and_ignore_op_leave_nodes_out_of_every_rule() -> None:
    assert check_json(TRACE, "--max-on", "CPU:1=0", expect=1)["failures"][0]["examples"] == ["x", "ones_1", "ones_2"]
    data = check_json(TRACE, "--max-on", "CPU:1=0", "--ignore", "^ones_", "--ignore-op", "matmul", expect=0)
    assert data["summary"]["left_out"]["ignored"] == 4  # ones_1, ones_2, and the MatMuls x and pinned
    assert data["summary"]["soft_fallbacks"] == 2  # pinned's is left out with it
    # --ignore-op MatMul also leaves out oneDNN's _MklMatMul, as --op does
    assert check(TF2, "--allow-placement-errors", "--max-on", "CPU:1=2")[0] == 1
    data = check_json(TF2, "--allow-placement-errors", "--max-on", "CPU:1=2", "--ignore-op", "MatMul", expect=0)
    assert data["summary"]["left_out"]["ignored"] == 4  # two MatMuls, the wrapper's _MklMatMul and the eager one


def test_no_fallback_ignores_what_is_ignored() -> None:
    data = check_json(TRACE, "--no-fallback", "--ignore", "^pinned$", "--ignore-op", "AssignAddVariableOp", expect=1)
    assert data["failures"][0]["examples"] == ["ReadVariableOp"]


def test_plumbing_is_left_out_unless_included() -> None:
    # eager_logical_cpus: CPU:1 holds _Arg/_Retval of the functions around its matmuls
    data = check_json(TF2, "--allow-placement-errors", "--max-on", "CPU:1=5", expect=0)
    assert data["summary"]["placements"] == 10
    assert data["summary"]["left_out"] == {"plumbing": 13, "ignored": 0}
    assert sum(data["summary"]["by_device"].values()) == 10
    data = check_json(TF2, "--allow-placement-errors", "--max-on", "CPU:1=5", "--include-plumbing", expect=1)
    assert data["summary"]["placements"] == 23 and data["summary"]["left_out"]["plumbing"] == 0
    assert "a" in data["failures"][0]["examples"]  # an _Arg


def test_nosend_norecv_noop_are_plumbing(tmp_path: Path) -> None:
    log = tmp_path / "p.log"
    log.write_text("".join(f"{n}: ({op}): /job:localhost/replica:0/task:0/device:CPU:0\n" for n, op in
                           (("init", "NoOp"), ("s", "_Send"), ("r", "_Recv"), ("x", "_Arg"), ("y", "_Retval"),
                            ("d", "_DeviceArg"), ("m", "MatMul"))))
    data = check_json(log, "--max-on", "CPU=1", expect=0)
    assert data["summary"]["left_out"]["plumbing"] == 6
    assert check_json(log, "--max-on", "CPU=1", "--include-plumbing", expect=1)["failures"][0]["examples"] == \
        ["init", "s", "r", "x", "y"]


def test_every_rule_at_once_in_text() -> None:
    code, out, err = check(TRACE, "--max-on", "CPU:1=2", "--expect", "^v=CPU:0", "--expect", "^x$=CPU:0",
                           "--no-fallback", "--max-on", "CPU=100")
    assert code == 1 and err == ""
    assert out.splitlines() == [
        "--max-on CPU:1=2 failed: placements on CPU:1: 3, at most 2 allowed (for example x, ones_1, ones_2)",
        "--expect ^x$=CPU:0 failed: nodes matching ^x$ not on CPU:0: 1 of 1 (for example x)",
        ("--no-fallback failed: soft fallbacks (ops placed elsewhere than they asked): 3 (for example pinned, "
        "AssignAddVariableOp, ReadVariableOp)"),
        ("17 distinct placements (19 logged: an eager op each time it runs, a graph node each time its graph is "
        "placed): 14 on CPU:0, 3 on CPU:1 (not judged: 10 of TensorFlow's plumbing); 3 soft fallbacks (7 whose "
        "request is unknown: _EagerConst: 4 (constants TensorFlow makes from Python values, which no op callback "
        "sees), eager ops without a record: 2 (an op that ended with an error after TensorFlow logged it, such as "
        "the IteratorGetNext that ends a dataset loop; another thread's op; or one whose record fits more than one "
        "line), in the single-op functions TensorFlow wraps eager ops in: 1); 5 rules, 3 failed"),
    ]


def test_a_pass_prints_only_the_summary() -> None:
    code, out, _err = check(TF1, "--max-on", "GPU=0")
    assert code == 0
    assert out == ("4 placements: 1 on XLA_GPU:0, 1 on ps/0 CPU:0, 1 on worker/0 CPU:0, 1 on worker/1 CPU:0; "
                   "1 rule, 0 failed\n")


def test_summary_of_a_log_with_placement_errors(tmp_path: Path) -> None:
    log = tmp_path / "e.log"
    log.write_text("a: (Const): /job:localhost/replica:0/task:0/device:CPU:0\n"
                   "InvalidArgumentError: Cannot assign a device for operation MatMul: {{node MatMul}} was "
                   "explicitly assigned to /device:GPU:2 but available devices are "
                   "[ /job:localhost/replica:0/task:0/device:CPU:0 ]. Make sure the device specification "
                   "refers to a valid device.\n")
    code, out, _err = check(log, "--max-on", "GPU=0", "--allow-placement-errors")
    assert code == 0 and out == "1 placement: 1 on CPU:0; 1 placement error; 1 rule, 0 failed\n"


def test_a_log_with_placement_errors_fails_the_gate() -> None:
    """Before: "1 placement error; 1 rule, 0 failed", exit 0: a log showing the graph could not be placed
    passed (a TF 1.x log whose Adam slot could not join its colocation group's device)."""
    source = CHECK / "placement_error_cluster.log"
    code, out, err = check(source, "--max-on", "GPU=10")
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        ("--fail-placement-errors failed: placement errors in the input: 1 (TensorFlow could not place the graph as "
        "asked; --allow-placement-errors lets such an input pass) (for example conv1/kernel/Adam)"),
        ("2 placements: 2 on worker/0 GPU:2 (not judged: 1 of TensorFlow's plumbing); 1 placement error; 2 rules, "
        "1 failed")]
    data = check_json(source, "--max-on", "GPU=10", expect=1)
    assert data["summary"]["rules"] == ["--max-on GPU=10", "--fail-placement-errors"]
    assert check(source, "--max-on", "GPU=10", "--allow-placement-errors")[0] == 0
    assert check(source, "--max-on", "GPU=1", "--allow-placement-errors")[0] == 1  # the other rules still judge


# --- inputs -----------------------------------------------------------------------------------------

def test_a_tf1_and_a_tf2_log_of_one_placement_judge_alike(tmp_path: Path) -> None:
    old = tmp_path / "old.log"
    old.write_text("2017-10-09 10:11:12.123456: I tensorflow/core/common_runtime/placer.cc:874] "
                   "MatMul: (MatMul)/job:localhost/replica:0/task:0/device:GPU:0\nb: /job:localhost/replica:0/task:0/gpu:0\n")
    new = tmp_path / "new.log"
    new.write_text("I0000 00:00:1795232759.847888    3899 placer.cc:162] MatMul: (MatMul): "
                   "/job:localhost/replica:0/task:0/device:GPU:0\nMatMul: (MatMul): /job:localhost/replica:0/task:0/device:GPU:0\n"
                   "b: (Const): /job:localhost/replica:0/task:0/device:GPU:0\n")
    for log in (old, new):
        data = check_json(log, "--max-on", "GPU:0=2", "--max-on", "CPU=0", "--expect", "^b$=/gpu:0", expect=0)
        assert data["summary"]["by_device"] == {"/job:localhost/replica:0/task:0/device:GPU:0": 2}


def test_standard_input_a_log_or_a_saved_report() -> None:
    assert check_json("-", "--max-on", "CPU=3", stdin=TF1.read_bytes(), expect=0)["passed"]
    data = check_json("-", "--no-fallback", stdin=TRACE.read_bytes(), expect=1)
    assert data["summary"]["soft_fallbacks"] == 3
    code, _out, err = check("-", "--no-fallback", stdin=TF1.read_bytes())
    assert code == 2 and "standard input records only where ops went" in err


def test_a_saved_parse_report_is_a_log_that_knows_no_requests(tmp_path: Path) -> None:
    saved = tmp_path / "parsed.json"
    saved.write_text(json.dumps(parse_paths([str(TF1)]).to_dict()))
    assert check_json(saved, "--max-on", "ps/0=1", expect=0)["summary"]["soft_fallbacks"] is None
    assert check(saved, "--no-fallback")[0] == 2


@pytest.mark.parametrize(("content", "why"), [(None, "no such file"), (b"", "empty input"),
                                              (b"just some output\n", "no placements found in"),
                                              (b'{"placements": [', "not valid JSON")])
def test_unreadable_input_or_nothing_to_check_is_exit_2(tmp_path: Path, content: bytes | None, why: str) -> None:
    path = tmp_path / "in.log"
    if content is not None:
        path.write_bytes(content)
    code, out, err = check(path, "--max-on", "CPU=0")
    assert (code, out) == (2, "")
    assert why in err and err.startswith("placement: ") and "Traceback" not in err


def test_a_log_with_only_a_placement_error_fails_the_gate(tmp_path: Path) -> None:
    """A program whose first op could not be placed logs the error and no placement: that is what the gate
    is for (docs/check.md: exit 1 whatever the other rules say), not "nothing to check" (exit 2, as a
    missing file). With --allow-placement-errors there is nothing left to judge: exit 2."""
    log = tmp_path / "failed.log"
    log.write_text("InvalidArgumentError: Cannot assign a device for operation MatMul: {{node MatMul}} was explicitly "
                   "assigned to /device:GPU:2 but available devices are [ /job:localhost/replica:0/task:0/device:CPU:0 "
                   "]. Make sure the device specification refers to a valid device.\n")
    code, out, err = check(log, "--max-on", "CPU=1")
    assert code == 1 and "--fail-placement-errors failed: placement errors in the input: 1" in out, (out, err)
    assert "(for example MatMul)" in out and "1 placement error" in out and "name right" not in err
    code, out, err = check(log, "--max-on", "CPU=1", "--json")
    data = json.loads(out)
    assert code == 1 and data["passed"] is False and data["summary"]["errors"] == 1
    assert [f["rule"] for f in data["failures"]] == ["--fail-placement-errors"]
    code, out, err = check(log, "--max-on", "CPU=1", "--allow-placement-errors")
    assert (code, out) == (2, "")
    assert "nothing to check (placement errors it reports: 1)" in err


@pytest.mark.parametrize(("field", "value", "why"), [
    ("exit_code", 3, "(exit code 3)"),  # trace --json of a program that failed
    ("run_error", "InvalidArgumentError: Cannot assign a device", "(InvalidArgumentError: Cannot assign a device)"),
])
def test_a_saved_report_of_a_run_that_did_not_finish_is_not_judged(tmp_path: Path, field: str, value: object,
                                                                    why: str) -> None:
    data = json.loads(TRACE.read_text())
    data[field] = value
    saved = tmp_path / "failed.json"
    saved.write_text(json.dumps(data))
    code, out, err = check(saved, "--max-on", "CPU=100")
    assert (code, out) == (2, "")
    assert f"failed.json records a run that did not finish {why}" in err
    data[field] = 0 if field == "exit_code" else None
    saved.write_text(json.dumps(data))
    assert check(saved, "--max-on", "CPU=100")[0] == 0


def test_a_summary_only_report_is_exit_2_saying_why(tmp_path: Path) -> None:
    saved = tmp_path / "summary.json"
    result = runner.invoke(app, ["parse", "--summary", "--json", str(TF1)])
    saved.write_text(result.stdout)
    code, out, err = check(saved, "--max-on", "ps/0=0")
    assert (code, out) == (2, "")
    assert "holds only counts per device (a `parse --summary` report)" in err


def test_no_rules_is_exit_2() -> None:
    code, _out, err = check(TF1)
    assert code == 2 and "no rules to check" in err


# --- the config file --------------------------------------------------------------------------------

PYPROJECT = """\
[project]
name = "mine"

[tool.placement.check]
max-on = {"CPU:1" = 0, CPU = 100}
expect = {"^x$" = "CPU:1"}
no-fallback = true
ignore = "^ones_1$"
ignore-op = ["Const"]
"""


def test_rules_from_pyproject_found_from_a_subfolder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "src" / "deep")
    data = check_json(TRACE, expect=1)
    assert data["summary"]["rules"] == ["--max-on CPU:1=0", "--max-on CPU=100", "--expect ^x$=CPU:1", "--no-fallback"]
    assert rules_failed(data) == ["--max-on CPU:1=0", "--no-fallback"]
    assert data["failures"][0]["examples"] == ["x"]  # ones_1 by name, ones_2 as a Const: ignored
    assert data["summary"]["config"] == "../../pyproject.toml"
    code, out, _err = check(TRACE)
    assert code == 1 and "rules from ../../pyproject.toml" in out


def test_command_line_adds_to_and_overrides_the_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    data = check_json(TRACE, "--max-on", "/cpu:1=1", "--allow-fallback", "--expect", "^v$=CPU:0", expect=0)
    # /cpu:1 replaces the file's CPU:1 (the same device however spelled); --allow-fallback turns the file's off
    assert data["summary"]["rules"] == ["--max-on /cpu:1=1", "--max-on CPU=100", "--expect ^x$=CPU:1",
                                        "--expect ^v$=CPU:0"]
    # --ignore adds to the file's (ones_1 by name, ones_2 as a Const): x leaves CPU:1 too, and with it
    # the file's --expect ^x$ has no node left to judge
    data = check_json(TRACE, "--max-on", "CPU:1=0", "--ignore", "^x$", "--allow-fallback", expect=1)
    assert rules_failed(data) == ["--expect ^x$=CPU:1"]
    assert data["summary"]["left_out"]["ignored"] == 4  # ones, ones_1, ones_2 (Consts) and x
    # --no-config: the file's ignores are gone with its rules
    data = check_json(TRACE, "--max-on", "CPU:1=0", "--ignore", "^x$", "--no-config", expect=1)
    assert data["summary"]["config"] is None and data["summary"]["rules"] == ["--max-on CPU:1=0"]
    assert data["failures"][0]["examples"] == ["ones_1", "ones_2"]
    assert check_json(TRACE, "--exclude-plumbing", "--allow-fallback", expect=1)["summary"]["left_out"]["plumbing"] == 10


def test_max_copy_bytes_on_the_command_line_replaces_the_files(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.placement.check]\nmax-copy-bytes = 10\n")
    assert check_json(TRAIN, expect=1)["summary"]["rules"] == ["--max-copy-bytes 10"]
    assert check_json(TRAIN, "--max-copy-bytes", "20000", expect=0)["summary"]["rules"] == ["--max-copy-bytes 20000"]


def test_config_file_given_with_its_rules_at_the_top_level(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)  # not read: --config names the file
    gate = tmp_path / "gate.toml"
    gate.write_text('max-on = ["CPU:1=3"]\nexpect = ["^pinned$=CPU:0"]\ninclude-plumbing = true\n')
    data = check_json(TRACE, "--config", gate, expect=0)
    assert data["summary"]["rules"] == ["--max-on CPU:1=3", "--expect ^pinned$=CPU:0"]
    assert data["summary"]["left_out"]["plumbing"] == 0 and data["summary"]["config"] == "gate.toml"
    assert check_json(TRACE, "--config", tmp_path / "pyproject.toml", "--allow-fallback", expect=1)["passed"] is False


def test_nearest_pyproject_without_the_table_means_no_rules_from_a_file(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "pyproject.toml").write_text('[project]\nname = "inner"\n')
    monkeypatch.chdir(tmp_path / "inner")
    code, _out, err = check(TRACE)
    assert code == 2 and "no rules to check" in err


@pytest.mark.parametrize(("text", "why"), [
    ("[tool.placement.check]\nmax-on = 3\n", "max-on must be a table of DEV = N"),
    ("[tool.placement.check]\nmax_on = {CPU = 0}\n", "unknown key max_on"),
    ("[tool.placement.check]\nno-fallback = \"yes\"\n", "no-fallback must be true or false"),
    ("[tool.placement.check]\nmax-copy-bytes = -1\n", "max-copy-bytes must be a whole number"),
    ("[tool.placement.check]\nmax-on = {CPU = -1}\n", "the limit must be a whole number, 0 or more"),
    ("[tool.placement.check]\nexpect = {\"(\" = \"CPU:0\"}\n", "--expect '(' is not a regex"),
    ("[tool.placement.check]\nmax-on = {\"not a device!\" = 1}\n", "is not a device"),
    ("[tool.placement]\ncheck = 1\n", "[tool.placement.check] must be a table"),
    ("[tool]\nplacement = 1\n", "[tool.placement] must be a table"),  # not silently no rules
    ("[tool.placement.check]\nmax-on = [\"CPU=1\", \"cpu=2\"]\n", "judge the same thing"),
    ("[tool.placement.check\n", "not valid TOML"),
])
def test_a_bad_config_is_exit_2_naming_the_file(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    code, out, err = check(TRACE, "--max-on", "CPU=100")
    assert (code, out) == (2, ""), err
    assert why in err and "pyproject.toml" in err and "Traceback" not in err


@pytest.mark.parametrize(("data", "why"), [
    (b"\xef\xbb\xbf[tool.placement.check]\nmax-on = {CPU = 1}\n", "starts with a byte order mark"),
    ("[tool.placement.check]\nmax-on = {CPU = 1}\n".encode("utf-16"), "not UTF-8 text"),
])
def test_a_config_that_is_not_plain_utf8_says_so(tmp_path: Path, data: bytes, why: str) -> None:
    (tmp_path / "pyproject.toml").write_bytes(data)
    code, out, err = check(TRACE, "--max-on", "CPU=100")
    assert (code, out) == (2, "") and why in err and "pyproject.toml" in err


def test_input_and_config_both_from_standard_input_is_exit_2() -> None:
    done = subprocess.run([sys.executable, "-m", "placement_cli", "check", "-", "--config", "/dev/stdin"],
                          input=TF1.read_bytes(), capture_output=True, check=False)
    assert done.returncode == 2 and done.stdout == b""
    assert b"INPUT - and --config /dev/stdin both read standard input" in done.stderr


def test_config_that_is_missing_or_given_twice(tmp_path: Path) -> None:
    assert "no such file" in check(TRACE, "--config", tmp_path / "nope.toml")[2]
    code, _out, err = check(TRACE, "--config", tmp_path / "nope.toml", "--no-config")
    assert code == 2 and "--config and --no-config" in err


# --- hostile values ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "why"), [
    (("--ignore", "--json", "--max-on", "CPU=0"), "--ignore '--json': looks like an option, not a regex"),
    (("--expect", "--json"), "--expect '--json': looks like an option, not a rule"),
    (("--expect", "(unclosed=CPU:0"), "--expect '(unclosed' is not a regex"),
    (("--expect", r"(a)\1=CPU:0"), "matched in linear time, by RE2"),
    (("--expect", "^x$"), "give REGEX=DEV"),
    (("--expect", "^x$=GPU!"), "--expect 'GPU!' is not a device"),
    (("--max-on", "CPU"), "give DEV=N, e.g. CPU=0"),
    (("--max-on", "CPU=-1"), "the limit must be a whole number, 0 or more"),
    (("--max-on", "CPU=²"), "the limit must be a whole number"),
    (("--max-on", "=3"), "give DEV=N"),
    (("--max-on", "CPU:0=1", "--max-on", "/cpu:0=5"), "--max-on 'CPU:0=1' and --max-on '/cpu:0=5' judge the same"),
    (("--expect", "^a=CPU", "--expect", "^a=GPU"), "--expect '^a=CPU' and --expect '^a=GPU' judge the same thing"),
    (("--ignore", "", "--max-on", "CPU=0"), "--ignore: give a regex"),
    (("--ignore-op", "Mat Mul", "--max-on", "CPU=0"), "--ignore-op 'Mat Mul' is not an op type"),
])
def test_bad_rules_are_exit_2_with_a_clear_message(args: tuple[str, ...], why: str) -> None:
    code, out, err = check(TF1, *args)
    assert (code, out) == (2, ""), err
    assert why in err and "Traceback" not in err


def test_markup_and_escape_codes_in_node_names_are_shown_literally(tmp_path: Path) -> None:
    cpu = parse_device("/job:localhost/replica:0/task:0/device:CPU:0")
    names = ("[red]x[/red]", "evil\x1b[31mname\x07", "[bold]b")  # a saved report holds any name
    saved = tmp_path / "hostile.json"
    saved.write_text(json.dumps(Report(placements=tuple(
        Placement(n, "MatMul", cpu.canonical, cpu, "placer", i) for i, n in enumerate(names, 1))).to_dict()))
    code, out, err = check(saved, "--max-on", "CPU=0", "--expect", r"\[red\]=GPU:0", "--expect", "[[]bold]=CPU")
    assert code == 1, err
    assert "(for example [red]x[/red], evil\ufffd[31mname\ufffd, [bold]b)" in out
    assert "--expect \\[red\\]=GPU:0 failed: nodes matching \\[red\\] not on GPU:0: 1 of 1 (for example [red]x[/red])" in out
    assert "\x1b" not in out and "\x07" not in out
    data = check_json(saved, "--max-on", "CPU=0", expect=1)  # JSON keeps the names as they are
    assert data["failures"][0]["examples"] == list(names)


def test_chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _err = check(TRACE, "--max-on", "CPU:1=2", "--no-fallback", "--lang", "zh")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "--max-on CPU:1=2 未通过：CPU:1 上的放置：3 个，最多允许 2 个 (例如 x, ones_1, ones_2)"
    assert lines[1].startswith("--no-fallback 未通过：软放置回退")
    assert lines[2] == ("17 个不同放置 (日志中 19 个：eager 操作每运行一次记一次, 图节点在其图每放置一次时记一次): "
                        "CPU:0 上 14 个, CPU:1 上 3 个 (未检查：TensorFlow 内部管道 10 个); 3 个软放置回退 （7 个的请求"
                        "未知：_EagerConst：4 个（TensorFlow 由 Python 值生成的常量，操作回调看不到）, 没有记录的 eager "
                        "操作：2 个（记入日志后以错误结束的操作，例如结束数据集循环的 IteratorGetNext；其他线程的操作；或其"
                        "记录可对应多行的操作）, 在 TensorFlow 包装 eager 操作的单操作函数中：1 个）; 2 条规则, 2 条未通过")
    code, _out, err = check(TRACE, "--max-on", "CPU=-1", "--lang", "zh")  # usage errors too
    assert code == 2 and "上限必须是 0 或更大的整数" in err
    data = check_json(TRACE, "--max-on", "CPU:1=2", "--lang", "zh", expect=1)  # JSON stays English
    assert data["failures"][0]["message"] == "placements on CPU:1: 3, at most 2 allowed"


# --- the engine as Python calls it ------------------------------------------------------------------

def test_rules_from_python_values() -> None:
    assert rules_from(max_on={"CPU": 0}, expect="^a=GPU:0", ignore="x") == \
        Rules(max_on=(("CPU", 0),), expect=(("^a", "GPU:0"),), ignore=("x",))
    assert rules_from(max_on=["CPU=0", "ps/0=3"]).max_on == (("CPU", 0), ("ps/0", 3))
    for bad in ({"max_on": {"CPU": -1}}, {"max_on": {"CPU": True}}, {"expect": {"(": "CPU"}}, {"expect": {"x": 3}},
                {"no_fallback": 1}, {"max_on": {"CPU": 1, "cpu": 5}}, {"max_on": ["GPU:0=1", "/gpu:0=2"]},
                {"ignore": [3]}, {"max_copy_bytes": -5}):
        with pytest.raises(RuleError) as caught:
            rules_from(**bad)
        assert isinstance(caught.value, ValueError)


def test_judge_copies_of_a_report_in_memory() -> None:
    cpu, gpu = parse_device("/cpu:0"), parse_device("/gpu:0")
    report = Report(placements=(Placement("a", "Const", cpu.canonical, cpu, "placer", 1, "/cpu:0", AS_REQUESTED),),
                    copies=(Copy("a:0", cpu.canonical, gpu.canonical, bytes=600),
                            Copy("b:0", gpu.canonical, cpu.canonical, bytes=424)))
    assert judge(report, Rules(max_copy_bytes=1024)).passed
    failed = judge(report, Rules(max_copy_bytes=1023))
    assert failed.failures[0].examples == ("a:0", "b:0")


def test_the_saved_train_report_is_gzip_and_its_total_is_its_own() -> None:
    data = json.loads(gzip.decompress(TRAIN.read_bytes()))
    assert data["copy_totals"]["per_step_bytes"] == 15528


# --- the CI step the README and docs/check.md show ------------------------------------------------

def ci_step(text: str) -> list[str]:
    block = text.split("- name: Placement gate\n  run: |\n", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_the_ci_step_in_the_readme_and_docs_is_one_and_its_options_are_real() -> None:
    import shlex

    import typer.main

    root = Path(__file__).parent.parent
    steps = ci_step((root / "README.md").read_text())
    assert steps == ci_step((root / "docs" / "check.md").read_text())
    trace, gate = (shlex.split(line) for line in steps)
    assert trace[:3] == ["placement", "trace", "--json"] and trace[-2] == ">"
    assert gate[:3] == ["placement", "check", trace[-1]]
    command = typer.main.get_command(app).commands["check"]
    with command.make_context("check", gate[2:]) as ctx:  # click reads it: every option is the command's
        assert ctx.params["no_fallback"] is True and list(ctx.params["max_on"]) == ["CPU=20"]


@pytest.mark.tf
def test_the_ci_step_on_a_real_trace(tmp_path: Path) -> None:
    """What the step does, for real: a script traced with --json, its report gated by check."""
    import subprocess
    import sys

    sample = Path(__file__).parent.parent / "samples" / "moved_ops.py"
    with open(tmp_path / "placement.json", "wb") as out:
        traced = subprocess.run([sys.executable, "-m", "placement_cli", "trace", "--json", str(sample)],
                                stdout=out, stderr=subprocess.PIPE, timeout=patience(300))
    assert traced.returncode == 0, traced.stderr[-2000:]
    code, out, err = check(tmp_path / "placement.json", "--max-on", "CPU:1=3", "--expect", "^v/=CPU:0")
    assert code == 0, (out, err)
    code, out, _err = check(tmp_path / "placement.json", "--no-fallback")
    # the update and read pinned away from their variable sit with it by TensorFlow's rule: no fallback
    assert code == 1 and "soft fallbacks (ops placed elsewhere than they asked): 1 (for example f: pinned)" in out


def test_check_does_not_import_tensorflow() -> None:
    from test_no_tensorflow_import import _tf_loaded

    assert not _tf_loaded("check", str(TRACE), "--max-on", "CPU:1=2", "--no-fallback", "--expect", "^v/=CPU:0")
    assert not _tf_loaded("check", "--json", "--lang", "zh", str(TF1), "--max-on", "ps/0=0", "--ignore", "^x")


def test_device_filters_take_a_tables_short_name_of_any_type() -> None:
    """XLA_GPU:0 as the tables print it (TensorFlow's own grammar wants /device:XLA_GPU:0), for parse's
    --device as for check's --max-on."""
    result = runner.invoke(app, ["parse", str(TF1), "--device", "xla_gpu:0", "--json"])
    assert result.exit_code == 0, result.output
    assert [p["node"] for p in json.loads(result.stdout)["placements"]] == ["cluster_0/_xla_run"]


def test_a_captured_reports_check() -> None:
    from placement_cli.notebook import CapturedReport

    captured = CapturedReport()
    captured.report = read_saved(TRACE)
    assert captured.check(max_on={"CPU:1": 3}).passed
    with pytest.raises(AssertionError, match=r"--max-on CPU:1=2: placements on CPU:1: 3.*\(e\.g\. x, ones_1, ones_2\)"):
        captured.check(max_on={"CPU:1": 2})
    captured.problems = ("TensorFlow's context had started before the block",)
    with pytest.raises(AssertionError, match="the capture is incomplete, so no rule can be judged: TensorFlow's"):
        captured.check(max_on={"CPU:1": 3})


def read_saved(path: Path) -> Report:
    from placement_cli.logparse.saved import read_input

    return read_input(str(path))


def test_a_device_no_placement_is_on_is_named_on_stderr() -> None:
    """A misspelt device (GUP) lets its --max-on hold whatever ran: the rule is judged as given (the
    exit code does not change), and the user is told which device matched nothing."""
    log = LOGS / "tf1.x" / "windows_console.log"
    code, out, err = check(log, "--max-on", "GUP=0", "--max-on", "GPU=5")
    assert code == 0 and out.endswith("2 rules, 0 failed\n")
    assert err.count("\n") == 1 and "is on GUP: is the name right?" in err
    code, _out, err = check(log, "--max-on", "GPU=5")
    assert code == 0 and err == ""


def test_placements_whose_request_is_unknown_are_counted_and_said(tmp_path: Path) -> None:
    """A report that knows some requests but not others' (another thread's eager ops): --no-fallback
    cannot see those, so the summary says how many; never counted as kept where they asked."""
    data = json.loads(TRACE.read_text())
    unknown = [p for p in data["placements"] if p["status"] == "logged"]
    for p in data["placements"]:
        if p["kind"] == "eager" and p["status"] != "soft fallback":
            p.update(requested=None, status="logged", reason=None)
    saved = tmp_path / "threads.json"
    saved.write_text(json.dumps(data))
    summary = check_json(saved, "--no-fallback", "--include-plumbing", expect=1)["summary"]
    assert summary["unknown_requests"] == sum(p["status"] == "logged" for p in data["placements"]) >= len(unknown)
    code, out, err = check(saved, "--no-fallback", "--include-plumbing")
    assert code == 1 and f"({summary['unknown_requests']} whose request is unknown" in out + err
    assert "whose request is unknown" not in "".join(check(saved, "--max-on", "CPU=1000")[1:])



# --- devices and tasks however spelled (issue 27, item 14) -----------------------------------------

def test_a_local_task_as_tables_name_it_is_judged_like_its_full_name() -> None:
    """localhost/0 is every device of the local task: the tables leave it out of the short names, so
    the rules must not compare short names."""
    every = check_json(TF2, "--allow-placement-errors", "--max-on", "CPU=0", expect=1)["failures"][0]["message"].split(":")[1]
    for device in ("localhost/0", "/job:localhost", "/job:localhost/replica:0/task:0"):
        data = check_json(TF2, "--allow-placement-errors", "--max-on", f"{device}=0", expect=1)
        assert data["failures"][0]["message"] == f"placements on {device}:{every}"
    assert check_json(TF2, "--allow-placement-errors", "--expect", "^MatMul$=localhost/0", expect=0)["passed"]
    assert check_json(TF2, "--allow-placement-errors", "--expect", "^MatMul$=/job:localhost", expect=0)["passed"]
    assert check_json(TF2, "--allow-placement-errors", "--max-on", "localhost/1=0", expect=0)["passed"]  # another task: nothing there
    assert check_json(TF1, "--max-on", "ps/0 CPU:0=0", expect=1)["failures"][0]["examples"] == ["ps_var"]


def test_a_full_device_name_on_the_command_line_replaces_the_files_rule_for_it(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.placement.check]\nmax-on = {"CPU:1" = 3}\n')
    data = check_json(TRACE, "--max-on", "/job:localhost/replica:0/task:0/device:CPU:1=1", expect=1)
    assert data["summary"]["rules"] == ["--max-on /job:localhost/replica:0/task:0/device:CPU:1=1"]
    code, _out, err = check(TRACE, "--no-config", "--max-on", "CPU:1=1", "--max-on",
                            "/job:localhost/replica:0/task:0/device:CPU:1=2")
    assert code == 2 and "judge the same thing" in err
    # a task's full name is its short one; another job's CPU:1 is another device
    code, _out, err = check(TRACE, "--no-config", "--max-on", "ps/0=1", "--max-on", "/job:ps/replica:0/task:0=2")
    assert code == 2 and "judge the same thing" in err
    assert check(TRACE, "--no-config", "--max-on", "CPU:1=3", "--max-on", "/job:ps/task:0/device:CPU:1=0")[0] == 0


def test_xla_compiled_bodies_of_a_saved_report_are_judged_by_no_fallback(tmp_path: Path) -> None:
    """A saved trace report's xla_compiled ops that asked for a device their cluster did not run on fail
    --no-fallback (TensorFlow logged no line for them), named, and --ignore leaves them out."""
    data = json.loads(TRACE.read_text())
    data["xla_compiled"] = [{"function": "__inference_f_10", "device": "/job:localhost/replica:0/task:0/device:CPU:0",
                             "line": 3, "calls": 2, "ops": [
                                 {"node": "xla_mm", "op": "MatMul", "requested": "/device:GPU:3", "moved": True},
                                 {"node": "Identity", "op": "Identity", "requested": None, "moved": False}]}]
    saved = tmp_path / "xla.json"
    saved.write_text(json.dumps(data))
    out = check_json(saved, "--no-fallback", "--ignore", "^pinned$", "--ignore-op", "AssignAddVariableOp",
                     "--ignore-op", "ReadVariableOp", expect=1)
    assert out["failures"][0]["examples"] == ["xla_mm"] and out["summary"]["xla_compiled_moved"] == 1
    assert "ops of XLA-compiled functions run in a cluster on another device than they asked: 1" in \
        out["failures"][0]["message"]
    assert check_json(saved, "--no-fallback", "--ignore", "^pinned$|^xla_mm$", "--ignore-op", "AssignAddVariableOp",
                      "--ignore-op", "ReadVariableOp", expect=0)["passed"]


# --- distinct placements: a node's identity; what the repeats are (tester h1, items 2 and 4) ---------

def test_same_named_nodes_of_different_functions_are_distinct_placements() -> None:
    """Before: the MatMul of tf.functions f, g and h was one placement ("1 distinct placement (3 logged:
    an eager op each time it runs)"), so --max-on CPU:0=1 passed."""
    three = CHECK / "three_functions.log"
    ignored = ("--ignore-op", "__inference_f_10", "--ignore-op", "__inference_g_11", "--ignore-op", "__inference_h_12")
    code, out, _err = check(three, "--max-on", "CPU:0=1", *ignored)
    assert code == 1
    assert out.splitlines()[-1] == "3 placements: 3 on CPU:0 (not judged: 3 ignored); 1 rule, 1 failed"
    assert check(three, "--max-on", "CPU:0=3", *ignored)[0] == 0


def test_the_summary_says_what_the_repeated_lines_are(tmp_path: Path) -> None:
    """Two Sessions' graphs with the same names (the log names no Session graph): their repeats are graph
    nodes placed again, not "an eager op each time it runs"."""
    log = tmp_path / "sessions.log"
    log.write_text("a: (Const): /job:localhost/replica:0/task:0/device:CPU:0\n"
                   "mm: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\n"
                   "a: (Const): /job:localhost/replica:0/task:0/device:CPU:0\n"
                   "mm: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\n")
    data = check_json(log, "--max-on", "CPU=5", expect=0)
    assert data["summary"]["distinct"] == 2 and data["summary"]["repeats"] == {"graph": 2}
    code, out, _err = check(log, "--max-on", "CPU=1")
    assert code == 1
    assert "distinct placements on CPU: 2 (4 logged), at most 1 allowed" in out
    assert out.splitlines()[-1].startswith("2 distinct placements (4 logged: a graph node each time its graph is "
                                           "placed): 2 on CPU:0;")
    assert "eager op" not in out


def test_fallbacks_left_out_as_plumbing_are_counted_in_the_summary() -> None:
    """Before: trace showed 12 soft fallbacks and check --no-fallback said 10, not saying that two were
    NoOps it leaves out as TensorFlow's plumbing."""
    cpu = parse_device("/job:localhost/replica:0/task:0/device:CPU:0")
    report = Report(placements=(
        Placement("mm", "MatMul", cpu.canonical, cpu, "placer", 1, "/device:CPU:1", "soft fallback"),
        Placement("init", "NoOp", cpu.canonical, cpu, "placer", 2, "/device:CPU:1", "soft fallback"),
        Placement("c", "Const", cpu.canonical, cpu, "placer", 3, "/device:CPU:0", AS_REQUESTED)))
    result = judge(report, rules_from(no_fallback=True))
    assert (result.soft_fallbacks, result.plumbing_fallbacks) == (1, 1)
    assert result.to_dict()["summary"]["plumbing_soft_fallbacks"] == 1
    from placement_cli.render.check import summary_line
    assert ("1 soft fallback (and 1 in TensorFlow's plumbing, such as NoOps, not judged: --include-plumbing judges "
            "them)") in summary_line(result)
    included = judge(report, rules_from(no_fallback=True, include_plumbing=True))
    assert (included.soft_fallbacks, included.plumbing_fallbacks) == (2, 0)
    assert "plumbing" not in summary_line(included)


def test_placement_errors_can_be_allowed_from_the_config_file_and_the_python_api(tmp_path: Path) -> None:
    source = CHECK / "placement_error_cluster.log"
    config = tmp_path / "rules.toml"
    config.write_text("max-on = {GPU = 10}\nallow-placement-errors = true\n")
    assert check(source, "--config", str(config))[0] == 0
    assert check(source, "--config", str(config), "--fail-placement-errors")[0] == 1
    report = parse_paths([str(source)])
    with pytest.raises(AssertionError, match="--fail-placement-errors: placement errors in the input: 1"):
        assert_holds(report, max_on={"GPU": 10})
    assert assert_holds(report, max_on={"GPU": 10}, allow_placement_errors=True).passed


def test_a_failures_examples_name_each_node_with_its_function(tmp_path: Path) -> None:
    """Two tf.functions' MatMuls are two nodes: the examples say whose each one is (as `diff` names
    them), not one "MatMul" for both."""
    saved = json.loads((FIXTURES / "saved" / "show.json").read_text())
    model = {**saved["placements"][0], "node": "MatMul", "op": "MatMul"}
    saved["placements"] = [{**model, "graph": "__inference_train_step_17"}, {**model, "graph": "__inference_eval_step_42"}]
    (tmp_path / "r.json").write_text(json.dumps(saved))
    found = check_json(str(tmp_path / "r.json"), "--max-on", "CPU:0=0", expect=1)
    assert set(found["failures"][0]["examples"]) == {"train_step: MatMul", "eval_step: MatMul"}, found


def test_a_failure_stays_one_line_whatever_its_examples_hold(tmp_path: Path) -> None:
    """A saved report may name a node or function anything: a newline, tab or escape code in an example
    must not split the failure's line (scripts read one failure a line), and markup stays literal."""
    saved = json.loads((FIXTURES / "saved" / "show.json").read_text())
    model = {**saved["placements"][0], "node": "[bold]y\x1b[31m\tz", "op": "MatMul"}
    saved["placements"] = [{**model, "graph": "__inference_[red]f_3"}, {**model, "graph": "__inference_g\nh_4"}]
    (tmp_path / "r.json").write_text(json.dumps(saved))
    code, out, _err = check(str(tmp_path / "r.json"), "--max-on", "CPU:0=0")
    lines = out.splitlines()
    assert code == 1 and len(lines) == 2 and lines[0].startswith("--max-on CPU:0=0 failed:"), out
    assert "[red]f: [bold]y\ufffd[31m\ufffdz" in lines[0] and "g\ufffdh: " in lines[0] and "\x1b" not in out, out


@pytest.mark.parametrize("narrowed", [["--device", "CPU:1"], ["--op", "Const"], ["--node", "^a"], ["--top", "1"]])
def test_a_report_saved_narrowed_by_filters_is_exit_2_saying_why(tmp_path: Path, narrowed: list[str]) -> None:
    """A report saved with ``parse --json --device CPU:1`` holds CPU:1's placements only: ``--expect
    "^b$=CPU:1"`` passed (exit 0) though the run put another ``b`` on CPU:2, and ``--max-on CPU:2=0``
    passed on a run with two ops there. The rules judge a whole run: exit 2, saying which filters."""
    cpu1, cpu2 = (f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in (1, 2))
    log = tmp_path / "run.log"
    log.write_text("".join(f"{n}: ({op}): {d}\n" for n, op, d in (("a", "Const", cpu1), ("b", "MatMul", cpu1),
                                                                  ("b", "MatMul", cpu2), ("c", "Const", cpu2))))
    saved = tmp_path / "narrowed.json"
    saved.write_text(runner.invoke(app, ["parse", "--json", *narrowed, str(log)]).stdout)
    for rule in (["--expect", "^b$=CPU:1"], ["--max-on", "CPU:2=0"]):
        code, out, err = check(saved, *rule)
        assert (code, out) == (2, ""), err
        assert f"was saved narrowed by {' '.join(narrowed)}" in err
    assert check(log, "--max-on", "CPU:2=0")[0] == 1  # the whole run fails it
    again = tmp_path / "again.json"  # parse shows a saved report; what it saves says the filters still
    again.write_text(runner.invoke(app, ["parse", "--json", str(saved)]).stdout)
    code, _out, err = check(again, "--max-on", "CPU:2=0")
    assert code == 2 and f"was saved narrowed by {' '.join(narrowed)}" in err and "of 4 placements" in err


def test_the_summary_orders_devices_of_equal_counts_by_name_whatever_the_order_of_the_input(tmp_path: Path) -> None:
    """A log and its own saved report said "2 on CPU:1, 2 on CPU:2" and "2 on CPU:2, 2 on CPU:1": devices of
    equal distinct counts came in the order of a set of strings, which changes from process to process
    (PYTHONHASHSEED). They are now in name order, the same line every run."""
    cpu = "/job:localhost/replica:0/task:0/device:CPU:"
    rows = [("a", "Const", 2), ("b", "MatMul", 2), ("c", "Const", 1), ("d", "MatMul", 1), ("h", "Const", 3),
            ("i", "MatMul", 3), ("e", "AddV2", 0), ("e", "AddV2", 0), ("f", "AddV2", 0), ("g", "AddV2", 0)]
    log = tmp_path / "run.log"
    log.write_text("".join(f"{n}: ({op}): {cpu}{d}\n" for n, op, d in rows))
    lines = set()
    for seed in range(6):
        done = subprocess.run([sys.executable, "-m", "placement_cli", "check", str(log), "--max-on", "CPU=99"],
                              capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": str(seed)},
                              timeout=patience(60))
        assert done.returncode == 0, done.stderr
        lines.add(done.stdout.strip().splitlines()[-1])
    assert len(lines) == 1 and "3 on CPU:0, 2 on CPU:1, 2 on CPU:2, 2 on CPU:3" in lines.pop()
