"""Graph placer lines: TF 1.x/2.x ``node: (Op): device`` and the guide era's ``node: device``.

Each placement is printed twice: a bare copy on stdout and a glog copy on stderr
(``... placer.cc:162] node: (Op): device``; TF 1.x wrote ``(Op)/job:`` with no
space there, TF 0.x ``simple_placer.cc``). The op group is empty in the TF 0.x
dialect, which is kind "legacy". Node names never hold spaces.
"""

DEVICE = (
    rb"/job:[^\s/]++(?:/replica:\d++)?+(?:/task:\d++)?+"
    rb"(?:/device:[A-Za-z_][A-Za-z0-9_]*+:\d++|/(?:cpu|gpu|CPU|GPU):\d++)"
)
# The engine first rewrites TF 1.x's "(Op)/job:" to "(Op): /job:", so both copies read alike.
NORMALISE = (b")/job:", b"): /job:")
_END = rb"[ \t\r]*+$"
# Groups: whole line body (the pairing key), node, op, device.
_DETAILED = rb"(([^\s:]++(?::[^\s:]++)*+): (?:\(([^\s()]*+)\): )?+(" + DEVICE + rb"))" + _END
# Groups: whole line body, device: all a per-device count needs.
_COUNTED = rb"([^\s:]++(?::[^\s:]++)*+: (?:\([^\s()]*+\): )?+(" + DEVICE + rb"))" + _END


def glog_pattern(detailed: bool) -> bytes:
    """The glog copy starts with a literal, which the regex engine finds fast."""
    return rb"placer\.cc:\d++\] " + (_DETAILED if detailed else _COUNTED)


def bare_pattern(detailed: bool) -> bytes:
    """The bare copy starts its line (the engine prefixes every chunk with a newline)."""
    return rb"\n" + (_DETAILED if detailed else _COUNTED)
