"""The log prefixes TensorFlow's C++ logging has used (absl, TF 1.x glog, TF 0.x), read leniently in
a log and exactly as TensorFlow writes them in a capture (compiled for that in ``written``)."""

import re

# Reading a log of any version: whatever ends in "] " after a severity or a date.
PREFIX = rb"(?:(?:[IWEF]\d{4} |\d{4}-\d\d-\d\d[ T]|[IWEF] )[^\]\n]*+\] )?+"


def _header(severities: bytes) -> bytes:
    return (rb"(?:(?P<sev>" + severities + rb")\d{4} \d\d:\d\d:\d++\.\d++ ++\d++ "
            rb"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d++: (?P<sev2>" + severities + rb") )"
            rb"(?P<file>[^\s\]:]++):\d++\] ")


# Telling TensorFlow's lines from a program's output: the prefix exactly as TensorFlow writes it,
# absl (TF >= 2.16: ``I0000 00:00:1795232759.847888    3899 placer.cc:162] ``) or glog (TF <= 2.15:
# ``2024-01-02 10:00:00.123456: I tensorflow/core/common_runtime/placer.cc:162] ``). Groups: sev or
# sev2 (the severity letter), file (the source file, with its folders).
HEADER = _header(rb"[IWEF]")
INFO_HEADER = _header(rb"I")
# A FATAL line as TensorFlow writes it: the last words of a process it ends (LOG(FATAL) aborts,
# LOG(QFATAL) exits with 1: an unknown flag in TF_XLA_FLAGS, a failed CHECK).
FATAL_LINE = rb"(?m)^" + _header(rb"F") + rb"[^\n]*+"
# absl's prefix up to the id of the thread that wrote the line (group 1):
# ``I0000 00:00:1795232759.847888    3899 execute.cc:1775]`` (glog's older prefix names no thread).
THREAD = rb"[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +(\d+) "
# Where a header may start inside a line (after a program's unfinished line): found fast, then tried.
HEADER_START = rb"(?=[IWEF]\d{4} \d\d:\d\d:\d|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.)"
# An unfinished line that may still become a header line (a capture holds it back a moment).
HEADER_PARTIAL = (rb"[IWEF]\d{0,4}(?: [\d:.]*(?: +\d*(?: [^\s\]]*(?:\](?: [^\n]*)?)?)?)?)?"
                  rb"|\d{1,4}(?:-[\d-]*(?: [\d:.]*(?:: ?(?:[IWEF](?: [^\s\]]*(?:\](?: [^\n]*)?)?)?)?)?)?)?")
# absl's notice, the first line a process writes through it before InitializeLog (no prefix).
ABSL_NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
ABSL_LINE = re.escape(ABSL_NOTICE) + rb"[ \t\r]*+"
# The second line of cpu_feature_guard's start-up notice (no prefix): it belongs to the line before.
CONTINUATION = b"To enable the following instructions:"
SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}
# The start of an ERROR or FATAL line (absl's or glog's), after any indentation: what a failed task said.
ERROR_START = rb"\s*(?:[EF]\d{4} |\d{4}-\d\d-\d\d[ T][\d:.]+: [EF] )"


def severity(match: re.Match[bytes]) -> int:
    """A HEADER match's severity: 0 INFO, 1 WARNING, 2 ERROR, 3 FATAL."""
    return SEVERITY[match.group("sev") or match.group("sev2")]
# What TensorFlow's profiler logs as --time starts, stops and saves it: placement's doing, not the program's.
PROFILER_SOURCES = frozenset({b"profiler_session.cc", b"save_profile.cc", b"xplane_to_step_stats.cc"})
_HEADER_LINE = re.compile(HEADER)


def without_profiler_lines(text: str) -> str:
    """``text`` less the lines TensorFlow's profiler logged (as --time ran it)."""
    kept = []
    for line in text.split("\n"):
        m = _HEADER_LINE.match(line.encode("utf-8", "surrogateescape"))
        if m is None or m.group("file").rsplit(b"/", 1)[-1] not in PROFILER_SOURCES:
            kept.append(line)
    return "\n".join(kept)
