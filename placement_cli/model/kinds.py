"""The kinds a placement and a placement error come in: one spelling each (JSON writes the value)."""

from __future__ import annotations

from enum import StrEnum


class PlacementKind(StrEnum):
    """Which of TensorFlow's lines reported a placement."""

    PLACER = "placer"  # the graph placer's: a Session's or a tf.function's node
    EAGER = "eager"  # the eager runtime's "Executing op": one op run on its own
    LEGACY = "legacy"  # the placer's of TensorFlow's first versions: "node: device", no op


class FailureKind(StrEnum):
    """What a placement error says went wrong."""

    DEVICE_NOT_FOUND = "device_not_found"  # pinned to a device that does not exist
    NO_KERNEL = "no_kernel"  # the op has no kernel for the requested device type
    COLOCATION = "colocation"  # ops that must share a device were pinned apart (or their group cannot run there)
    INVALID_DEVICE_SPEC = "invalid_device_spec"  # a device string TensorFlow cannot read
    UNSATISFIABLE = "unsatisfiable"  # no device satisfies the op's constraints
    RUN_FAILED = "run_failed"  # a run stopped with an error whose wording the parser does not know
