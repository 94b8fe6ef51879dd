"""capture() gives the same complete report in a real Jupyter kernel (ipykernel, run headless with
nbclient; with fd 1/2 forwarded into cells, and with that forwarding off) as in a script, run twice;
the program's own output reaches the user, TensorFlow's placement lines do not; the user's exception
always propagates; a capture that cannot see TensorFlow's log says so."""

from __future__ import annotations

import importlib.util
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
from processes import patience

pytestmark = pytest.mark.tf

SETUP = """
import json, os, re, sys, warnings
import placement_cli
import tensorflow as tf

PLUMBING = {"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval"}

def rows(report):
    # the rows a table shows; a tf.function's generated name loses its counter
    return sorted([p.kind, re.sub(r"_\\d+$", "", p.op or ""), p.node, p.canonical, str(p.status)]
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

@tf.function
def later(v):
    return v - 4.0

later(y)
print("user print after")
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
with pinned_away.as_default(), tf.device("/device:GPU:99"):  # no machine has it: refused everywhere
    m = tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]), name="refused")
try:
    with placement_cli.capture() as refused:
        with tf.compat.v1.Session(graph=pinned_away) as s3:  # no soft placement: the run raises
            s3.run(m)
except tf.errors.InvalidArgumentError:
    pass
print("REFUSED", json.dumps([[e.kind, e.requested_device] for e in refused.errors]), flush=True)

# What capture() touches is read before and checked after; a late block changes nothing the program set.
import logging
from tensorflow.python.client.session import BaseSession
from tensorflow.python.eager import context
from tensorflow.python.framework import func_graph

def settings():
    return {"soft": tf.config.get_soft_device_placement(), "log": tf.debugging.get_log_device_placement(),
            "policy": str(context.context().device_policy), "sync": tf.config.experimental.get_synchronous_execution(),
            "jit": tf.config.optimizer.get_jit(), "eagerly": tf.config.functions_run_eagerly(),
            "optimizer": tf.config.optimizer.get_experimental_options(),
            "patched": [repr(tf.compat.v1.Session.__init__), repr(tf.compat.v1.InteractiveSession.__init__),
                        repr(BaseSession.run), repr(func_graph.func_graph_from_py_func),
                        repr(type(context.context()).__dict__["log_device_placement"])],
            "filters": [len(logging.getLogger(n).filters) for n in ("tensorflow", "absl")],
            "streams": [sys.stdout is sys.__stdout__, sys.stderr is sys.__stderr__]}

def pin():
    try:
        with tf.device("/device:GPU:99"):
            tf.matmul(tf.ones([2, 2]), tf.ones([2, 2]))
        return "ran"
    except tf.errors.InvalidArgumentError:
        return "raised"

tf.config.set_soft_device_placement(False)
strict = {"before": settings(), "inside": [], "after": []}
for attempt in range(2):
    with placement_cli.capture():
        strict["inside"].append(pin())
    strict["after"].append(settings())
strict["pin after"] = pin()
tf.config.set_soft_device_placement(True)
print("STRICT", json.dumps(strict), flush=True)

# The program switches placement logging off inside the block: it reads back its own setting, the
# report stays whole and says so, and after the block the program's setting holds.
with placement_cli.capture() as switched:
    tf.debugging.set_log_device_placement(False)
    read_back = tf.debugging.get_log_device_placement()
    tf.subtract(tf.ones([2]), 1.0)
print("SWITCHED", json.dumps({"read_back": read_back, "after": tf.debugging.get_log_device_placement(),
                              "eager": [p.op for p in switched.placements if p.kind == "eager"],
                              "complete": switched.complete, "notes": list(switched.notes)}), flush=True)

# capture() in three threads at once: the log is the process's, so no report may say it is complete.
import threading
before_threads = settings()
barrier = threading.Barrier(3, timeout=300)  # ends a hang only (a loaded machine)
threaded = {}

def in_thread(i):
    with warnings.catch_warnings(record=True):
        with placement_cli.capture() as mine:
            barrier.wait()
            tf.add(tf.ones([i + 1]), float(i))
            barrier.wait()
    threaded[i] = {"complete": mine.complete, "problems": list(mine.problems)}

workers = [threading.Thread(target=in_thread, args=(i,)) for i in range(3)]
for w in workers:
    w.start()
for w in workers:
    w.join()
print("THREADS", json.dumps({"reports": [threaded[i] for i in range(3)], "restored": settings() == before_threads}),
      flush=True)
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
QUIET = SETUP + "with placement_cli.capture() as report:\n" + textwrap.indent(CODE, "    ") + '\nemit("QUIET", report)\n' + """
@tf.function
def quiet_step(v):
    return v * 2.0

with placement_cli.capture() as stepped:
    os.write(1, b"step=42")
    quiet_step(tf.ones([2]))
    os.write(1, b"\\ndone\\n")
print("STEPPED", json.dumps({"nodes": [p.node for p in stepped.placements], "problems": list(stepped.problems)}),
      flush=True)

@tf.function
def flipped_step(w):
    return w * 3.0

with placement_cli.capture() as flipped:  # TensorFlow read the level as it was imported: this changes nothing
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    flipped_step(tf.ones([2]))
print("FLIPPED", json.dumps({"nodes": [p.node for p in flipped.placements],
                             "problems": list(flipped.problems)}), flush=True)
"""

# A program's own bytes around TensorFlow's lines, and every way a block can end: fds 1/2 and
# sys.stdout/sys.stderr must come back as they were, the program's bytes whole.
HOSTILE = r'''
import json, os, random, re, signal, sys, tempfile, warnings
import placement_cli
from placement_cli.runtime.capture import fdcapture, pystreams
import tensorflow as tf
tf.get_logger().setLevel("ERROR")  # its retracing warnings are not the noise this checks

def state():
    return [os.readlink("/proc/self/fd/1"), os.readlink("/proc/self/fd/2"), sys.stdout is ORIGINAL[0],
            sys.stderr is ORIGINAL[1], pystreams.ACTIVE == [] and fdcapture._STACK == [] and fdcapture._ORIGINALS == {}]

ORIGINAL = (sys.stdout, sys.stderr)
BEFORE = state()

def own_fds(run):
    """Run ``run`` with fds 1 and 2 in files of this script's own; what they received, by fd."""
    sys.stdout.flush(); sys.stderr.flush()
    files = {fd: tempfile.TemporaryFile() for fd in (1, 2)}
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    for fd in (1, 2):
        os.dup2(files[fd].fileno(), fd)
    try:
        result = run()
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        for fd in (1, 2):
            os.dup2(saved[fd], fd)
            os.close(saved[fd])
    got = {}
    for fd, f in files.items():
        f.seek(0)
        got[fd] = f.read()
    return result, got

def rows(report):
    return sorted([p.kind, re.sub(r"_\d+$", "", p.op or ""), p.node, p.canonical] for p in report.placements)

def trial(rng=None, big=0):
    """A fresh tf.function (its placer lines, its _Args) and eager ops, with the program's bytes
    written to fds 1 and 2 around each: random, NULs, unfinished lines."""
    @tf.function
    def f(a, b):
        return tf.matmul(a, b) + 1.0

    mine = {1: bytearray(), 2: bytearray()}
    def noise():
        if rng is None:
            return
        for fd in (1, 2):
            data = rng.choice([rng.randbytes(rng.randrange(60)), b"step=42", b"\x00\x00", b"a: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0", b""])
            os.write(fd, data)
            mine[fd] += data
    def block():
        with placement_cli.capture() as report:
            noise()
            x = tf.ones([2, 2])
            noise()
            f(x, x)
            noise()
            tf.add(x, x)
            if big:
                data = rng.randbytes(big)
                os.write(1, data)
                mine[1] += data
            noise()
        return report
    report, got = own_fds(block)
    return report, got, {fd: bytes(d) for fd, d in mine.items()}

with placement_cli.capture():  # before TensorFlow's first op
    trial()
clean, _, _ = trial()
results = []
for seed in range(8):
    report, got, mine = trial(random.Random(seed), big=(30 << 20) if seed == 0 else 0)
    results.append({"same_rows": rows(report) == rows(clean), "count": [len(report.placements), len(clean.placements)],
                    "out_exact": got[1] == mine[1], "err_exact": got[2] == mine[2], "complete": report.complete,
                    "bad_out": repr(got[1][:300]) if got[1] != mine[1] and seed else "",
                    "bad_err": repr(got[2][:300]) if got[2] != mine[2] else ""})
print("NOISE", json.dumps(results), flush=True)

# the brief's case, word for word: an unfinished line, a first tf.function call, the line's end
def step():
    @tf.function
    def g(a):
        return a * 2.0
    with placement_cli.capture() as report:
        os.write(1, b"step=42")
        g(tf.ones([2]))
        os.write(1, b"\ndone\n")
    return report
stepped, got = own_fds(step)
print("STEP", json.dumps({"out": got[1].decode("latin-1"), "nodes": [p.node for p in stepped.placements],
                          "args": sum(1 for p in stepped.placements if p.op == "_Arg")}), flush=True)
print("STATE0", json.dumps([state() == BEFORE]), flush=True)

def check(tag, body):
    """Run ``body`` with fds of this script's own; whether fds 1/2 and sys.stdout/err are back after it."""
    def run():
        before = state()
        try:
            outcome = body()
        except BaseException as error:  # noqa: BLE001 - what escaped is the outcome
            outcome = type(error).__name__
        return outcome, state() == before
    (outcome, restored), got = own_fds(run)
    print(tag, json.dumps({"outcome": outcome, "restored": restored, "out": got[1].decode("latin-1")}), flush=True)

def eager(report):
    return sorted({p.op for p in report.placements if p.kind == "eager"})

def reenter():
    cap = placement_cli.capture()
    with cap as q1:
        with cap as q2:
            tf.square(3.0)
        tf.negative(1.0)
    return {"same": q1 is q2, "outer": eager(q1), "inner": eager(q2), "complete": [q1.complete, q2.complete]}

def reuse():
    cap = placement_cli.capture()
    with cap as r1:
        tf.subtract(1.0, 2.0)
    with cap as r2:
        tf.multiply(1.0, 2.0)
    return {"same": r1 is r2, "first": eager(r1), "second": eager(r2)}

def raises():
    with placement_cli.capture():
        os.write(1, b"before the error\n")
        raise ValueError("mine")

def nested_raises():
    with placement_cli.capture():
        with placement_cli.capture():
            os.write(1, b"inner\n")
            raise KeyError("mine")

def out_of_order():
    def suspended():
        with placement_cli.capture() as outer:
            yield outer
    g = suspended()
    next(g)
    inner = placement_cli.capture()
    report = inner.__enter__()
    os.write(1, b"while both ran\n")
    g.close()  # the outer block ends while the inner one runs
    tf.abs(-2.0)
    os.write(1, b"inner only\n")
    inner.__exit__(None, None, None)
    return eager(report)

def interrupted_while_restoring():
    real, armed = fdcapture._flush_all, []
    def flush():
        if armed == [1]:
            armed.append(2)
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C just as the fds are being put back
        real()
    fdcapture._flush_all = flush
    try:
        with placement_cli.capture():
            os.write(1, b"kept\n")
            tf.abs(-3.0)
            armed.append(1)
    finally:
        fdcapture._flush_all = real

def interrupted_while_parsing():
    import placement_cli.logparse as logparse
    real = logparse.parse_text
    def interrupt(text):
        raise KeyboardInterrupt
    logparse.parse_text = interrupt
    try:
        with placement_cli.capture():
            os.write(1, b"kept\n")
    finally:
        logparse.parse_text = real

def enter_fails():
    from placement_cli.runtime.trace.recording import Recorder
    real = Recorder.install
    def broken(self):
        raise RuntimeError("cannot patch")
    Recorder.install = broken
    try:
        with placement_cli.capture():
            os.write(1, b"never\n")
    finally:
        Recorder.install = real

def exit_first():
    return placement_cli.capture().__exit__(None, None, None)

for tag, body in [("REENTER", reenter), ("REUSE", reuse), ("RAISES", raises), ("NESTEDRAISES", nested_raises),
                  ("OUTOFORDER", out_of_order), ("SIGINT", interrupted_while_restoring),
                  ("INTERRUPTED", interrupted_while_parsing), ("ENTERFAILS", enter_fails), ("EXITFIRST", exit_first)]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(tag, body)
print("STATE", json.dumps([state() == BEFORE]), flush=True)
'''

KERNEL_CELLS = [SETUP, CAPTURE, CAPTURE, "report", NESTED, AFTER]

RUN_NOTEBOOK = """
import json, sys
import nbformat
from nbclient import NotebookClient

cells, extra, target = json.load(open(sys.argv[1])), json.loads(sys.argv[2]), sys.argv[3]
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
NotebookClient(nb, timeout=600, kernel_name="python3", extra_arguments=extra).execute()
with open(target, "w") as out:
    json.dump([cell.outputs for cell in nb.cells], out)
"""

# the test extras a kernel run needs (CI installs them; a machine given only TensorFlow and pytest skips these)
JUPYTER_MISSING = [name for name in ("ipykernel", "nbclient", "nbformat") if importlib.util.find_spec(name) is None]

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
        self.stdout, self.stderr = self.proc.communicate(timeout=patience(600))
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


class _Runs(dict[str, "Run"]):
    def __missing__(self, name: str) -> Run:
        if name.startswith("kernel") and JUPYTER_MISSING:  # not started
            pytest.skip(f"a Jupyter kernel needs the test extras: {', '.join(JUPYTER_MISSING)} not installed")
        raise KeyError(name)


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
            "hostile": Run([*python, HOSTILE]),
        }
        kernels = {} if JUPYTER_MISSING else {
            "kernel": Run([*python, RUN_NOTEBOOK, cells, "[]", os.path.join(tmp, "forwarded.json")],
                          outputs=os.path.join(tmp, "forwarded.json")),
            # older kernels and hosted notebooks: C++ output never reaches a cell (often with TF quietened)
            "kernel_no_fd": Run([*python, RUN_NOTEBOOK, cells, '["--IPKernelApp.capture_fd_output=False"]',
                                 os.path.join(tmp, "dropped.json")],
                                env={"TF_CPP_MIN_LOG_LEVEL": "1"}, outputs=os.path.join(tmp, "dropped.json")),
        }
        started.update(kernels)
        try:
            yield _Runs({name: run.finish() for name, run in started.items()})
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
        assert report_row(report, "pinned")[:3] == ["placer", "MatMul", "pinned"]
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
                             "summary", "xla_compiled"]


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
    # capture() takes its own op callback away as it ends: no note blames the program for it
    assert not any("removed placement's op callback" in note for note in after["notes"]), after["notes"]
    assert "after_session" not in stream_text(cells[5])  # a later Session no longer logs
    # TensorFlow keeps logging eager ops and new functions: none of it reaches a later cell
    text = stream_text(cells[5])
    assert "user print after" in text
    assert not [line for line in untagged(text) if any(mark in line for mark in PLACEMENT_MARKS)], text


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
    assert len(refused) == 1 and refused[0][1] and refused[0][1].upper().endswith("GPU:99")


def test_capture_changes_no_setting_of_tensorflow_s_and_puts_back_what_it_patched(script: dict[str, list[Any]]) -> None:
    """set_log_device_placement on a started context puts soft placement back to its default in
    TensorFlow: a pin the program expects to fail must still fail inside a late capture() and after it."""
    strict = script["STRICT"][0]
    assert strict["inside"] == ["raised", "raised"] and strict["pin after"] == "raised"
    assert strict["before"]["soft"] is False
    assert strict["after"] == [strict["before"], strict["before"]]


def test_a_program_that_switches_placement_logging_off_in_the_block_is_logged_whole_and_told(
        script: dict[str, list[Any]]) -> None:
    switched = script["SWITCHED"][0]
    assert switched["read_back"] is False and switched["after"] is False
    assert "Sub" in switched["eager"] and switched["complete"]
    assert any("switched placement logging off" in note for note in switched["notes"])


def test_captures_in_threads_at_once_each_say_they_cannot_tell_their_ops_apart(script: dict[str, list[Any]]) -> None:
    threads = script["THREADS"][0]
    assert threads["restored"]  # whatever order the blocks ended in
    for report in threads["reports"]:
        assert not report["complete"]
        assert any("another thread" in problem for problem in report["problems"])


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
    # a copy after the program's unfinished line has no twin to say where it starts: the program's own
    # graph's node names do, so its line stays whole and the node counts
    stepped = tagged(run.text)["STEPPED"][0]
    assert b"step=42\ndone\n" in run.stdout
    assert "v" in stepped["nodes"] and not any("unfinished line" in p for p in stepped["problems"])
    # the program changing the level inside a block changes nothing in TensorFlow, nor in the report
    flipped = tagged(run.text)["FLIPPED"][0]
    assert "w" in flipped["nodes"] and any("TF_CPP_MIN_LOG_LEVEL=1" in p for p in flipped["problems"])


@pytest.fixture(scope="module")
def hostile(runs: dict[str, Run]) -> dict[str, list[Any]]:
    run = runs["hostile"]
    assert run.proc.returncode == 0, run.stderr.decode("utf-8", "replace")[-4000:]
    return tagged(run.text)


def test_random_program_bytes_come_back_exactly_and_change_no_placement(hostile: dict[str, list[Any]]) -> None:
    """Random bytes (NULs, unfinished lines, 30 MB in one case, placement lookalikes) on fds 1 and 2
    around TensorFlow's lines: each fd gives back exactly what the program wrote, and the report
    equals the one of the same code run without them."""
    trials = hostile["NOISE"][0]
    assert len(trials) == 8
    for trial in trials:
        assert trial["out_exact"] and trial["err_exact"], (trial["bad_out"], trial["bad_err"])
        assert trial["same_rows"] and trial["count"][0] == trial["count"][1] and trial["complete"]


def test_an_unfinished_line_before_tensorflow_s_line_stays_the_program_s_and_is_no_node(
        hostile: dict[str, list[Any]]) -> None:
    step = hostile["STEP"][0]
    assert step["out"] == "step=42\ndone\n"
    assert "a" in step["nodes"] and not any(node and "step" in node for node in step["nodes"])
    assert step["args"] == 1  # the function's one argument, counted once


def test_one_capture_object_entered_again_or_reused_gives_each_block_its_own_report(
        hostile: dict[str, list[Any]]) -> None:
    reentered = hostile["REENTER"][0]["outcome"]
    assert not reentered["same"] and reentered["complete"] == [True, True]
    assert "Square" in reentered["inner"] and "Neg" not in reentered["inner"]
    assert {"Square", "Neg"} <= set(reentered["outer"])  # the outer block holds the inner one's too
    reused = hostile["REUSE"][0]["outcome"]
    assert not reused["same"] and "Sub" in reused["first"] and "Mul" in reused["second"]
    assert "Mul" not in reused["first"] and "Sub" not in reused["second"]


def test_after_every_kind_of_block_the_fds_and_streams_are_back(hostile: dict[str, list[Any]]) -> None:
    """os.readlink of fds 1/2 and the sys.stdout/sys.stderr objects are what they were, and no capture
    is left running: after normal, nested, re-entered, reused and failing blocks, blocks ending out
    of order, Ctrl-C while the fds are put back or while the report is parsed, a failed entry."""
    expected = {"REENTER": None, "REUSE": None, "RAISES": "ValueError", "NESTEDRAISES": "KeyError",
                "OUTOFORDER": None, "SIGINT": "KeyboardInterrupt", "INTERRUPTED": "KeyboardInterrupt",
                "ENTERFAILS": "RuntimeError", "EXITFIRST": "RuntimeError"}
    for tag, raised in expected.items():
        case = hostile[tag][0]
        assert case["restored"], tag
        if raised is not None:
            assert case["outcome"] == raised, tag
    # the program's bytes reach the fd however the block ended
    assert hostile["RAISES"][0]["out"] == "before the error\n" and hostile["NESTEDRAISES"][0]["out"] == "inner\n"
    assert hostile["SIGINT"][0]["out"] == "kept\n" and hostile["INTERRUPTED"][0]["out"] == "kept\n"
    assert hostile["OUTOFORDER"][0]["out"] == "while both ran\ninner only\n"
    assert "Abs" in hostile["OUTOFORDER"][0]["outcome"]
    assert hostile["STATE0"] == [[True]] and hostile["STATE"] == [[True]]
