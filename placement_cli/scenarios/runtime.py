"""Starting TensorFlow for a run: logical devices, sessions, and explaining each placement."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from placement_cli.fdcapture import capture_fds
from placement_cli.devices import try_parse
from placement_cli.errors import UsageProblem
from placement_cli.logparse import parse_text
from placement_cli.model import Copy, Report
from placement_cli.scenarios.facts import GraphRecorder, kernel_checks, kernel_map
from placement_cli.why import Facts, explain


@dataclass(frozen=True)
class RunOptions:
    """Options every TensorFlow-running command shares."""

    soft: bool = False
    mode: str = "graph"  # graph | eager
    cpus: int | None = None
    virtual_gpus: int | None = None
    copies: bool = False  # record the executed graph's _Send/_Recv pairs (constant folding off)


@dataclass
class Trial:
    """What one run produced before parsing: requests, result, error text."""

    graph: Any = None  # graph mode: the graph that ran (requests are read from it)
    groups: dict[str, str] = field(default_factory=dict)  # node -> group label (tower)
    eager: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (op, device, group) in run order
    copies: list[Copy] | None = None
    result: Any = None
    error: str | None = None
    available: tuple[str, ...] = ()


_TF: Any = None
_VGPU_MB = 512  # memory of each logical GPU carved out of one physical GPU
_EDGE = re.compile(r"^edge_\d+_")  # TF names a sent tensor edge_<id>_<producer>


def tensorflow(options: RunOptions) -> Any:
    """Import TensorFlow once, logging on and logical devices set before it initialises.

    ``set_log_device_placement`` must come before anything initialises the context
    (TF 2.21 silently logs nothing otherwise), so it is the first call made here.
    """
    global _TF
    if _TF is not None:
        return _TF
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")
    import tensorflow as tf  # noqa: PLC0415 - only run commands import TensorFlow

    tf.debugging.set_log_device_placement(True)
    if options.cpus:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * options.cpus)
    if options.virtual_gpus:
        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            raise UsageProblem("--virtual-gpus needs one physical GPU, and TensorFlow sees none here; "
                               "use --cpus N to split the CPU instead")
        tf.config.set_logical_device_configuration(
            gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=_VGPU_MB)] * options.virtual_gpus
        )
    _TF = tf
    return tf


def available_devices(tf: Any) -> tuple[str, ...]:
    specs = (try_parse(d.name) for d in tf.config.list_logical_devices())
    return tuple(s.canonical for s in specs if s)


def session_config(tf: Any, options: RunOptions) -> Any:
    """A v1 Session makes its own devices: logical CPUs must be asked for again here."""
    config = tf.compat.v1.ConfigProto(log_device_placement=True, allow_soft_placement=options.soft)
    if options.cpus:
        config.device_count["CPU"] = options.cpus
    if options.virtual_gpus:  # likewise the logical GPUs (untested here: no GPU on CI)
        config.gpu_options.experimental.virtual_devices.add(memory_limit_mb=[_VGPU_MB] * options.virtual_gpus)
    if options.copies:  # grappler would otherwise fold the guide's matmuls into constants: nothing to copy
        from tensorflow.core.protobuf import rewriter_config_pb2  # noqa: PLC0415

        config.graph_options.rewrite_options.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
    return config


def run_session(tf: Any, sess: Any, fetch: Any, options: RunOptions, trial: Trial) -> Any:
    """sess.run, asking for the partition graphs when the copies between devices are wanted."""
    if not options.copies:
        return sess.run(fetch)
    run_options = tf.compat.v1.RunOptions(output_partition_graphs=True)
    metadata = tf.compat.v1.RunMetadata()
    value = sess.run(fetch, options=run_options, run_metadata=metadata)
    trial.copies = list(sends(metadata.partition_graphs))
    return value


def sends(partition_graphs: Any) -> Iterator[Copy]:
    """The copies between devices of an executed graph: one per _Send node."""
    for graph in partition_graphs:
        for node in graph.node:
            if node.op == "_Send":
                yield Copy(_EDGE.sub("", node.attr["tensor_name"].s.decode()), node.attr["send_device"].s.decode(),
                           node.attr["recv_device"].s.decode())


def run_captured(build: Any, options: RunOptions, title: str) -> Report:
    """Run ``build(tf, options) -> Trial`` with fds 1/2 captured, then parse and explain."""
    recorder = GraphRecorder()
    with capture_fds() as cap:
        tf = tensorflow(options)
        undo = recorder.install()
        try:
            trial = build(tf, options)
        finally:
            undo()
        trial.available = available_devices(tf)
    if trial.graph is not None:
        recorder.add(trial.graph)
    log = cap.text
    report = parse_text(log + ("\n" + trial.error if trial.error else ""))
    placements = explain(report.placements, facts_of(recorder, trial))
    copies = None if trial.copies is None else tuple(trial.copies)
    return replace(report, placements=placements, title=title, result=trial.result, log=log, copies=copies)


def facts_of(recorder: GraphRecorder, trial: Trial) -> Facts:
    """What the run's graphs asked for, with the devices and kernels there were."""
    kernels = kernel_map()
    return Facts(nodes=recorder.nodes(kernels, kernel_checks(trial.available), trial.groups), available=trial.available, kernels=kernels,
                 eager=tuple(trial.eager), complete=True, graphs_known=True)
