"""`placement cluster`'s lesson: the graphs each task builds and runs (TF1: between-graph training with
replica_device_setter, SyncReplicasOptimizer for --sync; TF2: ParameterServerStrategy with a
ClusterCoordinator), handed to the supervisor, which builds none.

``python -m placement_cli.lessons.cluster_tasks`` is the supervisor's process: lessons may import
runtime, never the reverse, so this entry point hands runtime's supervisor the work it runs.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import asdict
from typing import Any

from placement_cli.runtime.cluster.supervisor import Trainer, main
from placement_cli.runtime.stepstats import copies_with_bytes
from placement_cli.runtime.timing import StepTimer, graph_sizes


def work(tf: Any, task: Trainer) -> dict[str, Any]:
    """What a training task runs: TF2's coordinator (the chief) or a TF1 worker."""
    if task.job == "chief":
        return _coordinate(tf, task.spec, task.request)
    return _train(tf, task)


def _data(seed: int, features: int, classes: int, batch: int) -> tuple[Any, Any]:
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    truth = np.random.default_rng(0).normal(size=(features, classes))  # the same true model everywhere
    x = rng.normal(size=(batch, features)).astype("float32")
    y = np.eye(classes, dtype="float32")[np.argmax(x @ truth, axis=1)]
    return x, y


def _train(tf: Any, task: Trainer) -> dict[str, Any]:
    """Between-graph training of a softmax regression: variables round-robin over the ps tasks."""
    v1 = tf.compat.v1
    spec, server, index, request = task.spec, task.server, task.index, task.request
    workers = request["workers"]
    steps = request["steps"]
    sync = request["sync"]
    is_chief = index == 0
    features, classes = 10, 3
    graph = tf.Graph()
    with graph.as_default():
        # the ps tasks' variables on their CPU, as TensorFlow's distributed guides keep them (--ps-on-cpu)
        on_gpu = bool((request.get("gpu_memory") or {}).get("ps_on_gpu"))
        setter = v1.train.replica_device_setter(ps_tasks=request["ps"], worker_device=f"/job:worker/task:{index}",
                                                ps_device="/job:ps" if on_gpu else "/job:ps/cpu:0", cluster=spec)
        with v1.device(setter):
            global_step = v1.train.get_or_create_global_step()
            weights = v1.get_variable("weights", [features, classes], initializer=v1.zeros_initializer())
            bias = v1.get_variable("bias", [classes], initializer=v1.zeros_initializer())
            x_value, y_value = _data(100 + index, features, classes, 32)
            x = tf.constant(x_value, name="features")
            y = tf.constant(y_value, name="labels")
            logits = tf.matmul(x, weights) + bias
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
            optimizer = v1.train.GradientDescentOptimizer(request["lr"])
            hooks = []
            if sync:
                optimizer = v1.train.SyncReplicasOptimizer(optimizer, replicas_to_aggregate=workers,
                                                           total_num_replicas=workers)
            train_op = optimizer.minimize(loss, global_step=global_step)
            release = None
            if sync:
                hooks = [optimizer.make_session_run_hook(is_chief), v1.train.StopAtStepHook(last_step=steps)]
                with v1.device(global_step.device):  # the token queue's device, where its ops run
                    release = tf.raw_ops.QueueEnqueueManyV2(
                        handle=graph.get_tensor_by_name("sync_token_q:0"),  # SyncReplicasOptimizer's shared queue
                        components=[tf.zeros([2 * workers], global_step.dtype.base_dtype)], name="release_tokens")
        variables = {v.op.name: v.device for v in v1.global_variables()}
        config = v1.ConfigProto(log_device_placement=True, operation_timeout_in_ms=request["operation_timeout_ms"],
                                device_filters=["/job:ps", f"/job:worker/task:{index}"])
        losses: list[float] = []
        steps_seen: list[int] = []
        copies: list[dict[str, Any]] = []
        timed = request.get("time")  # [warmup, steps]: this worker's own steps, timed
        timer = StepTimer(tf, timed[0], timed[1], graph_sizes(tf, lambda: [graph])) if timed else None
        with v1.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks,
                                               stop_grace_period_secs=2, config=config,
                                               save_checkpoint_secs=None, save_summaries_steps=None,
                                               save_summaries_secs=None, log_step_count_steps=None) as session:
            task.session_ready()  # every worker's session is up: all start their steps together
            while not session.should_stop() and (sync or len(losses) < steps):
                if request["copies"] and not losses:
                    options = v1.RunOptions(output_partition_graphs=True, trace_level=v1.RunOptions.FULL_TRACE)
                    metadata = v1.RunMetadata()
                    _, value, step = session.run([train_op, loss, global_step], options=options,
                                                 run_metadata=metadata)
                    copies = _copies(tf, metadata, graph)
                else:
                    with timer.step(len(losses)) if timer is not None else nullcontext():
                        _, value, step = session.run([train_op, loss, global_step])
                losses.append(float(value))
                steps_seen.append(int(step))
                task.stepped(len(losses))
            if release is not None:
                session.run_step_fn(lambda step_context: _release(tf, step_context.session, global_step, release, steps))
        if timer is not None:
            timer.finish()
    timing = {} if timer is None else {"profile": None if timer.profile is None else timer.profile.to_dict(),
                                       "timing_error": timer.error}
    return {"losses": losses, "global_steps": steps_seen, "variables": variables, "copies": copies,
            "edges": _edges(graph), **timing}


def _release(tf: Any, session: Any, global_step: Any, release: Any, steps: int) -> None:
    """The end of sync training, without a worker left waiting. Each worker stops on its own when
    it sees the global step reach ``steps`` (StopAtStepHook); another may by then be in one more run
    (two, where a run's fetched step was read before its update), its gradient pushed, waiting on
    the token queue for a step nobody else will push a gradient to. A non-chief left waiting is
    released when the chief ends (its queue runner closes the queue: OutOfRange, which ends a
    MonitoredSession quietly); the chief left waiting waited out the operation timeout
    (DeadlineExceeded). So a worker that reached the last step puts two tokens per worker in the
    queue: every run still waiting, or still to come, ends as a normal run. Their value is step 0,
    older than any step the accumulators take, so a gradient pushed with one is stale and dropped:
    no step beyond ``steps`` is made of them. A worker stopped before the last step (an error of its
    own or of the chief's queue runner) puts none; its error is raised when the session closes."""
    if session.run(global_step) < steps:
        return
    try:
        session.run(release)
    except tf.errors.CancelledError:  # the chief has ended and closed the queue: no run waits on it any more
        pass


def _edges(graph: Any) -> list[list[Any]]:
    """The worker's graph as [producer, consumer, control] triples, for --dot and --graph-svg."""
    found: dict[tuple[str, str, bool], None] = {}
    for op in graph.get_operations():
        for tensor in op.inputs:
            found[(tensor.op.name, op.name, False)] = None
        for control in op.control_inputs:
            found.setdefault((control.name, op.name, True), None)
    return [list(edge) for edge in found]


def _coordinate(tf: Any, spec: Any, request: dict[str, Any]) -> dict[str, Any]:
    """TF2: ParameterServerStrategy + ClusterCoordinator, this task being /job:chief. The training
    step is a tf.function the coordinator schedules on whichever worker is free; variables live on
    the ps tasks. Placement logging is pushed to every task, which logs its own partitions."""
    tf.debugging.set_log_device_placement(True)
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(spec, rpc_layer="grpc", task_type="chief",
                                                                    task_id=0)
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    features, classes = 10, 3
    x_value, y_value = _data(100, features, classes, 32)
    with strategy.scope():
        weights = tf.Variable(tf.zeros([features, classes]), name="weights")
        bias = tf.Variable(tf.zeros([classes]), name="bias")
        global_step = tf.Variable(0, dtype=tf.int64, name="global_step")
    lr = request["lr"]

    @tf.function  # type: ignore[untyped-decorator]  # tensorflow publishes no type information
    def train_step() -> Any:
        x = tf.constant(x_value, name="features")
        y = tf.constant(y_value, name="labels")
        with tf.GradientTape() as tape:
            logits = tf.matmul(x, weights) + bias
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grad_w, grad_b = tape.gradient(loss, [weights, bias])
        weights.assign_sub(lr * grad_w)
        bias.assign_sub(lr * grad_b)
        step = global_step.assign_add(1)
        return loss, step

    scheduled = [coordinator.schedule(train_step) for _ in range(request["steps"])]
    coordinator.join()
    fetched = [r.fetch() for r in scheduled]
    variables = {v.name.split(":")[0]: v.device for v in (weights, bias, global_step)}
    # the step every worker runs a part of (and the ps tasks theirs): its graph's edges, for the pictures
    return {"losses": [float(loss) for loss, _ in fetched], "global_steps": [int(step) for _, step in fetched],
            "variables": variables, "copies": [], "edges": _edges(train_step.get_concrete_function().graph)}


def _copies(tf: Any, metadata: Any, graph: Any) -> list[dict[str, Any]]:
    """The copies of one traced step that cross tasks, with dtype, shape and bytes where known."""


    found = []
    for copy in copies_with_bytes(tf, metadata.partition_graphs, metadata.step_stats, graph):
        if copy.physical is not False:  # between tasks (every task here has one CPU)
            data = asdict(copy)
            data["shape"] = None if copy.shape is None else list(copy.shape)
            found.append(data)
    return found


if __name__ == "__main__":
    main(work)
