"""The child of `placement trace`: logging on before the program's first op, facts written when it ends.

Run as ``python -m placement_cli.runtime.child SCRIPT [ARGS...]``. It turns placement logging on
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


def main() -> None:
    script, args = sys.argv[1], sys.argv[2:]
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python SCRIPT` would have it
    try:
        import tensorflow as tf  # noqa: PLC0415
    except ImportError:
        tf = None
    recorder = None
    if tf is not None:
        from placement_cli.runtime.recording import Recorder  # noqa: PLC0415

        recorder = Recorder(tf, copies=bool(os.environ.get(COPIES_ENV)))
        recorder.install()
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        _write_facts(recorder)


def _write_facts(recorder: Any) -> None:
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
