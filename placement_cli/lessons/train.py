"""The cifar10 multi-GPU tower pattern, trained for real: variables once on the CPU (get_variable,
reused by every tower), a loss and gradients per tower on its own device, average_gradients and
one apply_gradients on the CPU, a few steps on synthetic data with a fixed seed."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from placement_cli import messages
from placement_cli.devices import DeviceName, short_name, try_parse
from placement_cli.exceptions import UsageProblem
from placement_cli.i18n import Message, Wording
from placement_cli.lessons.split import check_even
from placement_cli.logparse.causes import cause, headline
from placement_cli.model import FREE, ExpectedBytes, GradientCheck, Placement, Report, Training, VariableCopies
from placement_cli.model.kinds import PlacementKind
from placement_cli.runtime.run import Trial, run_captured, run_traced_step, time_steps
from placement_cli.runtime.startup import RunOptions, session_config

FEATURES, HIDDEN, CLASSES = 24, 16, 10  # the notes' small MLP: 24 -> 16 -> 10
SEED = 2017
VARIABLES_ON = "/cpu:0"
MAX_STEPS = 10_000
MAX_BATCH = 65_536
# The largest relative difference (of the gradient's largest magnitude) the check allows: a few
# hundred ulps of the dtype, far above summation-order noise (measured ~1e-8 / ~1e-17), far below a bug.
TOLERANCE = {"float32": 1e-5, "float64": 1e-12}

# Roles, in the order the table shows them; towers' roles are "tower i: ..." between input and averaging
# (the names of code, average_gradients and apply_gradients, are no words to translate).
VARIABLES, INPUT, AVERAGE, APPLY, LOSS, CHECK, INIT = (messages.VARIABLES, messages.INPUT, "average_gradients",
                                                       "apply_gradients", messages.LOSS, messages.CHECK, messages.INIT)
FORWARD, READS, GRADIENTS = messages.FORWARD, messages.READS, messages.GRADIENTS


@dataclass(frozen=True)
class TrainSpec:
    """What `placement train` was asked to do."""

    devices: tuple[str, ...]  # one per tower
    batch: int = 64
    steps: int = 5
    lr: float = 0.1
    dtype: str = "float32"
    check: bool = False

    @property
    def towers(self) -> int:
        return len(self.devices)


def check_split(batch: int, towers: int) -> None:
    """An uneven split is refused before TensorFlow starts: tf.split needs one, and the plain average
    of the towers' gradients is only the full-batch gradient when every shard has the same size."""
    if towers < 1:
        raise UsageProblem("--towers must be at least 1")
    check_even(batch, towers, "towers", "tf.split needs an even split, and with uneven shards the plain "
               "average of the towers' gradients is not the full-batch gradient")


def role_order(towers: int) -> list[Wording]:
    per_tower = [messages.tower_role(i, part) for i in range(towers) for part in (FORWARD, READS, GRADIENTS)]
    return [VARIABLES, INPUT, *per_tower, AVERAGE, APPLY, LOSS, CHECK, INIT]


def synthetic_batches(spec: TrainSpec) -> list[tuple[Any, Any]]:
    """One (features, labels) batch per step: Gaussian features, labels from a fixed random linear
    teacher (so the loss can fall), all from one seed."""
    import numpy as np  # noqa: PLC0415 - comes with TensorFlow; only run commands need it

    rng = np.random.default_rng(SEED)
    teacher = rng.standard_normal((FEATURES, CLASSES))
    batches = []
    for _ in range(spec.steps):
        x = rng.standard_normal((spec.batch, FEATURES))
        batches.append((x.astype(spec.dtype), np.argmax(x @ teacher, axis=1).astype("int32")))
    return batches


def _variable(tf: Any, name: str, shape: list[int], dtype: Any, initializer: Any) -> Any:
    """The cifar10 example's _variable_on_cpu: created (or, reused, found) on the CPU whatever the tower."""
    with tf.device(VARIABLES_ON):
        return tf.compat.v1.get_variable(name, shape, dtype=dtype, initializer=initializer)


def inference(tf: Any, x: Any, dtype: Any) -> Any:
    """The model: 24 -> 16 (relu) -> 10 logits, its variables under variable_scope("model")."""
    glorot = tf.compat.v1.glorot_uniform_initializer
    with tf.compat.v1.variable_scope("model"):
        w1 = _variable(tf, "w1", [FEATURES, HIDDEN], dtype, glorot(seed=SEED))
        b1 = _variable(tf, "b1", [HIDDEN], dtype, tf.compat.v1.zeros_initializer())
        w2 = _variable(tf, "w2", [HIDDEN, CLASSES], dtype, glorot(seed=SEED + 1))
        b2 = _variable(tf, "b2", [CLASSES], dtype, tf.compat.v1.zeros_initializer())
    hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
    return tf.matmul(hidden, w2) + b2


def tower_loss(tf: Any, x: Any, y: Any, dtype: Any) -> Any:
    logits = inference(tf, x, dtype)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def average_gradients(tf: Any, tower_grads: list[list[tuple[Any, Any]]]) -> list[tuple[Any, Any]]:
    """The cifar10 example's: per variable, expand_dims + concat over towers + reduce_mean."""
    averaged = []
    for grad_and_vars in zip(*tower_grads):
        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
        averaged.append((tf.reduce_mean(tf.concat(grads, 0), 0), grad_and_vars[0][1]))
    return averaged


@dataclass
class _Built:
    graph: Any
    images: Any
    labels: Any
    train_op: Any
    loss: Any
    init: Any
    averaged: list[Any]
    full: list[Any]  # --check: the full-batch gradients on one device
    variables: list[Any]
    roles: dict[str, Wording] = field(default_factory=dict)  # node -> role
    reads: dict[str, tuple[int, str]] = field(default_factory=dict)  # tower read node -> (tower, variable node)


def build(tf: Any, spec: TrainSpec) -> _Built:
    """The tower graph, each node labelled with its role."""
    dtype = tf.dtypes.as_dtype(spec.dtype)
    graph = tf.Graph()
    roles: dict[str, Wording] = {}
    reads: dict[str, tuple[int, str]] = {}

    def label(since: int, role: Wording) -> int:
        ops = graph.get_operations()
        for op in ops[since:]:
            roles.setdefault(op.name, role)
        return len(ops)

    with graph.as_default():
        mark = 0
        with tf.device(VARIABLES_ON):
            images = tf.compat.v1.placeholder(dtype, [spec.batch, FEATURES], name="images")
            labels = tf.compat.v1.placeholder(tf.int32, [spec.batch], name="labels")
            image_shards = tf.split(images, spec.towers)
            label_shards = tf.split(labels, spec.towers)
            opt = tf.compat.v1.train.GradientDescentOptimizer(spec.lr)
        mark = label(mark, INPUT)
        tower_grads, losses = [], []
        with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope()):
            for i, device in enumerate(spec.devices):
                with tf.device(device), tf.name_scope(f"tower_{i}"):
                    loss = tower_loss(tf, image_shards[i], label_shards[i], dtype)
                    tf.compat.v1.get_variable_scope().reuse_variables()  # towers 1.. reuse tower 0's variables
                    tower_grads.append(opt.compute_gradients(loss))
                    losses.append(loss)
                gradients, read, forward = (messages.tower_role(i, part) for part in (GRADIENTS, READS, FORWARD))
                for op in graph.get_operations()[mark:]:
                    if op.name.startswith("model/"):
                        roles[op.name] = VARIABLES
                    elif op.name.startswith(f"tower_{i}/gradients/"):
                        roles[op.name] = gradients
                    elif op.type == "ReadVariableOp":
                        roles[op.name] = read
                        reads[op.name] = (i, op.inputs[0].op.name)
                    else:
                        roles[op.name] = forward
                mark = len(graph.get_operations())
        variables = [v for _, v in tower_grads[0]]
        with tf.device(VARIABLES_ON):
            with tf.name_scope("average_gradients"):
                averaged = average_gradients(tf, tower_grads)
            mark = label(mark, AVERAGE)
            train_op = opt.apply_gradients(averaged)
            mark = label(mark, APPLY)
            mean_loss = tf.reduce_mean(tf.stack(losses), name="loss")
            mark = label(mark, LOSS)
        full: list[Any] = []
        if spec.check:
            with tf.device(spec.devices[0]), tf.name_scope("check"):
                with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(), reuse=True):
                    full_loss = tower_loss(tf, images, labels, dtype)
                full = tf.gradients(full_loss, variables)
            mark = label(mark, CHECK)
        with tf.device(VARIABLES_ON):
            init = tf.compat.v1.global_variables_initializer()
        label(mark, INIT)
    return _Built(graph, images, labels, train_op, mean_loss, init, [g for g, _ in averaged], full, variables,
                  roles, reads)


def parameter_count(spec: TrainSpec) -> int:
    return FEATURES * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES


def expected_bytes(spec: TrainSpec, size: int, devices: tuple[str, ...] | None = None,
                   home: str = VARIABLES_ON) -> ExpectedBytes:
    """One step's copies, from the model's sizes: each tower on another device than the variables
    reads every variable and sends every gradient back, gets its shard of the batch, and sends its
    loss back for the mean. A tower on the variables' own device copies nothing.

    ``devices``: where each tower really ran (a soft-placed tower falls back, maybe beside the
    variables), else where it asked to; ``home``: where the variables really are. TensorFlow sends
    a tensor once to each device that reads it, so towers that share a device share one copy of
    the parameters (their gradients, shards and losses stay their own)."""
    where = [try_parse(d) for d in (devices or spec.devices)]
    base = try_parse(home)
    away_on = [s for s in where if not (base and s and s.canonical == base.canonical)]
    away = len(away_on)
    targets = len({s.canonical if s else i for i, s in enumerate(away_on)})
    params = parameter_count(spec) * size
    shard = spec.batch // spec.towers
    place = short_name(home)
    if targets == away:
        down = (messages.counted(messages.DOWN_AND_BACK, away) if away == spec.towers else
                messages.counted(messages.DOWN_AND_BACK_OF, away, total=spec.towers))
        moved: tuple[tuple[Message, int], ...] = ((messages.term(down, f"2 x {params:,} B x {away}"),
                                                   2 * params * away),)
        formula = Message(messages.FORMULA_TRAIN, device=place)
    else:  # towers sharing a device: the parameters go there once
        moved = ((messages.term(messages.counted(messages.DOWN_TO_DEVICES, targets), f"{params:,} B x {targets}"),
                  params * targets),
                 (messages.term(messages.counted(messages.BACK_FROM, away), f"{params:,} B x {away}"), params * away))
        formula = Message(messages.FORMULA_TRAIN_SHARED, device=place)
    terms = (*moved,
             (messages.term(messages.INPUT, f"{away} x {shard} examples x ({FEATURES} x {size} B + 4 B label)"),
              away * shard * (FEATURES * size + 4)),
             (messages.term(messages.FETCHED_LOSS, f"{away} x {size} B"), away * size))
    return ExpectedBytes(total=sum(b for _, b in terms), terms=terms, formula=formula)


def gradient_check(spec: TrainSpec, names: list[str], averaged: list[Any], full: list[Any], note: str | None) -> GradientCheck:
    import numpy as np  # noqa: PLC0415

    rows = []
    for name, a, b in zip(names, averaged, full):
        a, b = np.asarray(a, dtype="float64"), np.asarray(b, dtype="float64")
        diff = float(np.max(np.abs(a - b))) if a.size else 0.0
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        rel = diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)
        rows.append((name, diff, rel, scale))
    return GradientCheck(dtype=spec.dtype, reference=spec.devices[0], tolerance=TOLERANCE[spec.dtype],
                         variables=tuple(rows), note=note)


@dataclass
class _TrainTrial(Trial):
    """A Trial that also keeps what training produced."""

    losses: list[float] = field(default_factory=list)
    training: Training | None = None
    reads: dict[str, tuple[int, str]] = field(default_factory=dict)
    variables: list[VariableCopies] = field(default_factory=list)
    executed: tuple[tuple[str, int], ...] | None = None


def train(spec: TrainSpec, options: RunOptions) -> Report:
    """Build the towers, run ``spec.steps`` real steps, and report placements, losses and copies."""
    check_split(spec.batch, spec.towers)
    trial = _TrainTrial()

    def run(tf: Any, options: RunOptions) -> Trial:
        note = None
        if spec.check and tf.config.list_physical_devices("GPU"):
            # TF32 matmuls (Ampere and newer) round float32 inputs to 10 bits: the check would measure them
            tf.config.experimental.enable_tensor_float_32_execution(False)
            note = "TensorFloat-32 was turned off for this run so that float32 matmuls are float32"
        built = build(tf, spec)
        trial.graph = built.graph
        trial.groups = built.roles
        trial.reads = built.reads
        trial.variables = [VariableCopies(v.op.name, tuple(v.shape.as_list()), v.dtype.base_dtype.name,
                                          (DeviceName(v.device or ""),), type(v).__name__) for v in built.variables]
        batches = synthetic_batches(spec)
        size = tf.dtypes.as_dtype(spec.dtype).size
        check = None
        try:
            with tf.compat.v1.Session(graph=built.graph, config=session_config(tf, options)) as sess:
                sess.run(built.init)
                if spec.check:
                    x, y = batches[0]
                    averaged, full = sess.run([built.averaged, built.full], {built.images: x, built.labels: y})
                    names = [v.op.name for v in built.variables]
                    check = gradient_check(spec, names, averaged, full, note)
                for step, (x, y) in enumerate(batches):
                    feed = {built.images: x, built.labels: y}
                    fetch = [built.loss, built.train_op]
                    if step == 0:  # the first step is traced for --copies and --tensorboard
                        loss, _ = run_traced_step(tf, sess, fetch, feed, options, trial)
                    else:
                        loss, _ = sess.run(fetch, feed)
                    trial.losses.append(float(loss))
                if options.time:  # after the lesson's steps, whose losses stay the lesson's
                    time_steps(tf, lambda: sess.run(fetch, feed), options, trial, lambda: [built.graph])
        except tf.errors.OpError as exc:
            trial.error = exc.message
        trial.result = list(trial.losses) if len(trial.losses) == spec.steps else None
        trial.training = Training(
            lesson="towers", devices=tuple(map(DeviceName, spec.devices)), batch=spec.batch, steps=spec.steps, lr=spec.lr, dtype=spec.dtype,
            losses=tuple(trial.losses), parameters=parameter_count(spec),
            parameter_bytes=parameter_count(spec) * size, input_bytes=spec.batch * (FEATURES * size + 4),
            variables_on=DeviceName(VARIABLES_ON), check=check, expected=expected_bytes(spec, size), error=trial.error,
            error_headline=headline(trial.error) if trial.error else "", roles=tuple(role_order(spec.towers)))
        return trial

    template = messages.TRAINING if spec.towers > 1 else messages.TRAINING_ONE
    title = Message(template, count=spec.towers, devices=", ".join(spec.devices), variables=VARIABLES_ON)
    report = run_captured(run, options, title)
    placements = explain_reads(report.placements, trial.reads)
    training = trial.training
    if training is not None:
        where = {p.node: p.canonical for p in placements if p.kind == PlacementKind.PLACER and p.op == "VarHandleOp"}
        training = replace(training, variables=tuple(replace(v, devices=(DeviceName(where.get(v.name, v.devices[0])),))
                                                     for v in trial.variables))
        # the copies expected where the towers and the variables really ran (soft placement moves them)
        ran = [group_device(placements, messages.tower_role(i, FORWARD)) for i in range(spec.towers)]
        towers_on = tuple(p.canonical if p is not None else d for p, d in zip(ran, spec.devices))
        home = next(iter(where.values()), VARIABLES_ON)
        training = replace(training, expected=expected_bytes(spec, training.parameter_bytes // training.parameters,
                                                             towers_on, home))
    if training is not None and training.check is not None:
        check_ran = group_device(placements, CHECK)
        asked = training.check.reference
        wanted = try_parse(asked)
        if check_ran is not None and (wanted is None or not wanted.satisfied_by(check_ran.spec)):
            check = replace(training.check, reference=f"{check_ran.short} (asked for {asked})")
            training = replace(training, check=check)
    if training is not None and training.error:
        training = replace(training, cause=cause(training.error, report.log))
    return replace(report, placements=placements, training=training, executed=trial.executed)


def group_device(placements: tuple[Placement, ...], group: Wording) -> Placement | None:
    """A placement on the device most of a group's ops went to (None: the group placed nothing)."""
    by_device: dict[str, list[Placement]] = {}
    for p in placements:
        if p.group == group:
            by_device.setdefault(p.canonical, []).append(p)
    if not by_device:
        return None
    return max(by_device.values(), key=len)[0]


def explain_reads(placements: tuple[Placement, ...], reads: dict[str, tuple[int, str]]) -> tuple[Placement, ...]:
    """The towers' ReadVariableOps ask for no device (a variable's read resets the device scope) and
    the placer puts them with their resource variable: say so, and whether each step copies the value."""
    where = {p.node: p for p in placements if p.kind == PlacementKind.PLACER and p.node}
    towers = {i: group_device(placements, messages.tower_role(i, FORWARD)) for i, _ in reads.values()}
    explained = []
    for p in placements:
        found = reads.get(p.node or "") if p.kind == PlacementKind.PLACER else None
        variable = where.get(found[1]) if found else None
        if found and variable is not None and variable.canonical == p.canonical and p.status == FREE \
                and (p.reason is None or messages.colocated(p.reason)):
            tower = towers.get(found[0])
            if tower is None:
                template = messages.READ
            elif tower.canonical == p.canonical:
                template = messages.READ_SAME
            else:
                template = messages.READ_COPY
            p = replace(p, reason=Message(template, partner=found[1], device=p.short))
        explained.append(p)
    return tuple(explained)
