"""Starting TensorFlow for a run: logging on first, logical devices, and the v1 Session config."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from placement_cli.devices import try_parse
from placement_cli.exceptions import UsageProblem


@dataclass(frozen=True)
class RunOptions:
    """Options every TensorFlow-running command shares."""

    soft: bool = False
    mode: str = "graph"  # graph | eager
    cpus: int | None = None
    virtual_gpus: int | None = None
    copies: bool = False  # record the executed graph's _Send/_Recv pairs (constant folding off)
    tensorboard: str | None = None  # graph mode: write a TensorBoard event file (graph, assigned devices, step stats) here


_TF: Any = None


def drop_cluster_config(environ: Any = None) -> str | None:
    """The one-machine lessons run on this machine as asked, whatever TF_CONFIG says: a stale one
    (from a cluster job, a notebook, a shell profile) would make MirroredStrategy read a cluster
    that is not there ("Expecting value" for garbage, "No device satisfies" for a worker's).
    TF_CONFIG leaves this process's environment before TensorFlow starts (it, and any process
    started from here, never sees it); the value that was set is returned so that the user is
    told, None if it was unset or blank."""
    environ = os.environ if environ is None else environ
    value = environ.pop("TF_CONFIG", None)
    return value if value is not None and value.strip() else None
_VGPU_MB = 512  # memory of each logical GPU carved out of one physical GPU


def tensorflow(options: RunOptions) -> Any:
    """Import TensorFlow once, logging on and logical devices set before it initialises.

    ``set_log_device_placement`` must come before anything initialises the context
    (TF 2.21 silently logs nothing otherwise), so it is the first call made here. The
    placements are INFO lines: TensorFlow runs here with every level on, whatever the user's
    ``TF_CPP_MIN_LOG_LEVEL`` (it is read when TensorFlow first logs, so it stays set for this process).
    """
    global _TF
    if _TF is not None:
        return _TF
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
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
    if options.copies or options.tensorboard:
        # The guide's matmuls of constants would be folded into constants before they run, and the
        # copies listed (or the step stats TensorBoard shows) would be of those constants: by
        # grappler, and again by the older graph optimizer (``MatMul/_0__cf__0``). Both are turned
        # off, so the executed graph is the guide's.
        rewrite = config.graph_options.rewrite_options
        rewrite.constant_folding = rewrite.OFF
        optimizer = config.graph_options.optimizer_options
        optimizer.opt_level = tf.compat.v1.OptimizerOptions.L0
        optimizer.do_constant_folding = False
    return config
