"""The suite itself, on any machine: a busy one (deadlines scale, nothing a failed test started is
left running), a pytest started in the background of a script (Ctrl-C still reaches the processes
the tests interrupt), a GPU machine (several TensorFlow processes share one GPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import GROWTH, gpu_memory_policy, needs_gpu
from processes import PATIENCE_ENV, checkout_first, patience
from trace_helpers import wait_gone

pytest_plugins = ["pytester"]

TESTS = Path(__file__).parent
ROOT = TESTS.parent


def test_ctrl_c_reaches_the_tests_processes_when_pytest_runs_in_the_background() -> None:
    """`pytest ... &` in a script: the shell ignores SIGINT in the job, and an ignored signal stays
    ignored in every process started from it, so a test's Ctrl-C (SIGINT) was lost: `placement
    cluster` trained on and exited 0 instead of 130. A test of Ctrl-C, run by such a pytest."""
    tests = ["tests/test_trace_signals.py::test_ctrl_c_in_any_command_exits_130",
             # SIGHUP: `nohup pytest` leaves it ignored in every process started, as a background job SIGINT
             "tests/test_trace_signals.py::test_a_script_that_dies_of_the_signal_still_gets_its_report[1]"]
    # what a shell without job control does to a background job: SIGINT ignored, kept so by exec; nohup: SIGHUP
    proc = subprocess.run(["sh", "-c", "trap '' INT HUP; exec \"$@\"", "sh", sys.executable, "-m", "pytest", "-n", "0",
                           "-p", "no:cacheprovider", "-q", *tests],
                          cwd=ROOT, capture_output=True, text=True, timeout=patience(120),
                          env={**os.environ, "PYTHONPATH": checkout_first()})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "2 passed" in proc.stdout


def test_a_failed_test_leaves_no_process_behind(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A test that starts a process in a session of its own and fails before it ends it (as a
    signal test whose deadline passed): the suite's fixture ends the process and its group."""
    pids = tmp_path / "pids"
    pytester.makeconftest(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from processes import ends_its_processes  # noqa: F401
    """)
    pytester.makepyfile(test_leaves=f"""
        import subprocess

        def test_fails_with_its_process_running():
            proc = subprocess.Popen(["sh", "-c", "sleep 300 & echo $! >> {pids}; sleep 300"], start_new_session=True)
            with open({str(pids)!r}, "a") as f:
                f.write(f"{{proc.pid}}\\n")
            assert False, "the test failed before it ended its process"
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:placement", timeout=patience(120))
    result.assert_outcomes(failed=1)
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2  # the shell and the sleep it put in the background
    assert all(wait_gone(pid, patience(10)) for pid in started), started


def test_deadlines_scale_with_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PATIENCE_ENV, "4")
    assert patience(60) >= 240
    monkeypatch.setenv(PATIENCE_ENV, "not a number")
    assert patience(60) >= 60
    monkeypatch.setattr(os, "getloadavg", lambda: (6.0, 0.0, 0.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert patience(60) == 60 * 4  # four busy processes beside two workers on two cores: 1 + 6 / 2


def test_the_gpu_memory_policy_of_the_suite() -> None:
    assert gpu_memory_policy({}, gpus=1) == {GROWTH: "true"}
    assert gpu_memory_policy({GROWTH: "false"}, gpus=1) == {}  # the user's own setting stays
    assert gpu_memory_policy({}, gpus=0) == {}  # nothing to share


_HOLDER = """
import sys, time
import tensorflow as tf
with tf.device("/GPU:0"):
    x = tf.ones([512, 512])
    y = tf.matmul(x, x)
print(y.device, float(tf.reduce_sum(y)), flush=True)
sys.stdin.readline()  # holds its GPU device until the test says
"""


@needs_gpu
def test_two_tensorflow_processes_share_the_gpu() -> None:
    """Two of the suite's TensorFlow processes at once on GPU:0 (as two pytest workers' are)."""
    first = subprocess.Popen([sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None and first.stdin is not None
        line = first.stdout.readline()
        assert "GPU:0" in line, first.stderr.read() if first.poll() is not None else line
        second = subprocess.run([sys.executable, "-c", _HOLDER], input="\n", capture_output=True, text=True,
                                timeout=patience(300))
        assert second.returncode == 0 and "GPU:0" in second.stdout, second.stderr[-3000:]
        first.stdin.write("\n")
        first.stdin.flush()
        assert first.wait(timeout=patience(60)) == 0
    finally:
        first.kill()
        first.wait()


def test_a_cpu_lessons_module_sees_no_gpu_on_a_gpu_machine(pytester: pytest.Pytester) -> None:
    """The suite's conftest, on a machine said to have one GPU: a module marked ``cpu_devices``
    starts its processes with the GPU hidden (its module fixtures too), its ``gpu`` tests and every
    other module see it."""
    pytester.makeconftest(f"""
        import importlib.util, sys
        sys.path.insert(0, {str(TESTS)!r})
        spec = importlib.util.spec_from_file_location("suite_conftest", {str(TESTS / "conftest.py")!r})
        suite = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(suite)
        suite._machines_gpus = lambda: 1  # a GPU machine
        _cpu_devices, _gpu_tests_see_the_gpu = suite._cpu_devices, suite._gpu_tests_see_the_gpu
    """)
    seen = "import os; print(repr(os.environ.get('CUDA_VISIBLE_DEVICES')))"
    pytester.makepyfile(test_a_cpu_lesson=f"""
        import subprocess, sys
        import pytest

        pytestmark = pytest.mark.cpu_devices("a CPU lesson")

        def _seen():
            return subprocess.run([sys.executable, "-c", {seen!r}], capture_output=True, text=True).stdout.strip()

        @pytest.fixture(scope="module")
        def module_run():
            return _seen()

        def test_hidden(module_run):
            assert module_run == _seen() == "''"

        @pytest.mark.gpu
        def test_a_gpu_test_sees_it():
            assert _seen() == "None"
    """, test_b_other=f"""
        import subprocess, sys

        def test_visible():
            assert subprocess.run([sys.executable, "-c", {seen!r}], capture_output=True, text=True).stdout.strip() == "None"
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-n", "0",
                                           timeout=patience(120))
    result.assert_outcomes(passed=3)
