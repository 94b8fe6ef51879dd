"""What each eager op asked for: the device scope in force in its thread when it ran.

TensorFlow's log says where an eager op ran (``Executing op X in device D``) but not what it asked
for. An op callback (runtime.private.op_callbacks) is called in the thread that ran the op, right
after it ran and after its log line was written: it records the op's type and the thread's device
scope, in that thread's order. eagerjoin.eager_records joins these records to the log's eager lines,
thread by thread (absl's prefix names the thread), and only as far as the op types agree.

TensorFlow's op callbacks are per thread: the ops of a thread are recorded when the callback was
added in that thread (the one that imported TensorFlow under `placement trace`, the one that
entered capture()), or TensorFlow copied it there (MirroredStrategy's replica threads); the
eager ops of other threads keep no request (unknown, never guessed). Each record is four bytes:
an index into the (op type, request, resource) records seen.

An eager op that takes a resource (a variable's handle, an iterator's) runs on the resource's device,
whatever the scope (TensorFlow's MaybePinToResourceDevice, eager/placement_utils.cc): each record
also keeps the device of the op's first resource input and what made that resource (the variable's
name, or the op type that made it), so the report can say why it ran there.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable
from typing import Any

from placement_cli.runtime import private


class EagerOps:
    """The op callback's records for one install."""

    def __init__(self) -> None:
        # (op type as TF gave it, request, its first resource input's device, the op type that made that
        # resource, the resource's name) -> index
        self.pairs: dict[tuple[Any, str, str, str, str], int] = {}
        self.resources: dict[int, tuple[str, str]] = {}  # a resource handle's tensor id -> (made by, name)
        self.threads: dict[int, array[int]] = {}  # native thread id -> indices, in the order its ops ran
        self.installed = False
        self.removed_early = False  # the program took our callback away (op_callbacks.clear_op_callbacks)
        self.still_there: Callable[[], bool] = lambda: True  # our callback is in this thread's list
        self.watch: Callable[[Any], None] | None = None  # told each eager op's type (--time counts a step's calls)

    def install(self) -> Callable[[], None]:
        """Add the callback in this thread; returns the undo (a no-op where the API is missing)."""
        api = private.op_callbacks()
        if api is None:
            return lambda: None
        add, remove, requested, callbacks_of = api
        pairs, threads, resources = self.pairs, self.threads, self.resources
        lock = threading.Lock()
        native_id = threading.get_native_id
        mine = native_id()
        own: array[int] = array("i")
        threads[mine] = own

        def record(op_type: Any, inputs: Any, attrs: Any, outputs: Any, op_name: Any = None, graph: Any = None) -> None:
            if graph is not None:  # a graph op being made (a tf.function traced): the placer logs its request
                return
            watch = self.watch
            if watch is not None:
                watch(op_type)
            try:
                device, made_by, name = _resource_input(inputs, resources)
                _note_resources(op_type, op_name, outputs, resources)
                key = (op_type, requested(), device, made_by, name)
                index = pairs.get(key)
                if index is None:
                    with lock:
                        index = pairs.setdefault(key, len(pairs))
                thread = native_id()
                if thread == mine:
                    own.append(index)
                else:  # a thread TensorFlow copied the callback to
                    with lock:
                        found = threads.setdefault(thread, array("i"))
                    found.append(index)
            except Exception as exc:  # noqa: BLE001 - the program's op ran; only our record of it is lost
                private.note("op_callbacks", f"recording an eager op failed: {type(exc).__name__}: {exc}")
            return

        try:
            add(record)
        except Exception as exc:  # noqa: BLE001 - requests stay unknown; the program runs on
            private.note("op_callbacks", f"add_op_callback failed: {type(exc).__name__}: {exc}")
            return lambda: None
        self.installed = True
        self.still_there = lambda: record in callbacks_of()

        def undo() -> None:
            try:
                remove(record)
                self.still_there = lambda: True  # gone by this undo, not by the program (capture() ends so)
            except KeyError:  # already gone: the program cleared the callbacks of this thread
                self.removed_early = True
            except Exception as exc:  # noqa: BLE001
                private.note("op_callbacks", f"remove_op_callback failed: {type(exc).__name__}: {exc}")

        return undo

    def to_dict(self) -> dict[str, Any] | None:
        """``{"pairs": [[op type, request, resource device, made by, name], ...], "threads": {tid: [index,
        ...]}}``: the last three are the device of its first resource input, the op type that made that
        resource (VarHandleOp) and its name ('' each where not known or no resource); None: not recorded."""
        if not self.installed:
            return None
        try:
            gone = self.removed_early or (threading.get_native_id() in self.threads and not self.still_there())
        except Exception:  # noqa: BLE001 - cannot tell: say nothing
            gone = False
        if gone:
            private.note("op_callbacks", "the program removed placement's op callback (clear_op_callbacks): "
                                         "its eager ops after that have no request")
        pairs = [["", "", "", "", ""]] * len(self.pairs)
        for (op, requested, device, made_by, name), index in list(self.pairs.items()):
            pairs[index] = [_text(op), str(requested or ""), device, made_by, name]
        return {"pairs": pairs, "threads": {str(tid): list(found) for tid, found in list(self.threads.items())}}

    def op_types(self) -> set[str]:
        return {_text(key[0]) for key in list(self.pairs)}


def _text(op: Any) -> str:
    return op.decode("utf-8", "replace") if isinstance(op, bytes) else str(op)


def _is_resource(tensor: Any) -> bool:
    return getattr(getattr(tensor, "dtype", None), "name", None) == "resource"


def _resource_input(inputs: Any, resources: dict[int, tuple[str, str]]) -> tuple[str, str, str]:
    """The device of the op's first resource input, the op type that made that resource and its name
    ('' each where not known or none)."""
    for tensor in inputs or ():
        if _is_resource(tensor):
            return (str(tensor.device or ""), *resources.get(getattr(tensor, "_id", -1), ("", "")))
    return "", "", ""


def _note_resources(op_type: Any, op_name: Any, outputs: Any, resources: dict[int, tuple[str, str]]) -> None:
    """What made each resource handle an op returns: its op type (VarHandleOp, AnonymousIteratorV3) and
    the name the program gave it (a variable's name scope, as TensorFlow passes it to the op)."""
    for tensor in outputs or ():
        if _is_resource(tensor) and getattr(tensor, "_id", None) is not None:
            resources[tensor._id] = (_text(op_type), str(op_name or "").rstrip("/"))  # noqa: SLF001 - no public name
