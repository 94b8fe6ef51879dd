"""`placement train` and `placement mirrored` vs bare scripts doing the same TensorFlow work
(same model, devices, steps, logging on; target <= 1.25x each).

Each side runs as a fresh process, interleaved, best of N, in the same run; output goes to a pipe.
Usage: python benchmarks/train_bench.py [N] [train|mirrored]...
"""

from __future__ import annotations

import subprocess
import sys
import time

TRAIN_BARE = """
import numpy as np
import tensorflow as tf
tf.debugging.set_log_device_placement(True)
N, B, STEPS = 2, 64, 5
g = tf.Graph()
with g.as_default():
    with tf.device("/cpu:0"):
        images = tf.compat.v1.placeholder(tf.float32, [B, 24], name="images")
        labels = tf.compat.v1.placeholder(tf.int32, [B], name="labels")
        xs, ys = tf.split(images, N), tf.split(labels, N)
        opt = tf.compat.v1.train.GradientDescentOptimizer(0.5)

    def var(name, shape, init):
        with tf.device("/cpu:0"):
            return tf.compat.v1.get_variable(name, shape, initializer=init)

    def tower_loss(x, y):
        with tf.compat.v1.variable_scope("model"):
            w1 = var("w1", [24, 16], tf.compat.v1.glorot_uniform_initializer(seed=2017))
            b1 = var("b1", [16], tf.compat.v1.zeros_initializer())
            w2 = var("w2", [16, 10], tf.compat.v1.glorot_uniform_initializer(seed=2018))
            b2 = var("b2", [10], tf.compat.v1.zeros_initializer())
        logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))

    tower_grads, losses = [], []
    with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope()):
        for i in range(N):
            with tf.device(f"/cpu:{i + 1}"), tf.name_scope(f"tower_{i}"):
                loss = tower_loss(xs[i], ys[i])
                tf.compat.v1.get_variable_scope().reuse_variables()
                tower_grads.append(opt.compute_gradients(loss))
                losses.append(loss)
    with tf.device("/cpu:0"):
        averaged = []
        with tf.name_scope("average_gradients"):
            for gv in zip(*tower_grads):
                averaged.append((tf.reduce_mean(tf.concat([tf.expand_dims(g_, 0) for g_, _ in gv], 0), 0), gv[0][1]))
        train_op = opt.apply_gradients(averaged)
        mean_loss = tf.reduce_mean(tf.stack(losses), name="loss")
        init = tf.compat.v1.global_variables_initializer()
rng = np.random.default_rng(2017)
teacher = rng.standard_normal((24, 10))
config = tf.compat.v1.ConfigProto(log_device_placement=True, device_count={"CPU": N + 1})
with tf.compat.v1.Session(graph=g, config=config) as sess:
    sess.run(init)
    for step in range(STEPS):
        x = rng.standard_normal((B, 24))
        y = np.argmax(x @ teacher, axis=1).astype("int32")
        print(step + 1, sess.run([mean_loss, train_op], {images: x.astype("float32"), labels: y})[0])
"""

MIRRORED_BARE = """
import numpy as np
import tensorflow as tf
tf.debugging.set_log_device_placement(True)
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
B, STEPS, LR = 64, 3, 0.1
strategy = tf.distribute.MirroredStrategy(devices=["/cpu:0", "/cpu:1"])
with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.Input((784,)),
        tf.keras.layers.Dense(128, activation="relu", kernel_initializer=tf.keras.initializers.GlorotUniform(seed=2017)),
        tf.keras.layers.Dense(10, activation="softmax", kernel_initializer=tf.keras.initializers.GlorotUniform(seed=2018)),
    ])
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(reduction="none")
variables = model.trainable_variables

def step_fn(x, y):
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(loss_object(y, model(x, training=True)), global_batch_size=B)
    grads = tape.gradient(loss, variables)
    context = tf.distribute.get_replica_context()
    grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)

    def update(strategy, grads):
        for v, g in zip(variables, grads):
            strategy.extended.update(v.value, lambda var, grad: var.assign_sub(LR * grad), args=(g,), group=False)

    context.merge_call(update, args=(grads,))
    return loss

@tf.function
def train_step(x, y):
    return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step_fn, args=(x, y)), axis=None)

devices = strategy.extended.worker_devices
rng = np.random.default_rng(2017)
teacher = rng.standard_normal((784, 10))

def sharded(array):
    def value(context):
        i = context.replica_id_in_sync_group
        with tf.device(devices[i]):
            return tf.constant(array[i * 32:(i + 1) * 32])
    return strategy.experimental_distribute_values_from_function(value)

for step in range(STEPS):
    x = rng.standard_normal((B, 784)).astype("float32")
    y = np.argmax(x @ teacher, axis=1).astype("int32")
    print(step + 1, float(train_step(sharded(x), sharded(y))))
"""

BARES = {"train": TRAIN_BARE, "mirrored": MIRRORED_BARE}
COMMANDS = {"train": ["train"], "mirrored": ["mirrored"]}


def once(args: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args[:4])}... failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return elapsed


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 3
    wanted = [a for a in sys.argv[1:] if not a.isdigit()] or list(BARES)
    py = sys.executable
    for name in wanted:
        bare_times, cli_times = [], []
        for _ in range(runs):  # interleaved: both sides see the same machine load
            bare_times.append(once([py, "-c", BARES[name]]))
            cli_times.append(once([py, "-m", "placement_cli", *COMMANDS[name]]))
        bare, cli = min(bare_times), min(cli_times)
        print(f"{name}: bare TF script {bare:.2f} s; placement {' '.join(COMMANDS[name])} {cli:.2f} s; "
              f"ratio {cli / bare:.2f}x (target <= 1.25x, best of {runs})")


if __name__ == "__main__":
    main()
