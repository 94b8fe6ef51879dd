"""Every private TensorFlow API placement uses, in one place, each with a fallback.

TensorFlow may rename or drop any of these in a release. Each accessor returns ``None`` (or
``False``) when its API is missing or fails, and records why in ``unavailable()``; callers then
report ``unknown`` for what the API would have told, never a guess. Graph nodes' requests
(``op.device``), colocation groups and inputs are read through public APIs only; eager ops'
requests need ``op_callbacks``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

# name -> what it is used for (docs/notes.md and `unavailable()` messages use these words)
APIS = {
    "kernel_registry": "tensorflow.python.framework.kernels.get_all_registered_kernels: which device types have a kernel for each op",
    "kernel_lookup": "tensorflow.python.util._pywrap_kernel_registry.TryFindKernelClass: whether a node's very attrs have a kernel on a device type",
    "func_graph": "tensorflow.python.framework.func_graph.func_graph_from_py_func: recording each tf.function graph as it is traced",
    "base_session": "tensorflow.python.client.session.BaseSession.run: asking Session runs for their partition graphs (--copies)",
    "context_initialized": "tensorflow.python.eager.context.context()._initialized: whether TensorFlow's eager context has started",
    "enable_xla_devices": "tensorflow.python.pywrap_tfe.TF_EnableXlaDevices and context().reinitialize_physical_devices: TensorFlow's XLA devices turned on after the GPUs were counted (demo, errors: only where no GPU exists)",
    "set_device": "Operation._set_device: the errors catalogue's pin that contradicts a colocation",
    "cross_device_ops": "MirroredStrategy.extended._cross_device_ops: which all-reduce a MirroredStrategy uses (mirrored)",
    "context_class": "tensorflow.python.eager.context.Context.log_device_placement: keeping placement logging on when the traced program switches it off",
    "eager_run_metadata": "tensorflow.python.eager.context.enable_run_metadata/export_run_metadata: the partition graphs of a tf.function's runs (mirrored --copies)",
    "op_callbacks": "tensorflow.python.framework.op_callbacks.add_op_callback and context().device_name: the device each eager op asked for (trace, capture())",
    "function_defs": "tensorflow.python.eager.context.context().get_function_def: which tf.functions that ran were compiled by XLA (jit_compile), and their bodies, which TensorFlow does not log",
}

_disabled: set[str] = set()
_unavailable: dict[str, str] = {}


def disable(*names: str) -> None:
    """Treat these APIs as missing (tests check that each degrades to ``unknown``)."""
    unknown = set(names) - set(APIS)
    if unknown:
        raise KeyError(f"no private API named {sorted(unknown)}")
    _disabled.update(names)


@contextmanager
def disabled(*names: str) -> Iterator[None]:
    """``disable`` for the block only (a test runs each command with each API missing, in one process)."""
    before = set(_disabled)
    disable(*names)
    try:
        yield
    finally:
        _disabled.intersection_update(before)


def unavailable() -> dict[str, str]:
    """The APIs that were asked for and missing or failing, with why."""
    return dict(_unavailable)


def note(name: str, why: str) -> None:
    """An API that loaded but failed when used (the first failure is kept)."""
    _unavailable.setdefault(name, why)


def forget() -> None:
    """Start a new run's account of ``unavailable()``."""
    _unavailable.clear()


def missing_facts() -> tuple[str, ...]:
    """``unavailable()`` in words: what each missing API would have told, and why it could not."""
    return tuple(f"{name} ({APIS[name]}): {why}" for name, why in sorted(_unavailable.items()))


def _get(name: str, load: Callable[[], T]) -> T | None:
    if name in _disabled:
        _unavailable[name] = "switched off"
        return None
    try:
        return load()
    except Exception as exc:  # noqa: BLE001 - any failure of a private API means: unknown
        _unavailable[name] = f"{type(exc).__name__}: {exc}"
        return None


def registered_kernels() -> dict[str, frozenset[str]] | None:
    """Op type -> the device types with a registered kernel (one call: the whole registry)."""

    def load() -> dict[str, frozenset[str]]:
        from tensorflow.python.framework import kernels  # noqa: PLC0415 - TensorFlow

        found: dict[str, set[str]] = {}
        for kernel in kernels.get_all_registered_kernels().kernel:
            found.setdefault(kernel.op, set()).add(kernel.device_type)
        return {op: frozenset(types) for op, types in found.items()}

    return _get("kernel_registry", load)


def kernel_lookup() -> Callable[[bytes], bool] | None:
    """``lookup(serialized NodeDef) -> bool``: is there a kernel for this node on its device type?"""

    def load() -> Callable[[bytes], bool]:
        from tensorflow.python.util import _pywrap_kernel_registry as registry  # noqa: PLC0415 - TensorFlow

        find = registry.TryFindKernelClass

        def lookup(node_def: bytes) -> bool:
            try:
                return bool(find(node_def))
            except Exception as exc:  # this node's kernels stay unknown; the run says so
                note("kernel_lookup", f"failed for a node: {type(exc).__name__}: {exc}")
                raise

        return lookup

    return _get("kernel_lookup", load)


def func_graph_module() -> Any:
    """The module whose ``func_graph_from_py_func`` builds every tf.function graph."""

    def load() -> Any:
        from tensorflow.python.framework import func_graph  # noqa: PLC0415 - TensorFlow

        func_graph.func_graph_from_py_func  # noqa: B018 - fail here, not when patching
        return func_graph

    return _get("func_graph", load)


def frame_filter() -> Any:
    """tensorflow.python.util.tf_stack.CurrentModuleFilter: made in a module, it keeps that module's frames
    out of the stacks TensorFlow keeps of the ops created while it is entered (the "defined at" of its
    errors). Not one of ``APIS``: where it is missing nothing is unknown, placement's frame only shows."""
    try:
        from tensorflow.python.util import tf_stack  # noqa: PLC0415 - TensorFlow

        return tf_stack.CurrentModuleFilter
    except Exception:  # noqa: BLE001 - any failure: no filter
        return None


def base_session(tf: Any) -> Any:
    """The class whose ``run`` every v1 Session (and InteractiveSession) uses."""

    def load() -> Any:
        from tensorflow.python.client.session import BaseSession  # noqa: PLC0415 - TensorFlow

        if not issubclass(tf.compat.v1.Session, BaseSession) or "run" not in BaseSession.__dict__:
            raise TypeError("tf.compat.v1.Session no longer runs through BaseSession.run")
        return BaseSession

    return _get("base_session", load)


def context_initialized() -> bool | None:
    """Whether TensorFlow's eager context has started (None: cannot tell)."""

    def load() -> bool:
        from tensorflow.python.eager import context  # noqa: PLC0415 - TensorFlow

        return bool(context.context()._initialized)  # noqa: SLF001

    return _get("context_initialized", load)


def enable_xla_devices() -> bool:
    """Turn TensorFlow's XLA devices on in a TensorFlow already imported whose devices are not made yet
    (what TF_XLA_FLAGS=--tf_xla_enable_xla_devices does at its start), its physical devices listed
    again (False: cannot)."""

    def load() -> bool:
        from tensorflow.python import pywrap_tfe  # noqa: PLC0415 - TensorFlow
        from tensorflow.python.eager import context  # noqa: PLC0415 - TensorFlow

        ctx = context.context()
        if ctx._initialized:  # noqa: SLF001
            raise RuntimeError("TensorFlow's devices were already made")
        pywrap_tfe.TF_EnableXlaDevices()  # what context().enable_xla_devices() calls, without its deprecation warning
        ctx.reinitialize_physical_devices()
        return True

    return bool(_get("enable_xla_devices", load))


def set_device(op: Any, device: str) -> bool:
    """Force ``op``'s device field after it was built (False: cannot)."""

    def load() -> bool:
        op._set_device(device)  # noqa: SLF001
        return True

    return bool(_get("set_device", load))


def cross_device_ops(strategy: Any) -> tuple[str, str | None] | None:
    """The class of the cross-device ops a MirroredStrategy reduces with, and for collectives the
    implementation (RING, NCCL, AUTO) when it can be read; None: unknown."""

    def load() -> tuple[str, str | None]:
        ops = strategy.extended._cross_device_ops  # noqa: SLF001
        if ops is None:
            raise AttributeError("no cross-device ops chosen yet")
        implementation = None
        options = getattr(ops, "_options", None)
        if options is not None and getattr(options, "implementation", None) is not None:
            implementation = options.implementation.name
        return type(ops).__name__, implementation

    return _get("cross_device_ops", load)


def eager_run_metadata() -> tuple[Callable[[], None], Callable[[], Any], Callable[[], None]] | None:
    """(enable, export, disable) of the eager context's run metadata: the partition graphs each
    tf.function call executed."""

    def load() -> tuple[Callable[[], None], Callable[[], Any], Callable[[], None]]:
        from tensorflow.python.eager import context  # noqa: PLC0415 - TensorFlow

        return context.enable_run_metadata, context.export_run_metadata, context.disable_run_metadata

    return _get("eager_run_metadata", load)


def context_class() -> Any:
    """The class of TensorFlow's eager context, whose ``log_device_placement`` property every way of
    switching placement logging goes through (``tf.debugging.set_log_device_placement`` included)."""

    def load() -> Any:
        from tensorflow.python.eager import context  # noqa: PLC0415 - TensorFlow

        cls = type(context.context())
        if not isinstance(cls.__dict__.get("log_device_placement"), property):
            raise TypeError("Context.log_device_placement is no longer a property")
        return cls

    return _get("context_class", load)


def op_callbacks() -> tuple[Callable[[Any], None], Callable[[Any], None], Callable[[], str], Callable[[], Any]] | None:
    """(add, remove, requested, callbacks) for eager ops: ``add(cb)`` has ``cb(op_type, inputs, attrs,
    outputs, op_name=None, graph=None)`` called in this thread after every op it runs (``graph is
    None``: an eager op or function call) and as each graph op is made; ``remove(cb)`` undoes it;
    ``requested()``, called inside ``cb``, is the device scope in force in this thread ('' for none);
    ``callbacks()`` the callbacks of the calling thread."""

    def load() -> tuple[Callable[[Any], None], Callable[[Any], None], Callable[[], str], Callable[[], Any]]:
        from tensorflow.python.eager import context  # noqa: PLC0415 - TensorFlow
        from tensorflow.python.framework import op_callbacks as callbacks  # noqa: PLC0415 - TensorFlow

        ctx = context.context()
        if not isinstance(type(ctx).__dict__.get("device_name"), property):
            raise TypeError("Context.device_name is no longer a property")
        device_name = type(ctx).__dict__["device_name"].fget
        return (callbacks.add_op_callback, callbacks.remove_op_callback, lambda: device_name(ctx),
                lambda: ctx.op_callbacks)

    return _get("op_callbacks", load)


def function_def() -> Callable[[str], Any] | None:
    """``get(name)``: the FunctionDef of a function TensorFlow's eager context knows (raises where it
    knows none by that name)."""

    def load() -> Callable[[str], Any]:
        from tensorflow.python.eager import context  # noqa: PLC0415 - TensorFlow

        get: Callable[[str], Any] = context.context().get_function_def
        return get

    return _get("function_defs", load)
