"""Starting TensorFlow for a run: logging on first, logical devices, and the v1 Session config."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from placement_cli.devices import try_parse
from placement_cli.exceptions import UsageProblem
from placement_cli.runtime import private


@dataclass(frozen=True)
class RunOptions:
    """Options every TensorFlow-running command shares."""

    soft: bool = False
    mode: str = "graph"  # graph | eager
    cpus: int | None = None
    virtual_gpus: int | None = None
    copies: bool = False  # record the executed graph's _Send/_Recv pairs (constant folding off)
    tensorboard: str | None = None  # graph mode: write a TensorBoard event file (graph, assigned devices, step stats) here
    xla: bool = False  # a device asked for is an XLA device: TensorFlow's XLA devices are turned on before it starts
    time: bool = False  # --time: the step run again, measured with TensorFlow's profiler
    time_steps: int = 10  # measured steps
    warmup: int = 2  # runs before them (the logged run is the first)


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

# TensorFlow makes its XLA devices (XLA_CPU:0, and XLA_GPU:N beside GPUs) only with this switch in
# TF_XLA_FLAGS when it starts (it reads the variable once a process); a deprecated switch, that a
# later version may drop: xla_devices() says what this one made.
XLA_SWITCH = "--tf_xla_enable_xla_devices"
XLA_DEVICES_FLAG = XLA_SWITCH  # what is added to TF_XLA_FLAGS (a test sets the switch off here: a TF without them)
_xla_switched: list[bool] = []  # the switch was in TF_XLA_FLAGS when this process's TensorFlow started


def xla_flags(current: str | None) -> str:
    """TF_XLA_FLAGS with XLA_DEVICES_FLAG added after the user's own flags (theirs kept, in order).
    TensorFlow reads a value whose first non-blank is not "-" as the name of a file of flags (the
    value as it is, blanks too): its flags come first then. A file TensorFlow cannot open is left as
    it is: TensorFlow stops at start-up saying so (a FATAL line placement shows), as without placement."""
    if current is None or not current.strip():
        return XLA_DEVICES_FLAG
    if not current.lstrip().startswith("-"):
        if os.path.isdir(current):  # read as no flags, as TensorFlow does
            return XLA_DEVICES_FLAG
        try:
            with open(current, encoding="utf-8", errors="replace") as flags:
                current = flags.read()
        except OSError:
            return current
    return f"{current.strip()} {XLA_DEVICES_FLAG}".strip()


def _switched_on(environ: Any, import_tensorflow: Any) -> Any:
    """Import TensorFlow with XLA_DEVICES_FLAG in TF_XLA_FLAGS, read there once, and the user's value
    back (unset if it was) before anything else runs: processes started later never get it."""
    before = environ.get("TF_XLA_FLAGS")
    environ["TF_XLA_FLAGS"] = xla_flags(before)
    try:
        tf = import_tensorflow()
        tf.config.list_physical_devices()  # TensorFlow reads TF_XLA_FLAGS when it first lists devices
    finally:
        if before is None:
            environ.pop("TF_XLA_FLAGS", None)
        else:
            environ["TF_XLA_FLAGS"] = before
    return tf


def xla_devices(tf: Any) -> tuple[str, ...]:
    """The XLA devices TensorFlow made (physical devices: listing them starts nothing)."""
    return tuple(d.name for d in tf.config.list_physical_devices() if d.device_type.startswith("XLA_"))


def xla_missing(options: RunOptions) -> str | None:
    """Why the XLA devices a run asked for do not exist (None: they do, or none was asked for):
    ``started`` TensorFlow was already running without the switch, ``dropped`` this TensorFlow
    makes none even with it."""
    if not options.xla or _TF is None or xla_devices(_TF):
        return None
    switched = bool(_xla_switched and _xla_switched[0]) or XLA_DEVICES_FLAG in os.environ.get("TF_XLA_FLAGS", "")
    return "dropped" if switched else "started"


def _import_tensorflow() -> Any:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    import tensorflow as tf  # noqa: PLC0415 - only run commands import TensorFlow

    tf.debugging.set_log_device_placement(True)  # first, before anything can initialise the context
    return tf


_probed: list[bool] = []  # physical_devices() imported TensorFlow: [whether it was imported before that]


def physical_devices() -> tuple[str, ...]:
    """The types of the physical devices TensorFlow finds ("CPU", "GPU", ...), asked before it makes
    any: a lesson chooses its logical devices, and whether it needs XLA devices, from them, then
    starts TensorFlow with ``tensorflow(options)`` (which turns the XLA devices on then, if asked)."""
    if _TF is None and not _probed:
        _probed.append("tensorflow" in sys.modules)
    tf = _TF if _TF is not None else _import_tensorflow()
    return tuple(d.device_type for d in tf.config.list_physical_devices())


def _turns_on(flags: str) -> bool:
    """Whether these TF_XLA_FLAGS leave the XLA devices switch on (its last mention bare, =true or =1)."""
    said = [flag.partition("=")[2].lower() for flag in flags.split() if flag.partition("=")[0] == XLA_SWITCH]
    return bool(said) and said[-1] in ("", "true", "1")


def _switched_late(tf: Any) -> bool:
    """After ``physical_devices()`` listed TensorFlow's devices (TF_XLA_FLAGS is read then, once), the
    XLA devices are turned on through TensorFlow itself, as XLA_DEVICES_FLAG would have at its start."""

    if not xla_devices(tf) and _turns_on(XLA_DEVICES_FLAG):
        private.enable_xla_devices()  # False: an API this TensorFlow dropped (with its XLA devices, says xla_missing)
    return True


def tensorflow(options: RunOptions) -> Any:
    """Import TensorFlow once, logging on and logical devices set before it initialises.

    ``set_log_device_placement`` must come before anything initialises the context
    (TF 2.21 silently logs nothing otherwise), so it is the first call made here. The
    placements are INFO lines: TensorFlow runs here with every level on, whatever the user's
    ``TF_CPP_MIN_LOG_LEVEL`` (it is read when TensorFlow first logs, so it stays set for this process).
    """
    global _TF  # noqa: PLW0603 - TensorFlow is imported once per process
    if _TF is not None:
        return _TF
    # started: by the program around this one (a notebook), too late for a switch
    started = _probed[0] if _probed else "tensorflow" in sys.modules
    if options.xla and not started and not _probed:
        tf = _switched_on(os.environ, _import_tensorflow)
        switched = True
    else:
        tf = _import_tensorflow()
        switched = bool(options.xla and not started) and _switched_late(tf)
    _xla_switched[:] = [switched]
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
    if options.copies or options.tensorboard or options.time:
        # The guide's matmuls of constants would be folded into constants before they run, and the
        # copies listed (or the step stats TensorBoard shows, or the times measured) would be of those constants: by
        # grappler, and again by the older graph optimizer (``MatMul/_0__cf__0``). Both are turned
        # off, so the executed graph is the guide's.
        rewrite = config.graph_options.rewrite_options
        rewrite.constant_folding = rewrite.OFF
        optimizer = config.graph_options.optimizer_options
        optimizer.opt_level = tf.compat.v1.OptimizerOptions.L0
        optimizer.do_constant_folding = False
    return config
