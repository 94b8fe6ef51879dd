"""The log prefixes TensorFlow's C++ logging has used (absl, TF 1.x glog, TF 0.x)."""

# One group: the literal "] " that ends a prefix, so every prefixed line yields the
# same constant marker and the bare stdout copy yields "" (how copies are paired).
PREFIX = (
    rb"(?:(?:[IWEF]\d{4} |\d{4}-\d\d-\d\d[ T]|[IWEF] )[^\]\n]*(\] ))?"
)
