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
