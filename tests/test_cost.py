"""What a placement costs, from a profile: steps, busy time per device, copies and who caused them, the
pictures (no TensorFlow here: profiles are built by hand as TensorFlow's profiler records them)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console

from placement_cli import costs
from placement_cli.devices import DeviceName
from placement_cli.model import AS_REQUESTED, FREE, SOFT_FALLBACK, Origin, Placement, PlacementKind, Report
from placement_cli.model.cost import COPY, EAGER, FUNCTION, SESSION, Cost, Profile, ProfiledEvent, ProfiledRun, Spread
from placement_cli.messages import duration
from placement_cli.render.cost import cost_renderables
from placement_cli.render.timeline import render_chrome_trace, render_timeline_svg

CPU = "/job:localhost/replica:0/task:0/device:CPU:"


def placed(node: str, op: str, device: int, status=AS_REQUESTED, graph: str | None = "__inference_step_13",
           kind: PlacementKind = PlacementKind.PLACER) -> Placement:
    name = f"{CPU}{device}"
    return Placement(node=node, op=op, device=name, spec=DeviceName(name).spec, kind=kind, line=1,
                     status=status, graph=graph)


def step_profile(calls: int = 5, warmup: int = 2, graph: str = "__inference_step_13") -> Profile:
    """``calls`` calls of a function, 1000 µs apart: MatMul 600 µs on CPU:1 (its name only: the device
    comes from the placements), its 4 MiB result sent to CPU:2 in 10 µs, Sum 100 µs there."""
    runs, events = [], []
    for i in range(calls):
        t = 1000.0 * i
        runs.append(ProfiledRun(FUNCTION, graph, t, 800.0))
        events.append(ProfiledEvent(i, "MatMul", "_MklMatMul", t + 10, 600.0))
        events.append(ProfiledEvent(i, "MatMul/_3", "_Send", t + 612, 10.0, COPY, DeviceName(f"{CPU}1"),
                                    DeviceName(f"{CPU}2"), "MatMul", "Sum", 4 * 1024 * 1024))
        events.append(ProfiledEvent(i, "Sum", "Sum", t + 630, 100.0))
    return Profile(tuple(runs), tuple(events), warmup=warmup)


PLACEMENTS = (placed("MatMul", "MatMul", 1), placed("Sum", "Sum", 2), placed("x", "_Arg", 0, FREE))


def test_steps_are_the_calls_of_the_most_called_function_after_the_warmup() -> None:
    cost = costs.build(step_profile(calls=6, warmup=2), PLACEMENTS)
    assert cost.step == "step"  # the function, its trace counter dropped
    assert cost.steps == 3  # calls 2..5: the last only closes the step before it
    assert cost.wall.mean == pytest.approx(1000.0)
    busy = {d.device.short: d.busy.mean for d in cost.devices}
    assert busy == {"CPU:1": pytest.approx(600.0), "CPU:2": pytest.approx(100.0)}
    matmul = next(o for o in cost.ops if o.node == "MatMul")
    assert matmul.op == "MatMul" and matmul.device.short == "CPU:1" and matmul.status == AS_REQUESTED
    assert cost.ops[0].node == "MatMul"  # most time first


def test_a_copy_has_its_bytes_time_and_the_placement_that_caused_it() -> None:
    cost = costs.build(step_profile(), PLACEMENTS)
    [copy] = cost.copies
    assert (copy.producer, copy.consumer, copy.step_bytes) == ("MatMul", "Sum", 4_194_304)
    assert copy.time.mean == pytest.approx(10.0) and copy.physical is False
    [link] = cost.links
    assert link.bytes == 4_194_304 and link.copies == 1
    sum_row = next(c for c in cost.costly if c.node == "Sum")  # both ends pinned: the reader asked for it there
    assert sum_row.copy_bytes == 4_194_304 and sum_row.copies == 1 and sum_row.status == AS_REQUESTED


def test_blame_goes_to_the_reader_or_to_the_end_a_rule_moved() -> None:
    pinned, free = placed("a", "MatMul", 1), placed("b", "Sum", 2, FREE)
    assert costs.blame(pinned, free) is free  # TensorFlow put the reader away from its input (#2441's gradients)
    assert costs.blame(free, pinned) is pinned  # the reader's pin
    assert costs.blame(pinned, placed("c", "Sum", 2)).node == "c"  # both asked: the reader
    fallen = placed("d", "MatMul", 0, SOFT_FALLBACK)
    assert costs.blame(fallen, free) is fallen  # the input a fallback moved
    assert costs.blame(None, free) is free and costs.blame(pinned, None) is pinned


def test_busy_time_counts_overlapping_kernels_once() -> None:
    runs = (ProfiledRun(SESSION, None, 0.0, 100.0), ProfiledRun(SESSION, None, 100.0, 100.0))
    events = tuple(ProfiledEvent(i, name, "MatMul", 100.0 * i + start, 50.0)
                   for i in range(2) for name, start in (("a", 0.0), ("b", 25.0)))
    cost = costs.build(Profile(runs, events, warmup=0, marked=((0.0, 100.0), (100.0, 100.0))),
                       (placed("a", "MatMul", 1, graph=None), placed("b", "MatMul", 1, graph=None)))
    [device] = cost.devices
    assert device.busy.mean == pytest.approx(75.0) and device.share == pytest.approx(0.75)
    assert cost.step is None and cost.steps == 2  # a lesson's marked steps


def test_two_functions_with_the_same_node_names_keep_their_own_devices() -> None:
    runs = (ProfiledRun(FUNCTION, "__inference_f_3", 0.0, 50.0), ProfiledRun(FUNCTION, "__inference_g_9", 60.0, 30.0))
    events = (ProfiledEvent(0, "MatMul", "MatMul", 5.0, 40.0), ProfiledEvent(1, "MatMul", "MatMul", 65.0, 20.0))
    placements = (placed("MatMul", "MatMul", 1, graph="__inference_f_3"),
                  placed("MatMul", "MatMul", 2, graph="__inference_g_9"))
    cost = costs.build(Profile(runs, events, marked=((0.0, 100.0),)), placements)
    by_graph = {o.graph: o.device.short for o in cost.ops}
    assert by_graph == {"__inference_f_3": "CPU:1", "__inference_g_9": "CPU:2"}


def test_an_eager_op_takes_the_device_its_inputs_were_copied_to() -> None:
    runs = (ProfiledRun(EAGER, "MatMul", 0.0, 30.0),)
    events = (ProfiledEvent(0, "MatMul", "_Send", 1.0, 1.0, COPY, DeviceName(f"{CPU}0"), DeviceName(f"{CPU}1"),
                            None, "MatMul"),)
    eager = (placed("a", "MatMul", 1, graph=None, kind=PlacementKind.EAGER),
             placed("b", "MatMul", 2, graph=None, kind=PlacementKind.EAGER))  # two devices: the type alone says none
    cost = costs.build(Profile(runs, events, marked=((0.0, 40.0),)), eager)
    [op] = cost.ops
    assert op.device.short == "CPU:1" and op.time.mean == pytest.approx(30.0)


@pytest.mark.parametrize(("calls", "warmup", "steps"), [(6, 2, 3), (3, 2, 1), (2, 2, 0), (6, 10, 0), (6, 0, 5)])
def test_the_warmup_leaves_out_calls_and_never_invents_a_step(calls: int, warmup: int, steps: int) -> None:
    cost = costs.build(step_profile(calls=calls, warmup=warmup), PLACEMENTS)
    assert cost.steps == steps and cost.calls == calls
    if steps == 1:  # one call left: measured alone, its own duration
        assert cost.wall.mean == pytest.approx(800.0)
    if steps == 0:
        console = Console(width=200, record=True)
        for part in cost_renderables(cost):
            console.print(part)
        assert f"step ran {calls} times and the warm-up leaves out the first {warmup}" in console.export_text()


def test_no_step_measured_is_said_not_invented() -> None:
    cost = costs.build(Profile((), ()), PLACEMENTS)
    assert cost.steps == 0 and not cost.ops
    console = Console(width=100, record=True)
    for part in cost_renderables(cost):
        console.print(part)
    assert "No step was measured" in console.export_text()


def test_the_cost_round_trips_through_json_in_a_report() -> None:
    cost = costs.build(step_profile(), PLACEMENTS)
    report = Report(placements=PLACEMENTS, origin=Origin.RUN, cost=cost, result=1.0)
    again = Report.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again.cost is not None
    assert again.cost.to_dict() == cost.to_dict()
    assert Cost.from_dict(cost.to_dict()).to_dict() == cost.to_dict()
    profile = step_profile()
    assert Profile.from_dict(json.loads(json.dumps(profile.to_dict()))) == profile


def test_spread_and_durations_read_as_people_read_them() -> None:
    assert Spread.of([1.0, 3.0]) == Spread(2.0, 1.0, 3.0, 1.0)
    assert Spread.of([]).mean == 0.0
    assert [duration(v) for v in (0.5, 812.0, 5310.0, 1_200_000.0)] == ["0.5 us", "812 us", "5.31 ms", "1.2 s"]
    assert duration(float("nan")) == "?"


def test_the_tables_name_the_costly_placement_and_why() -> None:
    cost = costs.build(step_profile(), PLACEMENTS)
    console = Console(width=160, record=True)
    for part in cost_renderables(cost):
        console.print(part)
    text = console.export_text()
    assert "one call of step" in text and "4,194,304 B" in text and "Costly placements" in text
    assert "as requested" in text


def test_the_timeline_is_svg_with_a_lane_per_device_and_the_copy_as_an_arrow() -> None:
    report = Report(placements=PLACEMENTS, origin=Origin.RUN, cost=costs.build(step_profile(), PLACEMENTS),
                    title="a <b>title</b> & [red]markup[/red]")
    root = ET.fromstring(render_timeline_svg(report))  # well-formed, the title's markup escaped
    ns = {"s": "http://www.w3.org/2000/svg"}
    lanes = {g.get("data-device") for g in root.iterfind(".//s:g[@class='lane']", ns)}
    assert lanes == {f"{CPU}1", f"{CPU}2"}  # the _Arg on CPU:0 is plumbing: no lane of its own
    [copy] = root.findall(".//s:g[@class='copy']", ns)
    assert (copy.get("data-from"), copy.get("data-to")) == (f"{CPU}1", f"{CPU}2")
    ops = {g.get("data-node"): g.get("data-device") for g in root.iterfind(".//s:g[@class='op']", ns)}
    assert ops == {"MatMul": f"{CPU}1", "Sum": f"{CPU}2"}


def test_the_chrome_trace_carries_each_ops_placement_and_the_copy_as_a_flow() -> None:
    report = Report(placements=PLACEMENTS, origin=Origin.RUN, cost=costs.build(step_profile(), PLACEMENTS))
    trace = json.loads(render_chrome_trace(report))
    events = trace["traceEvents"]
    lanes = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    matmul = next(e for e in events if e["ph"] == "X" and e["name"] == "MatMul")
    assert lanes[matmul["tid"]] == "CPU:1" and matmul["args"]["status"] == "as requested"
    assert matmul["dur"] == pytest.approx(600.0)
    start = next(e for e in events if e["ph"] == "s")
    end = next(e for e in events if e["ph"] == "f" and e["id"] == start["id"])
    assert (lanes[start["tid"]], lanes[end["tid"]]) == ("CPU:1", "CPU:2")


def _saved(tmp_path, name: str, profile: Profile) -> str:
    report = Report(placements=PLACEMENTS, origin=Origin.RUN, cost=costs.build(profile, PLACEMENTS), result=1.0)
    path = tmp_path / name
    path.write_text(json.dumps(report.to_dict()))
    return str(path)


def _slower(profile: Profile, factor: float) -> Profile:
    """The same profile with its MatMul kernels ``factor`` times as long."""
    events = tuple(replace(e, duration=e.duration * factor) if e.node == "MatMul" else e for e in profile.events)
    return replace(profile, events=events)


def test_diff_of_two_timed_reports_compares_each_device_and_link(tmp_path) -> None:
    from typer.testing import CliRunner

    from placement_cli.cli import app

    old = _saved(tmp_path, "old.json", step_profile())
    new = _saved(tmp_path, "new.json", _slower(step_profile(), 1.5))
    runner = CliRunner(env={"COLUMNS": "120", "NO_COLOR": "1"})
    shown = runner.invoke(app, ["diff", old, new])
    assert shown.exit_code == 0, shown.output
    assert "Time per step" in shown.stdout and "CPU:1 busy" in shown.stdout and "+50%" in shown.stdout
    assert "copies CPU:1 -> CPU:2" in shown.stdout and "4,194,304 B" in shown.stdout
    data = json.loads(runner.invoke(app, ["diff", "--json", old, new]).stdout)
    times = data["summary"]["time"]
    assert times["new"]["busy_us"][f"{CPU}1"] == pytest.approx(1.5 * times["old"]["busy_us"][f"{CPU}1"])
    assert times["old"]["links"][0]["bytes_per_step"] == 4_194_304
    from placement_cli.model import PlacementDiff

    assert PlacementDiff.from_dict(data).to_dict() == data  # the times read back as they were written


def test_check_holds_a_timed_report_to_its_copy_time_and_busy_share(tmp_path) -> None:
    from typer.testing import CliRunner

    from placement_cli.cli import app

    saved = _saved(tmp_path, "timed.json", step_profile())  # copies: 10 µs a step; CPU:1 busy 60% of a step
    runner = CliRunner(env={"COLUMNS": "120", "NO_COLOR": "1"})

    def check(*rules: str) -> object:
        return runner.invoke(app, ["check", "--no-config", saved, *rules])

    assert check("--max-copy-time", "20us", "--max-busy", "CPU:1=70").exit_code == 0
    slow = check("--max-copy-time", "5us")
    assert slow.exit_code == 1 and "10us, at most 5us" in slow.stdout and "MatMul -> Sum" in slow.stdout
    busy = check("--max-busy", "CPU=50")  # a device type: each CPU it names
    assert busy.exit_code == 1 and "CPU:1 busy 60% of a step, at most 50%" in busy.stdout
    assert "CPU:2" not in busy.stdout.split("CPU:1 busy")[1].split("\n")[0]
    assert check("--max-copy-time", "2").exit_code == 2  # no unit: refused, not guessed
    assert check("--max-busy", "CPU=150").exit_code == 2
    untimed = tmp_path / "untimed.json"
    untimed.write_text(json.dumps(Report(placements=PLACEMENTS, origin=Origin.RUN, result=1.0).to_dict()))
    cannot = runner.invoke(app, ["check", "--no-config", str(untimed), "--max-copy-time", "1ms"])
    assert cannot.exit_code == 2 and "needs a timed report" in cannot.stderr


def test_the_rules_on_time_live_in_pyproject_too(tmp_path) -> None:
    from placement_cli.rules import config

    (tmp_path / "pyproject.toml").write_text('[tool.placement.check]\nmax-copy-time = "2ms"\nmax-busy = {CPU = 10}\n')
    rules = config.load(tmp_path / "pyproject.toml")
    assert rules.max_copy_time == 2000.0 and rules.max_busy == (("CPU", 10.0),)
    assert rules.described() == ("--max-copy-time 2ms", "--max-busy CPU=10")


def test_calls_that_overlap_are_said() -> None:
    runs = tuple(ProfiledRun(FUNCTION, "__inference_f_3", 100.0 * i, 150.0) for i in range(5))  # each outlasts the gap
    events = tuple(ProfiledEvent(i, "MatMul", "MatMul", 100.0 * i + 1, 120.0) for i in range(5))
    cost = costs.build(Profile(runs, events, warmup=1), (placed("MatMul", "MatMul", 1, graph="__inference_f_3"),))
    assert cost.overlapped and all(c.share <= 1.0 for c in cost.costly)
    console = Console(width=200, record=True)
    for part in cost_renderables(cost):
        console.print(part)
    assert "Calls of f ran at once" in console.export_text()


def test_a_saved_report_with_impossible_times_is_refused(tmp_path) -> None:
    from typer.testing import CliRunner

    from placement_cli.cli import app

    data = json.loads(Path(_saved(tmp_path, "timed.json", step_profile())).read_text())
    runner = CliRunner(env={"COLUMNS": "120", "NO_COLOR": "1"})
    for broken in ({**data, "cost": "fast"}, {**data, "cost": {**data["cost"], "wall_us": {**data["cost"]["wall_us"], "mean": -5}}}):
        path = tmp_path / "broken.json"
        path.write_text(json.dumps(broken))
        result = runner.invoke(app, ["check", "--no-config", str(path), "--max-copy-time", "1ms"])
        assert result.exit_code == 2 and "not as placement writes it" in result.stderr, result.stderr
    untimed = tmp_path / "untimed.json"
    untimed.write_text(json.dumps({**data, "cost": None}))
    said = runner.invoke(app, ["diff", str(untimed), str(tmp_path / "timed.json")])
    assert said.exit_code == 0 and "Only NEW was timed" in said.stdout


def test_check_says_which_busy_rule_names_no_timed_device(tmp_path) -> None:
    from typer.testing import CliRunner

    from placement_cli.cli import app

    saved = _saved(tmp_path, "timed.json", step_profile())
    result = CliRunner().invoke(app, ["check", "--no-config", saved, "--max-busy", "GPU=10", "--max-copy-time", "0"])
    assert result.exit_code == 1  # 10 us of copies a step is more than 0
    assert "GPU" in result.stderr and "is the name right?" in result.stderr


def test_two_functions_of_one_name_are_two_steps_and_keep_their_devices() -> None:
    """Two tf.functions a factory made, both ``step`` (two graphs, two trace counters): the most called is
    the step, and each MatMul stays on its own device (never merged by the Python name)."""
    runs, events = [], []
    for i in range(8):
        runs.append(ProfiledRun(FUNCTION, "__inference_step_19", 100.0 * i, 40.0))
        events.append(ProfiledEvent(2 * i, "MatMul", "MatMul", 100.0 * i + 1, 30.0))
        runs.append(ProfiledRun(FUNCTION, "__inference_step_27", 100.0 * i + 50, 10.0))
        events.append(ProfiledEvent(2 * i + 1, "MatMul", "MatMul", 100.0 * i + 51, 5.0))
    runs.append(ProfiledRun(FUNCTION, "__inference_step_19", 800.0, 40.0))  # one call more: the step
    placements = (placed("MatMul", "MatMul", 1, graph="__inference_step_19"),
                  placed("MatMul", "MatMul", 2, graph="__inference_step_27"))
    cost = costs.build(Profile(tuple(runs), tuple(events), warmup=1), placements)
    assert cost.calls == 9 and cost.steps == 7 and cost.wall.mean == pytest.approx(100.0)
    where = {o.graph: (o.device.short, o.function) for o in cost.ops}
    assert where == {"__inference_step_19": ("CPU:1", "__inference_step_19"),
                     "__inference_step_27": ("CPU:2", "__inference_step_27")}  # the rows say which graph


def test_a_node_two_sessions_placed_apart_gets_no_device_rather_than_a_wrong_one() -> None:
    runs = (ProfiledRun(SESSION, None, 0.0, 50.0),)
    events = (ProfiledEvent(0, "MatMul", "MatMul", 1.0, 30.0),)
    placements = (placed("MatMul", "MatMul", 1, graph=None), placed("MatMul", "MatMul", 2, graph=None))
    [op] = costs.build(Profile(runs, events, marked=((0.0, 60.0),)), placements).ops
    assert op.device is None
