"""The run commands' device options are checked against TensorFlow's grammar before anything runs (exit 2)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from placement_cli.cli import app


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

