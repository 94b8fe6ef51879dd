"""One tf.function with a pinned op, called twice."""

import sys

import tensorflow as tf


@tf.function
def scaled_matmul(x, y):
    with tf.device("/cpu:0"):
        return tf.matmul(x, y) * 2.0


a = tf.ones([2, 3])
b = tf.ones([3, 2])
print(scaled_matmul(a, b).numpy().tolist())
print(scaled_matmul(a, b).numpy().tolist())
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
