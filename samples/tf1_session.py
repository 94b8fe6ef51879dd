"""A TF1-style script whose own ConfigProto does not ask for placement logging."""

import tensorflow as tf

tf.compat.v1.disable_eager_execution()
with tf.device("/cpu:0"):
    a = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape=[2, 3], name="a")
    b = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape=[3, 2], name="b")
c = tf.matmul(a, b)
with tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(allow_soft_placement=True)) as sess:
    print("result:", sess.run(c).tolist())
