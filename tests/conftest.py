"""Shared helpers: running the real entry point, and skipping GPU-only paths."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest

from processes import ends_its_processes, patience, sigint_as_a_terminal_gives_it  # noqa: F401 - the fixture is autouse

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = FIXTURES / "logs"
EXPECTED = FIXTURES / "expected"

# The suite's processes (pytest's workers and every process a test starts) ------------------------

GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH"


def gpu_memory_policy(environ: dict[str, str] | Any, gpus: int) -> dict[str, str]:
    """What the suite adds to its environment on a GPU machine: each TensorFlow process reserves
    nearly the whole GPU as it creates its device, so two workers' processes (or a test's and its
    subprocess's) could not both run. With memory growth each takes what it uses. A value the user
    set is theirs; without a GPU nothing is added (TensorFlow would ignore it)."""
    if gpus and GROWTH not in environ:
        return {GROWTH: "true"}
    return {}


def _set_up_the_suites_processes() -> None:
    sigint_as_a_terminal_gives_it()
    os.environ.update(gpu_memory_policy(os.environ, gpu_count()))


def run_cli(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None,
            timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run ``python -m placement_cli`` for real: TensorFlow's C++ output is only
    capturable at file-descriptor level, which CliRunner cannot see."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "placement_cli", *args],
        input=stdin, capture_output=True, timeout=patience(timeout), env=full_env,
    )
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def run_batch(*commands: Any, env: dict[str, str] | None = None, timeout: float = 600,
              xla_flag: str | None = None) -> list[subprocess.CompletedProcess[str]]:
    """Run many commands in ONE fresh Python (tests/cli_batch.py): one TensorFlow start-up for all.
    A command is its arguments, or (arguments, an env of its own that is not TensorFlow's); ``env``
    (TensorFlow's settings) is the batch's, as run_cli's is a call's. Every command must ask for the
    same logical devices. What a command writes at fd level is in its output, as with run_cli; keep
    run_cli for what needs a process of its own (signals, ptys, stdin, a closed stdout, the exit code
    of the interpreter itself, output compared byte for byte with a fresh process's: TensorFlow logs some
    lines once a process, and the demo's missing-GPU step parses one line fewer in-process). ``xla_flag``:
    what placement adds to TF_XLA_FLAGS to turn XLA devices on (``--tf_xla_enable_xla_devices=false``:
    TensorFlow starts as one that dropped them would)."""
    request = [{"args": list(c[0]), "env": c[1]} if isinstance(c, tuple) and len(c) == 2 and isinstance(c[1], dict)
               else {"args": list(c), "env": {}} for c in commands]
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", **(env or {})}
    proc = subprocess.run([sys.executable, str(Path(__file__).parent / "cli_batch.py")], capture_output=True,
                          input=json.dumps({"commands": request, "xla_flag": xla_flag}).encode(), timeout=patience(timeout), env=full_env)
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-3000:]
    return [subprocess.CompletedProcess(["placement", *r["args"]], r["exit_code"], r["stdout"], r["stderr"])
            for r in json.loads(proc.stdout)]


def run_json(*args: str, expect: int = 0) -> dict[str, Any]:
    proc = run_cli(*args, "--json")
    assert proc.returncode == expect, proc.stderr[-3000:]
    return json.loads(proc.stdout)


VISIBLE = "CUDA_VISIBLE_DEVICES"


@functools.cache
def _machines_gpus() -> int:
    """The NVIDIA GPUs of this machine, asked once, as trace --cluster --split-gpus finds them (the
    driver's list, or nvidia-smi), whatever CUDA_VISIBLE_DEVICES says."""
    from placement_cli.runtime.gpu_policy import present

    return len(present({}))


def gpu_count() -> int:
    """Physical GPUs the TensorFlow processes a test starts now would see, asked without starting
    TensorFlow in the test process: the machine's, narrowed by CUDA_VISIBLE_DEVICES as CUDA narrows
    it (a module marked ``cpu_devices`` hides them: 0 while its tests run)."""
    visible = os.environ.get(VISIBLE)
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    found = _machines_gpus()
    if visible is not None:
        found = min(found, len([v for v in visible.split(",") if v.strip()]))
    return found


def has_gpu() -> bool:
    """Whether the TensorFlow processes a test starts see a physical GPU (an unpinned op then runs on GPU:0)."""
    return gpu_count() > 0


_VISIBLE_AT_START = os.environ.get(VISIBLE)


@pytest.fixture(autouse=True, scope="module")
def _cpu_devices(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module marked ``cpu_devices(reason)`` asserts the lessons of a machine without a GPU (its
    logical CPUs, what an unpinned op does there): on a GPU machine its TensorFlow processes are
    started with the GPUs hidden (CUDA_VISIBLE_DEVICES=""), so what it asserts is pinned, not
    skipped. Its tests marked ``gpu`` see the GPUs again."""
    if request.node.get_closest_marker("cpu_devices") is None or not has_gpu():
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(VISIBLE, "")
        yield


@pytest.fixture(autouse=True)
def _gpu_tests_see_the_gpu(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("gpu") is None or os.environ.get(VISIBLE) == _VISIBLE_AT_START:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        if _VISIBLE_AT_START is None:
            patch.delenv(VISIBLE, raising=False)
        else:
            patch.setenv(VISIBLE, _VISIBLE_AT_START)
        yield


_set_up_the_suites_processes()  # as conftest is imported: before any test, in every worker


def needs_gpu(test: Any) -> Any:
    """A test of GPU paths: marked ``gpu`` (tools/gpu_check.sh runs them, ``pytest -m gpu``) and
    skipped where there is no physical GPU."""
    skipped = pytest.mark.skipif(not has_gpu(), reason="needs a physical GPU (this machine has none)")
    return pytest.mark.gpu(skipped(test))

# ------------------------------------------------------------------------------- oneDNN's op names

# Where oneDNN's rewrites apply (TF_ENABLE_ONEDNN_OPTS unset or 1, on CPUs it chooses), an eager or
# executed tf.matmul is `_MklMatMul`, and one fused with its bias add `_MklNativeFusedMatMul`; placer
# lines keep the graph's `MatMul`. A test that expects a matmul accepts every name it can have.
MATMUL_OPS = frozenset({"MatMul", "_MklMatMul", "_MklNativeMatMul",
                        "_FusedMatMul", "_MklFusedMatMul", "_MklNativeFusedMatMul"})


def is_matmul(op: str | None) -> bool:
    return op in MATMUL_OPS


def matmul_count(executed_ops: dict[str, int]) -> int:
    """The matmuls an executed graph holds, whatever oneDNN renamed them to."""
    return sum(n for op, n in executed_ops.items() if op in MATMUL_OPS)


# ------------------------------------------------------------------------------- a tiny DOT reader

_CLUSTER = re.compile(r"subgraph (cluster_\d+) \{\n(.*?)\n  \}", re.DOTALL)
_NODE = re.compile(r'^\s*(n\d+) \[label="((?:[^"\\]|\\.)*)".*fillcolor="(#[0-9a-f]{6})"', re.MULTILINE)
_EDGE = re.compile(r"^\s*(n\d+) -> (n\d+)(?: \[(.*)\])?;$", re.MULTILINE)
_LABEL = re.compile(r'label="((?:[^"\\]|\\.)*)"')


def unquote(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def read_dot(text: str) -> dict[str, Any]:
    """Clusters (device label -> colour, node ids), nodes (id -> name, cluster, colour), edges."""
    clusters, nodes = {}, {}
    for cid, body in _CLUSTER.findall(text):
        label = unquote(_LABEL.search(body).group(1))
        colour = re.search(r'color="(#[0-9a-f]{6})"', body).group(1)
        members = []
        for nid, node_label, fill in _NODE.findall(body):
            nodes[nid] = {"name": unquote(node_label).split("\n")[0], "cluster": label, "fill": fill}
            members.append(nid)
        clusters[label] = {"colour": colour, "nodes": members}
    edges = [(a, b, attrs or "") for a, b, attrs in _EDGE.findall(text)]
    return {"clusters": clusters, "nodes": nodes, "edges": edges}


_FAILURES = os.environ.get("PLACEMENT_TEST_FAILURES")  # tools/gpu_check.sh --suite: each failure as it happens


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Where PLACEMENT_TEST_FAILURES names a file, each failed test's report is appended to it at once (in
    the worker that ran it): a suite cut off by its time limit still says why its tests failed."""
    if not _FAILURES or not report.failed:
        return
    with open(_FAILURES, "a", encoding="utf-8", errors="replace") as out:
        out.write(f"=== {report.nodeid} ({report.when})\n{report.longreprtext}\n")
