"""TensorFlow's lines exactly as it writes them, compiled: what trace's splitter and capture() take
off a program's output. Each is made of its dialect module's pattern, so a line taken is a line the
parser reads. Only the capture side imports this module: the parser reads more (any version, pasted
logs) and compiles its own, so ``parse`` compiles none of these."""

import re

from placement_cli.logparse import eager, glog, mapping, placer

_END = rb"[ \t\r]*+"

GLOG_START = re.compile(glog.HEADER_START)
GLOG_PARTIAL = re.compile(glog.HEADER_PARTIAL)
INFO_LINE = re.compile(r"\s*+" + glog.INFO_HEADER.decode("ascii"))  # TensorFlow's INFO chatter, as text

PLACER_LINE = re.compile(placer.WRITTEN + _END)  # a placer record's text, for fullmatch
PLACER_PARTIAL = re.compile(placer.PARTIAL)
COPY = re.compile(placer.COPY)
COPY_TAIL = re.compile(placer.COPY_TAIL)
NODE_CHAR = re.compile(placer.NODE_CHAR)

EAGER_LINE = re.compile(eager.PATTERN)  # an eager line's text, for fullmatch
EAGER_ANYWHERE = re.compile(eager.PATTERN, re.MULTILINE)

MAPPING_HEADER_LINE = re.compile(re.escape(mapping.HEADER) + rb".*+")
MAPPING_ENTRY_LINE = re.compile(mapping.ENTRY + rb".*+")

# trace's splitter, on a chunk prefixed with a newline (every line starts after one):
# one whole glog line (its message: msg; absl's notice: absl)
WHOLE_GLOG_LINE = re.compile(rb"\n(?:" + glog.HEADER + rb"(?P<msg>[^\n]*)|(?P<absl>" + glog.ABSL_LINE + rb"))(?=\n)")
WHOLE_BARE_LINE = re.compile(rb"\n" + placer.WRITTEN + _END + rb"(?=\n)")  # the placer's printf copy, whole
MAPPING_LINE = re.compile(mapping.ENTRY + rb"[^\n]*\n")  # a Device mapping entry and its newline
# a line of TensorFlow's own log (glog/absl prefix), a placer record or a Device mapping line: never part of
# an error message
LOG_LINE = re.compile(glog.HEADER + rb"|" + placer.WRITTEN + rb"|" + mapping.ENTRY)

# capture(): TensorFlow's lines found anywhere in a line (a program may have left its own unfinished)
BARE_RECORD = re.compile(rb"(?:" + placer.WRITTEN + rb"|" + eager.PATTERN + rb")" + _END)  # printf copy, eager line
GLOG_PLACER = re.compile(glog.HEADER + rb"(?P<placed>" + placer.WRITTEN + rb")" + _END)
GLOG_EAGER = re.compile(glog.HEADER + eager.PATTERN + _END)
GLOG_MAPPING = re.compile(glog.HEADER + MAPPING_HEADER_LINE.pattern)
JOB = re.compile(re.escape(placer.JOB))
KEYWORDS = re.compile(re.escape(placer.JOB) + rb"|/device:|" + re.escape(mapping.HEADER))  # where a line may be one
