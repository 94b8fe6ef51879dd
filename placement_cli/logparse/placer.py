"""Graph placer lines: TF 1.x/2.x ``node: (Op): device`` and the guide era's ``node: device``.

Each placement is printed twice: a bare copy on stdout and a glog copy on stderr
(``... placer.cc:162] node: (Op): device``; TF 1.x wrote ``(Op)/job:`` with no
space there, TF 0.x ``simple_placer.cc``). The op group is empty in the TF 0.x
dialect, which is kind "legacy".

Node names follow TensorFlow's own rule (``IsValidNodeName`` in
graph_constructor.cc): a letter, digit, ``.`` or, for internal nodes, ``_``, then
letters, digits and ``_.-/``, with ``>`` between pieces; ``:`` is kept inside a name
as the product spec allows. So a fragment such as ``(Mul): /job:...`` (what is left
of a line a notebook flushed in two parts) is never read as a node named ``(Mul)``.
"""

DEVICE = (
    rb"/job:[^\s/]++(?:/replica:\d++)?+(?:/task:\d++)?+"
    rb"(?:/device:[A-Za-z_][A-Za-z0-9_]*+:\d++|/(?:cpu|gpu|CPU|GPU):\d++)"
)
# The engine first rewrites TF 1.x's "(Op)/job:" to "(Op): /job:", so both copies read alike.
NORMALISE = (b")/job:", b"): /job:")
_END = rb"[ \t\r]*+$"
_NAME = rb"[A-Za-z0-9_.\-/>]"
NODE = rb"[A-Za-z0-9._]" + _NAME + rb"*+(?::" + _NAME + rb"++)*+"
# An op type: letters, digits, "_" and ">" (TensorFlow's op names), and "<" as in the functions
# TensorFlow names after a lambda (``Executing op __inference_<lambda>_9``, measured on TF 2.21).
# Anything else in the brackets (what two processes' interleaved lines leave there,
# ``(.cc:162]_Arg)``) is no op: the line is left out, never guessed at.
OP = rb"[A-Za-z0-9_<>]++"
# Groups: whole line body (the pairing key), node, op, device.
_DETAILED = rb"((" + NODE + rb"): (?:\((" + OP + rb")\): )?+(" + DEVICE + rb"))" + _END
# Groups: whole line body, device: all a per-device count needs.
_COUNTED = rb"(" + NODE + rb": (?:\(" + OP + rb"\): )?+(" + DEVICE + rb"))" + _END
# A bare copy may be indented (logs pasted into issues and mails often are).
_INDENT = rb"[ \t]*+"


def glog_pattern(detailed: bool) -> bytes:
    """The glog copy starts with a literal, which the regex engine finds fast."""
    return rb"placer\.cc:\d++\] " + (_DETAILED if detailed else _COUNTED)


def bare_pattern(detailed: bool) -> bytes:
    """The bare copy starts its line (the engine prefixes every chunk with a newline)."""
    return rb"\n" + _INDENT + (_DETAILED if detailed else _COUNTED)


def line_pattern() -> bytes:
    """One line (no newline in it) that is a glog or bare placer record, for ``fullmatch``."""
    return rb"(?:[^\n]*?placer\.cc:\d++\] |" + _INDENT + rb")" + _COUNTED


# What a capture takes off a program's output (compiled in ``written``): exactly the shapes TensorFlow
# >= 2.16 writes, each one the parser reads as kind "placer", never indented, never without its op.
# The placer's record, its printf copy or the body of its glog copy: TF 2.x ``node: (Op): device``,
# TF 1.x ``node: (Op)/job:...`` (NORMALISE makes the two alike for the parser).
WRITTEN = NODE + rb": \(" + OP + rb"\)(?:: )?+" + DEVICE
# TF 2.x's printf copy to the letter; and its end, after the node's name, and one character of a name.
COPY = NODE + rb": \(" + OP + rb"\): " + DEVICE
COPY_TAIL = rb": \(" + OP + rb"\): " + DEVICE
NODE_CHAR = _NAME
# Every placement names a device "/job:...": a literal that tells fast whether text may hold one.
JOB = b"/job:"
# An unfinished line that may still become a printf copy (a capture holds it back a moment).
PARTIAL = rb"[^\s:]+(?::[^\s:]+)*(?::(?: (?:\([^\s()]*(?:\)(?::? ?(?:/[^\s]*)?)?)?)?)?)?"
# The source files of the placer's glog copy (TF >= 1.x, TF 0.x).
FILES = (b"placer.cc", b"simple_placer.cc")


def placer_file(path: bytes) -> bool:
    """Whether a glog line's source file (with its folders) is the placer's."""
    return path.rsplit(b"/", 1)[-1] in FILES
