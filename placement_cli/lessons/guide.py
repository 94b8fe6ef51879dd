"""The "Using GPUs" guide's graphs: the logged matmul and the multi-tower sum."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from placement_cli.model import Report
from placement_cli.runtime.run import Trial, run_captured, run_session
from placement_cli.runtime.startup import RunOptions, session_config

A_VALUES = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def _on(tf: Any, device: str | None) -> Any:
    return tf.device(device) if device else nullcontext()


def _constants(tf: Any, named: bool) -> tuple[Any, Any]:
    a = tf.constant(A_VALUES, shape=[2, 3], name="a" if named else None)
    b = tf.constant(A_VALUES, shape=[3, 2], name="b" if named else None)
    return a, b


def _run_graph(tf: Any, graph: Any, fetch: Any, trial: Trial, options: RunOptions) -> Trial:
    """The guide's way: a v1 Session with log_device_placement (and soft placement if asked)."""
    trial.graph = graph
    try:
        with tf.compat.v1.Session(graph=graph, config=session_config(tf, options)) as sess:
            trial.result = run_session(tf, sess, fetch, options, trial).tolist()
    except tf.errors.InvalidArgumentError as exc:
        trial.error = exc.message
    return trial


def _run_eager(tf: Any, compute: Any, trial: Trial, options: RunOptions) -> Trial:
    tf.config.set_soft_device_placement(options.soft)
    try:
        trial.result = compute().numpy().tolist()
    except tf.errors.InvalidArgumentError as exc:
        trial.error = exc.message
    return trial


def matmul(device: str | None, inputs_on: str | None, options: RunOptions) -> Report:
    """``a`` (2x3) times ``b`` (3x2): the guide's first examples."""
    inputs = inputs_on or device

    def build(tf: Any, options: RunOptions) -> Trial:
        trial = Trial()
        if options.mode == "eager":
            trial.eager = [("_EagerConst", inputs, None), ("_EagerConst", inputs, None), ("MatMul", device, None)]

            @tf.function
            def product(x: Any, y: Any) -> Any:
                with _on(tf, device):
                    return tf.matmul(x, y)

            def compute() -> Any:
                with _on(tf, inputs):
                    a, b = _constants(tf, named=True)
                with _on(tf, device):
                    c = tf.matmul(a, b)
                product(a, b)  # the same matmul once more, inside a tf.function
                return c

            return _run_eager(tf, compute, trial, options)
        graph = tf.Graph()
        with graph.as_default():
            with _on(tf, inputs):
                a, b = _constants(tf, named=True)
            with _on(tf, device):
                c = tf.matmul(a, b)
        return _run_graph(tf, graph, c, trial, options)

    pins = [f"all on {device}"] if device else []
    if inputs_on:
        pins.append(f"a and b on {inputs_on}")
    title = f"Guide matmul ({', '.join([options.mode + ' mode', *pins])})"
    return run_captured(build, options, title)


def tower(devices: list[str], reduce_on: str, options: RunOptions) -> Report:
    """One matmul per device, summed with ``tf.add_n`` on ``reduce_on``."""

    def build(tf: Any, options: RunOptions) -> Trial:
        trial = Trial()
        if options.mode == "eager":
            for i, d in enumerate(devices):
                label = f"tower {i} ({d})"
                trial.eager += [("_EagerConst", d, label), ("_EagerConst", d, label), ("MatMul", d, label)]
            trial.eager.append(("AddN", reduce_on, "reduce"))

            def compute() -> Any:
                towers = []
                for d in devices:
                    with _on(tf, d):
                        a, b = _constants(tf, named=False)
                        towers.append(tf.matmul(a, b))
                with _on(tf, reduce_on):
                    return tf.add_n(towers)

            return _run_eager(tf, compute, trial, options)
        graph = tf.Graph()
        towers = []
        with graph.as_default():
            for i, d in enumerate(devices):
                before = len(graph.get_operations())
                with _on(tf, d):
                    a, b = _constants(tf, named=False)
                    towers.append(tf.matmul(a, b))
                for op in graph.get_operations()[before:]:
                    trial.groups[op.name] = f"tower {i} ({d})"
            with _on(tf, reduce_on):
                total = tf.add_n(towers)
            trial.groups[total.op.name] = "reduce"
        return _run_graph(tf, graph, total, trial, options)

    title = f"Guide towers on {', '.join(devices)}, summed on {reduce_on} ({options.mode} mode)"
    return run_captured(build, options, title)
