"""A small MultiWorkerMirroredStrategy custom training loop, in the shape of TensorFlow's multi-worker
tutorial: every worker runs this same script, and TF_CONFIG says which one it is. Run it as a cluster
of two workers on this machine (on one GPU too: each worker's memory grows as it needs), with every
task's placements:

    placement trace --cluster worker=2 samples/multi_worker.py
"""

import json
import os

import tensorflow as tf

task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {"type": "worker", "index": 0})
for gpu in tf.config.list_physical_devices("GPU"):  # the workers may share a GPU: each takes what it uses
    tf.config.experimental.set_memory_growth(gpu, True)
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    w = tf.Variable(tf.fill([4, 1], 0.5), name="w")
    optimizer = tf.keras.optimizers.SGD(0.05)

x = tf.reshape(tf.range(8, dtype=tf.float32), [2, 4]) / 8.0
y = tf.constant([[1.0], [2.0]])


@tf.function
def train_step() -> tf.Tensor:
    def step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        optimizer.apply_gradients(zip(tape.gradient(loss, [w]), [w]))  # the gradients all-reduced over the workers
        return loss

    return strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(step), axis=None)


for _ in range(3):
    loss = train_step()
print(f"{task['type']} {task['index']}: {strategy.num_replicas_in_sync} replicas, loss {float(loss):.4f}", flush=True)
