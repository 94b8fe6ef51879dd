"""Patching TensorFlow in the process that runs the user's code: every Session logs, every graph is kept."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, cast

from placement_cli.i18n import english
from placement_cli.runtime import private
from placement_cli.runtime.facts import GraphRecorder, kernel_checks, kernel_map, xla_compiled
from placement_cli.runtime.partitions import sends
from placement_cli.runtime.stepstats import copies_with_bytes
from placement_cli.runtime.trace.eagerops import EagerOps


def set_logging(tf: Any, enabled: bool) -> None:
    """``tf.debugging.set_log_device_placement`` and nothing else. On a context that has started,
    TensorFlow's switch also puts the context's soft placement back to its default (measured, TF
    2.21: after ``set_soft_device_placement(False)``, a pin to a missing GPU then runs on the CPU,
    while ``get_soft_device_placement()`` still says False): the program's own setting is set again."""
    soft = tf.config.get_soft_device_placement()
    tf.debugging.set_log_device_placement(enabled)
    if private.context_initialized():
        tf.config.set_soft_device_placement(soft)


# What TensorFlow had before any recorder patched it, while recorders are installed. Recorders of
# different threads may end in any order, each putting back what it found (maybe another's patch):
# when the last one ends, everything is put back as it was before the first.
_FIRST: dict[tuple[int, str], tuple[Any, str, Any]] = {}
_LIVE = [0]
_LOCK = threading.Lock()


def _note_first(owner: Any, name: str) -> None:
    _FIRST.setdefault((id(owner), name), (owner, name, owner.__dict__[name]))


class _Switch(property):
    """A recorder's stand-in for the context's ``log_device_placement`` (a nested one finds it there)."""


class Recorder:
    """Patches TensorFlow in this process and keeps what the facts file needs."""

    def __init__(self, tf: Any, copies: bool) -> None:
        self.tf = tf
        self.graphs = GraphRecorder()
        self.eager = EagerOps()
        self.session_devices: set[str] = set()
        # the graph of each Session at its first run, in order: TensorFlow places a Session's graph then,
        # so the log's placer blocks of Session graphs come in this order (two graphs with the same
        # node names are told apart by it)
        self.session_runs: list[int] = []
        self._sessions_ran: weakref.WeakSet[Any] = weakref.WeakSet()  # (an id is reused once a Session is freed)
        self.copies: dict[tuple[str, str, str], None] | None = {} if copies else None
        self._partitioned: set[tuple[int, str]] = set()
        # each copy's [dtype, shape, bytes, physical] by "tensor|from|to", where the graph tells them
        self.copy_sizes: dict[str, list[Any]] = {}
        self.previous_logging: bool | None = None  # set_log_device_placement before install()
        self.program_logging: bool | None = None  # what the program set while installed (it reads that back)
        self.switched_off = False  # the program asked to switch placement logging off meanwhile
        self.kept_on = False  # ... and TensorFlow logged on (the switch was intercepted)
        self.installed = False
        self.intercepting = False  # the context's logging switch is ours while installed

    def install(self) -> Callable[[], None]:
        """Patch TensorFlow; returns the undo, which puts back everything install() changed. TensorFlow
        itself keeps logging eager ops and tf.functions if its context started while logging was on."""
        with _LOCK:
            _LIVE[0] += 1
            self._note_patched()
        try:
            return self._install()
        except BaseException:
            with _LOCK:
                _LIVE[0] -= 1
            raise

    def _install(self) -> Callable[[], None]:
        tf = self.tf
        context = private.context_class()
        nested = context is not None and isinstance(context.__dict__.get("log_device_placement"), _Switch)
        self.previous_logging = bool(tf.debugging.get_log_device_placement())
        self.program_logging = self.previous_logging
        if not nested:  # a recorder around this one keeps TensorFlow logging already
            set_logging(tf, True)
        saved: list[tuple[Any, str, Any]] = []
        self.intercepting = context is not None
        if context is not None:
            saved.append((context, "log_device_placement", context.__dict__["log_device_placement"]))
            context.log_device_placement = self._kept_on(context.__dict__["log_device_placement"])
        for cls in (tf.compat.v1.Session, tf.compat.v1.InteractiveSession):
            saved.append((cls, "__init__", cls.__dict__["__init__"]))
            cls.__init__ = self._logged_init(cls.__init__)
        base = private.base_session(tf) if self.copies is not None else None
        if base is not None:
            saved.append((base, "run", base.__dict__["run"]))
            base.run = self._partitioned_run(base.run)
        elif self.copies is not None:
            self.copies = None  # cannot ask Session runs for their partition graphs: copies unknown
        ordered = private.base_session(tf)
        if ordered is not None:
            saved.append((ordered, "run", ordered.__dict__["run"]))
            ordered.run = self._ordered_run(ordered.run)
        undo_graphs = self.graphs.install()
        undo_eager = self.eager.install()
        self.installed = True

        def undo() -> None:
            self.logging_switched_off()
            self.installed = False
            undo_eager()
            undo_graphs()
            for owner, name, original in reversed(saved):
                setattr(owner, name, original)
            with _LOCK:
                _LIVE[0] -= 1
                if not _LIVE[0]:
                    for owner, name, original in _FIRST.values():
                        setattr(owner, name, original)
                    _FIRST.clear()
            if not nested:
                set_logging(tf, bool(self.program_logging))
                return
            # what the program switched inside this block, it switched inside the one around it too
            if self.switched_off:
                tf.debugging.set_log_device_placement(False)
            if self.switched_off or self.program_logging != self.previous_logging:
                tf.debugging.set_log_device_placement(bool(self.program_logging))

        return undo

    def _note_patched(self) -> None:
        """What each patch of install() replaces, as TensorFlow had it before any recorder."""
        tf = self.tf
        context = private.context_class()
        if context is not None:
            _note_first(context, "log_device_placement")
        for cls in (tf.compat.v1.Session, tf.compat.v1.InteractiveSession):
            _note_first(cls, "__init__")
        base = private.base_session(tf)
        if base is not None:
            _note_first(base, "run")
        func_graph = private.func_graph_module()
        if func_graph is not None:
            _note_first(func_graph, "func_graph_from_py_func")

    def _kept_on(self, switch: property) -> property:
        """The context's logging switch while placement records: what the program sets is what it
        reads back, and TensorFlow keeps logging (the program's switch takes effect when recording ends)."""
        recorder = self

        def read(context: Any) -> Any:
            getter = cast("Callable[[Any], Any]", switch.fget)  # the context's own switch has a getter
            return recorder.program_logging if recorder.program_logging is not None else getter(context)

        def write(context: Any, enable: Any) -> None:
            recorder.program_logging = bool(enable)
            if not enable:
                recorder.switched_off = recorder.kept_on = True

        return _Switch(read, write, doc=switch.__doc__)

    def logging_switched_off(self) -> bool:
        """Whether the program switched placement logging off while recording (kept on, or not)."""
        if self.installed and not self.intercepting and not self.switched_off \
                and not self.tf.debugging.get_log_device_placement():
            self.switched_off = True  # the switch could not be intercepted: TensorFlow stopped logging
        return self.switched_off

    def _logged_init(self, init: Any) -> Any:
        recorder = self

        def logged_init(self: Any, target: str = "", graph: Any = None, config: Any = None) -> None:
            logged = recorder.tf.compat.v1.ConfigProto()
            if config is not None:
                logged.CopyFrom(config)  # the program's own config stays as it wrote it
            logged.log_device_placement = True
            init(self, target, graph, logged)
            recorder.graphs.add(self.graph)
            try:
                devices = [d.name for d in self.list_devices()]
            except Exception:  # noqa: BLE001 - the devices are a nicety; the program's session is not ours to break
                return
            recorder.session_devices.update(devices)
            recorder.graphs.devices_of(self.graph, devices)

        return logged_init

    def _ordered_run(self, run: Any) -> Any:
        """Note each Session's graph at its first run (when TensorFlow places it)."""
        recorder = self

        def ordered_run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self not in recorder._sessions_ran:
                recorder._sessions_ran.add(self)
                graph = getattr(self, "graph", None)
                if graph is not None:
                    recorder.graphs.add(graph)
                    recorder.session_runs.append(id(graph))
            return run(self, *args, **kwargs)

        return ordered_run

    def _partitioned_run(self, run: Any) -> Any:
        """Ask once per session and fetch signature for the partition graphs, to list their _Send copies."""
        recorder = self

        def partitioned_run(self: Any, fetches: Any, feed_dict: Any = None, options: Any = None,
                            run_metadata: Any = None) -> Any:
            key = (id(self), f"{fetches!s}|{sorted(map(str, feed_dict or ()))}")
            if key in recorder._partitioned:
                return run(self, fetches, feed_dict, options, run_metadata)
            recorder._partitioned.add(key)
            tf = recorder.tf
            asked = tf.compat.v1.RunOptions()
            if options is not None:
                asked.CopyFrom(options)
            asked.output_partition_graphs = True
            metadata = run_metadata if run_metadata is not None else tf.compat.v1.RunMetadata()
            try:
                return run(self, fetches, feed_dict, asked, metadata)
            finally:
                recorder._note_copies(metadata, getattr(self, "graph", None))

        return partitioned_run

    def _note_copies(self, metadata: Any, graph: Any) -> None:
        for copy in sends(metadata.partition_graphs):
            self.copies[(copy.tensor, copy.source, copy.target)] = None  # type: ignore[index]
        try:  # sizes from the _Send's dtype and the Python graph's static shapes (no step is traced for them)
            for copy in copies_with_bytes(self.tf, metadata.partition_graphs, None, graph):
                self.copy_sizes[f"{english(copy.tensor).rsplit(':', 1)[0]}|{copy.source}|{copy.target}"] = [
                    copy.dtype, None if copy.shape is None else list(copy.shape), copy.bytes, copy.physical]
        except Exception:  # noqa: BLE001 - the copies stay listed, their sizes unknown
            pass

    def available(self) -> list[str]:
        names = set(self.session_devices)
        if private.context_initialized():  # never initialise it here, at the end
            names.update(d.name for d in self.tf.config.list_logical_devices())
        return sorted(names)

    def facts(self) -> dict[str, Any]:
        kernels = kernel_map()
        available = self.available()
        check = kernel_checks(available)
        graphs = self.graphs.per_graph(kernels, check)
        graph_calls = self.graphs.calls()
        order = list(self.graphs.graphs)  # the graphs' ids, in per_graph's order
        if not check and kernels is not None:  # the registry of the ops that ran: why one was not where it asked
            ran = {n.op for graph in graphs for n in graph} | self.eager.op_types()
            kernels = {op: kernels[op] for op in ran if op in kernels}
        return {
            # graph by graph: a placer line takes the request of a node of its own graph, never another's
            "graphs": [[node.to_dict() for node in graph] for graph in graphs],
            # each graph's own devices, where a Session ran it (its device_count, its cluster), else null:
            # the reasons of its nodes name those, not the process's
            "graph_devices": self.graphs.device_lists(),
            # the graph (its index in "graphs") of each Session at its first run, in order: whose placer block
            # comes next among graphs with the same node names
            "session_runs": [order.index(g) for g in self.session_runs if g in order],
            # each graph's name where it has one (a tf.function's graph: "step", run as __inference_step_N)
            "graph_names": [name if isinstance(name := getattr(g, "name", None), str) else None
                            for g in self.graphs.graphs.values()],
            "available": available,
            "kernels": None if kernels is None else {op: sorted(types) for op, types in kernels.items()},
            # None: not asked for, or no Session ran (the copies of tf.functions are not recorded)
            "copies": [list(c) for c in self.copies] if self.copies is not None and self._partitioned else None,
            "copy_sizes": self.copy_sizes or None,  # read by trace --cluster (trace lists copies without them)
            # the recorded graphs' edges, for the pictures (--dot, --graph-svg): [producer, consumer, control]
            "edges": [[e.source, e.target, e.control] for e in self.graphs.edges()],
            # the program called set_log_device_placement(False): "kept" (TensorFlow logged on) or "off"
            "logging_switched_off": ("kept" if self.kept_on else "off") if self.logging_switched_off() else None,
            # each eager op's type and the device scope it ran in, by thread (None: not recorded)
            "eager": self.eager.to_dict(),
            # the tf.functions that ran compiled by XLA (jit_compile), with their bodies' nodes: TensorFlow
            # logs only the call (None: the function library could not be read)
            "xla_compiled": xla_compiled(self.eager.op_types() | {f for calls in graph_calls for f in calls.values()}),
            # each recorded graph's function call nodes -> the function each calls (a compiled one's body is not logged)
            "graph_calls": graph_calls,
            # each recorded graph's placeholders of captured variables -> the variable's name
            "graph_captures": self.graphs.captured(),
            # the private APIs that were missing or failed, with what they would have told and why
            "unavailable": list(private.missing_facts()),
        }
