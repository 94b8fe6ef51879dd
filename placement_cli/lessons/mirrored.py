"""tf.distribute.MirroredStrategy, trained for real: the seed's 784-128-10 Keras model mirrored
over the replicas' devices, one step as a custom loop (strategy.run, all_reduce, strategy.reduce)
or Keras fit, on synthetic data with a fixed seed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from placement_cli import messages
from placement_cli.devices import DeviceName, crosses_memory, parse_device, try_parse
from placement_cli.exceptions import UsageProblem
from placement_cli.i18n import Message, Wording, english
from placement_cli.lessons.split import check_even
from placement_cli.logparse.causes import cause, headline
from placement_cli.model import Copy, ExpectedBytes, Placement, Report, Training, VariableCopies
from placement_cli.model.kinds import PlacementKind
from placement_cli.model.ops import PLUMBING_OPS
from placement_cli.runtime import private
from placement_cli.runtime.facts import GraphRecorder
from placement_cli.runtime.run import Trial, run_captured, time_steps
from placement_cli.runtime.startup import RunOptions
from placement_cli.runtime.stepstats import copies_with_bytes, executed_ops, static_shape, tensor_bytes

INPUTS, HIDDEN, CLASSES = 784, 128, 10  # the seed's model
SEED = 2017
REDUCTIONS = ("collective", "one-device", "hierarchical", "nccl")
MAX_REPLICAS = 16
# Custom loop roles per replica, in the order the step runs them; then what is not one replica's.
PARTS = (messages.FORWARD, messages.GRADIENTS, messages.ALL_REDUCE, messages.APPLY)
REDUCE_LOSS, STEP_OTHER, SETUP = messages.REDUCE_LOSS, messages.STEP_OTHER, messages.SETUP
_REPLICA = re.compile(r"^replica_(\d+)/(.*)$")
_CALL_PREFIX = re.compile(r"^(?:(?:Stateful)?PartitionedCall(?:_\d+)?/)+")
_UPDATE = re.compile(r"(?:^|/)update_(\d+)(?:_\d+)?(?:/|$)")
_NCCL_LESSON = messages.NOTE_NCCL


@dataclass(frozen=True)
class MirroredSpec:
    """What `placement mirrored` was asked to do."""

    devices: tuple[str, ...]
    batch: int = 64
    steps: int = 3
    lr: float = 0.1
    reduce: str = "collective"
    fit: bool = False

    @property
    def replicas(self) -> int:
        return len(self.devices)


def _spec(device: str) -> Any:
    return parse_device(device)


def check_split(batch: int, replicas: int) -> None:
    """Each replica gets an equal shard of the global batch (placement shards it by hand)."""
    check_even(batch, replicas, "replicas", "each replica takes an equal shard of the global batch")


def role_order(replicas: int) -> list[Message]:
    return [messages.replica_role(k, part) for k in range(replicas) for part in (*PARTS, messages.OTHER_PART)] + \
        [REDUCE_LOSS, STEP_OTHER, SETUP]


def parameter_count() -> int:
    return INPUTS * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES


def _cross_device_ops(tf: Any, reduce: str) -> Any:
    if reduce == "one-device":
        return tf.distribute.ReductionToOneDevice()
    if reduce == "hierarchical":
        return tf.distribute.HierarchicalCopyAllReduce()
    if reduce == "nccl":
        return tf.distribute.NcclAllReduce()
    return None  # MirroredStrategy's own choice: CollectiveAllReduce (ReductionToOneDevice for mixed CPU/GPU)


def _model(tf: Any) -> Any:
    """The seed's model: Dense(128, relu) on 784 inputs, Dense(10, softmax); fixed initial weights."""
    keras = tf.keras
    return keras.Sequential([
        keras.Input((INPUTS,)),
        keras.layers.Dense(HIDDEN, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(seed=SEED)),
        keras.layers.Dense(CLASSES, activation="softmax",
                           kernel_initializer=keras.initializers.GlorotUniform(seed=SEED + 1)),
    ])


def synthetic_batches(spec: MirroredSpec) -> list[tuple[Any, Any]]:
    """One global (features, labels) batch per step, labels from a fixed random linear teacher."""
    import numpy as np  # noqa: PLC0415 - comes with TensorFlow

    rng = np.random.default_rng(SEED)
    teacher = rng.standard_normal((INPUTS, CLASSES))
    batches = []
    for _ in range(spec.steps):
        x = rng.standard_normal((spec.batch, INPUTS)).astype("float32")
        batches.append((x, np.argmax(x @ teacher, axis=1).astype("int32")))
    return batches


@dataclass
class _MirroredTrial(Trial):
    losses: list[float] = field(default_factory=list)
    replicas: tuple[str, ...] = ()
    variables: list[VariableCopies] = field(default_factory=list)
    reduction: tuple[str, str | None] | None = None
    step_nodes: set[str] = field(default_factory=set)
    executed: tuple[tuple[str, int], ...] | None = None
    collective: bool = False  # the traced step all-reduced inside collective ops (no _Send for gradients)


def _variables(model: Any) -> list[VariableCopies]:
    found = []
    for v in model.trainable_variables:
        mirrored = getattr(v, "value", v)  # a Keras 3 Variable wraps the tf.Variable (a MirroredVariable)
        components = getattr(mirrored, "values", None) or (mirrored,)
        found.append(VariableCopies(name=str(getattr(v, "path", None) or v.name), shape=tuple(int(d) for d in v.shape),
                                    dtype=str(getattr(v.dtype, "name", v.dtype)),
                                    devices=tuple(c.device for c in components), kind=type(mirrored).__name__))
    return found


def _custom_loop(tf: Any, spec: MirroredSpec, strategy: Any, model: Any, options: RunOptions,
                 trial: _MirroredTrial) -> None:
    """strategy.run of one replica step (forward, gradients, an explicit all_reduce, the update in a
    merge_call), strategy.reduce of the replicas' losses."""
    with strategy.scope():
        loss_object = tf.keras.losses.SparseCategoricalCrossentropy(reduction="none")
    variables = model.trainable_variables
    lr = spec.lr

    def step_fn(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape, tf.name_scope("forward"):
            loss = tf.nn.compute_average_loss(loss_object(y, model(x, training=True)),
                                              global_batch_size=spec.batch)
        with tf.name_scope("gradients"):
            grads = tape.gradient(loss, variables)
        context = tf.distribute.get_replica_context()
        with tf.name_scope("all_reduce"):
            grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)

        def update(strategy: Any, grads: Any) -> None:
            with tf.name_scope("apply"):
                for v, g in zip(variables, grads):
                    strategy.extended.update(getattr(v, "value", v), lambda var, grad: var.assign_sub(lr * grad),
                                             args=(g,), group=False)

        context.merge_call(update, args=(grads,))
        return loss

    @tf.function  # type: ignore[untyped-decorator]  # tensorflow publishes no type information
    def train_step(x: Any, y: Any) -> Any:
        per_replica = strategy.run(step_fn, args=(x, y))
        with tf.name_scope("reduce_loss"):
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    devices = strategy.extended.worker_devices
    per = spec.batch // spec.replicas

    def sharded(array: Any) -> Any:
        def value(context: Any) -> Any:
            i = context.replica_id_in_sync_group
            with tf.device(devices[i]):  # each shard starts on its replica's device
                return tf.constant(array[i * per:(i + 1) * per])

        return strategy.experimental_distribute_values_from_function(value)

    for step, (x, y) in enumerate(synthetic_batches(spec)):
        xs, ys = sharded(x), sharded(y)
        if step == 0:
            loss = _traced_first(tf, lambda xs=xs, ys=ys: train_step(xs, ys), options, trial)
            graph = train_step.get_concrete_function(xs, ys).graph
            trial.step_nodes = {op.name for op in graph.get_operations()}
            if trial.copies is not None:
                trial.copies = _sized(tf, trial.copies, graph)
        else:
            loss = train_step(xs, ys)
        trial.losses.append(float(loss))
    if options.time:  # after the lesson's steps, whose losses stay the lesson's
        time_steps(tf, lambda: float(train_step(xs, ys)), options, trial, lambda: [graph])


def _fit(tf: Any, spec: MirroredSpec, strategy: Any, model: Any, options: RunOptions, trial: _MirroredTrial) -> None:
    """Keras fit, one step per epoch so that each epoch's loss is one step's."""
    import numpy as np  # noqa: PLC0415

    with strategy.scope():
        model.compile(optimizer=tf.keras.optimizers.SGD(spec.lr), loss=tf.keras.losses.SparseCategoricalCrossentropy())
    batches = synthetic_batches(spec)
    x = np.concatenate([b[0] for b in batches])
    y = np.concatenate([b[1] for b in batches])
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(spec.batch).repeat()
    recorder = GraphRecorder()  # Keras's train function is its own: find its graph as it is traced
    undo = recorder.install()
    try:
        history = _traced_first(tf, lambda: model.fit(dataset, epochs=spec.steps, steps_per_epoch=1, verbose=0),
                                options, trial)
    finally:
        undo()
    trial.losses.extend(float(v) for v in history.history.get("loss", []))
    graphs = list(recorder.graphs.values())
    if graphs:
        graph = max(graphs, key=lambda g: len(g.get_operations()))
        trial.step_nodes = {op.name for op in graph.get_operations()}
        if trial.copies is not None:
            trial.copies = _sized(tf, trial.copies, graph)
    if options.time:  # a step as Keras runs it: fit for one step, after the lesson's
        time_steps(tf, lambda: model.fit(dataset, epochs=1, steps_per_epoch=1, verbose=0), options, trial,
                   lambda: graphs)


def _traced_first(tf: Any, call: Any, options: RunOptions, trial: _MirroredTrial) -> Any:
    """Run ``call`` with the eager context's run metadata on when copies are wanted: the partition
    graphs of the biggest function it ran (the training step) give the copies."""
    recorder = private.eager_run_metadata() if options.copies else None
    if recorder is None:
        return call()
    enable, export, disable = recorder
    enable()
    try:
        value = call()
        metadata = export()
    finally:
        disable()
    graphs = list(metadata.function_graphs)
    if graphs:
        step = max(graphs, key=lambda g: sum(len(p.node) for p in g.partition_graphs))

        trial.copies = list(copies_with_bytes(tf, step.partition_graphs, None, None,
                                              virtual_gpus=bool(options.virtual_gpus)))
        trial.executed = executed_ops(step.partition_graphs)
        trial.collective = any(op.startswith(("Collective", "Nccl")) for op, _ in trial.executed)
    else:
        trial.copies = []
    return value


def _sized(tf: Any, copies: list[Copy], graph: Any) -> list[Copy]:
    """Sizes the partition graphs did not give, from the traced function's static shapes."""

    sized = []
    for c in copies:
        if c.bytes is None and c.dtype:
            name, _, slot = english(c.tensor).rpartition(":")
            node, index = (name, int(slot)) if name and slot.isdigit() else (english(c.tensor), 0)
            shape = static_shape(graph, strip_calls(node), index) or static_shape(graph, strip_calls(c.producer or ""), index)
            size = tensor_bytes(tf, tf.dtypes.as_dtype(c.dtype), shape)
            c = replace(c, shape=shape, bytes=size)
        sized.append(c)
    return sized


def ring_copies(replicas: tuple[str, ...], gradient_bytes: int) -> list[Copy]:
    """What a ring all-reduce moves, worked out: each device sends 2(n-1)/n of the gradients to the
    next one (reduce-scatter, then all-gather); the total is 2(n-1) x the gradient bytes."""
    n = len(replicas)
    if n < 2:
        return []
    total = 2 * (n - 1) * gradient_bytes
    share, extra = divmod(total, n)
    return [Copy(tensor=messages.RING_TENSOR, source=DeviceName(replicas[i]), target=DeviceName(replicas[(i + 1) % n]),
                 dtype="float32", bytes=share + (1 if i < extra else 0), computed=True,
                 physical=crosses_memory(replicas[i], replicas[(i + 1) % n])) for i in range(n)]


def expected_bytes(spec: MirroredSpec, replicas: tuple[str, ...]) -> ExpectedBytes:
    """One step's copies from the model's sizes: every other replica's gradients to be summed and the
    sums back, 2 x (replicas - 1) x gradient bytes, whichever all-reduce moves them (reduce to one
    device and a ring both come to this total); each other replica's loss for strategy.reduce; and
    the int32 labels of replicas on other CPUs than the host's CPU:0 (a function's int32 arguments
    stay in host memory, on CPU:0, and are sent from there)."""

    n = spec.replicas
    size = parameter_count() * 4
    specs = [try_parse(d) for d in replicas]
    away = 0 if spec.fit else sum(1 for s in specs if s is not None and s.device_type == "CPU" and s.device_index != 0)
    labels = away * (spec.batch // n) * 4  # Keras fit's distributed dataset puts each shard on its replica
    terms = ((messages.term(messages.GRADIENTS, f"2 x ({n} - 1) x {size:,} B"), 2 * (n - 1) * size),
             (messages.term(messages.LOSSES, f"({n} - 1) x 4 B"), (n - 1) * 4),
             (messages.term(messages.LABELS,
                            f"{away} replica{'s' if away != 1 else ''} off CPU:0 x {spec.batch // n} x 4 B"), labels))
    return ExpectedBytes(total=sum(b for _, b in terms), terms=terms, formula=Message(messages.FORMULA_MIRRORED))


def mirrored(spec: MirroredSpec, options: RunOptions) -> Report:
    """Mirror the seed's model over ``spec.devices``, train ``spec.steps`` steps, and report."""
    if not spec.replicas:
        raise UsageProblem("mirrored needs at least one device")
    canonical = [d.canonical for d in map(_spec, spec.devices)]
    if len(set(canonical)) != len(canonical):
        raise UsageProblem(f"the same device twice in {', '.join(spec.devices)}: MirroredStrategy needs one "
                           "device per replica")
    check_split(spec.batch, spec.replicas)
    trial = _MirroredTrial()

    def run(tf: Any, options: RunOptions) -> Trial:
        missing = missing_device_error(tf, spec.devices)
        if missing is not None:
            trial.error = missing
            return trial
        try:
            strategy = tf.distribute.MirroredStrategy(devices=list(spec.devices),
                                                      cross_device_ops=_cross_device_ops(tf, spec.reduce))
        except (ValueError, RuntimeError, tf.errors.OpError) as exc:
            trial.error = _message(exc)
            return trial
        trial.replicas = tuple(strategy.extended.worker_devices)
        trial.reduction = private.cross_device_ops(strategy)
        try:
            with strategy.scope():
                model = _model(tf)
            trial.variables = _variables(model)
            if spec.fit:
                _fit(tf, spec, strategy, model, options, trial)
            else:
                _custom_loop(tf, spec, strategy, model, options, trial)
        except (tf.errors.OpError, ValueError, RuntimeError) as exc:
            trial.error = _message(exc)
        trial.result = list(trial.losses) if len(trial.losses) == spec.steps else None
        return trial

    template = messages.MIRRORED_FIT if spec.fit else messages.MIRRORED_LOOP
    title = Message(template, devices=", ".join(spec.devices), reduce=spec.reduce)
    report = run_captured(run, replace(options, mode="eager"), title)
    replica_of = _replica_index(trial.replicas or spec.devices)
    steps = step_placements(report.placements, trial.step_nodes)
    placements = tuple(replace(p, group=_role(p, i in steps, replica_of)) for i, p in enumerate(report.placements))
    copies = report.copies
    notes: list[Wording] = []
    if copies is not None and trial.collective:
        copies = (*copies, *ring_copies(trial.replicas, parameter_count() * 4))
        notes.append(messages.NOTE_RING)
    if spec.reduce == "nccl" and trial.error:
        notes.append(_NCCL_LESSON)
    reduction, implementation = trial.reduction or (None, None)
    training = Training(
        lesson="mirrored", devices=tuple(map(DeviceName, spec.devices)), batch=spec.batch, steps=spec.steps, lr=spec.lr, dtype="float32",
        losses=tuple(trial.losses), parameters=parameter_count(), parameter_bytes=parameter_count() * 4,
        input_bytes=spec.batch * (INPUTS * 4 + 4), variables=tuple(trial.variables),
        reduction=None if reduction is None else f"{reduction}{f' ({implementation})' if implementation else ''}",
        reduction_source=Message(messages.REDUCE_DEFAULT if spec.reduce == "collective" else messages.REDUCE_CHOSEN,
                                 reduce=spec.reduce),
        mode=messages.MODE_FIT if spec.fit else messages.MODE_LOOP,
        expected=expected_bytes(spec, trial.replicas or spec.devices), notes=tuple(notes), error=trial.error,
        roles=tuple(role_order(spec.replicas)), replicas=tuple(map(DeviceName, trial.replicas)),
        cause=cause(trial.error, report.log) if trial.error else None,
        error_headline=headline(trial.error) if trial.error else "")
    return replace(report, placements=placements, copies=copies, training=training, executed=trial.executed)


def missing_device_error(tf: Any, devices: tuple[str, ...]) -> str | None:
    """TensorFlow's own error for the first replica device that does not exist, or None.

    MirroredStrategy does not check: eager soft placement then puts every missing replica on the
    CPU, and the replicas' collective all-reduce, its members now on one device, waits forever. So
    each device is tried first with soft placement off, and TensorFlow's refusal is the lesson."""

    existing = [s for s in (try_parse(d.name) for d in tf.config.list_logical_devices()) if s is not None]
    for device in devices:
        wanted = try_parse(device)
        if wanted is not None and any(wanted.satisfied_by(s) for s in existing):
            continue
        soft = tf.config.get_soft_device_placement()
        tf.config.set_soft_device_placement(False)
        try:
            with tf.device(device):
                tf.identity(tf.zeros([]))
        except (tf.errors.InvalidArgumentError, tf.errors.NotFoundError, ValueError, RuntimeError) as exc:
            return _message(exc)
        finally:
            tf.config.set_soft_device_placement(soft)
        names = ", ".join(s.short for s in existing) or "none"
        return f"{device} does not exist here (TensorFlow has: {names})"
    return None


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc)


def _replica_index(devices: tuple[str, ...]) -> dict[str, int]:
    found = {}
    for i, d in enumerate(devices):
        spec = try_parse(d)
        if spec is not None:
            found[spec.canonical] = i
    return found


def strip_calls(name: str) -> str:
    """A node inlined from a called function is named ``<call node>/<name>``: its own name."""
    return _CALL_PREFIX.sub("", name)


def step_placements(placements: tuple[Placement, ...], step_nodes: set[str]) -> set[int]:
    """The indices of the training step's placer lines. The placer logs a function's nodes together,
    so the step is the stretch of the log from its first to its last node with a scoped name (one no
    other function has); in it, a node of the step's graph (inlined or not) is the step's. Generic
    names (Identity, NoOp) of other functions' lines outside that stretch stay out."""
    lines = [p.line for p in placements if p.kind == PlacementKind.PLACER and p.node and "/" in strip_calls(p.node)
             and strip_calls(p.node) in step_nodes]
    if not lines:
        return set()
    first, last = min(lines), max(lines)
    return {i for i, p in enumerate(placements)
            if p.kind == PlacementKind.PLACER and not p.wrapper and first <= p.line <= last and p.node
            and (strip_calls(p.node) in step_nodes or p.node.startswith("Func/"))}


def _role(p: Placement, in_step: bool, replica_of: dict[str, int]) -> Wording:
    """A placement's role: which replica's forward, gradients, all-reduce or update it is, the loss
    reduction, the rest of the step, or the setup around it (variables, data, eager ops)."""
    if not in_step:
        return SETUP
    if p.op in PLUMBING_OPS or (p.node or "").startswith("Func/"):
        return STEP_OTHER
    name = strip_calls(p.node or "")
    gradient = name.startswith("gradient_tape/")  # tape.gradient names its ops after the forward ones
    name = name.removeprefix("gradient_tape/")
    replica: int | None = None
    if m := _REPLICA.match(name):
        replica, name = int(m.group(1)), m.group(2)
    scope = name.split("/", 1)[0]
    if scope == "reduce_loss":
        return REDUCE_LOSS
    if replica is None and (m := _UPDATE.search(name)):
        replica = int(m.group(1))
    if replica is None:
        replica = _device_replica(p, replica_of)
    if replica is None:
        return STEP_OTHER
    return messages.replica_role(replica, _part(p.op or "", scope, name, gradient))


def _part(op: str, scope: str, name: str, gradient: bool) -> Message:
    """Which part of a replica's step a node is: its scope in our custom loop; Keras fit's scopes
    (the model's, compile_loss, the optimizer's) mapped onto the same parts."""
    if op.startswith(("Collective", "Nccl")) or scope == "all_reduce":
        return messages.ALL_REDUCE
    if gradient or scope == "gradients":
        return messages.GRADIENTS
    if scope in ("forward", "compile_loss") or scope.startswith("sequential"):
        return messages.FORWARD
    if scope in ("apply", "sgd") or _UPDATE.search(name):
        return messages.APPLY
    return messages.OTHER_PART


def _device_replica(p: Placement, replica_of: dict[str, int]) -> int | None:
    for device in (p.requested, p.canonical):
        spec = try_parse(device) if device else None
        if spec is not None and spec.device_type and spec.device_index is not None:
            found = replica_of.get(spec.canonical)
            if found is not None:
                return found
    return None
