"""Causes survive: what stopped a run is said by TensorFlow's cause line (out of memory, a cuBLAS/cuDNN handle,
CUDA_ERROR_*), not by the header of its traceback ("Detected at node 'MatMul' defined at (most recent call
last):"), in every failure panel and summary; where GPU memory or a GPU library handle could not be had, the
failure says so in one line, with the remedies.

Wordings: the recorded GPU run (../shared/recorded/h200-tf2.21/x-demo.txt: "worker/0 stopped training:
InternalError: Detected at node 'MatMul' defined at (most recent call last): ('MatMul')", the message of a
Session whose two root errors name MatMul, as tensorflow/python/framework/error_interpolation.py builds it), the
strings TensorFlow 2.21's own library holds (stream_executor cuda_blas.cc, cuda_dnn.cc, cuda_driver.cc, cuda_fft.cc,
bfc_allocator.cc, gpu_util.cc, matmul/conv kernels) and logs people posted (tensorflow#9489, #3600)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from placement_cli import messages
from placement_cli.i18n import Message, shown
from placement_cli.logparse.causes import cause, cause_line, gpu_kind, gpu_log_line, node_named, start_up_noise
from placement_cli.model import Cause, ClusterReport, ClusterRun, Origin, PlacementFailure, Report
from placement_cli.render.parts import failure_panel, gpu_remedy, result_cause
from placement_cli.render.view import Hints
from reports import as_run
from trace_helpers import TRACE, environment

# What the demo's worker/0 raised on the H200: a Session's error, interpolated (two root errors, one node)
RECORDED = ("Graph execution error:\n\n"
            "Detected at node 'MatMul' defined at (most recent call last):\n<stack traces unavailable>\nNode: 'MatMul'\n"
            "Detected at node 'MatMul' defined at (most recent call last):\n<stack traces unavailable>\nNode: 'MatMul'\n"
            "2 root error(s) found.\n"
            "  (0) INTERNAL:  Blas xGEMM launch failed : a.shape=[1,2,2], b.shape=[1,2,2], m=2, n=2, k=2\n"
            "\t [[{{node MatMul}}]]\n\t [[MatMul/_5]]\n"
            "  (1) INTERNAL:  Blas xGEMM launch failed : a.shape=[1,2,2], b.shape=[1,2,2], m=2, n=2, k=2\n"
            "\t [[{{node MatMul}}]]\n0 successful operations.\n0 derived errors ignored.")
RECORDED_SUMMARY = "InternalError: Detected at node 'MatMul' defined at (most recent call last): ('MatMul')"
CUBLAS_LOG = ("I0000 00:00:1795665599.171620   10818 gpu_device.cc:2020] Created device /job:worker/replica:0/task:0/"
              "device:GPU:0 with 226 MB memory:  -> device: 0, name: NVIDIA H200\n"
              "E0000 00:00:1795665604.298090   10818 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
              "Failed call to cuInit: UNKNOWN ERROR (303)\n"
              "E0000 00:00:1795665604.301200   10818 cuda_blas.cc:193] failed to create cublas handle: "
              "CUBLAS_STATUS_NOT_INITIALIZED\n"
              "E0000 00:00:1795665604.301300   10818 cuda_blas.cc:196] Failure to initialize cublas may be due to OOM "
              "(cublas needs some free memory when you initialize it, and your deep-learning framework may have "
              "preallocated more than its fair share), or may be because this binary was not built with support for "
              "the GPU in your machine.\n")

# (a line TensorFlow writes or raises, the kind it names)
WORDINGS = [
    (("OOM when allocating tensor with shape[10000,10000] and type float on /job:localhost/replica:0/task:0/device:"
     "GPU:0 by allocator GPU_0_bfc"), "gpu_memory"),
    (("2017-05-02 10:11:12.123456: E tensorflow/stream_executor/cuda/cuda_driver.cc:1002] failed to allocate 3.77G "
     "(4046333952 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY"), "gpu_memory"),
    (("W tensorflow/core/common_runtime/bfc_allocator.cc:270] Allocator (GPU_0_bfc) ran out of memory trying to "
     "allocate 1.00GiB (rounded to 1073741824)"), "gpu_memory"),
    ("Dst tensor is not initialized.", "gpu_memory"),
    ("CUDA runtime implicit initialization on GPU:0 failed. Status: out of memory", "gpu_memory"),
    (("2017-12-30 21:18:15.134786: E tensorflow/stream_executor/cuda/cuda_blas.cc:366] failed to create cublas handle: "
     "CUBLAS_STATUS_NOT_INITIALIZED"), "gpu_library"),
    ("Attempting to perform BLAS operation using StreamExecutor without BLAS support [Op:MatMul]", "gpu_library"),
    ("Blas GEMM launch failed : a.shape=(100, 784), b.shape=(784, 10), m=100, n=10, k=784", "gpu_library"),
    ("Blas xGEMMBatched launch failed : a.shape=[1,2,2], b.shape=[1,2,2], m=2, n=2, k=2, batch_size=1",
     "gpu_library"),
    ("E tensorflow/stream_executor/cuda/cuda_dnn.cc:329] Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR",
     "gpu_library"),
    ("could not create cudnn handle: CUDNN_STATUS_NOT_INITIALIZED", "gpu_library"),
    (("Failed to get convolution algorithm. This is probably because cuDNN failed to initialize, so try looking to "
     "see if a warning log message was printed above."), "gpu_library"),
    ("DNN library initialization failed. Look at the errors above for more details.", "gpu_library"),
    ("Failed to create cuFFT batched plan with scratch allocator", "gpu_library"),
    ("Failed to create cuSolverDN instance.", "gpu_library"),
    ("CUDNN_STATUS_ALLOC_FAILED", "gpu_memory"),
    ("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered", "gpu"),
    # a machine without a GPU says these at every start: never a cause
    (("E0000 00:00:1795665604.298090   10818 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
     "Failed call to cuInit: UNKNOWN ERROR (303)"), None),
    ("Could not find cuda drivers on your machine, GPU will not be used.", None),
    ("Cannot assign a device for operation a: Operation was explicitly assigned to /device:GPU:0", None),
]


@pytest.mark.parametrize(("line", "kind"), WORDINGS)
def test_tensorflows_gpu_wordings_are_in_the_catalogue(line: str, kind: str | None) -> None:
    assert gpu_kind(line) == kind
    found = cause(f"InternalError: Graph execution error:\n\nDetected at node 'x' defined at (most recent call "
                  f"last):\n  File \"t.py\", line 3, in <module>\n    y = f()\nNode: 'x'\n{line}\n\t [[{{{{node x}}}}]]")
    assert found is not None and (found.kind == (kind or "other"))
    assert "Detected at node" not in found.line and "Graph execution error" not in found.line


def test_the_recorded_failure_is_said_by_its_cause_not_its_traceback_header() -> None:
    """Before: 'worker/0 stopped training: InternalError: Detected at node 'MatMul' defined at (most recent call
    last): ('MatMul')' (the H200 run's demo, step 11)."""
    from placement_cli.runtime.cluster.supervisor import said

    line = said(RuntimeError(RECORDED))
    assert line.startswith("INTERNAL: Blas xGEMM launch failed"), line
    assert "Detected at node" not in line and line.endswith("('MatMul')")
    assert cause_line(RECORDED) == "INTERNAL: Blas xGEMM launch failed : a.shape=[1,2,2], b.shape=[1,2,2], m=2, n=2, k=2"
    # eager and tf.function errors have one header with a stack, then the cause
    assert cause_line("Graph execution error:\n\nDetected at node StatefulPartitionedCall defined at (most recent call "
                      "last):\n  File \"fit.py\", line 9, in <module>\n\nOOM when allocating tensor with shape[8,1024] "
                      "[Op:__inference_train_function_812]").startswith("OOM when allocating tensor")


def test_the_logs_gpu_line_names_a_cause_the_error_does_not() -> None:
    """The recorded summary kept only the header: the task's log still says why (a cuBLAS handle)."""
    found = cause(RECORDED_SUMMARY, CUBLAS_LOG)
    assert found == Cause(line=RECORDED_SUMMARY, kind="gpu_library",
                          log_line="failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED")
    assert found.gpu_taken and "CUBLAS_STATUS_NOT_INITIALIZED" in found.said
    assert gpu_log_line(CUBLAS_LOG.splitlines()[1]) is None  # cuInit on a CPU machine
    assert cause("ValueError: no such file", CUBLAS_LOG.splitlines()[1]) == Cause("ValueError: no such file", "other")


def test_the_cluster_supervisor_says_the_cause_and_keeps_it(tmp_path: Path) -> None:
    from placement_cli.runtime.cluster.watch import Watch as _Watch

    (tmp_path / "worker-0.err").write_text(CUBLAS_LOG)
    watch = _Watch({}, None, str(tmp_path))
    said = watch.caused("worker/0", f"InternalError: {RECORDED}")
    assert said.startswith("INTERNAL: Blas xGEMM launch failed") and "CUBLAS_STATUS_NOT_INITIALIZED" in said
    assert watch.cause is not None and Cause(**watch.cause).gpu_taken
    run = ClusterRun(problem=said, cause=Cause(**watch.cause))
    data = ClusterReport(run=run, report=Report(), sync=False, steps=1).to_dict()
    assert data["cause"]["kind"] == "gpu_library" and data["cause"]["log_line"].startswith("failed to create cublas")
    assert gpu_remedy(result_cause(ClusterReport(run=run, report=Report(), sync=False, steps=1)))


def test_the_cluster_supervisor_knows_a_taken_port_from_tensorflows_words(tmp_path: Path) -> None:
    """A task whose server could not listen (another process took the port placement chose) is what the
    supervisor retries once on new ports: told by logparse's reading of TensorFlow's message, whether the
    message came as the task's error or was quoted from its log."""
    from types import SimpleNamespace

    from placement_cli.logparse.causes import port_taken
    from placement_cli.runtime.cluster.watch import Watch as _Watch

    taken = "UnknownError: Could not start gRPC server"
    assert port_taken(taken) and not port_taken("UnknownError: Deadline exceeded")
    watch = _Watch({}, None, str(tmp_path))
    watch.caused("worker/0", "UnknownError: Deadline exceeded")
    assert not watch.port_taken
    watch.caused("worker/0", taken)
    assert watch.port_taken
    (tmp_path / "ps-0.err").write_text(f"E0000 00:00:1.5    1 grpc_server_lib.cc:1] {taken}\n")
    quoted = _Watch({"ps/0": SimpleNamespace(pid=4321)}, None, str(tmp_path))
    quoted._named("ps/0", Message("exited with code {code}", code=1), "before it was ready",
                  quote=True)
    assert quoted.port_taken


def _panel_text(failure: PlacementFailure) -> str:
    console = Console(record=True, width=120, color_system=None, file=open(os.devnull, "w"))
    console.print(failure_panel(failure, Origin.RUN, Hints.run_command(soft=False)))
    return " ".join(console.export_text().replace("│", " ").split())


def test_a_run_that_failed_shows_the_cause_and_the_gpu_remedy() -> None:
    """show/tower/train/mirrored: the run's failure keeps its cause, from the error and the run's log."""
    from placement_cli.runtime.run import Trial, outcome

    trial = Trial(error=RECORDED_SUMMARY, error_class="InternalError")
    (failure,), _run_error = outcome((), trial, CUBLAS_LOG)
    assert failure.kind == "run_failed" and failure.cause is not None and failure.cause.gpu_taken
    assert failure.to_dict()["cause"]["log_line"] == "failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED"
    text = _panel_text(failure)
    assert "CUBLAS_STATUS_NOT_INITIALIZED" in text
    assert "TensorFlow could not get GPU memory or a GPU library handle" in text
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in text and "per_process_gpu_memory_fraction" in text
    assert "its own GPU (CUDA_VISIBLE_DEVICES)" in text
    plain = outcome((), Trial(error="InternalError: something else", error_class="InternalError"), "")[0][0]
    assert "could not get GPU memory" not in _panel_text(plain)  # the remedy only where GPU memory or a handle failed
    assert "cause" not in PlacementFailure("colocation", None, None, "m").to_dict()  # parsed errors: as before


def test_the_remedy_is_translated() -> None:
    from placement_cli import i18n

    with i18n.speaking("zh"):
        assert "TF_FORCE_GPU_ALLOW_GROWTH" in shown(messages.GPU_TAKEN)
        assert shown(messages.GPU_TAKEN) != messages.GPU_TAKEN.template


FAILS_ON_THE_GPU = r'''
import sys
sys.stderr.write("E0000 00:00:1795665604.301200   10818 cuda_blas.cc:193] failed to create cublas handle: "
                 "CUBLAS_STATUS_NOT_INITIALIZED\n")
for i in range(20):
    sys.stderr.write(f"training step {i}\n")
raise RuntimeError("Graph execution error:\n\nDetected at node 'MatMul' defined at (most recent call last):\n"
                   "<stack traces unavailable>\nNode: 'MatMul'\n"
                   "Attempting to perform BLAS operation using StreamExecutor without BLAS support\n"
                   "\t [[{{node MatMul}}]] [Op:__inference_step_12]")
'''


def test_trace_cluster_says_a_tasks_cause_and_the_remedy(tmp_path: Path) -> None:
    """The task's cuBLAS line scrolled out of the quoted tail long before it failed: the summary still says it."""
    script = tmp_path / "gpu_step.py"
    script.write_text(FAILS_ON_THE_GPU)
    done = subprocess.run([*TRACE, "--cluster", "worker=1", str(script)], cwd=tmp_path, env=environment(tmp_path),
                          capture_output=True, timeout=300, check=False)
    err = done.stderr.decode()
    assert done.returncode == 1, err[-3000:]
    named = [line for line in err.splitlines() if line.startswith("placement: worker/0 (pid ")]
    assert named and "without BLAS support" in named[0] and "CUBLAS_STATUS_NOT_INITIALIZED" in named[0], err[-3000:]
    assert "placement: TensorFlow could not get GPU memory or a GPU library handle" in err
    assert "placement trace --cluster --split-gpus" in " ".join(err.split())  # its own option, where it ran the tasks
    done = subprocess.run([*TRACE, "--cluster", "worker=1", "--json", str(script)], cwd=tmp_path,
                          env=environment(tmp_path), capture_output=True, timeout=300, check=False)
    doc = json.loads(done.stdout)
    assert doc["cause"]["kind"] == "gpu_library" and "without BLAS support" in doc["cause"]["line"]


def test_a_training_that_stopped_shows_the_cause_and_the_remedy() -> None:
    """train, mirrored: 'N of M steps ran. TensorFlow says: ...' with the cause, not the traceback's header."""
    from placement_cli.model import Training
    from placement_cli.render.training import training_group
    from placement_cli.render.view import View

    found = cause(f"InternalError: {RECORDED}", CUBLAS_LOG)
    training = Training(lesson="towers", devices=("/gpu:0", "/gpu:1"), batch=8, steps=5, lr=0.1, dtype="float32",
                        losses=(1.0,), error=RECORDED, cause=found)
    report = Report(training=training)
    assert as_run(report).to_dict()["training"]["cause"]["kind"] == "gpu_library"
    console = Console(record=True, width=200, color_system=None, file=open(os.devnull, "w"))
    console.print(training_group(report, View()))
    text = " ".join(console.export_text().replace("│", " ").split())
    assert "1 of 5 steps ran. TensorFlow says: INTERNAL: Blas xGEMM launch failed" in text
    assert "Detected at node" not in text and "CUBLAS_STATUS_NOT_INITIALIZED" in text
    assert "TensorFlow could not get GPU memory or a GPU library handle" in text


def test_a_task_tensorflow_aborted_is_named_with_the_gpu_line_of_its_log(tmp_path: Path) -> None:
    """A task killed by TensorFlow's own abort (SIGABRT: no traceback is quoted) said why on its log."""
    from types import SimpleNamespace

    from placement_cli.runtime.cluster.launch import message
    from placement_cli.runtime.cluster.watch import Watch as _Watch

    (tmp_path / "ps-0.err").write_text(
        "I0000 00:00:1795665599.171620   10818 gpu_device.cc:2020] Created device /job:ps/replica:0/task:0/device:GPU:0\n"
        "E0000 00:00:1795665604.301200   10818 cuda_driver.cc:1002] failed to allocate 137.53G (147670155264 bytes) "
        "from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"
        "F0000 00:00:1795665604.301300   10818 gpu_device.cc:500] Check failed\n")
    watch = _Watch({"ps/0": SimpleNamespace(pid=4321)}, None, str(tmp_path))
    named = watch._named("ps/0", Message("was killed by signal {signal}", signal="SIGABRT"),
                         "while the workers trained")
    said = str(message(named))
    assert "CUDA_ERROR_OUT_OF_MEMORY" in said and "failed to allocate 137.53G" in said
    assert watch.cause is not None and watch.cause["kind"] == "gpu_memory"


def test_cluster_names_its_own_gpu_memory_options_where_a_task_found_the_gpu_taken(monkeypatch) -> None:
    """`placement cluster` sets the tasks' memory policy itself: its remedy is its own --gpu-memory, not a
    ConfigProto field the user never writes there (trace --cluster's is --split-gpus)."""
    from typer.testing import CliRunner

    from placement_cli.cli import app
    from placement_cli.lessons import cluster

    stopped = ClusterRun(problem="worker/0 stopped training: OOM when allocating tensor",
                         cause=Cause("OOM when allocating tensor with shape[4096,4096]", "gpu_memory"))
    monkeypatch.setattr(cluster, "run", lambda request, progress: stopped)
    result = CliRunner().invoke(app, ["cluster", "--ps", "1", "--workers", "1", "--lang", "en"])
    said = " ".join(result.stderr.split())
    assert result.exit_code == 1, said
    assert "TensorFlow could not get GPU memory" in said and "placement cluster --gpu-memory growth" in said
    assert "--gpu-memory share" in said and "per_process_gpu_memory_fraction" not in said
    assert "--split-gpus" in " ".join(shown(messages.GPU_TAKEN_TRACE_CLUSTER).split())
    assert "--gpu-memory" not in shown(messages.GPU_TAKEN)  # show, tower, train, mirrored: TensorFlow's own remedies


def test_the_node_a_graph_error_names_and_start_up_noise_are_read_here() -> None:
    message = ("Graph execution error:\n\nDetected at node 'MatMul' defined at (most recent call last):\n"
               "  File \"x.py\", line 3\nNode: 'MatMul'\nCannot assign a device for operation MatMul")
    assert node_named(message) == "'MatMul'"
    assert node_named("Cannot assign a device for operation MatMul") is None
    assert start_up_noise("E0000 00:00:1795665604.298090   10818 cuda_platform.cc:52] failed call to cuInit: INTERNAL")
    assert start_up_noise("Could not find cuda drivers on your machine, GPU will not be used.")
    assert not start_up_noise("E0000 00:00:1795665604.298090   10818 cuda_blas.cc:193] failed to create cublas handle")
