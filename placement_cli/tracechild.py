"""The child of `placement trace`: logging on before the program's first op, facts written when it ends.

Run as ``python -m placement_cli.tracechild SCRIPT [ARGS...]``. It turns placement logging on
before TensorFlow's context initialises, makes every v1 Session log whatever its own ConfigProto
says, remembers the graphs the placer will see (Session graphs, tf.function graphs) and, when the
program ends in any way Python sees (return, exception, sys.exit, Ctrl-C), writes what those graphs
asked for to the JSON file named by $PLACEMENT_TRACE_FACTS.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from typing import Any

FACTS_ENV = "PLACEMENT_TRACE_FACTS"
COPIES_ENV = "PLACEMENT_TRACE_COPIES"


class Recorder:
    """Patches TensorFlow in this process and keeps what the facts file needs."""

    def __init__(self, tf: Any, copies: bool) -> None:
        from placement_cli.scenarios.facts import GraphRecorder  # noqa: PLC0415

        self.tf = tf
        self.graphs = GraphRecorder()
        self.session_devices: set[str] = set()
        self.copies: dict[tuple[str, str, str], None] | None = {} if copies else None
        self._partitioned: set[tuple[int, str]] = set()

    def install(self) -> None:
        tf = self.tf
        tf.debugging.set_log_device_placement(True)
        for cls in (tf.compat.v1.Session, tf.compat.v1.InteractiveSession):
            cls.__init__ = self._logged_init(cls.__init__)
        if self.copies is not None:
            base = tf.compat.v1.Session.__mro__[1]  # BaseSession: run() lives there
            base.run = self._partitioned_run(base.run)
        self.graphs.install()

    def _logged_init(self, init: Any) -> Any:
        recorder = self

        def logged_init(self: Any, target: str = "", graph: Any = None, config: Any = None) -> None:
            config = config if config is not None else recorder.tf.compat.v1.ConfigProto()
            config.log_device_placement = True
            init(self, target, graph, config)
            recorder.graphs.add(self.graph)
            try:
                recorder.session_devices.update(d.name for d in self.list_devices())
            except Exception:  # noqa: BLE001 - the devices are a nicety; the program's session is not ours to break
                pass

        return logged_init

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
                recorder._note_copies(metadata)

        return partitioned_run

    def _note_copies(self, metadata: Any) -> None:
        from placement_cli.scenarios.runtime import sends  # noqa: PLC0415

        for copy in sends(metadata.partition_graphs):
            self.copies[(copy.tensor, copy.source, copy.target)] = None  # type: ignore[index]

    def available(self) -> list[str]:
        from tensorflow.python.eager import context  # noqa: PLC0415

        names = set(self.session_devices)
        if getattr(context.context(), "_initialized", False):  # never initialise it here, at the end
            names.update(d.name for d in self.tf.config.list_logical_devices())
        return sorted(names)

    def facts(self) -> dict[str, Any]:
        from placement_cli.scenarios.facts import kernel_map  # noqa: PLC0415

        kernels = kernel_map()
        available = self.available()
        check = ("GPU",) if any("GPU:" in name.upper() for name in available) else ()
        return {
            "nodes": [node.to_dict() for node in self.graphs.nodes(kernels, check).values()],
            "available": available,
            "kernels": {op: sorted(types) for op, types in kernels.items()},
            "copies": None if self.copies is None else [list(c) for c in self.copies],
        }


def main() -> None:
    script, args = sys.argv[1], sys.argv[2:]
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python SCRIPT` would have it
    try:
        import tensorflow as tf  # noqa: PLC0415
    except ImportError:
        tf = None
    recorder = Recorder(tf, copies=bool(os.environ.get(COPIES_ENV))) if tf is not None else None
    if recorder is not None:
        recorder.install()
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        _write_facts(recorder)


def _write_facts(recorder: Recorder | None) -> None:
    path = os.environ.get(FACTS_ENV)
    if not path or recorder is None:
        return
    try:
        facts = recorder.facts()
    except Exception as exc:  # noqa: BLE001 - the program's own outcome matters more than our facts
        facts = {"error": f"{type(exc).__name__}: {exc}"}
    with open(path, "w", encoding="utf-8") as out:
        json.dump(facts, out)


if __name__ == "__main__":
    main()
