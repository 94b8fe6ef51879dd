"""The run commands' device options are checked against TensorFlow's grammar before anything runs (exit 2)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import typer
from typer.testing import CliRunner

from placement_cli.cli import app
from placement_cli.lessons.caps import LESSON_DEVICES, MAX_CPUS, MAX_VIRTUAL_GPUS


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize(
    "args",
    [
        ("show", "--device", "/gpu:99999999999999999999"),
        ("show", "--device", "/job:a b/cpu:0"),
        ("show", "--device", "/task:99999999999999999999"),
        ("show", "--device", "/cpu:0/gpu:0"),  # once an internal error (exit 3)
        ("show", "--device", "/cpu:4294967296"),  # TensorFlow would run it on CPU:0
        ("show", "--mode", "eager", "--device", "/gpu:99999999999999999999"),
        ("show", "--soft", "--device", "/job:a b/cpu:0"),
        ("show", "--inputs-on", "/job:a-b/cpu:0"),
        ("tower", "--gpus", "99999999999999999999"),
        ("tower", "--gpus", "0-10000000"),  # once a minute and 1.7 GB
        ("tower", "--mode", "eager", "--soft", "--gpus", "99999999999999999999"),
        ("tower", "--devices", "/cpu:0,/CPU:0"),
        ("tower", "--devices", "/cpu:1,/job:localhost/cpu:1"),
        ("tower", "--devices", "/cpu:1,,/cpu:2"),
        ("tower", "--reduce-on", "/job:ps/task:99999999999999999999/cpu:0"),
        ("tower", "--devices", "/cpu:0", "--gpus", "2,3"),  # --gpus was silently ignored
        *(("tower", "--gpus", bad) for bad in ("x", "-1", "", "2,2", "3-1", "\u00b2")),
    ],
)
def test_device_strings_tensorflow_would_reject_are_usage_errors(args: tuple[str, ...]) -> None:
    code, output = invoke(*args)
    assert code == 2, output
    assert "Traceback" not in output
    assert "Invalid value" in output


def test_gpus_and_devices_are_exclusive_but_either_alone_is_fine() -> None:
    code, output = invoke("tower", "--devices", "/cpu:0", "--gpus", "2,3")
    assert code == 2 and "not both" in output



# ------------------------------------------------------------------ every way of asking for devices

_RAN = 99  # the exit code of a command whose lesson was called (no lesson exits 99)
_calls: list[tuple[list[str], Any]] = []  # what each call got: the devices and the RunOptions
_environments: list[str | None] = []  # TF_CONFIG as each lesson saw it


def _lesson(devices_at: int | None) -> Any:
    def called(*args: Any) -> None:
        devices = [] if devices_at is None else list(getattr(args[devices_at], "devices", args[devices_at]) or [])
        _calls.append((devices, args[-1] if args else None))
        _environments.append(os.environ.get("TF_CONFIG"))
        raise typer.Exit(_RAN)

    return called


@contextmanager
def _no_tensorflow() -> Iterator[None]:
    """Every lesson, and TensorFlow's start itself, records what it was given and exits _RAN."""
    _calls.clear()
    _environments.clear()
    with patch("placement_cli.lessons.guide.matmul", _lesson(None)), \
            patch("placement_cli.lessons.failure_cases.catalogue", _lesson(None)), \
            patch("placement_cli.lessons.demo.start", _lesson(None)), \
            patch("placement_cli.lessons.guide.tower", _lesson(0)), \
            patch("placement_cli.lessons.train.train", _lesson(0)), \
            patch("placement_cli.lessons.mirrored.mirrored", _lesson(0)), \
            patch("placement_cli.runtime.inventory.inventory", _lesson(None)), \
            patch("placement_cli.runtime.startup.tensorflow", _lesson(None)):
        yield


def _check_caps(args: list[str]) -> None:
    """A clean usage error (exit 2, one message, no traceback), or the lesson called within every cap."""
    result = CliRunner().invoke(app, args)
    if result.exit_code == _RAN:
        [(devices, options)] = _calls
        assert options.cpus is None or 1 <= options.cpus <= MAX_CPUS, (args, options.cpus)
        assert options.virtual_gpus is None or 1 <= options.virtual_gpus <= MAX_VIRTUAL_GPUS, (args, options)
        if args[0] in LESSON_DEVICES:
            assert 1 <= len(devices) <= LESSON_DEVICES[args[0]][0], (args, len(devices))
        return
    assert result.exit_code == 2, (args, result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), (args, result.exception)
    assert "Traceback" not in result.output and result.output.strip(), (args, result.output)


_INDEX = st.one_of(st.integers(0, 70), st.integers(-3, 2**40), st.sampled_from([63, 64, 20_000, 1_000_000, 2**31 - 1, 2**31]))
_DEVICE = st.one_of(
    st.builds(lambda kind, i: f"/{kind}:{i}", st.sampled_from(["cpu", "gpu", "CPU", "device:CPU", "device:GPU"]), _INDEX),
    st.builds(lambda i: f"/job:localhost/replica:0/task:0/device:CPU:{i}", _INDEX),
    st.builds(lambda i: f"/job:ps/task:1/cpu:{i}", _INDEX),
    st.text(max_size=12),
)
_DEVICES = st.lists(_DEVICE, min_size=1, max_size=70).map(",".join)
_SPAN = st.one_of(st.builds(str, _INDEX), st.builds(lambda a, b: f"{a}-{b}", _INDEX, _INDEX))
_GPUS = st.one_of(st.lists(_SPAN, min_size=1, max_size=5).map(",".join), st.text(max_size=10))
_COUNT = st.one_of(st.builds(str, st.integers(-3, 80)), st.builds(str, st.integers(-2**70, 2**70)), st.text(max_size=6))
_OPTIONS = {
    "show": {"--device": _DEVICE, "--inputs-on": _DEVICE, "--cpus": _COUNT, "--virtual-gpus": _COUNT},
    "tower": {"--gpus": _GPUS, "--devices": _DEVICES, "--reduce-on": _DEVICE, "--cpus": _COUNT,
              "--virtual-gpus": _COUNT},
    "train": {"--towers": _COUNT, "--devices": _DEVICES, "--gpus": _GPUS, "--cpus": _COUNT, "--virtual-gpus": _COUNT,
              "--batch": st.sampled_from(["64", "960", "65536"])},
    "mirrored": {"--replicas": _COUNT, "--devices": _DEVICES, "--gpus": _GPUS, "--cpus": _COUNT,
                 "--virtual-gpus": _COUNT, "--batch": st.sampled_from(["64", "960", "8190"])},
    "devices": {"--cpus": _COUNT, "--virtual-gpus": _COUNT},
}


@st.composite
def _command(draw: Any) -> list[str]:
    name = draw(st.sampled_from(sorted(_OPTIONS)))
    chosen = draw(st.lists(st.sampled_from(sorted(_OPTIONS[name])), unique=True, max_size=4))
    args = [name]
    for option in chosen:
        args += [option, draw(_OPTIONS[name][option])]
    return args


@given(_command())
@settings(max_examples=150, deadline=None)
def test_any_device_option_value_is_a_lesson_within_the_caps_or_a_clean_exit_2(args: list[str]) -> None:
    with _no_tensorflow():
        _check_caps(args)


@pytest.mark.parametrize(("args", "says"), [
    (["train", "--devices", "/cpu:1,/cpu:20000"], "/cpu:20000 in --devices would need 20001 logical CPUs"),
    (["mirrored", "--devices", "/cpu:0,/cpu:1000000"], "placement makes at most 64"),
    (["train", "--devices", "/cpu:1,/cpu:2147483647"], "at most 64"),  # once an internal error
    (["mirrored", "--devices", ",".join(f"/cpu:{i}" for i in range(20))], "mirrored runs at most 16 replicas"),
    (["mirrored", "--gpus", "0-19"], "20 replicas asked for with --gpus"),
    (["train", "--devices", ",".join(f"/cpu:{i}" for i in range(1, 34))], "train runs at most 32 towers"),
    (["tower", "--gpus", "0-64"], "at most 64"),
    (["show", "--cpus", "65"], "--cpus takes 1 to 64"),
    (["devices", "--virtual-gpus", "17"], "--virtual-gpus takes 1 to 16"),
    (["mirrored", "--replicas", "17"], "--replicas takes 1 to 16"),
])
def test_the_issues_device_counts_are_refused_before_tensorflow_starts(args: list[str], says: str) -> None:
    with _no_tensorflow():
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), (result.output, result.exception)
    assert says in " ".join(result.output.split()), result.output


def test_the_logical_cpus_that_devices_name_are_made_up_to_the_cap() -> None:
    """The caps refuse only what is beyond them: /cpu:63 makes 64 logical CPUs; 16 replicas run."""
    for args, cpus, count in ((["train", "--devices", "/cpu:1,/cpu:63"], 64, 2),
                              (["mirrored", "--devices", ",".join(f"/cpu:{i}" for i in range(16))], 16, 16),
                              (["train", "--towers", "32"], 33, 32),
                              (["mirrored", "--gpus", "0,1"], None, 2),
                              (["tower", "--devices", "/cpu:1,/cpu:2", "--cpus", "3"], 3, 2)):
        with _no_tensorflow():
            result = CliRunner().invoke(app, args)
        assert result.exit_code == _RAN, (args, result.output)
        [(devices, options)] = _calls
        assert options.cpus == cpus and len(devices) == count, (args, options, devices)


# ------------------------------------------------------------------ a TF_CONFIG left in the environment

_TF_CONFIGS = {
    "garbage": "garbage",
    "a worker of a multi-worker cluster": '{"cluster": {"worker": ["localhost:12345", "localhost:23456"]}, '
                                          '"task": {"type": "worker", "index": 0}}',
    "a task without a cluster": '{"task": {"type": "worker"}}',
}
_ONE_MACHINE = [["show"], ["tower", "--devices", "/cpu:0"], ["train"], ["mirrored"], ["devices"], ["errors"], ["demo"]]


@pytest.mark.parametrize("value", list(_TF_CONFIGS.values()), ids=list(_TF_CONFIGS))
@pytest.mark.parametrize("args", _ONE_MACHINE, ids=lambda a: a[0])
def test_a_one_machine_lesson_runs_without_a_stale_tf_config_and_says_so_once(args: list[str], value: str) -> None:
    """MirroredStrategy read a stale TF_CONFIG ("Expecting value", "No device satisfies"): every
    lesson that runs on this machine alone drops it before TensorFlow starts, and says so once."""
    with _no_tensorflow():
        result = CliRunner().invoke(app, args, env={"TF_CONFIG": value})
    assert result.exit_code == _RAN, result.output
    assert _environments and set(_environments) == {None}  # the lesson (and TensorFlow) never saw it
    notice = [line for line in result.stderr.splitlines() if "TF_CONFIG" in line]
    assert len(notice) == 1, result.stderr
    assert f"`placement {args[0]}` runs on this machine alone" in notice[0] and value[:20] in notice[0]


def test_tf_config_notice_is_translated_and_blank_or_absent_says_nothing() -> None:
    with _no_tensorflow():
        zh = CliRunner().invoke(app, ["show", "--lang", "zh"], env={"TF_CONFIG": "garbage"})
        blank = CliRunner().invoke(app, ["show"], env={"TF_CONFIG": "  "})
        unset = CliRunner().invoke(app, ["show"], env={"TF_CONFIG": None})
        listed = CliRunner().invoke(app, ["demo", "--list"], env={"TF_CONFIG": "garbage"})  # starts nothing
    assert zh.exit_code == _RAN and "TF_CONFIG" in zh.stderr and "runs on this machine alone" not in zh.stderr
    for quiet in (blank, unset):
        assert quiet.exit_code == _RAN and "TF_CONFIG" not in quiet.stderr
    assert listed.exit_code == 0 and "TF_CONFIG" not in listed.stderr


def test_commands_that_read_tf_config_still_read_it() -> None:
    """inspect (and cluster) take their cluster from TF_CONFIG: theirs is no stale one."""
    result = CliRunner().invoke(app, ["inspect"], env={"TF_CONFIG": "garbage"})
    assert result.exit_code == 2 and "TF_CONFIG: not JSON" in result.stderr
