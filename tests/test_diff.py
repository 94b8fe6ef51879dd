"""`placement diff OLD NEW`: exit codes, dialects, eager counting, paired copies, saved reports,
filters, digest, pictures, hostile input, Chinese (recorded logs and reports: no TensorFlow)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from conftest import FIXTURES, LOGS
from placement_cli.cli import app
from placement_cli.compare import compare
from placement_cli.devices import parse_device
from placement_cli.i18n import speaking
from placement_cli.logparse import parse_paths
from placement_cli.logparse.saved import read_tallied
from placement_cli.model import AS_REQUESTED, FREE, SOFT_FALLBACK, Copy, Placement, Report
from placement_cli.render.diff import diff_group
from placement_cli.render.view import View
from reports import as_run

runner = CliRunner()
SAVED = FIXTURES / "saved"
GOLDEN = FIXTURES / "golden"
GUIDE_TF0 = LOGS / "tf0.x" / "guide_default.log"  # TF 0.x: a, b, MatMul on gpu:0, no op types
GUIDE_TF1 = LOGS / "tf1.x" / "windows_console.log"  # TF 1.x: the same graph on GPU:0, both copies
PLAIN_TF2 = LOGS / "tf2.21" / "guide_matmul_plain.log"  # TF 2.21: the same graph on CPU:0
TRAINING_TF1 = LOGS / "tf1.x" / "training_buffered_stdout.log"
CPU, GPU0, GPU1 = (f"/job:localhost/replica:0/task:0/device:{d}" for d in ("CPU:0", "GPU:0", "GPU:1"))


def diff(*args: str, expect: int, stdin: str | bytes | None = None) -> Any:
    result = runner.invoke(app, ["diff", *args], input=stdin)
    assert result.exit_code == expect, (result.stdout, result.stderr)
    return result


def diff_json(*args: str, expect: int, stdin: str | bytes | None = None) -> dict[str, Any]:
    return json.loads(diff("--json", *args, expect=expect, stdin=stdin).stdout)


def write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


def glog(node: str, op: str, device: str) -> str:
    """TF 2.21's two copies of one placement, as a program's merged output has them."""
    return f"{node}: ({op}): {device}\nI0000 00:00:1795233561.662419    2368 placer.cc:162] {node}: ({op}): {device}\n"


def eager(op: str, device: str) -> str:
    return f"I0000 00:00:1795233568.753412    2392 execute.cc:1775] Executing op {op} in device {device}\n"


# --- exit codes and dialects ---------------------------------------------------------------------

def test_tf0_and_tf1_logs_of_the_same_placements_do_not_differ() -> None:
    data = diff_json(str(GUIDE_TF0), str(GUIDE_TF1), expect=0)
    assert data["moved"] == data["added"] == data["removed"] == []
    assert data["by_device"] == {GPU0: {"old": 3, "new": 3}}
    assert data["summary"]["same"] is True and data["summary"]["unchanged"] == 3
    assert "Same placements: 3" in diff(str(GUIDE_TF1), str(GUIDE_TF0), expect=0).stdout


def test_a_tf1_log_and_the_same_placements_in_tf2_and_guide_dialects(tmp_path: Path) -> None:
    """The placements of a real TF 1.x log (glog ``(Op)/job:`` and stdout copies), written again as
    TF 2.21 prints them and as the guide era did (``/gpu:N``, no op): no difference either way."""
    placements = parse_paths([str(TRAINING_TF1)]).placements
    assert len(placements) == 5
    tf2 = "".join(glog(p.node, p.op, p.canonical) for p in reversed(placements))
    guide = "".join(f"{p.node}: /job:localhost/replica:0/task:0/{p.spec.device_type.lower()}:{p.spec.device_index}\n"
                    for p in placements)
    for other in (write(tmp_path, "tf2.log", tf2), write(tmp_path, "guide.log", guide)):
        assert diff_json(str(TRAINING_TF1), other, expect=0)["summary"]["unchanged"] == 5


def test_moved_placements_exit_1_with_each_move() -> None:
    data = diff_json(str(GUIDE_TF0), str(PLAIN_TF2), expect=1)
    assert data["moved"] == [{"node": n, "op": op, "graph": None, "from": GPU0, "to": CPU, "old_status": None, "new_status": None,
                              "count": 1} for n, op in (("MatMul", "MatMul"), ("a", "Const"), ("b", "Const"))]
    assert data["by_device"] == {CPU: {"old": 0, "new": 3}, GPU0: {"old": 3, "new": 0}}
    text = diff(str(GUIDE_TF0), str(PLAIN_TF2), expect=1).stdout
    assert "Moved (3)" in text and "3 moved, 0 only in OLD, 0 only in NEW" in text


def test_added_and_removed(tmp_path: Path) -> None:
    old = write(tmp_path, "old.log", glog("a", "Const", CPU) + glog("gone", "Identity", CPU))
    new = write(tmp_path, "new.log", glog("a", "Const", CPU) + glog("came", "AddN", GPU0))
    data = diff_json(old, new, expect=1)
    assert data["removed"] == [{"node": "gone", "op": "Identity", "graph": None, "device": CPU, "status": None, "count": 1}]
    assert data["added"] == [{"node": "came", "op": "AddN", "graph": None, "device": GPU0, "status": None, "count": 1}]
    assert data["moved"] == [] and data["summary"]["unchanged"] == 1
    text = diff(old, new, expect=1).stdout
    assert "Only in OLD (1)" in text and "Only in NEW (1)" in text


def test_a_name_placed_several_times_is_a_multiset(tmp_path: Path) -> None:
    old = write(tmp_path, "old.log", glog("x", "Const", CPU) + glog("x", "Const", GPU0) + glog("x", "Const", GPU0))
    new = write(tmp_path, "new.log", glog("x", "Const", GPU0) + glog("x", "Const", GPU1))
    data = diff_json(old, new, expect=1)
    assert [(m["from"], m["to"], m["count"]) for m in data["moved"]] == [(CPU, GPU1, 1)]
    assert [(r["device"], r["count"]) for r in data["removed"]] == [(GPU0, 1)]
    assert data["added"] == [] and data["summary"]["unchanged"] == 1


def test_nodes_are_matched_by_task_too(tmp_path: Path) -> None:
    ps, worker = "/job:ps/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0"
    old = write(tmp_path, "old.log", glog("v", "VarHandleOp", ps) + glog("v", "VarHandleOp", worker))
    new = write(tmp_path, "new.log", glog("v", "VarHandleOp", worker) + glog("v", "VarHandleOp", ps))
    assert diff_json(old, new, expect=0)["summary"]["unchanged"] == 2
    cluster = LOGS / "tf2.21" / "ps_worker_cluster.log"
    assert diff_json(str(cluster), str(cluster), expect=0)["summary"]["unchanged"] == 33


# --- copies paired, eager ops counted -------------------------------------------------------------

def test_duplicate_copies_are_paired(tmp_path: Path) -> None:
    """A TF 2.21 log's stdout and glog copies count once: the glog copies alone are the same."""
    only_glog = "".join(line + "\n" for line in PLAIN_TF2.read_text().splitlines()
                        if "placer.cc" in line or "/job:" not in line)
    assert diff_json(str(PLAIN_TF2), write(tmp_path, "glog.log", only_glog), expect=0)["summary"]["unchanged"] == 3
    twice = write(tmp_path, "twice.log", PLAIN_TF2.read_text() * 2)  # a second run: placed again, counted again
    data = diff_json(str(PLAIN_TF2), twice, expect=1)
    assert sorted((a["node"], a["count"]) for a in data["added"]) == [("MatMul", 1), ("a", 1), ("b", 1)]


def test_eager_ops_are_counts_per_op_and_device(tmp_path: Path) -> None:
    old = write(tmp_path, "old.log", eager("MatMul", CPU) * 5 + eager("AddV2", CPU) * 2)
    new = write(tmp_path, "new.log", eager("MatMul", CPU) * 3 + eager("MatMul", GPU0) * 2 + eager("AddV2", CPU) * 3)
    data = diff_json(old, new, expect=1)
    assert data["moved"] == [{"node": None, "op": "MatMul", "graph": None, "from": CPU, "to": GPU0, "old_status": None,
                              "new_status": None, "count": 2}]
    assert data["added"] == [{"node": None, "op": "AddV2", "graph": None, "device": CPU, "status": None, "count": 1}]
    assert data["removed"] == [] and data["summary"]["unchanged"] == 5
    assert "(eager ops)" in diff(old, new, expect=1).stdout


def test_onednn_names_are_the_same_eager_op(tmp_path: Path) -> None:
    old = write(tmp_path, "old.log", eager("MatMul", CPU) * 2)
    new = write(tmp_path, "new.log", eager("_MklMatMul", CPU) * 2)
    assert diff_json(old, new, expect=0)["summary"]["unchanged"] == 2


def test_a_real_eager_log_with_one_device_renamed(tmp_path: Path) -> None:
    log = LOGS / "tf2.21" / "eager_logical_cpus.log"
    text = log.read_text()
    moved = text.replace("Executing op _MklMatMul in device /job:localhost/replica:0/task:0/device:CPU:1",
                         "Executing op _MklMatMul in device /job:localhost/replica:0/task:0/device:CPU:0")
    assert moved != text
    data = diff_json(str(log), write(tmp_path, "moved.log", moved), expect=1)
    assert [(m["node"], m["op"], m["to"]) for m in data["moved"]] == [(None, "_MklMatMul", CPU)]
    assert diff_json(str(log), str(log), expect=0)["moved"] == []


# --- saved reports ---------------------------------------------------------------------------------

def test_a_saved_show_report_and_a_log_of_the_same_run() -> None:
    data = diff_json(str(PLAIN_TF2), str(SAVED / "show.json"), expect=0)
    assert data["summary"]["old"]["kind"] == "log" and data["summary"]["new"]["kind"] == "report"


def test_a_saved_trace_report_against_itself_and_a_changed_copy(tmp_path: Path) -> None:
    saved = json.loads((SAVED / "trace.json").read_text())
    assert diff_json(str(SAVED / "trace.json"), str(SAVED / "trace.json"), expect=0)["summary"]["unchanged"] == 22
    for p in saved["placements"]:
        if p["node"] == "MatMul":
            p.update(device=GPU0, canonical=GPU0, device_type="GPU", device_index=0, status="soft fallback")
    data = diff_json(str(SAVED / "trace.json"), write(tmp_path, "changed.json", json.dumps(saved)), expect=1)
    assert data["moved"] == [{"node": "MatMul", "op": "MatMul", "graph": None, "from": CPU, "to": GPU0, "old_status": "free",
                              "new_status": "soft fallback", "count": 1}]


def test_a_saved_report_of_a_run_that_did_not_finish_is_diffed_with_a_notice(tmp_path: Path) -> None:
    saved = json.loads((SAVED / "trace.json").read_text())
    saved["exit_code"] = 3  # trace --json of a program that failed: its placements may be partial
    failed = write(tmp_path, "failed.json", json.dumps(saved))
    result = diff(str(SAVED / "trace.json"), failed, expect=0)
    assert "failed.json records a run that did not finish (exit code 3): its placements may be partial" in result.stderr
    assert "did not finish" not in diff(str(SAVED / "trace.json"), str(SAVED / "trace.json"), expect=0).stderr


def test_standard_input_on_one_side() -> None:
    assert diff_json("-", str(GUIDE_TF1), stdin=GUIDE_TF0.read_bytes(), expect=0)["summary"]["old"]["source"] == \
        "standard input"
    assert diff_json(str(PLAIN_TF2), "-", stdin=(SAVED / "show.json").read_bytes(), expect=0)


def test_standard_input_on_both_sides_is_refused() -> None:
    result = diff("-", "-", stdin=GUIDE_TF0.read_bytes(), expect=2)
    assert "standard input can be one side only" in result.stderr


def counts_report(tmp_path: Path, log: Path) -> str:
    return write(tmp_path, "summary.json", json.dumps(parse_paths([str(log)], keep=False).to_dict()))


def test_a_counts_only_report_compares_counts(tmp_path: Path) -> None:
    data = diff_json(str(GUIDE_TF0), counts_report(tmp_path, GUIDE_TF1), expect=0)
    assert data["summary"]["new"]["counts_only"] is True
    assert diff_json(str(PLAIN_TF2), counts_report(tmp_path, GUIDE_TF1), expect=1)["by_device"][CPU] == \
        {"old": 3, "new": 0}


def test_only_device_filters_narrow_a_counts_only_report(tmp_path: Path) -> None:
    """Counts per device are narrowed by --device (the counts on it), never by --op or --node. A report saved
    narrowed by --device CPU:1 and then with --summary was exit 2 against its own run's log, "--device CPU:1
    cannot narrow it", a filter the user never gave: its counts are compared with the log's on CPU:1."""
    counts = counts_report(tmp_path, GUIDE_TF1)
    assert diff_json("--device", "GPU", str(GUIDE_TF0), counts, expect=0)["summary"]["new"]["counts_only"] is True
    assert diff_json("--device", "GPU", str(PLAIN_TF2), counts, expect=1)["by_device"] == {GPU0: {"old": 0, "new": 3}}
    result = diff("--op", "MatMul", str(GUIDE_TF0), counts, expect=2)
    assert "holds only counts per device" in result.stderr and "--op MatMul" in result.stderr
    cpu1 = CPU.replace("CPU:0", "CPU:1")
    log = write(tmp_path, "run.log", glog("a", "Const", cpu1) + glog("b", "MatMul", cpu1) + glog("c", "Const", CPU))
    narrowed = write(tmp_path, "cpu1.json", runner.invoke(app, ["parse", "--json", "--device", "CPU:1", log]).stdout)
    summed = write(tmp_path, "sum.json", runner.invoke(app, ["parse", "--summary", "--json", narrowed]).stdout)
    same = diff_json(summed, log, expect=0)
    assert same["by_device"] == {cpu1: {"old": 2, "new": 2}} and same["summary"]["old"]["counts_only"] is True


@pytest.mark.parametrize("log", sorted(LOGS.rglob("*.log")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_log_against_its_own_saved_parse(tmp_path: Path, log: Path) -> None:
    """A log counted per record (diff's fast reading) and its full parse saved as JSON: the same."""
    saved = write(tmp_path, "parsed.json", json.dumps(parse_paths([str(log)]).to_dict()))
    result = compare(read_tallied(str(log)), read_tallied(saved))
    assert result.same and not result.moved and not result.added and not result.removed
    assert result.unchanged == result.old.placements == result.new.placements


def test_compressed_logs_on_either_side_and_on_standard_input(tmp_path: Path) -> None:
    import gzip

    packed = write(tmp_path, "old.log.gz", gzip.compress(GUIDE_TF0.read_bytes()))
    assert diff_json(packed, str(GUIDE_TF1), expect=0)["summary"]["unchanged"] == 3
    assert diff_json(str(GUIDE_TF1), "-", stdin=gzip.compress(GUIDE_TF0.read_bytes()), expect=0)
    assert "corrupt gzip data" in diff(write(tmp_path, "bad.gz", b"\x1f\x8b" + b"\x00" * 64), str(GUIDE_TF0),
                                       expect=2).stderr


def run_report(moved: bool) -> Report:
    cpu, gpu = parse_device(CPU), parse_device(GPU0)
    where = gpu if moved else cpu
    return Report(
        placements=(Placement("a", "Const", CPU, cpu, "placer", 1, requested="/cpu:0", status=AS_REQUESTED),
                    Placement("MatMul", "MatMul", where.canonical, where, "placer", 2, status=FREE)),
        result=[[1.0]], log="",
        copies=(Copy("a:0", CPU, GPU0, "float32", (2, 3), 24),) if moved else (),
    )


def test_copies_and_bytes_when_both_reports_carry_them(tmp_path: Path) -> None:
    old = write(tmp_path, "old.json", json.dumps(as_run(run_report(False)).to_dict()))
    new = write(tmp_path, "new.json", json.dumps(as_run(run_report(True)).to_dict()))
    data = diff_json(old, new, expect=1)
    assert data["summary"]["copies"]["old"] == {"links": [], "copies": 0, "per_step_bytes": 0}
    assert data["summary"]["copies"]["new"]["per_step_bytes"] == 24
    assert data["moved"][0]["old_status"] == data["moved"][0]["new_status"] == "free"
    text = diff(old, new, expect=1).stdout
    assert "Copies between devices per step" in text and "24" in text
    assert "copies" not in diff_json(str(GUIDE_TF0), new, expect=1)["summary"]  # only when both carry them


# --- JSON, filters, digest, pictures ----------------------------------------------------------------

def test_json_schema() -> None:
    data = diff_json(str(GUIDE_TF0), str(PLAIN_TF2), expect=1)
    assert set(data) == {"moved", "added", "removed", "by_device", "summary"}
    assert set(data["moved"][0]) == {"node", "op", "graph", "from", "to", "old_status", "new_status", "count"}
    assert set(data["summary"]) >= {"same", "old", "new", "unchanged", "moved", "added", "removed"}
    assert set(data["summary"]["old"]) == {"source", "kind", "placements", "counts_only"}
    for counts in data["by_device"].values():
        assert set(counts) == {"old", "new"}


def test_filters_narrow_both_sides_and_device_narrows_the_answer(tmp_path: Path) -> None:
    old = write(tmp_path, "old.log", glog("t0/a", "Const", CPU) + glog("t1/mm", "MatMul", GPU0))
    new = write(tmp_path, "new.log", glog("t0/a", "Const", GPU0) + glog("t1/mm", "MatMul", GPU0))
    assert diff_json("--op", "MatMul", old, new, expect=0)["filters"]["op"] == "MatMul"
    assert diff_json("--node", "^t1/", old, new, expect=0)["by_device"] == {GPU0: {"old": 1, "new": 1}}
    data = diff_json("--device", "CPU", old, new, expect=1)  # what left the CPU moved: it is not gone
    assert data["removed"] == [] and [(r["node"], r["from"], r["to"]) for r in data["moved"]] == [("t0/a", CPU, GPU0)]
    assert data["by_device"] == {CPU: {"old": 1, "new": 0}} and data["summary"]["unchanged"] == 0
    data = diff_json("--device", "GPU", old, new, expect=1)  # ... and entered the GPU; t1/mm stayed there
    assert data["added"] == [] and [r["node"] for r in data["moved"]] == ["t0/a"]
    assert data["summary"]["unchanged"] == 1
    assert "is not a regex" in diff("--node", "(", old, new, expect=2).stderr


def big_logs(tmp_path: Path, n: int = 120) -> tuple[str, str]:
    old = "".join(glog(f"tower_{i % 3}/layer_{i}/MatMul", "MatMul", GPU0) for i in range(n))
    new = "".join(glog(f"tower_{i % 3}/layer_{i}/MatMul", "MatMul", GPU1 if i % 2 else GPU0) for i in range(n))
    new += "".join(glog(f"extra/node_{i}", "Identity", CPU) for i in range(n))
    return write(tmp_path, "old.log", old), write(tmp_path, "new.log", new)


def test_a_long_diff_is_a_digest_and_all_prints_every_row(tmp_path: Path) -> None:
    old, new = big_logs(tmp_path)
    text = diff(old, new, expect=1).stdout
    assert "a digest follows" in text and "Moved (60), per op type" in text
    assert "Only in NEW (120), per op type" in text and "per name scope" in text
    full = diff("--all", old, new, expect=1).stdout
    assert "a digest follows" not in full and "tower_1/layer_1/MatMul" in full and "extra/node_119" in full


def test_svg_is_written_and_refused_with_json(tmp_path: Path) -> None:
    svg = tmp_path / "diff.svg"
    diff("--svg", str(svg), str(GUIDE_TF0), str(PLAIN_TF2), expect=1)
    assert svg.read_text().startswith("<svg")
    assert "--svg draws the tables" in diff("--json", "--svg", str(tmp_path / "x.svg"), str(GUIDE_TF0),
                                            str(PLAIN_TF2), expect=2).stderr


# --- hostile input -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("data", "words"), [
    (b"", "empty input"), (b"\x00\x01\x02\x03\x04\x05" * 2000, "binary"),
    (b'{"placements": ', "not valid JSON"), (b'{"cases": []}', "not a report of placements"),
])
def test_unreadable_input_is_exit_2_with_one_line(tmp_path: Path, data: bytes, words: str) -> None:
    for args in ((write(tmp_path, "bad", data), str(GUIDE_TF0)), (str(GUIDE_TF0), str(tmp_path / "bad"))):
        result = diff(*args, expect=2)
        assert words in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_missing_file_and_directory_are_exit_2(tmp_path: Path) -> None:
    assert "no such file" in diff(str(tmp_path / "nope.log"), str(GUIDE_TF0), expect=2).stderr
    assert "is a directory" in diff(str(GUIDE_TF0), str(tmp_path), expect=2).stderr


def test_a_huge_line_and_markup_in_names_and_file_names(tmp_path: Path) -> None:
    huge = "x" * (600 << 10) + "\n"
    old = write(tmp_path, "[bold]old.log", huge + glog("ok", "Const", CPU) + "\x1b[31mred\x1b[0m\n")
    new = write(tmp_path, "new.log", glog("ok", "Const", GPU0) + huge)
    result = diff(old, new, expect=1)
    assert "[bold]old.log" in result.stdout.replace("\n", "") and "\x1b" not in result.stdout  # a long path wraps
    # a saved report may name a node anything: markup and escape codes are shown, never obeyed
    cpu, gpu = parse_device(CPU), parse_device(GPU0)
    names = ("[red]x", "\x1b[31mevil")
    saved_old = write(tmp_path, "old.json", json.dumps(Report(placements=tuple(
        Placement(n, "[b]Op", CPU, cpu, "placer", 1) for n in names)).to_dict()))
    saved_new = write(tmp_path, "new.json", json.dumps(Report(placements=tuple(
        Placement(n, "[b]Op", GPU0, gpu, "placer", 1) for n in names)).to_dict()))
    result = diff(saved_old, saved_new, expect=1)
    assert "[red]x" in result.stdout and "[b]Op" in result.stdout and "\x1b" not in result.stdout
    assert sorted(m["node"] for m in diff_json(saved_old, saved_new, expect=1)["moved"]) == sorted(names)


def test_a_side_without_placements_is_said(tmp_path: Path) -> None:
    empty = write(tmp_path, "noise.log", "nothing placed here\n")
    result = diff(empty, str(GUIDE_TF0), expect=1)
    assert "no placements found in" in result.stderr and "noise.log" in result.stderr


def test_two_sides_without_placements_are_not_the_same_placements(tmp_path: Path) -> None:
    # a failed run's saved report, or two logs of nothing: nothing was compared, so never exit 0
    empty = write(tmp_path, "noise.log", "nothing placed here\n")
    failed = write(tmp_path, "failed.json", json.dumps(Report().to_dict()))
    for args in ((empty, empty), (failed, empty), (failed, failed)):
        result = diff(*args, expect=2)
        assert "nothing to compare" in result.stderr and "Traceback" not in result.stderr
    assert "nothing to compare" in diff(empty, "-", stdin="\n", expect=2).stderr


def test_a_json_lines_log_is_named_as_such(tmp_path: Path) -> None:
    lines = "".join(json.dumps({"severity": "INFO", "message": line}) + "\n"
                    for line in GUIDE_TF0.read_text().splitlines())
    result = diff(write(tmp_path, "shipped.log", lines), str(GUIDE_TF0), expect=2)
    assert "JSON lines" in result.stderr and result.stderr.count("\n") == 1
    # a saved report with something after it is still "not valid JSON"
    report = write(tmp_path, "r.json", (SAVED / "show.json").read_text() + "\nmore\n")
    assert "not valid JSON" in diff(report, str(GUIDE_TF0), expect=2).stderr


@pytest.mark.parametrize("width", range(40, 90))
def test_the_header_keeps_the_count_with_its_words(tmp_path: Path, width: int) -> None:
    """In a pipe (80 columns) or a narrow screen, "OLD: NAME (33 placements)" wrapped mid-phrase ("(33" /
    "placements)"): the count and its words stay on one line, whatever the width."""
    old = tmp_path / "ps_worker_cluster_recorded_on_a_machine.log"
    old.write_text(GUIDE_TF1.read_text())
    result = runner.invoke(app, ["diff", str(old), str(GUIDE_TF1)], env={"COLUMNS": str(width)})
    lines = result.stdout.splitlines()
    assert any(line.rstrip().endswith("(3 placements)") for line in lines[:8]), result.stdout
    assert not any(line.rstrip().endswith("(3") for line in lines[:8]), result.stdout


@pytest.mark.parametrize("narrow", [("--device", "CPU"), ("--device", "GUP"), ("--op", "NoSuchOp"),
                                    ("--node", "^zzz"), ("--json", "--node", "^zzz")])
def test_filters_that_match_nothing_on_either_side_are_nothing_to_compare(narrow: tuple[str, ...]) -> None:
    """A filter that matches nothing on both sides (a typo in a CI gate) is no "same placements": exit 2, as
    nothing to compare without a filter is; it says so, not that the log is empty."""
    result = diff(str(GUIDE_TF0), str(GUIDE_TF1), *narrow, expect=2)
    assert f"no placements match {' '.join(narrow[-2:])} in" in result.stderr and "(of 3)" in result.stderr
    assert "nothing to compare" in result.stderr and "no placements found" not in result.stderr
    assert "Same placements" not in result.stdout


def test_a_filter_that_matches_one_side_only_is_a_difference(tmp_path: Path) -> None:
    result = diff(str(GUIDE_TF0), str(PLAIN_TF2), "--device", "CPU", expect=1)  # all moved onto the CPU
    assert "nothing to compare" not in result.stderr


@pytest.mark.parametrize("command", ["diff", "parse"])
def test_a_node_filter_that_looks_like_an_option_is_refused(command: str) -> None:
    """``--node --all``: the regex was left out; check's --ignore refuses that alike."""
    files = [str(GUIDE_TF0), str(GUIDE_TF1)] if command == "diff" else [str(GUIDE_TF0)]
    result = runner.invoke(app, [command, "--node", "--all", *files])
    assert result.exit_code == 2 and "looks like an option, not a regex" in result.stderr
    assert "looks like an option" not in runner.invoke(app, [command, "--node", "[-]x", *files]).stderr


@pytest.mark.parametrize("data", ["[]", ' [\n {"placements": []}]'])
def test_a_json_array_is_no_report_and_no_log(tmp_path: Path, data: str) -> None:
    bad = write(tmp_path, "list.json", data)
    for args in ((bad, str(GUIDE_TF0)), (str(GUIDE_TF0), bad)):
        assert "JSON, but not a report" in diff(*args, expect=2).stderr
    # a log whose first line is a bracket is still a log
    assert diff(write(tmp_path, "b.log", "[[ 22.  28.]]\n" + GUIDE_TF0.read_text()), str(GUIDE_TF0), expect=0)


# --- Chinese, rendered ------------------------------------------------------------------------------

def render(view: View, width: int = 80) -> str:
    console = Console(record=True, width=width, color_system=None, file=open(os.devnull, "w"))
    # the names as a user in the repository would type them (the golden text is the same on any machine)
    old = replace(read_tallied(str(GUIDE_TF0)), name="guide_default.log")
    result = compare(old, replace(read_tallied(str(SAVED / "trace.json")), name="trace.json"))
    console.print(diff_group(result, view), crop=False)
    return console.export_text()


def check(name: str, text: str) -> None:
    golden = GOLDEN / f"{name}.txt"
    if os.environ.get("PLACEMENT_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_golden_english_and_chinese() -> None:
    check("diff__80", render(View()))
    with speaking("zh"):
        zh = render(View())
    check("zh__diff__80", zh)
    assert "旧" in zh or "移" in zh


def test_lang_zh_on_the_command_line() -> None:
    result = diff("--lang", "zh", str(GUIDE_TF0), str(PLAIN_TF2), expect=1)
    assert "Moved" not in result.stdout and "old device" not in result.stdout


@pytest.mark.parametrize("status", [AS_REQUESTED, SOFT_FALLBACK])
def test_statuses_survive_the_round_trip(tmp_path: Path, status: str) -> None:
    cpu = parse_device(CPU)
    report = Report(placements=(Placement("a", "Const", CPU, cpu, "placer", 1, requested="/cpu:0", status=status),))
    old = write(tmp_path, "old.json", json.dumps(as_run(report).to_dict()))
    gpu = parse_device(GPU0)
    moved = Report(placements=(Placement("a", "Const", GPU0, gpu, "placer", 1, requested="/cpu:0", status=status),))
    new = write(tmp_path, "new.json", json.dumps(as_run(moved).to_dict()))
    assert diff_json(old, new, expect=1)["moved"][0]["old_status"] == str(status)


def test_a_saved_reports_counts_per_device_are_normalised_too(tmp_path: Path) -> None:
    """A report saved by ``parse --summary --json`` holds counts per device only; one whose names are
    spelled another way (an older placement, a hand-made gate: ``/cpu:0``, ``/device:GPU:0``) was
    "The counts per device differ", exit 1, each device twice in the table. Names are normalised
    there as everywhere: the guide's graph on GPU:0 counts the same."""
    summary = json.loads(runner.invoke(app, ["parse", "--summary", "--json", str(GUIDE_TF1)]).stdout)
    summary["summary"]["by_device"] = {"/gpu:0": 2, "/device:GPU:0": 1}
    saved = write(tmp_path, "gate.json", json.dumps(summary))
    data = diff_json(saved, str(GUIDE_TF0), expect=0)
    assert data["by_device"] == {GPU0: {"old": 3, "new": 3}} and data["summary"]["same"] is True
    summary["summary"]["by_device"] = {"/gpu:0": 2, "/cpu:0": 1}
    data = diff_json(write(tmp_path, "moved.json", json.dumps(summary)), str(GUIDE_TF0), expect=1)
    assert data["by_device"] == {CPU: {"old": 1, "new": 0}, GPU0: {"old": 2, "new": 3}}


@pytest.mark.parametrize("ascii_only", [False, True])
def test_big_diff_rows_written_from_records_equal_their_dicts(tmp_path: Path, ascii_only: bool) -> None:
    """A big diff's rows are written straight from its records, a batch at a time where every name is
    plain; each row must read back as the dict its Change makes, whatever a name holds (quotes,
    backslashes, control characters, NUL, other scripts) and wherever it falls among the batches."""
    from io import StringIO

    from placement_cli.render.json import BATCH, write

    saved = json.loads((FIXTURES / "saved" / "show.json").read_text())
    model = saved["placements"][0]
    odd = ['q"uote', "back\\slash", "tab\there", "caf\u00e9", "\u4e2d\u6587", "ctl\x01x", "nul\x00x", "x (y): z"]
    names = [f"n{i:06d}" for i in range(BATCH + 300)]
    for at, name in zip((5, BATCH + 7, BATCH + 100, 17, 40, BATCH + 200, 60, BATCH + 299), odd):
        names[at] = f"n{at:06d}/{name}"
    graphs = {7: "caf\u00e9_fn", 8: "plain_fn", BATCH + 1: 'q"fn'}
    for side, nodes in (("old", names), ("new", [f"m{i}" for i in range(BATCH + 5)] + ["", "\u00e9"])):
        saved["placements"] = [{**model, "node": node, "graph": graphs.get(i) if side == "old" else None}
                               for i, node in enumerate(nodes)]
        (tmp_path / f"{side}.json").write_text(json.dumps(saved))
    found = compare(read_tallied(str(tmp_path / "old.json")), read_tallied(str(tmp_path / "new.json")))
    out = StringIO()
    write(found.to_dict(lazy=True), out, ascii_only=ascii_only)
    assert out.getvalue().isascii() or not ascii_only
    data = json.loads(out.getvalue())
    assert data["removed"] == [c.side_dict() for c in found.removed]
    assert data["added"] == [c.side_dict() for c in found.added]
    assert len(data["removed"]) == len(names) and len(data["added"]) == BATCH + 7
    assert {row["node"] for row in data["removed"]} >= {f"n{at:06d}/{name}" for at, name in zip((5, 60), (odd[0], odd[6]))}
    assert {(row["node"], row["graph"]) for row in data["removed"]} >= {("n000007", "caf\u00e9_fn")}


def test_a_name_with_a_line_break_or_tab_stays_on_its_row(tmp_path: Path) -> None:
    """A saved report may name a node anything: a newline or tab in it must not break the table's rows
    (each row one line, its cells in their columns)."""
    saved = json.loads((FIXTURES / "saved" / "show.json").read_text())
    model = saved["placements"][0]
    for side, nodes in (("old", ["a\nb", "ok"]), ("new", ["c\td\ne"])):
        saved["placements"] = [{**model, "node": node} for node in nodes]
        (tmp_path / f"{side}.json").write_text(json.dumps(saved))
    out = diff(str(tmp_path / "old.json"), str(tmp_path / "new.json"), expect=1).stdout
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 3 + 1, out  # three rows and the per-device table's one
    assert all(line.endswith("│") for line in rows), out
    assert any("a\ufffdb" in line for line in rows) and any("c\ufffdd\ufffde" in line for line in rows), out


def test_the_moves_digest_names_each_example_with_its_function() -> None:
    """Two tf.functions' MatMuls are two nodes: the digest's examples say whose each one is."""
    from placement_cli.model import Change
    from placement_cli.render.diff import moved_digest

    cpu, gpu = "/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:GPU:0"
    changes = [Change("MatMul", "MatMul", gpu, cpu, graph="train_step"), Change("MatMul", "MatMul", gpu, cpu, graph="eval_step")]
    console = Console(width=200, record=True, color_system=None)
    console.print(moved_digest(changes, fit=True))
    text = console.export_text()
    assert "train_step: MatMul" in text and "eval_step: MatMul" in text, text


def test_a_report_saved_narrowed_by_filters_is_compared_with_the_other_side_narrowed_alike(tmp_path: Path) -> None:
    """``parse --json --device CPU:1`` holds only CPU:1's placements: against the whole log of the same run,
    diff said "4 only in NEW" (every placement the filter had left out) with exit 1. The other side is now
    narrowed by the same filters (those the command line did not give), and a line says so; two reports
    narrowed differently are exit 2; one saved with --top holds only its first rows, which a line says."""
    cpu1, cpu2 = CPU.replace("CPU:0", "CPU:1"), CPU.replace("CPU:0", "CPU:2")
    run = glog("a", "Const", cpu1) + glog("b", "MatMul", cpu1) + glog("c", "Const", cpu2) + glog("d", "AddV2", cpu2)
    log = write(tmp_path, "run.log", run)
    moved = write(tmp_path, "moved.log", run.replace(f"b: (MatMul): {cpu1}", f"b: (MatMul): {cpu2}"))

    def saved(name: str, *filters: str) -> str:
        result = runner.invoke(app, ["parse", "--json", *filters, log])
        assert result.exit_code == 0, result.stderr
        return write(tmp_path, name, result.stdout)

    on_cpu1 = saved("cpu1.json", "--device", "CPU:1")
    same = diff(on_cpu1, log, expect=0)
    assert "cpu1.json was saved narrowed by --device CPU:1 (2 of 4 placements)" in same.stderr
    data = diff_json(on_cpu1, moved, expect=1)
    assert [(r["node"], r["from"], r["to"]) for r in data["moved"]] == [("b", cpu1, cpu2)]
    assert data["added"] == data["removed"] == []
    assert diff_json(log, saved("matmul.json", "--op", "MatMul"), expect=0)["summary"]["unchanged"] == 1
    clash = diff(on_cpu1, saved("cpu2.json", "--device", "CPU:2"), expect=2)
    assert "narrowed by different filters" in clash.stderr
    top = diff(saved("top.json", "--top", "2"), log, expect=1)
    assert "top.json was saved with --top 2: it holds only its first 2 placements (of 4)" in top.stderr


@pytest.mark.parametrize("saved", [{"node": "(a"}, {"node": "(a)\\1"}, {"node": "--all"}, {"node": ""},
                                   {"device": "!!"}, {"device": "  "}, {"op": "a b"}])
def test_a_report_saved_narrowed_by_a_filter_that_is_none_is_an_input_error(tmp_path: Path, saved: dict) -> None:
    """A report whose ``filters`` hold what no command line takes (hand-edited: a regex that does not compile,
    one with a backreference, an option) was an internal error (exit 3) when diff narrowed the other side
    alike, or "nothing to compare" / "saved narrowed by -": exit 2 naming the report and the filter."""
    report = json.loads(runner.invoke(app, ["parse", "--json", str(PLAIN_TF2)]).stdout)
    path = write(tmp_path, "edited.json", json.dumps({**report, "filters": saved}))
    for args in ((path, str(PLAIN_TF2)), (str(PLAIN_TF2), path)):
        result = diff(*args, expect=2)
        assert "edited.json: saved narrowed by a filter that is none" in result.stderr, result.stderr
        assert "internal error" not in result.stderr


def test_a_narrowed_report_narrowed_again_by_a_wider_value_is_refused_not_mislabelled(tmp_path: Path) -> None:
    """A report saved with ``--device CPU:1``, re-saved by ``parse --json --device CPU``, said it held every CPU
    placement ("filters": {"device": "CPU"}) while it held CPU:1's only: diffed against the run's own log it
    said "2 only in NEW" (exit 1), and ``diff CPU1.json LOG --device CPU`` alike, since the command line's
    --device replaced the saved one on the other side. A value of the same filter that is not within the
    saved one is exit 2 now; one within it (``CPU:1`` again, its full name, ``cpu:1``) still narrows, and
    --top given again keeps the smaller N (the report holds no more)."""
    cpu1, cpu2 = CPU.replace("CPU:0", "CPU:1"), CPU.replace("CPU:0", "CPU:2")
    run = glog("a", "Const", cpu1) + glog("b", "MatMul", cpu1) + glog("c", "Const", cpu2) + glog("d", "AddV2", cpu2)
    log = write(tmp_path, "run.log", run)

    def parse(source: str, *filters: str, expect: int = 0) -> Any:
        result = runner.invoke(app, ["parse", "--json", *filters, source])
        assert result.exit_code == expect, (result.stdout, result.stderr)
        return result

    on_cpu1 = write(tmp_path, "cpu1.json", parse(log, "--device", "CPU:1").stdout)
    wider = parse(on_cpu1, "--device", "CPU", expect=2)
    assert "cpu1.json was saved narrowed by --device CPU:1: --device CPU cannot narrow it again" in wider.stderr
    assert parse(on_cpu1, "--op", "Const", "--node", "b", expect=0).stdout  # other kinds still narrow it
    for within in ("CPU:1", "cpu:1", cpu1):
        assert json.loads(parse(on_cpu1, "--device", within).stdout)["filters"]["device"] == within
    matmul = write(tmp_path, "matmul.json", parse(log, "--op", "MatMul").stdout)
    assert "--op MatMul: --op Const cannot" in parse(matmul, "--op", "Const", expect=2).stderr
    top = write(tmp_path, "top.json", parse(log, "--top", "2").stdout)
    again = json.loads(parse(top, "--top", "3").stdout)
    assert again["filters"]["top"] == 2 and len(again["placements"]) == 2
    clash = diff(on_cpu1, log, "--device", "CPU", expect=2)
    assert "cpu1.json was saved narrowed by --device CPU:1: --device CPU would compare what it left out" in clash.stderr
    assert "--op MatMul: --op Const would" in diff(log, matmul, "--op", "Const", expect=2).stderr
    assert diff_json(on_cpu1, log, "--device", "CPU:1", expect=0)["summary"]["unchanged"] == 2


def test_a_report_narrowed_from_a_sessions_run_keeps_each_sessions_order(tmp_path: Path) -> None:
    """Two Sessions of one model, MatMul on CPU:0 then CPU:1; the other run swaps them. ``diff`` of the logs
    with --device CPU:1 says two moves, but the first run's report saved with ``--device CPU:1`` holds only the
    second Session's MatMul, which read alone is the first to place that name: against the swapped run's log
    it said "Same placements" (exit 0). A report narrowed from a run that executed no eager op now names such
    a node by its order in the whole run (graph "#2", ``summary.sessions_numbered``), kept when narrowed again."""
    cpu1 = CPU.replace("CPU:0", "CPU:1")

    def sessions(*devices: str) -> str:
        return "".join(glog("MatMul", "MatMul", d) + glog("out", "AddV2", CPU) for d in devices)

    first = write(tmp_path, "first.log", sessions(CPU, cpu1))
    swapped = write(tmp_path, "swapped.log", sessions(cpu1, CPU))
    assert diff_json(first, swapped, "--device", "CPU:1", expect=1)["summary"]["moved"] == 2
    saved = runner.invoke(app, ["parse", "--json", "--device", "CPU:1", first])
    data = json.loads(saved.stdout)
    assert [(p["node"], p.get("graph")) for p in data["placements"]] == [("MatMul", "#2")]
    assert data["summary"]["sessions_numbered"] is True
    narrowed = write(tmp_path, "cpu1.json", saved.stdout)
    moved = diff_json(narrowed, swapped, expect=1)
    assert [(m["node"], m["graph"], m["from"], m["to"]) for m in moved["moved"]] == [("MatMul", "#2", cpu1, CPU)]
    assert [(r["node"], r["graph"], r["device"]) for r in moved["added"]] == [("MatMul", None, cpu1)]
    assert diff_json(narrowed, first, expect=0)["summary"]["unchanged"] == 1
    again = write(tmp_path, "again.json", runner.invoke(app, ["parse", "--json", "--op", "MatMul", narrowed]).stdout)
    assert json.loads(Path(again).read_text())["placements"][0]["graph"] == "#2"
    assert diff(again, swapped, expect=1).exit_code == 1
    # a run that executed eager ops keeps its multiset (its nodes of no function may be eager ops' wrappers)
    mixed = write(tmp_path, "mixed.log", sessions(CPU, cpu1) + eager("MatMul", CPU))
    plain = json.loads(runner.invoke(app, ["parse", "--json", "--device", "CPU:1", mixed]).stdout)
    assert "sessions_numbered" not in plain["summary"] and "graph" not in plain["placements"][0]
