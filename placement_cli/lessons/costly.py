"""The lesson of tensorflow#2441: tower gradients with and without ``colocate_gradients_with_ops``.

Each tower's forward ops run on its own device; one ``tf.gradients`` call, made outside the towers'
device scopes, builds the backward ops. Without ``colocate_gradients_with_ops`` they are placed where no
scope asks (every tower's gradients on one device, which then reads each tower's activations from its
device every step); with it, each gradient op goes with its forward op, and only the weight's gradient
crosses to be summed."""

from __future__ import annotations

from typing import Any

from placement_cli import messages
from placement_cli.i18n import Message, Wording
from placement_cli.model import Report
from placement_cli.runtime.run import Trial, plain, run_captured, run_session
from placement_cli.runtime.startup import RunOptions, session_config

SIZE = 256  # the weight is SIZE x SIZE float32 (256 KiB); each tower's batch BATCH x SIZE (1 MiB)
BATCH = 1024


def gradient_graph(tf: Any, devices: list[str], colocate: bool, groups: dict[str, Wording]) -> Any:
    """Two matmuls per tower with one shared weight on /cpu:0, the towers' losses summed there, and the
    weight's gradient from one tf.gradients call outside every device scope."""
    ops = tf.compat.v1.get_default_graph().get_operations
    with tf.device("/cpu:0"):
        w = tf.Variable(tf.random.stateless_normal([SIZE, SIZE], seed=[2441, 0]) * 0.01, name="w")
    losses = []
    for i, device in enumerate(devices):
        before = len(ops())
        with tf.device(device), tf.name_scope(f"tower_{i}"):
            x = tf.random.stateless_normal([BATCH, SIZE], seed=[2441, i + 1])
            losses.append(tf.reduce_sum(tf.matmul(tf.matmul(x, w), w)))
        for op in ops()[before:]:
            groups[op.name] = messages.guide_tower(i, device)
    with tf.device("/cpu:0"):
        loss = tf.add_n(losses)
    (gradient,) = tf.compat.v1.gradients(loss, [w], colocate_gradients_with_ops=colocate)
    return gradient


def gradients(devices: list[str], colocate: bool, options: RunOptions) -> Report:
    """``gradient_graph`` run (graph mode), its step timed when ``options.time``."""

    def build(tf: Any, options: RunOptions) -> Trial:
        trial = Trial()
        trial.graph = tf.Graph()
        try:
            with trial.graph.as_default():
                gradient = gradient_graph(tf, devices, colocate, trial.groups)
                with tf.device("/cpu:0"):
                    shown = tf.identity(gradient[0, :2], name="shown")  # the result: the gradient's first values
                init = tf.compat.v1.global_variables_initializer()
            with tf.compat.v1.Session(graph=trial.graph, config=session_config(tf, options)) as sess:
                sess.run(init)
                trial.result = plain(run_session(tf, sess, shown, options, trial))
        except (tf.errors.OpError, ValueError) as exc:
            trial.failed(exc)
        return trial

    title = Message(messages.TOWER_GRADIENTS, devices=", ".join(devices), colocate=colocate)
    return run_captured(build, options, title)
