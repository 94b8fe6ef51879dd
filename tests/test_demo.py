"""`placement demo`: the steps as data, the code shown is the code that ran, one TensorFlow start-up
per run, --step, --pause (piped stdin and a pty), Ctrl-C, a failing step, JSON the same in every language."""

from __future__ import annotations

import ast
import inspect
import io
import json
import os
import pty
import re
import select as selecting
import signal
import subprocess
import xml.etree.ElementTree as ET
import sys
import time
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from conftest import is_matmul, run_cli
from placement_cli.cli import app
from placement_cli.lessons import demo
from placement_cli.i18n import Message
from placement_cli.lessons.demo import STEPS, Machine, Step, run_step, select
from placement_cli.model import DemoOutcome, Inventory, PhysicalDevice
from reports import as_run
from processes import patience

KEYS = ["devices", "logging", "manual", "missing", "soft", "kernel", "towers", "copies", "cost", "train", "mirrored",
        "cluster"]
IN_PROCESS = len(KEYS) - 1  # the steps that run in the demo's own TensorFlow (the cluster runs in processes of its own)


def test_the_steps_follow_the_guide_in_order() -> None:
    assert [s.key for s in STEPS] == KEYS


def test_list_shows_every_step_without_tensorflow() -> None:
    result = CliRunner().invoke(app, ["demo", "--list", "--json"])
    assert result.exit_code == 0
    assert [s["key"] for s in json.loads(result.stdout)["steps"]] == KEYS
    table = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["demo", "--list", "--lang", "zh"])
    assert "软放置" in table.stdout and "演示的步骤" in table.stdout


@pytest.mark.parametrize(("spec", "steps"), [("3", [3]), ("3-5", [3, 4, 5]), ("2,4", [2, 4]),
                                              (" 1-2 , 2 ", [1, 2]), (None, list(range(1, len(KEYS) + 1)))])
def test_step_selection(spec, steps) -> None:
    assert select(spec) == steps


@pytest.mark.parametrize("spec", ["0", str(len(KEYS) + 1), "5-3", "x", "1-", "", "2,,3", "²", "١", "1-²", "３"])
def test_a_bad_step_is_a_usage_error(spec) -> None:
    result = CliRunner().invoke(app, ["demo", "--step", spec])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and "invalid literal" not in result.output
    assert "is not a step" in result.output or "out of range" in result.output or "runs backwards" in result.output
    assert ("runs backwards: give the lower step first (3-5)" in result.output) == (spec == "5-3")


def test_list_with_step_is_refused() -> None:
    result = CliRunner().invoke(app, ["demo", "--list", "--step", "3"])
    assert result.exit_code == 2
    assert "--list" in result.output and "--step" in result.output


@pytest.mark.parametrize("step", STEPS, ids=KEYS)
def test_the_shown_code_is_the_source_of_the_functions_the_step_runs(step: Step) -> None:
    shown = step.source()
    for function in step.functions():
        source = inspect.getsource(inspect.unwrap(function))
        assert source.rstrip() in shown
        ast.parse(source)  # real Python, not a description of it


def _fake(run) -> Step:
    return Step("fake", "Fake", "A step for tests", ((demo.GUIDE, "matmul_graph"),), run)


def test_a_step_whose_shown_code_did_not_run_fails() -> None:
    outcome = run_step(_fake(lambda machine: DemoOutcome(notice=Message("x"))), Machine(0))
    assert not outcome.ok and "did not run: matmul_graph" in outcome.problem


def test_a_step_records_the_shown_code_it_ran_and_restores_it() -> None:
    from placement_cli.lessons import guide

    original = guide.matmul_graph

    def run(machine):
        try:
            guide.matmul_graph(None, None, None)  # the recorder sees the call before the lesson fails
        except AttributeError:
            pass
        return DemoOutcome(notice=Message("x"))

    outcome = run_step(_fake(run), Machine(0))
    assert outcome.ok and outcome.ran == ("matmul_graph",)
    assert guide.matmul_graph is original


def test_a_step_that_breaks_is_named_and_the_demo_exits_1(monkeypatch) -> None:
    def broken(machine):
        raise RuntimeError("lesson broke")

    monkeypatch.setattr(demo, "STEPS", [_fake(broken), STEPS[0]])
    monkeypatch.setattr(demo, "start", lambda chosen: Machine(0))
    monkeypatch.setattr(demo, "select", lambda spec: [1])
    result = CliRunner().invoke(app, ["demo", "--no-pause"])
    assert result.exit_code == 1
    assert "step 1 (fake): RuntimeError: lesson broke" in result.stderr
    assert "This step failed" in result.stdout


@pytest.mark.parametrize("gpus", [0, 1])
def test_the_opening_note_names_every_stand_in_a_step_uses(gpus) -> None:
    """What the note says stands in for GPUs is true of every step: the towers' and the replicas' devices
    (one GPU: the two logical GPUs carved from it)."""
    machine = Machine(gpus)
    note = demo.gpu_note(machine)
    used = {d for step in STEPS for value in step.args(machine).values()
            for d in (value if isinstance(value, list | tuple) else [value]) if isinstance(d, str) and d.startswith("/")}
    assert set(machine.towers) | set(machine.replicas) <= used
    for device in set(machine.towers) | set(machine.replicas):
        assert device in note, (device, note)
    assert ("/cpu:0, /cpu:1" if gpus == 0 else "two logical GPUs (/gpu:0, /gpu:1)") in note


def test_the_kernel_step_names_its_stand_in_or_says_why_it_cannot_run() -> None:
    """A GPU where there is one, else TensorFlow's XLA_CPU device; neither: the step is not run here, and
    says so without failing (its code did not run: nothing is faked)."""
    step = next(s for s in STEPS if s.key == "kernel")
    assert step.args(Machine(1, xla=True))["device"] == "/gpu:0"
    assert step.args(Machine(0, xla=True))["device"] == "/device:XLA_CPU:0"
    assert "XLA_CPU" in demo.gpu_note(Machine(0, xla=True)) and "XLA_CPU" not in demo.gpu_note(Machine(0))
    outcome = run_step(step, Machine(0, xla=False))
    assert outcome.ok and outcome.skipped and outcome.result is None and outcome.ran == ()
    assert "no XLA devices" in str(outcome.notice)


def test_the_demo_shows_no_hint_of_another_commands_options() -> None:
    from placement_cli.render.demo import step_result
    from placement_cli.render.table import View

    found = Inventory(physical=(PhysicalDevice("/physical_device:CPU:0", "CPU"),), logical=())
    console = Console(file=io.StringIO(), width=200)
    console.print(step_result(found, View()))
    assert "--cpus" not in console.file.getvalue() and "--soft" not in console.file.getvalue()


@pytest.mark.parametrize(("gpus", "towers", "virtual"), [(0, ["/cpu:1", "/cpu:2"], None), (1, ["/gpu:0", "/gpu:1"], 2),
                                                         (4, ["/gpu:0", "/gpu:1"], None)])
def test_gpu_steps_use_gpus_where_they_exist(gpus, towers, virtual) -> None:
    """One GPU: two logical GPUs carved from it (the lesson is about GPUs), asked for in every step's run."""
    machine = Machine(gpus)
    assert machine.towers == towers and machine.virtual_gpus == virtual
    assert machine.missing == f"/gpu:{max(gpus, 2)}"  # /gpu:2 with two logical GPUs too
    assert (demo.gpu_note(machine) is None) == (gpus >= 2)
    assert machine.replicas == (["/cpu:0", "/cpu:1"] if gpus == 0 else ["/gpu:0", "/gpu:1"])
    assert machine.options(soft=True) == demo.RunOptions(cpus=demo.CPUS, virtual_gpus=virtual, soft=True)


@pytest.mark.parametrize(("physical", "keys", "gpus", "xla"), [
    (("CPU",), KEYS, 0, True),  # no GPU: XLA_CPU stands in for the kernel step
    (("CPU",), ["devices", "towers"], 0, False),  # no kernel step, no XLA devices
    (("CPU", "GPU"), KEYS, 1, False),  # a GPU: the kernel step uses it, no XLA_CPU/XLA_GPU in any step
    (("CPU", "GPU", "GPU"), ["kernel"], 2, False),
])
def test_the_demo_chooses_its_devices_from_those_found(physical, keys, gpus, xla) -> None:
    machine = demo.choose(physical, keys)
    assert (machine.gpus, machine.xla) == (gpus, xla)
    kernel = next(s for s in STEPS if s.key == "kernel")
    assert kernel.args(machine)["device"] == ("/gpu:0" if gpus else "/device:XLA_CPU:0" if xla else None)


@pytest.mark.parametrize(("physical", "virtual", "xla"), [(("CPU", "GPU"), 2, False), (("CPU",), None, True)])
def test_the_demo_starts_tensorflow_with_the_devices_it_chose(monkeypatch, physical, virtual, xla) -> None:
    """Counted first, then started once: one GPU split in two and no XLA devices; no GPU: XLA devices."""
    from placement_cli.runtime import startup

    class Config:
        @staticmethod
        def list_physical_devices(kind=None):
            return [type("D", (), {"name": f"/physical_device:{t}:0", "device_type": t}) for t in physical
                    if kind in (None, t)] + ([type("D", (), {"name": "/physical_device:XLA_CPU:0",
                                                             "device_type": "XLA_CPU"})] if xla and kind is None else [])

    started: list[startup.RunOptions] = []
    monkeypatch.setattr(startup, "physical_devices", lambda: physical)
    monkeypatch.setattr(startup, "tensorflow", lambda options: started.append(options) or type("TF", (), {"config": Config}))
    machine = demo.start(list(range(1, len(KEYS) + 1)))
    assert started == [startup.RunOptions(cpus=demo.CPUS, virtual_gpus=virtual, xla=xla)]
    assert machine.xla == xla and machine.virtual_gpus == virtual


# --- real runs: TensorFlow once per run, every step in it ---

@pytest.fixture(scope="module")
def json_runs() -> dict[str, subprocess.CompletedProcess[str]]:
    # Chinese: the steps whose JSON is the same in every run (a cluster's pids, ports and async losses are not)
    return {"en": run_cli("demo", "--json", "--lang", "en", timeout=400),
            "zh": run_cli("demo", "--json", "--lang", "zh", "--step", f"1-{IN_PROCESS}")}


@pytest.mark.tf
def test_every_step_runs_and_teaches(json_runs) -> None:
    run = json_runs["en"]
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout)
    assert [s["key"] for s in found["steps"]] == KEYS
    by_key = {s["key"]: s for s in found["steps"]}
    for step, data in zip(STEPS, found["steps"]):
        assert data["ok"], data["problem"]
        assert data["code"] == step.source()  # what was shown ...
        assert data["code_ran"] == [name for _, name in step.code]  # ... is what ran
        assert data["notice"]
    missing = by_key["missing"]["result"]
    assert missing["errors"] and missing["errors"][0]["kind"] == "device_not_found"  # the real error
    assert "does not exist" in by_key["soft"]["notice"]
    # a missing kernel, for real: on a GPU where there is one, else on TensorFlow's XLA_CPU device
    kernel = by_key["kernel"]
    stand_in = "GPU:0" if found["gpus"] else "XLA_CPU:0"
    # the step's device as the code spells it (/gpu:0 on a GPU machine, /device:XLA_CPU:0 here)
    assert kernel["args"]["device"].upper().endswith(stand_in) and kernel["result"]["result"] == ["0", "1", "2"]
    fallen = [p for p in kernel["result"]["placements"] if p["status"] == "soft fallback" and p["op"] == "AsString"]
    assert len(fallen) == 1 and fallen[0]["requested"].upper().endswith(stand_in)
    assert fallen[0]["reason"] == f"no {stand_in.split(':')[0]} kernel registered for AsString"
    assert fallen[0]["reason"] in kernel["notice"] and f"asked for {stand_in}" in kernel["notice"]
    if found["gpus"] == 0:
        assert "logical CPUs" in found["note"] and "XLA_CPU" in found["note"]
        assert "XLA_CPU:0" in by_key["devices"]["notice"]
        assert by_key["towers"]["args"]["devices"] == ["/cpu:1", "/cpu:2"]
        assert "CPU:1" in by_key["towers"]["notice"] and "GPU:0" not in by_key["towers"]["notice"]
    else:
        assert by_key["towers"]["args"]["devices"][0] == "/gpu:0" and "GPU:0" in by_key["towers"]["notice"]
    # tensorflow#2441: one device ran every tower's gradients, and the copies shrank once they were colocated
    cost = by_key["cost"]
    assert cost["result"]["cost"]["steps"] == 5 and cost["args"]["colocate"] is False
    moved = [int(n.replace(",", "")) for n in re.findall(r"([\d,]+) B", cost["notice"])]
    assert len(moved) == 2 and moved[0] > 2 * moved[1], cost["notice"]
    grads = {p["device"] for p in cost["result"]["placements"] if (p["node"] or "").startswith("gradients/")
             and is_matmul(p["op"])}
    assert len(grads) == 1
    cluster = by_key["cluster"]["result"]  # a real cluster: every task a process, ended when the step was done
    assert [(t["job"], t["task"]) for t in cluster["tasks"]] == [("ps", 0), ("worker", 0), ("worker", 1)]
    assert all(t["pid"] and t["exit_code"] is not None for t in cluster["tasks"])
    assert set(cluster["variables"].values()) == {"/job:ps/task:0/device:CPU:0"}  # the ps kept off any GPU
    assert cluster["gpu_memory"]["policy"] == "growth" and cluster["gpu_memory"]["ps_on_gpu"] is False
    assert [w["steps"] for w in cluster["workers"]] == [3, 3]
    assert "/job:ps/task:0" in by_key["cluster"]["notice"]
    assert "worker/0 ready on" in run.stderr  # a line per task while the cluster starts


@pytest.mark.tf
def test_json_is_the_same_bytes_in_chinese(json_runs) -> None:
    """Byte for byte, but for what differs between any two runs: the clock and thread ids in
    TensorFlow's log prefixes, and the times the cost step measured."""
    from placement_cli.render.json import dumps

    assert json_runs["zh"].returncode == 0
    english = _untimed(json.loads(json_runs["en"].stdout))
    english["steps"] = english["steps"][:IN_PROCESS]
    chinese = _untimed(json.loads(json_runs["zh"].stdout))
    if english["gpus"]:  # TensorFlow's GPU profiler logs counts of its own that vary from run to run
        assert _logless(chinese) == _logless(english)
        return
    assert _timeless(dumps(chinese)) == _timeless(dumps(english))
    assert not re.search(r"[\u4e00-\u9fff]", json_runs["zh"].stdout)


def _untimed(data: Any) -> Any:
    """The demo's JSON with what a timed run measures taken out: the cost step's times (what it placed
    and copied stays)."""
    for step in data["steps"]:
        if step["key"] == "cost":
            step["notice"] = re.sub(r"[\d.]+ (us|ms|s)\b", "T", step["notice"])
            if step["result"]:
                step["result"]["cost"] = None
    return data


def _logless(data: Any) -> Any:
    """The JSON without TensorFlow's raw log and the line numbers into it."""
    if isinstance(data, dict):
        return {k: _logless(v) for k, v in data.items() if k not in ("log", "line")}
    if isinstance(data, list):
        return [_logless(v) for v in data]
    return data


def _timeless(text: str) -> str:
    return re.sub(r"[IWEF]\d{4} \d\d:\d\d:[\d.]+ +\d+ ", "PREFIX ", text)


@pytest.mark.tf
def test_chinese_tables_for_some_steps_without_pausing_on_a_pipe(tmp_path) -> None:
    slides = tmp_path / "demo.svg"
    run = run_cli("demo", "--step", "4-5", "--lang", "zh", "--svg", str(slides), env={"COLUMNS": "80"}, stdin=b"")
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    drawn = "".join(ET.parse(slides).getroot().itertext()).replace("\xa0", " ")  # the slides: what was printed
    assert f"第 4 步（共 {len(STEPS)} 步）：指定一个不存在的设备" in drawn and "软放置回退" in drawn
    assert f"第 4 步（共 {len(STEPS)} 步）：指定一个不存在的设备" in out and "第 5 步" in out and "第 3 步" not in out
    assert "实际运行的代码" in out and "def matmul_graph" in out and "注意" in out
    assert "放置失败" in out  # the real error, as the lesson
    assert "软放置回退" in out
    assert "按回车" not in out  # stdin is a pipe: no pause by default


@pytest.mark.tf
def test_pause_waits_for_enter_and_eof_ends_the_pauses() -> None:
    run = run_cli("demo", "--step", "1-3", "--pause", stdin=b"\n")  # one Enter, then end of input
    assert run.returncode == 0, run.stderr[-3000:]
    # before step 2 (Enter), before 3 (EOF: go on); stdout is a pipe: the prompt goes to stderr, never the output
    assert run.stderr.count("Press Enter for step") == 2, run.stderr[-3000:]
    assert "Press Enter" not in run.stdout
    assert f"Step 3 of {len(STEPS)}" in run.stdout


@pytest.mark.tf
def test_on_a_terminal_it_pauses_and_ctrl_c_exits_130(tmp_path) -> None:
    master, slave = pty.openpty()
    # faulthandler: should the demo not end (a rare hang seen in CI), SIGABRT makes it print every thread's stack
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100", "PYTHONFAULTHANDLER": "1"}
    slides = tmp_path / "slides.svg"
    proc = subprocess.Popen([sys.executable, "-m", "placement_cli", "demo", "--step", "1-2", "--svg", str(slides)],
                            stdin=slave, stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + patience(120)
    while b"Press Enter for step 2" not in seen and time.monotonic() < deadline:
        ready, _, _ = selecting.select([master], [], [], 1)
        if ready:
            try:
                seen += os.read(master, 65536)
            except OSError:
                break
    assert b"Press Enter for step 2" in seen, seen[-2000:]
    proc.send_signal(signal.SIGINT)
    end = time.monotonic() + patience(60)
    while proc.poll() is None and time.monotonic() < end:  # keep the terminal read: a full one blocks a writer
        if selecting.select([master], [], [], 0.2)[0]:
            try:
                seen += os.read(master, 65536)
            except OSError:
                break
    try:  # the terminal may close (EIO) a moment before the process is gone: wait for it, then judge
        proc.wait(timeout=max(5.0, end - time.monotonic()))
    except subprocess.TimeoutExpired:
        from trace_helpers import _where

        where = _where(proc.pid)
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=patience(60))
        os.close(master)
        raise AssertionError(f"demo did not end 60 s after Ctrl-C\n{where}\n{err.decode(errors='replace')[-6000:]}")
    try:
        _, err = proc.communicate(timeout=patience(60))
    except subprocess.TimeoutExpired:  # gone, but its stderr still held open: by whom
        every = subprocess.run(["ps", "-eo", "pid,ppid,sid,stat,wchan:20,args"], capture_output=True, text=True)
        raise AssertionError(f"demo exited ({proc.returncode}) but its stderr stayed open:\n{every.stdout}") from None
    os.close(master)
    assert proc.returncode == 130, err
    assert b"Traceback" not in err
    import xml.etree.ElementTree as ET

    drawn = "".join(t.text or "" for t in ET.parse(slides).getroot().iter("{http://www.w3.org/2000/svg}text"))
    assert "Step 1 of" in drawn.replace("\xa0", " ")  # Ctrl-C is how a class stops: the slides keep what was shown


@pytest.mark.parametrize("step", STEPS, ids=KEYS)
def test_the_shown_code_takes_the_arguments_it_says_and_shows_its_pinning(step: Step) -> None:
    from placement_cli.render.demo import arguments_line

    for gpus in (0, 2):
        args = step.args(Machine(gpus))
        line = arguments_line(args, step.parameters())
        run_with = next((x for x in line.splitlines() if "run with" in x), "")
        for name in re.findall(r"(\w+)=", run_with):
            assert name in step.parameters(), (step.key, name, line)
        if "config" in args:
            assert "config" not in run_with and "allow_soft_placement=True" in line
    if step.key in ("manual", "missing", "soft", "kernel", "towers", "copies", "train"):
        assert "tf.device(" in step.source(), step.key


def test_a_step_is_a_model_value_and_its_json_comes_from_the_model() -> None:
    from placement_cli.model import DemoRun, DemoStep, Report

    step = DemoStep(2, "k", "T", "E", "code", {"device": None},
                    DemoOutcome(as_run(Report()), Message("seen on {x}", x="/cpu:0"), ran=("f",)))
    data = step.to_dict()
    assert list(data) == ["number", "key", "title", "explanation", "code", "args", "code_ran", "ok", "problem",
                          "notice", "result"]
    assert data["notice"] == "seen on /cpu:0" and data["code_ran"] == ["f"] and step.failure is None
    assert data["result"] == as_run(Report()).to_dict()
    failed = DemoStep(3, "k", "T", "E", "code", {}, DemoOutcome(ok=False, problem="it broke"))
    assert failed.to_dict()["notice"] is None and failed.to_dict()["result"] is None
    assert failed.failure == "step 3 (k): it broke"
    assert DemoRun(0, None, (step,)).to_dict() == {"gpus": 0, "note": None, "steps": [data]}
    with pytest.raises(AttributeError):
        step.outcome.ok = False  # type: ignore[misc]  # frozen


def test_a_step_result_is_shown_by_its_own_renderer(monkeypatch) -> None:
    """The renderer picks by the result's type: a training run's report as train shows it, another report
    as show does, the devices as devices does, a cluster as cluster does."""
    from dataclasses import replace

    from rich.text import Text

    from placement_cli.model import ClusterReport, Report
    from placement_cli.render import cluster, inventory, training
    from placement_cli.render import demo as rendered
    from placement_cli.render.table import View

    monkeypatch.setattr(training, "training_group", lambda report, view: Text("training"))
    monkeypatch.setattr(cluster, "cluster_group", lambda found, view: Text("cluster"))
    monkeypatch.setattr(inventory, "render_inventory", lambda found, hints: Text(f"inventory hints={hints}"))
    monkeypatch.setattr(rendered, "report_group", lambda report, view: Text(f"report run={report.ran}"))
    found = Inventory(physical=(), logical=())
    cases = [(as_run(Report()), "report run=True"), (replace(Report(), training=object()), "training"),
             (found, "inventory hints=False"), (object.__new__(ClusterReport), "cluster"), (None, "")]
    for result, expected in cases:
        assert str(rendered.step_result(result, View())) == expected


_WAIT_WHILE_ANOTHER_THREAD_TAKES_CTRL_C = r"""
import os, signal, sys, threading
from placement_cli.runtime.capture.wakeup import read_line
started = threading.Event()
def press_ctrl_c():
    started.wait()
    os.kill(os.getpid(), signal.SIGINT)  # the only thread that does not block SIGINT receives it
helper = threading.Thread(target=press_ctrl_c, daemon=True)
helper.start()  # before the mask: the helper keeps SIGINT unblocked
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
started.set()
try:
    print("a line" if read_line(sys.stdin) else "end of input", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_a_ctrl_c_the_wait_for_enter_itself_never_sees_still_ends_it() -> None:
    """The pause's wait ends on a Ctrl-C however it arrives: here its read is never interrupted (the
    signal goes to another thread), as when a Ctrl-C lands an instant before the read begins (seen:
    a demo on a terminal that waited for Enter after Ctrl-C). Nothing is ever written to the pipe."""
    read, write = os.pipe()
    try:
        proc = subprocess.Popen([sys.executable, "-c", _WAIT_WHILE_ANOTHER_THREAD_TAKES_CTRL_C], stdin=read,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(read)
        try:
            out, err = proc.communicate(timeout=patience(60))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError("the wait for a line went on after Ctrl-C") from None
    finally:
        os.close(write)
    assert (out, proc.returncode) == ("interrupted\n", 0), err[-2000:]


@pytest.mark.parametrize(("given", "said"), [(b"one\ntwo\n", "line line end"), (b"", "end end end"),
                                             (b"no newline", "end end end")])
def test_each_wait_takes_one_line_and_leaves_the_next(given: bytes, said: str) -> None:
    code = ("import sys\nfrom placement_cli.runtime.capture.wakeup import read_line\n"
            "print(*('line' if read_line(sys.stdin) else 'end' for _ in range(3)))")
    ran = subprocess.run([sys.executable, "-c", code], input=given, capture_output=True, timeout=patience(60),
                         check=False)
    assert ran.stdout.decode().split() == said.split(), ran.stderr[-2000:]
