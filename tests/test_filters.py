"""--device, --op, --node, --top: one pure module, consistent in every command, honest in JSON."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from placement_cli.cli import app
from placement_cli.filters import FilterError, apply, compile_node, filtered
from placement_cli.model.filtered import Filters
from placement_cli.model import Report
from reports import CPU0, GPU, placed, trace_report
from processes import patience

runner = CliRunner()
PS = "/job:ps/replica:0/task:0/device:CPU:0"
LOG = "".join(f"{node}: ({op}): {device}\n" for node, op, device in [
    ("a/MatMul", "MatMul", CPU0), ("b/MatMul", "_MklMatMul", CPU0), ("c/Conv", "_MklNativeConv2D", CPU0),
    ("d/Const", "Const", GPU.format(0)), ("e/AddN", "AddN", GPU.format(1)), ("v", "VariableV2", PS),
])


def ops(report: Report) -> list[str | None]:
    return [p.op for p in report.placements]


def plumbed() -> Report:
    """A run report whose first rows are TensorFlow's plumbing, as a tf.function's are."""
    rows = [placed("args_0", "_Arg", CPU0, 1), placed("retval", "_Retval", CPU0, 2),
            replace(placed("MatMul", "MatMul", CPU0, 3), wrapper=True),
            placed("x", "MatMul", CPU0, 4), placed("y", "Const", GPU.format(0), 5), placed("z", "AddN", CPU0, 6)]
    return Report(placements=tuple(rows))


def test_top_counts_the_rows_a_table_shows_not_hidden_plumbing() -> None:
    narrowed = apply(plumbed(), Filters(top=2))
    assert [p.node for p in narrowed.report.placements] == ["x", "y"]
    assert not any(p.plumbing for p in narrowed.report.placements)
    assert narrowed.total == 6 and narrowed.matched == 2
    assert [p.node for p in apply(plumbed(), Filters(top=2), hide_plumbing=False).report.placements] == \
        ["args_0", "retval"]  # parse shows every row, so it counts every row


@pytest.mark.parametrize("value", ["gpu", "GPU", "Gpu"])
def test_device_and_op_both_ignore_case(value: str) -> None:
    report = trace_report()
    assert {p.spec.device_type for p in filtered(report, value, None, None, None).placements} == {"GPU"}
    assert ops(filtered(report, None, "matmul", None, None)) == ops(filtered(report, None, "MATMUL", None, None))
    assert ops(filtered(report, None, "matmul", None, None))


def test_device_takes_every_spelling() -> None:
    report = Report(placements=(placed("a", "X", CPU0, 1), placed("b", "X", GPU.format(1), 2), placed("c", "X", PS, 3)))
    nodes = lambda value: [p.node for p in filtered(report, value, None, None, None).placements]  # noqa: E731
    assert nodes("GPU:1") == nodes("/gpu:1") == nodes("/device:GPU:1") == nodes("gpu:1") == ["b"]
    assert nodes("/job:ps") == nodes("ps/0 cpu:0") == nodes("/JOB:PS/task:0") == ["c"]
    assert nodes("CPU") == ["a", "c"] and nodes("CPU:0") == ["a", "c"]
    assert nodes("TPU") == [] and nodes("nonsense/x y") == []


def test_op_also_matches_onednn_renames() -> None:
    report = Report(placements=(placed("a", "MatMul", CPU0, 1), placed("b", "_MklMatMul", CPU0, 2),
                                placed("c", "_MklNativeConv2D", CPU0, 3), placed("d", "BatchMatMul", CPU0, 4)))
    assert [p.node for p in filtered(report, None, "MatMul", None, None).placements] == ["a", "b"]
    assert [p.node for p in filtered(report, None, "conv2d", None, None).placements] == ["c"]


def test_node_regex_ignores_case_and_bad_ones_are_refused() -> None:
    assert [p.node for p in filtered(trace_report(), None, None, "^TOWER_1/", None).placements] == [
        "tower_1/gradients/dense/MatMul_grad/MatMul", "tower_1/gradients/dense/MatMul_grad/MatMul_1"]
    with pytest.raises(FilterError):
        compile_node("(")


def test_filtered_counts_describe_the_filtered_list() -> None:
    narrowed = apply(trace_report(), Filters(device="GPU"))
    assert narrowed.report.placement_count == narrowed.matched == 6
    assert set(narrowed.report.by_device) == {GPU.format(0)}
    assert narrowed.total == 11


def write(tmp_path: Path) -> str:
    path = tmp_path / "run.log"
    path.write_text(LOG)
    return str(path)


def test_parse_json_says_which_filters_applied(tmp_path: Path) -> None:
    result = runner.invoke(app, ["parse", "--json", "--op", "matmul", write(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["filters"] == {"device": None, "op": "matmul", "node": None, "top": None}
    assert [p["node"] for p in data["placements"]] == ["a/MatMul", "b/MatMul"]
    assert data["summary"]["placements"] == 2 and data["summary"]["unfiltered_placements"] == 6
    assert data["summary"]["by_device"] == {CPU0: 2}
    plain = json.loads(runner.invoke(app, ["parse", "--json", write(tmp_path)]).stdout)
    assert "filters" not in plain and "unfiltered_placements" not in plain["summary"]


@pytest.mark.parametrize("as_json", [False, True])
def test_nothing_matched_is_said_on_stderr_with_the_exit_code_unchanged(tmp_path: Path, as_json: bool) -> None:
    args = ["parse", *(["--json"] if as_json else []), "--device", "TPU", write(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0
    assert "no placements match --device TPU (of 6)" in result.stderr
    assert "no placements found" not in result.stderr  # the log has placements; none matched
    if as_json:
        assert json.loads(result.stdout)["placements"] == []
    else:
        assert "d/Const" not in result.stdout and "Per device" not in result.stdout  # no unfiltered table


def test_filtered_table_says_what_it_shows(tmp_path: Path) -> None:
    result = runner.invoke(app, ["parse", "--device", "gpu", write(tmp_path)], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    assert "d/Const" in result.stdout and "e/AddN" in result.stdout and "a/MatMul" not in result.stdout
    assert "2 of 6 placements match --device gpu" in result.stdout


def test_summary_with_filters_counts_what_matched(tmp_path: Path) -> None:
    result = runner.invoke(app, ["parse", "--summary", "--json", "--device", "CPU", write(tmp_path)])
    assert json.loads(result.stdout)["summary"]["by_device"] == {CPU0: 3, PS: 1}


def test_bad_regex_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["parse", "--node", "(", write(tmp_path)])
    assert result.exit_code == 2 and "is not a regex" in result.output


def test_a_task_as_the_tables_name_it_filters_by_task() -> None:
    log = str(Path(__file__).parent / "fixtures" / "logs" / "tf2.21" / "ps_worker_cluster.log")
    runner = CliRunner()
    counts = {}
    for value in ("ps/0", "PS/0 cpu:0", "/job:ps/task:0"):
        result = runner.invoke(app, ["parse", log, "--device", value, "--json"])
        assert result.exit_code == 0, result.output
        found = json.loads(result.stdout)["placements"]
        assert found and {p["job"] for p in found} == {"ps"}
        counts[value] = len(found)
    assert len(set(counts.values())) == 1


@pytest.mark.parametrize("value", ["zz!!", "[red]x", "", "ps/", "/job:ps/task:x"])
def test_a_device_no_placement_could_match_is_a_usage_error(value: str) -> None:
    result = CliRunner().invoke(app, ["parse", "-", "--device", value], input="")
    assert result.exit_code == 2, result.output
    assert "is not a device" in result.output or "give a device type" in result.output


def _refusal(result: object) -> str:
    """The one line a usage error ends with (click's usage lines above it), no traceback."""
    output = result.output  # type: ignore[attr-defined]
    assert result.exit_code == 2, output  # type: ignore[attr-defined]
    assert isinstance(result.exception, SystemExit) and "Traceback" not in output, output  # type: ignore[attr-defined]
    last = output.rstrip("\n").splitlines()[-1]
    assert last.startswith("Error: Invalid value for"), output
    return last


@pytest.mark.parametrize(("pattern", "says"), [
    ("a{99999999999}", "is not a regex"),  # re raises OverflowError, not re.error
    ("(" * 2000 + "a" + ")" * 2000, "is not a regex"),  # re raises RecursionError
    ("[", "is not a regex"),
    ("(a)\\1", "linear time"), ("(?P<n>a)(?P=n)", "linear time"),  # backreferences
    ("(?<=a)b", "linear time"), ("a(?!b)", "linear time"),  # lookaround
    ("(?>a+)", "linear time"), ("a++", "linear time"),  # atomic group, possessive repeat
    ("(?:a{1000}){1000}", "at most 1000"),
    ("\udcff", "not valid text"),  # bytes that are not UTF-8 on the command line
])
def test_a_node_regex_that_cannot_be_matched_is_one_line_and_exit_2(tmp_path: Path, pattern: str, says: str) -> None:
    line = _refusal(runner.invoke(app, ["parse", "--node", pattern, write(tmp_path)]))
    assert says in line


def test_a_catastrophic_node_regex_finishes_on_long_names() -> None:
    """(\\w+/?)+Z$ backtracks exponentially in Python's re on a long name with no Z: RE2 is linear."""
    names = ["/".join(f"tower_{i}_scope_{j}" for j in range(60)) for i in range(100)]
    report = Report(placements=tuple(placed(name, "MatMul", CPU0, i) for i, name in enumerate(names)))
    started = time.monotonic()
    assert filtered(report, None, None, r"(\w+/?)+Z$", None).placements == ()
    assert [p.node for p in filtered(report, None, None, r"(\w+/?)+scope_59$", None).placements] == names
    assert time.monotonic() - started < 10  # Python's re: longer than the age of the universe


def test_a_node_regex_is_searched_in_a_name_that_is_not_valid_utf8() -> None:
    report = Report(placements=(placed("a\udcffb/MatMul", "MatMul", CPU0, 1), placed("c", "Const", CPU0, 2)))
    assert [p.node for p in filtered(report, None, None, "b/mat", None).placements] == ["a\udcffb/MatMul"]


@pytest.mark.parametrize("option", ["--device", "--op", "--node"])
@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_filter_is_a_usage_error_for_every_filter(tmp_path: Path, option: str, value: str) -> None:
    line = _refusal(runner.invoke(app, ["parse", option, value, write(tmp_path)]))
    assert f"{option}: give " in line


@pytest.mark.parametrize("value", ["Mat Mul", "[red]x", "MatMul()", "a/b", "\x1b[31mMatMul"])
def test_an_op_no_placement_could_have_is_a_usage_error(tmp_path: Path, value: str) -> None:
    line = _refusal(runner.invoke(app, ["parse", "--op", value, write(tmp_path)]))
    assert "is not an op type" in line and "\x1b" not in line


def test_a_refused_value_is_quoted_as_typed() -> None:
    """Backslashes as typed, control characters escaped, a byte that is not UTF-8 as \\xff."""
    from placement_cli.messages import quoted

    assert quoted("(a)\\1") == "'(a)\\1'" and quoted("\x1b[31m") == "'\\x1b[31m'"
    assert quoted("\udcff") == "'\\xff'" and quoted("x" * 100) == "'" + "x" * 57 + "...'"


def test_an_op_filter_keeps_what_the_parser_reads_as_ops(tmp_path: Path) -> None:
    log = tmp_path / "lambda.log"
    log.write_text("Executing op __inference_<lambda>_9 in device /job:localhost/replica:0/task:0/device:CPU:0\n")
    result = runner.invoke(app, ["parse", "--json", "--op", " __inference_<lambda>_9 ", str(log)])
    assert result.exit_code == 0, result.output
    assert [p["op"] for p in json.loads(result.stdout)["placements"]] == ["__inference_<lambda>_9"]


PROBE = """
import runpy, sys
sys.argv = ["placement", *sys.argv[1:]]
code = None
try:
    runpy.run_module("placement_cli", run_name="__main__")
except SystemExit as exc:
    code = exc.code
sys.stderr.write("\\nEXIT=%s LOADED=%s\\n" % (code, sorted(m for m in ("re2", "tensorflow") if m in sys.modules)))
"""


@pytest.mark.parametrize(("args", "loaded"), [
    (["--node", "matmul"], ["re2"]),  # RE2, and still no TensorFlow
    ([], []),  # RE2 is loaded where --node is given, only
])
def test_re2_is_imported_only_for_node(tmp_path: Path, args: list[str], loaded: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE, "parse", *args, write(tmp_path)], capture_output=True,
                          text=True, timeout=patience(60))
    assert f"EXIT=0 LOADED={loaded}" in proc.stderr, proc.stderr
