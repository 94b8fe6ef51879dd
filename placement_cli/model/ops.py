"""What an op's name says of it: TensorFlow's plumbing of functions and eager wrappers, and the ops
oneDNN renamed on CPUs (a fact of the placement, whoever asks: filters, rules, reasons, tables)."""

from __future__ import annotations

import re

# The nodes TensorFlow adds to carry a function's arguments and results: hidden from run tables (kept in JSON).
PLUMBING_OPS = frozenset({"_Arg", "_Retval", "_DeviceArg", "_DeviceRetval"})
# oneDNN renames ops on CPUs (MatMul -> _MklMatMul, Conv2D -> _MklNativeConv2D)
_ONEDNN = re.compile(r"_Mkl(?:Native)?(?=.)")


def onednn_base(op: str) -> str | None:
    """The op a oneDNN op stands for (``_MklMatMul`` -> MatMul, ``_MklNativeConv2D`` -> Conv2D); None
    for an op that is not oneDNN's."""
    match = _ONEDNN.match(op)
    return op[match.end():] if match else None
