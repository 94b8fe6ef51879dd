"""capture() gives the same complete report in a real Jupyter kernel (ipykernel, run headless with
nbclient; with fd 1/2 forwarded into cells, and with that forwarding off) as in a script, run twice;
the program's own output reaches the user, TensorFlow's placement lines do not; the user's exception
always propagates; a capture that cannot see TensorFlow's log says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

import placement_cli

pytestmark = pytest.mark.tf

SETUP = """
import json, os, re, sys, warnings
import placement_cli
import tensorflow as tf

PLUMBING = {"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval"}

def rows(report):
    # the rows a table shows; a tf.function's generated name loses its counter
    return sorted([p.kind, re.sub(r"_\\d+$", "", p.op or ""), p.node, p.canonical, p.status]
                  for p in report.placements if p.op not in PLUMBING and not p.wrapper)

def emit(tag, report):
    print(tag, json.dumps({"rows": rows(report), "complete": report.complete, "problems": list(report.problems),
                           "notes": list(report.notes), "user_in_log": "user print inside" in report.log,
                           "log_lines": len(report.log.splitlines())}), flush=True)

print("MODULE", placement_cli.__file__, flush=True)
"""

CODE = """
x = tf.matmul(tf.ones([2, 3]), tf.ones([3, 2]))

@tf.function
def f(a):
    with tf.device("/gpu:3"):
        return tf.matmul(a, a, name="pinned")

f(tf.ones([2, 2]))
g = tf.Graph()
with g.as_default():
    c = tf.constant(1.0, name="in_session")
with tf.compat.v1.Session(graph=g) as sess:
    sess.run(c)
print("user print inside")
tf.print("tf.print inside")
os.write(1, b"fd1 user line\\n")
sys.stdout.write("Executing op Lookalike in device /job:localhost/replica:0/task:0/device:CPU:0\\n")
"""

CAPTURE = "with placement_cli.capture() as report:\n" + textwrap.indent(CODE, "    ") + '\nemit("RUN", report)\n'

NESTED = """
with placement_cli.capture() as outer:
    a = tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))
    with placement_cli.capture() as inner:
        b = tf.add(a, a)

        @tf.function
        def h(v):
            return v * 3.0

        h(b)
        print("inner user print")
    d = tf.subtract(b, a)
emit("OUTER", outer)
emit("INNER", inner)
"""

# Outside any capture: what capture() changed is back (TensorFlow's own logging cannot be switched off).
AFTER = """
y = tf.add(x, 1.0)
g2 = tf.Graph()
with g2.as_default():
    k = tf.constant(2.0, name="after_session")
with tf.compat.v1.Session(graph=g2) as s2:
    s2.run(k)
print("AFTER", json.dumps({"flag": tf.debugging.get_log_device_placement(), "notes": list(report.notes)}), flush=True)
"""

# Only in the script: the block's own exception, binary output, a report that cannot be built.
SCRIPT_ONLY = """
mine = ValueError("mine")
try:
    with placement_cli.capture() as failed:
        tf.add(tf.ones([2]), 1.0)
        os.write(1, b"bin\\x00ary out\\n")
        os.write(2, b"\\x00\\x01\\x02 err bytes\\n")
        raise mine
except ValueError as got:
    print("RAISED", json.dumps({"same": got is mine, "complete": failed.complete,
                                "eager": [p.op for p in failed.placements if p.kind == "eager"]}), flush=True)

import placement_cli.logparse as logparse
real_parse = logparse.parse_text

def broken(text):
    raise RuntimeError("parser broke")

logparse.parse_text = broken
with warnings.catch_warnings(record=True) as caught:
    try:
        with placement_cli.capture() as unbuilt:
            tf.add(tf.ones([2]), 2.0)
            raise KeyError("user key")
    except KeyError as got:
        same = got.args == ("user key",)
logparse.parse_text = real_parse
print("UNBUILT", json.dumps({"same": same, "complete": unbuilt.complete, "problems": list(unbuilt.problems),
                             "warned": [str(w.message) for w in caught],
                             "json": json.loads(unbuilt.to_json())["capture"]}), flush=True)

pinned_away = tf.Graph()
with pinned_away.as_default(), tf.device("/device:GPU:7"):
    m = tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]), name="refused")
try:
    with placement_cli.capture() as refused:
        with tf.compat.v1.Session(graph=pinned_away) as s3:  # no soft placement: the run raises
            s3.run(m)
except tf.errors.InvalidArgumentError:
    pass
print("REFUSED", json.dumps([[e.kind, e.requested_device] for e in refused.errors]), flush=True)
"""

DISPLAY_CHECK = """
bundle = report._repr_mimebundle_()
print("DISPLAY", json.dumps({"keys": sorted(bundle), "html": bundle["text/html"], "text": bundle["text/plain"],
                             "json": sorted(json.loads(report.to_json()))}), flush=True)
"""

SCRIPT = SETUP + CAPTURE + CAPTURE + NESTED + DISPLAY_CHECK + SCRIPT_ONLY

# After TensorFlow ran an op, switching placement logging on does nothing (the SPEC's gotcha).
LATE = SETUP + """
tf.constant(1.0) + 1
tf.debugging.set_log_device_placement(True)
for attempt in range(2):
    with warnings.catch_warnings(record=True) as caught:
        with placement_cli.capture() as report:
            x = tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))
            g = tf.Graph()
            with g.as_default():
                c = tf.constant(1.0, name="in_session")
            with tf.compat.v1.Session(graph=g) as sess:
                sess.run(c)
    emit("LATE", report)
    print("WARNED", json.dumps([str(w.message) for w in caught]), flush=True)
print("SHOWN", json.dumps({"text": str(report), "json": json.loads(report.to_json())["capture"]}), flush=True)

from placement_cli.runtime import private
private.disable("context_initialized")  # a TensorFlow that renamed it: unknown, and said
with warnings.catch_warnings(record=True):
    with placement_cli.capture() as report:
        x = tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))
emit("UNKNOWN", report)
"""

# TF_CPP_MIN_LOG_LEVEL=1 hides glog's INFO lines: eager placements are lost outside IPython.
QUIET = SETUP + "with placement_cli.capture() as report:\n" + textwrap.indent(CODE, "    ") + '\nemit("QUIET", report)\n'

KERNEL_CELLS = [SETUP, CAPTURE, CAPTURE, "report", NESTED, AFTER]

RUN_NOTEBOOK = """
import json, sys
import nbformat
from nbclient import NotebookClient

cells, extra, target = json.load(open(sys.argv[1])), json.loads(sys.argv[2]), sys.argv[3]
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
NotebookClient(nb, timeout=300, kernel_name="python3", extra_arguments=extra).execute()
with open(target, "w") as out:
    json.dump([cell.outputs for cell in nb.cells], out)
"""

PLACEMENT_MARKS = ("Executing op ", "placer.cc", ": (_Arg): /job:", "Device mapping")


class Run:
    """One process started for the module; its results read once it ended."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, outputs: str | None = None) -> None:
        self.outputs = outputs
        full_env = {**os.environ, **(env or {})}
        full_env.pop("PYTEST_CURRENT_TEST", None)  # ipykernel does not forward fds under pytest
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env)
        self.stdout = self.stderr = b""

    def finish(self) -> Run:
        self.stdout, self.stderr = self.proc.communicate(timeout=600)
        return self

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    def cells(self) -> list[list[dict[str, Any]]]:
        assert self.proc.returncode == 0, self.stderr.decode("utf-8", "replace")[-4000:]
        assert self.outputs is not None
        with open(self.outputs, encoding="utf-8") as f:
            return json.load(f)


def tagged(text: str) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for line in text.splitlines():
        tag, _, rest = line.partition(" ")
        if tag.isupper() and rest[:1] in "{[" and rest:
            found.setdefault(tag, []).append(json.loads(rest))
    return found


def untagged(text: str) -> list[str]:
    """The lines of ``text`` that are not the test's own ``TAG {json}`` lines."""
    return [line for line in text.splitlines() if line not in tagged_lines(line)]


def tagged_lines(line: str) -> list[str]:
    tag, _, rest = line.partition(" ")
    return [line] if tag.isupper() and rest[:1] in ("{", "[") else []


def stream_text(outputs: list[dict[str, Any]], name: str | None = None) -> str:
    return "".join(o["text"] for o in outputs if o["output_type"] == "stream" and name in (None, o["name"]))


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, Run]]:
    """Every process this module needs, started together (each pays TensorFlow's start-up once)."""
    with tempfile.TemporaryDirectory(prefix="placement-nb-") as tmp:
        cells = os.path.join(tmp, "cells.json")
        with open(cells, "w", encoding="utf-8") as f:
            json.dump(KERNEL_CELLS, f)
        python = [sys.executable, "-c"]
        started = {
            "script": Run([*python, SCRIPT]),
            "late": Run([*python, LATE]),
            "quiet": Run([*python, QUIET], env={"TF_CPP_MIN_LOG_LEVEL": "1"}),
            "kernel": Run([*python, RUN_NOTEBOOK, cells, "[]", os.path.join(tmp, "forwarded.json")],
                          outputs=os.path.join(tmp, "forwarded.json")),
            # older kernels and hosted notebooks: C++ output never reaches a cell (often with TF quietened)
            "kernel_no_fd": Run([*python, RUN_NOTEBOOK, cells, '["--IPKernelApp.capture_fd_output=False"]',
                                 os.path.join(tmp, "dropped.json")],
                                env={"TF_CPP_MIN_LOG_LEVEL": "1"}, outputs=os.path.join(tmp, "dropped.json")),
        }
        try:
            yield {name: run.finish() for name, run in started.items()}
        finally:
            for run in started.values():
                if run.proc.poll() is None:
                    run.proc.kill()
                    run.proc.wait()


@pytest.fixture(scope="module")
def script(runs: dict[str, Run]) -> dict[str, list[Any]]:
    run = runs["script"]
    assert run.proc.returncode == 0, run.stderr.decode("utf-8", "replace")[-4000:]
    return tagged(run.text)


def kernel_results(run: Run) -> tuple[dict[str, list[Any]], list[list[dict[str, Any]]]]:
    cells = run.cells()
    return tagged("".join(stream_text(c, "stdout") for c in cells)), cells


KERNELS = ["kernel", "kernel_no_fd"]


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_reports_equal_the_script_s_also_when_the_cell_runs_again(runs: dict[str, Run],
                                                                       script: dict[str, list[Any]],
                                                                       kernel: str) -> None:
    found, _ = kernel_results(runs[kernel])
    first, again = found["RUN"]
    assert first["rows"] == script["RUN"][0]["rows"]
    assert again["rows"] == script["RUN"][1]["rows"]
    for report in (first, again):
        assert report["complete"], report["problems"]
        kinds = {row[0] for row in report["rows"]}
        assert kinds == {"eager", "placer"}
        assert ["placer", "MatMul", "pinned"] == report_row(report, "pinned")[:3]
        assert report_row(report, "in_session")  # a Session whose config did not ask for logging
        assert not any(row[1] == "Lookalike" for row in report["rows"])  # the user's line is no placement
        assert not report["user_in_log"] and report["log_lines"]  # the user's output is theirs, not the log's
    assert len([r for r in first["rows"] if r[0] == "eager"]) >= 5


def report_row(report: dict[str, Any], node: str) -> list[Any]:
    return next((row for row in report["rows"] if row[2] == node), [])


def test_the_kernel_runs_this_checkout(runs: dict[str, Run]) -> None:
    for kernel in KERNELS:
        lines = [line for line in stream_text(runs[kernel].cells()[0]).splitlines() if line.startswith("MODULE ")]
        assert lines == [f"MODULE {placement_cli.__file__}"]


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_program_s_output_reaches_the_cell_and_tensorflow_s_placement_lines_do_not(
        runs: dict[str, Run], kernel: str) -> None:
    _, cells = kernel_results(runs[kernel])
    for cell in (cells[1], cells[2], cells[4]):
        text = stream_text(cell)
        lines = [line for line in untagged(text) if "Lookalike" not in line]
        assert not [line for line in lines if any(mark in line for mark in PLACEMENT_MARKS)], text
    for cell in (cells[1], cells[2]):
        out = stream_text(cell, "stdout")
        assert "user print inside" in out and "tf.print inside" in out
        assert "Executing op Lookalike in device" in out
        # fd 1 reaches a cell where the kernel forwards it, and only there: as without capture()
        assert ("fd1 user line" in out) == (kernel == "kernel")
    assert "inner user print" in stream_text(cells[4], "stdout")


def test_script_output_reaches_the_terminal_and_placement_lines_do_not(runs: dict[str, Run]) -> None:
    run = runs["script"]
    out, err = run.stdout.decode("utf-8", "replace"), run.stderr.decode("utf-8", "replace")
    assert out.count("user print inside") == 2 and out.count("fd1 user line") == 2
    assert out.count("Executing op Lookalike in device") == 2
    assert "tf.print inside" in err
    assert b"bin\x00ary out" in run.stdout and b"\x00\x01\x02 err bytes" in run.stderr  # bytes, as written
    for text in (out, err):
        lines = [line for line in untagged(text) if "Lookalike" not in line]
        assert not [line for line in lines if any(mark in line for mark in PLACEMENT_MARKS)]


def test_report_shows_once_in_a_kernel_as_an_html_fragment(runs: dict[str, Run]) -> None:
    for kernel in KERNELS:
        _, cells = kernel_results(runs[kernel])
        shown = cells[3]
        assert [o["output_type"] for o in shown] == ["execute_result"]
        check_bundle(shown[0]["data"])


def test_report_mimebundle_and_json_in_a_script(script: dict[str, list[Any]]) -> None:
    shown = script["DISPLAY"][0]
    assert shown["keys"] == ["text/html", "text/plain"]
    check_bundle({"text/html": shown["html"], "text/plain": shown["text"]})
    assert shown["json"] == ["capture", "copies", "device_mapping", "errors", "log", "placements", "result",
                             "summary"]


def check_bundle(data: dict[str, str]) -> None:
    html, text = data["text/html"], data["text/plain"]
    assert html.lstrip().startswith("<pre style=") and html.rstrip().endswith("</pre>")
    for page_level in ("<style", "<html", "<body", "<head", "<!DOCTYPE", "class="):
        assert page_level not in html
    for shown in (html, text):
        assert "pinned" in shown and "in_session" in shown
        assert "--json" not in shown and "--soft" not in shown  # the CLI's options mean nothing here
    assert "report.to_json()" in text  # where the plumbing rows the table hides can be found


@pytest.mark.parametrize("kernel", ["script", *KERNELS])
def test_nested_captures_are_both_complete(runs: dict[str, Run], script: dict[str, list[Any]], kernel: str) -> None:
    found = script if kernel == "script" else kernel_results(runs[kernel])[0]
    outer, inner = found["OUTER"][0], found["INNER"][0]
    assert outer["complete"] and inner["complete"]
    outer_ops = [row[1] for row in outer["rows"]]
    inner_ops = [row[1] for row in inner["rows"]]
    for op in ("AddV2", "Mul", "__inference_h"):
        assert op in inner_ops and op in outer_ops
    assert "Sub" in outer_ops and "Sub" not in inner_ops
    assert all(row in outer["rows"] for row in inner["rows"])
    if kernel != "script":
        assert outer["rows"] == script["OUTER"][0]["rows"] and inner["rows"] == script["INNER"][0]["rows"]


@pytest.mark.parametrize("kernel", KERNELS)
def test_after_the_block_what_capture_changed_is_restored_and_what_stays_on_is_said(
        runs: dict[str, Run], kernel: str) -> None:
    found, cells = kernel_results(runs[kernel])
    after = found["AFTER"][0]
    assert after["flag"] is False  # set_log_device_placement is back to what it was
    assert any("stays on" in note for note in after["notes"])
    assert "after_session" not in stream_text(cells[5])  # a later Session no longer logs


def test_the_block_s_own_exception_propagates_whatever_it_printed(script: dict[str, list[Any]]) -> None:
    raised = script["RAISED"][0]
    assert raised["same"] and raised["complete"]
    assert "AddV2" in raised["eager"]  # binary output around it is parsed around, not refused


def test_a_report_that_cannot_be_built_says_why_and_the_user_s_exception_still_propagates(
        script: dict[str, list[Any]]) -> None:
    unbuilt = script["UNBUILT"][0]
    assert unbuilt["same"] and not unbuilt["complete"]
    assert any("could not be built: RuntimeError: parser broke" in p for p in unbuilt["problems"])
    assert any("parser broke" in w for w in unbuilt["warned"])
    assert unbuilt["json"]["complete"] is False


def test_a_placement_error_raised_in_the_block_is_in_the_report(script: dict[str, list[Any]]) -> None:
    refused = script["REFUSED"][0]
    assert len(refused) == 1 and refused[0][1] and refused[0][1].upper().endswith("GPU:7")


def test_capture_entered_after_tensorflow_started_says_it_could_not_capture(runs: dict[str, Run]) -> None:
    run = runs["late"]
    assert run.proc.returncode == 0, run.stderr.decode("utf-8", "replace")[-4000:]
    found = tagged(run.text)
    assert len(found["LATE"]) == 2 and len(found["WARNED"]) == 2  # a re-run warns again
    for report, warned in zip(found["LATE"], found["WARNED"]):
        assert not report["complete"]
        assert [row[2] for row in report["rows"]] == ["in_session"]  # Sessions still log; eager ops did not
        assert any("already run an op" in p for p in report["problems"])
        assert len(warned) == 1 and "already run an op" in warned[0]
    shown = found["SHOWN"][0]
    assert "Capture incomplete" in shown["text"] and shown["json"]["complete"] is False
    unknown = found["UNKNOWN"][0]
    assert not unknown["complete"] and any("cannot be told (switched off)" in p for p in unknown["problems"])


def test_a_log_level_that_hides_eager_lines_is_said_and_graph_placements_still_count(runs: dict[str, Run]) -> None:
    run = runs["quiet"]
    assert run.proc.returncode == 0, run.stderr.decode("utf-8", "replace")[-4000:]
    report = tagged(run.text)["QUIET"][0]
    assert not report["complete"]
    assert any("TF_CPP_MIN_LOG_LEVEL=1" in p for p in report["problems"])
    assert report_row(report, "pinned")[:3] == ["placer", "MatMul", "pinned"]  # from the stdout copies alone
    assert report_row(report, "in_session")
