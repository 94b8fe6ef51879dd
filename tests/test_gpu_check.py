"""tools/gpu_check.sh, the script the next GPU run uses, run here against stand-ins for nvidia-smi,
placement and python3 (what each was asked is logged): every command it owes is run and summed up
with its expected and actual exit code, the one-process commands share the GPU while the demo, cluster
and trace --cluster run with the environment as it is, a command that fails or outruns its limit makes
it exit 1, and the suite keeps every test's name and outcome even when it is cut off."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "tools" / "gpu_check.sh"

FAKE_PLACEMENT = """#!/usr/bin/env bash
echo "${TF_FORCE_GPU_ALLOW_GROWTH:-unset} $*" >> "$FAKE_LOG"
[[ "$1" == --version ]] && { echo "placement 0"; exit 0; }
[[ " $* " == *" $FAKE_FAIL "* ]] && exit 1
[[ " $* " == *" ${FAKE_SLOW:-no-such-command} "* ]] && { echo "slow $$" >> "$FAKE_LOG"; exec sleep 300; }
echo "output of $1"
"""
FAKE_PYTHON = """#!/usr/bin/env bash
echo "python3 $*" >> "$FAKE_LOG"
if [[ "$1 $2" == "-m pytest" ]]; then
    echo "tests/test_a.py::test_one PASSED"
    exec sleep "${FAKE_SUITE_SECONDS:-0}"
fi
echo "3.12"
"""


def _setup(tmp_path: Path, *args: str, gpus: int = 1, **env: str) -> tuple[list[str], dict[str, str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = "".join(f'echo "GPU {i}: NVIDIA H200 (UUID: GPU-{i})"\n' for i in range(gpus))
    for name, text in {"placement": FAKE_PLACEMENT, "python3": FAKE_PYTHON,
                       "nvidia-smi": f"#!/usr/bin/env bash\n{smi}"}.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    folder = tmp_path / "out"
    full_env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_LOG": str(tmp_path / "log"),
                "FAKE_FAIL": "no-such-command", **env}
    full_env.pop("TF_FORCE_GPU_ALLOW_GROWTH", None)
    return ["bash", str(SCRIPT), *args, str(folder)], full_env, folder


def _run(tmp_path: Path, *args: str, gpus: int = 1, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    command, full_env, folder = _setup(tmp_path, *args, gpus=gpus, **env)
    return subprocess.run(command, capture_output=True, text=True, env=full_env, timeout=300), folder


def _summary(folder: Path) -> dict[str, list[str]]:
    lines = (folder / "summary.tsv").read_text().splitlines()
    assert lines[0].split("\t") == ["name", "args", "exit code", "expected", "seconds"]
    return {row[0]: row[1:] for row in (line.split("\t") for line in lines[1:])}


def _asked(tmp_path: Path) -> list[str]:
    return (tmp_path / "log").read_text().splitlines()


def test_every_command_is_run_kept_and_summed_up_on_one_gpu(tmp_path: Path) -> None:
    proc, folder = _run(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = _summary(folder)
    for name in ("demo", "cluster", "trace-cluster", "show", "show-gpu0", "tower", "tower-timed", "train", "mirrored",
                 "errors"):
        for kind in ("txt", "json"):
            assert summary[f"{name}.{kind}"][1:3] == ["0", "0"], name
            assert (folder / f"{name}.{kind}").read_text().startswith("output of"), name
    assert "tests-gpu.txt" in summary and "devices-virtual.txt" in summary and "tests-suite.txt" not in summary
    asked = _asked(tmp_path)
    # the one-process commands share the GPU; those that start processes of their own run as the user runs them
    assert "true tower --virtual-gpus 2 --gpus 0,1 --copies --log" in asked
    # the timed tower: the GPU's own kernel and memcpy times, its step kept as a Chrome trace
    assert f"true tower --virtual-gpus 2 --gpus 0,1 --time --json --chrome-trace {folder}/tower-timed.trace.json" in asked
    assert "true show --json" in asked and "true errors" in asked
    assert "unset demo --no-pause" in asked and "unset cluster" in asked and "unset cluster --json" in asked
    multi = [a for a in asked if "trace --cluster worker=2" in a]
    assert len(multi) == 2 and all(a.startswith("unset ") and a.endswith("samples/multi_worker.py") for a in multi)
    assert f"--save-log {folder}/trace-cluster-logs" in multi[0] + multi[1]
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true placement show --log" in summary["show.txt"][0]


def test_a_command_that_exits_otherwise_fails_the_check(tmp_path: Path) -> None:
    proc, folder = _run(tmp_path, FAKE_FAIL="cluster")
    assert proc.returncode == 1
    summary = _summary(folder)
    assert summary["cluster.txt"][1:3] == ["1", "0"] and summary["cluster.json"][1:3] == ["1", "0"]
    assert summary["demo.txt"][1:3] == ["0", "0"]
    assert "cluster.txt: exit code 1 (expected 0)" in proc.stdout


def test_the_suite_alone_keeps_each_outcome_when_cut_off(tmp_path: Path) -> None:
    """--only suite: no command runs; the suite past its limit is killed (124), its log keeps what ended."""
    proc, folder = _run(tmp_path, "--only", "suite", GPU_CHECK_SUITE_LIMIT="2", FAKE_SUITE_SECONDS="60",
                        GPU_CHECK_WORKERS="8")
    assert proc.returncode == 1
    summary = _summary(folder)
    assert list(summary) == ["tests-suite.txt"] and summary["tests-suite.txt"][1:3] == ["124", "0"]
    assert "-m pytest -n 8 --dist loadfile -v -rA" in summary["tests-suite.txt"][0]
    assert "tests/test_a.py::test_one PASSED" in (folder / "tests-suite.txt").read_text()
    assert not any(a.split()[1:2] in (["show"], ["demo"], ["cluster"]) for a in _asked(tmp_path))


def test_suite_runs_beside_the_commands(tmp_path: Path) -> None:
    proc, folder = _run(tmp_path, "--suite", gpus=0)
    assert proc.returncode == 2 and "no NVIDIA GPU here" in proc.stderr and not folder.exists()
    proc, folder = _run(tmp_path, "--suite", "--allow-cpu", gpus=0, FAKE_FAIL="/gpu:0")  # as TensorFlow refuses it
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = _summary(folder)
    assert summary["tests-suite.txt"][1:3] == ["0", "0"] and "demo.txt" in summary
    assert summary["show-gpu0.txt"][2] == "1"  # no GPU: /gpu:0 does not exist, expected
    assert not any(a.startswith("true ") for a in _asked(tmp_path))  # no GPU to share


def test_sigterm_ends_the_commands_still_running_and_sums_up_what_ran(tmp_path: Path) -> None:
    command, env, folder = _setup(tmp_path, FAKE_SLOW="demo")
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ((tmp_path / "log").exists() and "slow " in (tmp_path / "log").read_text()):
            assert time.monotonic() < deadline and proc.poll() is None, "the demo never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    summary = _summary(folder)
    assert summary["demo.txt"][1] == "143"  # ended by the signal, its row kept
    slow = [int(line.split()[1]) for line in _asked(tmp_path) if line.startswith("slow ")]
    assert slow and not any(_sleeping(pid) for pid in slow)  # the fake demo's sleep was ended with it


def _sleeping(pid: int) -> bool:
    try:
        return "sleep" in Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:  # gone
        return False


@pytest.mark.parametrize("args", [["--only", "everything"], ["--only"], ["--bogus"]])
def test_bad_usage_exits_2(tmp_path: Path, args: list[str]) -> None:
    proc, _ = _run(tmp_path, *args)
    assert proc.returncode == 2 and "gpu_check.sh:" in proc.stderr
