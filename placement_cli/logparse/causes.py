"""What a stopped run's error says: the line that heads it, TensorFlow's message without graph mode's
traceback, a server that found its port taken, and the cause line (a GPU's trouble named)."""

from __future__ import annotations

import re

from placement_cli.logparse import lazy
from placement_cli.model import Cause

MAX_CHARS = 16384  # characters of one message that are read


# TensorFlow's message for several errors at once: "2 root error(s) found." then "  (0) KIND: text"
_ROOTS = re.compile(r"\d+ root error\(s\) found\.?\s*")
_FIRST_ROOT = re.compile(r"\s*\(0\) ([^\n]*)")


def headline(message: str) -> str:
    """The line of an error message that says what failed: its first, or where TensorFlow's first
    line only counts root errors ("2 root error(s) found."), that line and the first root error."""
    lines = message.strip().splitlines()
    if not lines:
        return ""
    if _ROOTS.fullmatch(lines[0].strip()) and len(lines) > 1:
        first = _FIRST_ROOT.match(lines[1])
        if first:
            return f"{lines[0].strip()} (0) {' '.join(first.group(1).split())}"
    return lines[0]


def essential(message: str) -> str:
    """TensorFlow's message without the Python traceback graph mode adds to it ("Graph execution error:",
    "Detected at node ... defined at", File lines, "Node: 'x'", "[[x]]"); the whole message if that is all."""
    kept = []
    skipping = False
    for line in message.splitlines():
        stripped = line.strip()
        if stripped.startswith("Detected at node") and stripped.endswith("(most recent call last):"):
            skipping = True
            continue
        if skipping and (line[:1].isspace() or not stripped):
            continue
        skipping = False
        if not stripped or stripped == "Graph execution error:" or stripped.startswith("Node: '") \
                or (stripped.startswith("[[") and stripped.endswith("]]")):
            continue
        kept.append(line.rstrip())
    return "\n".join(kept) or message


# TensorFlow's words when a task's server could not listen on its port (another process took it)
_PORT_TAKEN = "Could not start gRPC server"


def port_taken(text: str) -> bool:
    """Whether TensorFlow's message says a server could not start on its port."""
    return _PORT_TAKEN in text


# ---------------------------------------------------------------- why a run stopped: TensorFlow's cause line
# TensorFlow's GPU wordings, literal (matched case-blind), most specific first, with what they mean. From
# TensorFlow's source (stream_executor/cuda/cuda_blas.cc, cuda_dnn.cc, cuda_driver.cc, cuda_fft.cc,
# cuda_solvers.cc; core/common_runtime/gpu/gpu_device.cc, gpu_util.cc; common_runtime/bfc_allocator.cc;
# kernels/matmul_op*.cc, conv_ops*.cc; the TF 2.21 library holds each of its own) and from logs people posted.
# "failed call to cuInit" is left out: every TensorFlow on a machine without a GPU logs it.
GPU_CAUSES: tuple[tuple[str, str], ...] = (
    # memory: TensorFlow's allocator (BFC) or the driver had none left
    ("OOM when allocating", "gpu_memory"),  # "OOM when allocating tensor with shape[..] ... by allocator GPU_0_bfc"
    ("CUDA_ERROR_OUT_OF_MEMORY", "gpu_memory"),  # "failed to allocate 3.77G (..) from device: CUDA_ERROR_OUT_OF_MEMORY"
    ("ran out of memory trying to allocate", "gpu_memory"),  # "Allocator (GPU_0_bfc) ran out of memory trying .."
    ("EigenAllocator for GPU ran out of memory", "gpu_memory"),
    ("cuMemAlloc failed to allocate", "gpu_memory"),
    ("cuMemAllocAsync failed to allocate", "gpu_memory"),
    ("CUDA error (failed to allocate", "gpu_memory"),
    ("Dst tensor is not initialized", "gpu_memory"),  # a copy to the GPU whose buffer could not be allocated
    # "CUDA runtime implicit initialization on GPU:0 failed. Status: out of memory"
    ("implicit initialization on GPU", "gpu_memory"),
    ("CUDNN_STATUS_ALLOC_FAILED", "gpu_memory"),
    ("CUBLAS_STATUS_ALLOC_FAILED", "gpu_memory"),
    # a library handle (cuBLAS, cuDNN, cuFFT, cuSOLVER) could not be made: with the memory taken, it has none
    # "... cuda_blas.cc:366] failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED"
    ("failed to create cublas handle", "gpu_library"),
    ("Failure to initialize cublas may be due to OOM", "gpu_library"),
    ("Failed to create cuBlas instance", "gpu_library"),
    # "Attempting to perform BLAS operation using StreamExecutor without BLAS support"
    ("without BLAS support", "gpu_library"),
    ("No BLAS support in stream", "gpu_library"),
    ("No Blas support for stream", "gpu_library"),
    ("Failed to initialize BLAS support", "gpu_library"),
    ("Blas GEMM launch failed", "gpu_library"),  # TF 1.x-2.4: "Blas GEMM launch failed : a.shape=(..), b.shape=(..)"
    ("Blas SGEMM launch failed", "gpu_library"),
    ("Blas xGEMM", "gpu_library"),  # "Blas xGEMMBatched launch failed : a.shape=[..]"
    ("Blas xGEMV launch failed", "gpu_library"),
    ("CUBLAS_STATUS_", "gpu_library"),  # NOT_INITIALIZED, EXECUTION_FAILED, INTERNAL_ERROR, ...
    ("create cudnn handle", "gpu_library"),  # "Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR" (any case)
    ("cudnn library could not create a handle", "gpu_library"),
    ("DNN library initialization failed", "gpu_library"),
    ("Failed to get convolution algorithm", "gpu_library"),  # ".. This is probably because cuDNN failed to initialize"
    ("cuDNN failed to initialize", "gpu_library"),
    ("without DNN support", "gpu_library"),
    ("CUDNN_STATUS_", "gpu_library"),
    ("Failed to create cuFFT", "gpu_library"),
    ("CUFFT_", "gpu_library"),
    ("Failed to create cuSolverDN instance", "gpu_library"),
    ("CUSOLVER_STATUS_", "gpu_library"),
    # any other GPU error TensorFlow passes on
    ("CUDA_ERROR_", "gpu"),
    ("an illegal memory access was encountered", "gpu"),
    ("no kernel image is available for execution", "gpu"),
)
_GPU_LITERALS = tuple((literal.lower(), kind) for literal, kind in GPU_CAUSES)
_NOT_A_CAUSE = ("failed call to cuinit", "could not find cuda drivers")  # a CPU machine's start-up noise
# glog's prefix in every form TensorFlow wrote it ("E0000 00:00:1795665604.298090   10818 cuda_blas.cc:193] ",
# "2017-12-30 21:18:15.134786: E tensorflow/stream_executor/cuda/cuda_blas.cc:366] ")
_GLOG_HEAD = lazy.Pattern(r"^\s*+(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d++)?+: )?+"
                          r"[IWEF](?:\d{4})?+[ \d:.]*+\S*?\.(?:cc|h|py):\d++\] ")
_CLASS_HEAD = lazy.Pattern(r"^(?:\w++\.)*+\w*?(?:Error|Exception): ")
# What TensorFlow puts around its cause: graph mode's traceback of the node (error_interpolation.py,
# atomic_function.py), its "[[node]]" lines, and the count of root errors.
_FRAME = lazy.Pattern(r"\s*+(?:File \"|<stack traces unavailable>|Traceback \(most recent call last\))")
_ROOT = lazy.Pattern(r"\s*+\((\d++)\) (.*+)")


def start_up_noise(line: str) -> bool:
    """A line every TensorFlow on a machine without a GPU logs as it starts: it says nothing of why."""
    low = line.lower()
    return any(noise in low for noise in _NOT_A_CAUSE)


def node_named(message: str) -> str | None:
    """The node a graph error names on its ``Node: 'X'`` line, quotes kept (None: it names none)."""
    return next((line.strip().removeprefix("Node: ") for line in message.splitlines()
                 if line.strip().startswith("Node: '")), None)


def gpu_kind(line: str) -> str | None:
    """The kind of GPU trouble a line names (GPU_CAUSES), or None."""
    if start_up_noise(line):
        return None
    low = line.lower()
    return next((kind for literal, kind in _GPU_LITERALS if literal in low), None)


def _plain(line: str) -> str:
    """A line without its glog prefix, its blanks made single."""
    return " ".join(_GLOG_HEAD.sub("", line.strip(), count=1).split())


def cause_line(message: str) -> str:
    """The line of an error message that says why: not "Graph execution error:", "Detected at node 'X'
    defined at (most recent call last):", the node's stack, "Node: 'X'", "[[X]]" or "N root error(s)
    found." (then the first root error's text); a line that names GPU trouble is preferred."""
    kept: list[str] = []
    in_stack = False
    lines = message[:MAX_CHARS].splitlines()
    raised = [i for i, raw in enumerate(lines) if _CLASS_HEAD.match(_plain(raw))]
    for raw in lines[raised[-1] if raised else 0 :]:  # a traceback: from the exception Python printed last
        line = _plain(raw)
        bare = _CLASS_HEAD.sub("", line, count=1)  # "InternalError: Detected at node ..." is a header too
        if bare.startswith("Detected at node") and bare.endswith("(most recent call last):"):
            in_stack = True
            continue
        if in_stack and (raw[:1].isspace() or _FRAME.match(raw) or not line):
            continue
        in_stack = False
        if not bare or bare in ("Graph execution error:", "Traceback (most recent call last):") \
                or bare.startswith("Node: '") or (bare.startswith("[[") and bare.endswith("]]")) \
                or _ROOTS.fullmatch(bare) or _FRAME.match(raw) or bare.endswith(("successful operations.",
                                                                                 "derived errors ignored.")):
            continue
        if m := _ROOT.match(bare):
            line = m.group(2)
        kept.append(line)
    if not kept:
        return _plain(message.strip().splitlines()[0]) if message.strip() else ""
    return next((k for k in kept if gpu_kind(k)), kept[0])


def gpu_log_line(log: str) -> str | None:
    """The first line of a log's last MiB that names GPU trouble (its glog prefix taken off), or None:
    the first such line says what went wrong; the ones after it repeat it or follow from it."""
    found = None
    for raw in log[-(1 << 20):].splitlines():
        if len(raw) < 4 * MAX_CHARS and gpu_kind(raw):
            found = found or _plain(raw)
    return found


def cause(message: str, log: str | None = None) -> Cause | None:
    """Why a run stopped, in TensorFlow's words: the error's cause line and, where the error names no
    GPU memory trouble but the log names GPU memory or a library handle TensorFlow could not get
    (``failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED``), the log's line too."""
    line = cause_line(message) if message else ""
    kind = gpu_kind(line) if line else None
    said = gpu_log_line(log) if log and kind != "gpu_memory" else None
    if said is not None and (said == line or gpu_kind(said) not in ("gpu_memory", "gpu_library")):
        said = None
    if not line:
        return None if said is None else Cause(line=said, kind=gpu_kind(said) or "gpu")
    if said is None:
        return Cause(line=line, kind=kind or "other")
    return Cause(line=line, kind=kind if kind == "gpu_library" else gpu_kind(said) or "gpu", log_line=said)
