"""The log prefixes TensorFlow's C++ logging has used (absl, TF 1.x glog, TF 0.x)."""

PREFIX = rb"(?:(?:[IWEF]\d{4} |\d{4}-\d\d-\d\d[ T]|[IWEF] )[^\]\n]*+\] )?+"
