"""A small Keras model fitted on synthetic data."""

import numpy as np
import tensorflow as tf

x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(8, activation="relu"),
                             tf.keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer="sgd", loss="binary_crossentropy")
history = model.fit(x, y, epochs=1, batch_size=32, verbose=0)
print("loss:", round(float(history.history["loss"][-1]), 4))
