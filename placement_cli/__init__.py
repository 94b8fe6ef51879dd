"""Inspect where TensorFlow places every op, and why."""

__version__ = "0.1.0"
