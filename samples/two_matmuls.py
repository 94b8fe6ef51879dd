"""A tf.function whose 1024x1024 matmul runs on /cpu:1 and whose 64x64 one, and the sum of both, run on
/cpu:2: the big product (4 MiB) crosses from CPU:1 to CPU:2 every step. Try: placement trace --time two_matmuls.py"""

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)


@tf.function
def step(x, y):
    with tf.device("/cpu:1"):
        big = tf.matmul(x, x)  # 1024x1024 float32: 4 MiB
    with tf.device("/cpu:2"):
        small = tf.matmul(y, y)
        return tf.reduce_sum(big) + tf.reduce_sum(small)  # big crosses CPU:1 -> CPU:2


x = tf.random.normal([1024, 1024])
y = tf.random.normal([64, 64])
for _ in range(8):
    step(x, y)
print("done")
