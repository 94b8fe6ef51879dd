"""The "Using GPUs" guide's graphs: the logged matmul and the multi-tower sum."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from placement_cli import messages
from placement_cli.i18n import Message, Wording
from placement_cli.model import Report
from placement_cli.runtime.run import Trial, plain, run_captured, run_session, time_steps
from placement_cli.runtime.startup import RunOptions, session_config

A_VALUES = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def _on(tf: Any, device: str | None) -> Any:
    return tf.device(device) if device else nullcontext()


def _constants(tf: Any, named: bool) -> tuple[Any, Any]:
    a = tf.constant(A_VALUES, shape=[2, 3], name="a" if named else None)
    b = tf.constant(A_VALUES, shape=[3, 2], name="b" if named else None)
    return a, b


def _run_graph(tf: Any, build: Any, trial: Trial, options: RunOptions) -> Trial:
    """The guide's way: a v1 Session with log_device_placement (and soft placement if asked).
    ``build()`` makes the graph's ops and returns the fetch; any error TensorFlow raises while
    building or running stops the run, and is kept for the report."""
    trial.graph = tf.Graph()
    try:
        with trial.graph.as_default():
            fetch = build()
        with tf.compat.v1.Session(graph=trial.graph, config=session_config(tf, options)) as sess:
            trial.result = plain(run_session(tf, sess, fetch, options, trial))
    except (tf.errors.OpError, ValueError) as exc:
        trial.failed(exc)
    return trial


def _run_eager(tf: Any, compute: Any, trial: Trial, options: RunOptions) -> Trial:
    tf.config.set_soft_device_placement(options.soft)
    try:
        trial.result = compute().numpy().tolist()
        if options.time:
            time_steps(tf, compute, options, trial, tuple)
    except (tf.errors.OpError, ValueError) as exc:
        trial.failed(exc)
    return trial


def matmul_graph(tf: Any, device: str | None, inputs_on: str | None) -> Any:
    """The guide's matmul: a (2x3) times b (3x2), each made under the device it is pinned to."""
    with _on(tf, inputs_on):
        a = tf.constant(A_VALUES, shape=[2, 3], name="a")
        b = tf.constant(A_VALUES, shape=[3, 2], name="b")
    with _on(tf, device):
        return tf.matmul(a, b)


def string_graph(tf: Any, device: str) -> Any:
    """Numbers made on ``device``, then written as text there: AsString has a CPU kernel only."""
    with tf.device(device):
        numbers = tf.range(3, name="numbers")
        return tf.strings.as_string(numbers, name="as_string")


def string_op(device: str, options: RunOptions) -> Report:
    """``string_graph`` run (graph mode): where ``device`` has no AsString kernel, TensorFlow refuses
    the pin, or with soft placement runs the op on the CPU."""

    def build(tf: Any, options: RunOptions) -> Trial:
        return _run_graph(tf, lambda: string_graph(tf, device), Trial(), options)

    return run_captured(build, options, Message(messages.STRING_OP, device=device, mode="graph"))


def tower_graph(tf: Any, devices: list[str], reduce_on: str, groups: dict[str, Wording]) -> Any:
    """One matmul per device, summed on ``reduce_on``; ``groups`` gets each op's tower (or "reduce")."""
    towers = []
    ops = tf.compat.v1.get_default_graph().get_operations
    for i, d in enumerate(devices):
        before = len(ops())
        with _on(tf, d):
            a = tf.constant(A_VALUES, shape=[2, 3])
            b = tf.constant(A_VALUES, shape=[3, 2])
            towers.append(tf.matmul(a, b))
        for op in ops()[before:]:
            groups[op.name] = messages.guide_tower(i, d)
    if len(towers) == 1:
        return towers[0]  # nothing to sum: tf.add_n of one tensor makes no op
    before = len(ops())
    with _on(tf, reduce_on):
        total = tf.add_n(towers)
    for op in ops()[before:]:
        groups[op.name] = messages.REDUCE
    return total


def matmul(device: str | None, inputs_on: str | None, options: RunOptions) -> Report:
    """``a`` (2x3) times ``b`` (3x2): the guide's first examples."""
    inputs = inputs_on or device

    def build(tf: Any, options: RunOptions) -> Trial:
        trial = Trial()
        if options.mode == "eager":

            @tf.function  # type: ignore[untyped-decorator]  # tensorflow publishes no type information
            def product(x: Any, y: Any) -> Any:
                with _on(tf, device):
                    return tf.matmul(x, y)

            def compute() -> Any:
                with trial.span(inputs), _on(tf, inputs):
                    a, b = _constants(tf, named=True)
                with trial.span(device), _on(tf, device):
                    c = tf.matmul(a, b)
                with trial.span(None, calls_function=True):
                    product(a, b)  # the same matmul once more, inside a tf.function
                return c

            return _run_eager(tf, compute, trial, options)

        return _run_graph(tf, lambda: matmul_graph(tf, device, inputs), trial, options)

    template = {(False, False): messages.MATMUL, (True, False): messages.MATMUL_PINNED,
                (False, True): messages.MATMUL_INPUTS,
                (True, True): messages.MATMUL_BOTH}[bool(device), bool(inputs_on)]
    title = Message(template, mode=options.mode, device=device, inputs=inputs_on)
    return run_captured(build, options, title)


def tower(devices: list[str], reduce_on: str, options: RunOptions) -> Report:
    """One matmul per device, summed with ``tf.add_n`` on ``reduce_on``. With one tower there is
    nothing to sum (``tf.add_n`` of one tensor returns it, no op runs): the tower's product is
    the result, and the title says so."""
    summed = len(devices) > 1

    def build(tf: Any, options: RunOptions) -> Trial:
        trial = Trial()
        if options.mode == "eager":

            def compute() -> Any:
                towers = []
                for i, d in enumerate(devices):
                    with trial.span(d, messages.guide_tower(i, d)), _on(tf, d):
                        a, b = _constants(tf, named=False)
                        towers.append(tf.matmul(a, b))
                if not summed:
                    return towers[0]
                with trial.span(reduce_on, messages.REDUCE), _on(tf, reduce_on):
                    return tf.add_n(towers)

            return _run_eager(tf, compute, trial, options)

        return _run_graph(tf, lambda: tower_graph(tf, devices, reduce_on, trial.groups), trial, options)

    template = messages.TOWERS if summed else messages.ONE_TOWER
    title = Message(template, devices=", ".join(devices), reduce_on=reduce_on, mode=options.mode)
    return run_captured(build, options, title)
