"""The placement error messages TensorFlow logs or raises (InvalidArgumentError), in every wording since 0.x.

A message may run over several lines: TensorFlow's own tails (``Registered devices:``,
``Registered kernels:``, ``All kernels registered for op``, an eager op's ``Device
Name:``), and lines a console wrapped at a word. ``read_failure`` takes what follows
only when its grammar says so, at most ``MAX_LINES`` lines, and never a placement line.
Every search here is linear in the text: lists are cut with ``str.find``, repeats are
possessive, and a message is cut at ``MAX_CHARS``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

from placement_cli.devices import DeviceName, device_name, tf_rejects, try_parse
from placement_cli.logparse import lazy
from placement_cli.logparse.causes import MAX_CHARS, headline
from placement_cli.model import PlacementFailure
from placement_cli.model.kinds import FailureKind

MAX_LINES = 32  # lines one message may span, its first included

# Cheap literal searches that tell whether a chunk of bytes may hold an error at all (a
# substring test runs at memchr speed; one regex of many branches does not): each of
# TRIGGER's wordings holds one of these.
_LIKELY = (b"Cannot ", b"device spec", b"unknown device.", b"find device for node", b"No OpKernel", b"No registered '",
           b"find any devices", b"colocate", b"Assigned device '")
# Finds the candidate lines themselves.
TRIGGER = re.compile(
    rb"Cannot assign a device|Could not satisfy (?:explicit )?device specification|Cannot colocate"
    rb"|Malformed device specification|unknown device\.|No OpKernel was registered"
    rb"|Could not find device for node|No registered '|while parsing the device spec"
    rb"|Unable to find any devices for spec|Cannot place the graph because|Could not colocate node"
    rb"|expects to be colocated with unknown node|Assigned device '"
)
_START = lazy.Pattern(
    r"Cannot assign a device|Could not satisfy (?:explicit )?device specification|Cannot colocate"
    r"|Malformed device specification|No OpKernel was registered|Could not find device for node"
    r"|No registered '|Multiple device types are not allowed|Unknown attribute '"
    r"|Unable to find any devices for spec|Cannot place the graph because|Could not colocate node"
    r"|Node '[^'\n]*+' expects to be colocated with unknown node|Assigned device '"
)
# "/job:ps/replica:0/task:3/device:CPU:0 unknown device." (eager); the name may hold a space.
_UNKNOWN = " unknown device."
_NODE = lazy.Pattern(r"Cannot assign a device (?:for operation|to node) '?+([^'\s:]++(?::[^'\s:]++)*+)'?+:")
_NODE_COLOCATE = lazy.Pattern(
    r"Cannot colocate nodes \{\{colocation_node (?P<a>\S+?)\}\} and \{\{colocation_node (?P<b>\S+?)\}\}"
    r"|Cannot colocate nodes '?(?P<c>[^'\s]+?)'? and"
)
_ASSIGNED = lazy.Pattern(r"(?:explicitly )?assigned to (\S++) but available devices are \[")
_SATISFY = lazy.Pattern(r"Could not satisfy (explicit )?device specification '([^'\n]*+)'")
_NO_KERNEL = lazy.Pattern(r"no supported kernel for \w++ devices", re.IGNORECASE)
_NOT_REGISTERED = "no devices matching that specification are registered"
# A tf.function called under a device scope no device matches, soft placement off (TF 2.x):
# "Unable to find any devices for spec /device:GPU:99 [Op:__inference_f_8]"
_NO_DEVICES = lazy.Pattern(r"Unable to find any devices for spec (\S++)")
_MALFORMED = lazy.Pattern(r"Malformed device specification '([^'\n]*+)'")
_SPEC_ERROR = lazy.Pattern(
    r"Multiple device types are not allowed while parsing the device spec: (\S++)"
    r"|Unknown attribute '[^'\n]*+' is encountered while parsing the device spec: '([^'\n]*+)'"
)
# Where the runtime wordings of a missing kernel name their node.
_KERNEL_NODE = lazy.Pattern(
    r"used by \{\{node ([^\s}]++)\}\}|used by node ([^\s(]++)|Could not find device for node: \{\{node ([^\s}]++)\}\}"
    r"|compatible with node (?:\{\{node )?+([^\s}=]++)|in node: \{name:'([^'\n]++)'"
)
_TRACE_NODE = lazy.Pattern(r"^\s*\[\[(?:Node: |\{\{node )?+([^\s}\]=]++)")  # "\t [[Node: X = ...", "\t [[X]]"
_DEVICE_ATTR = lazy.Pattern(r'_device="([^"\n]++)"')
_KERNEL_TAIL = lazy.Pattern(
    r"Registered devices: |Registered kernels:|All kernels registered for op |\s++device=|\s++<no registered kernels>"
)
_EAGER_TAIL = lazy.Pattern(r"Device Name: |Device: |Attrs: ")
# A line that continues a wrapped placement error (a console broke it at a word).
_WRAPPED_TAIL = lazy.Pattern(
    r"\s*+(?:but available devices|available devices|was explicitly assigned|because no supported kernel"
    r"|Make sure the device specification|Supported device types|All available devices|enable_soft_placement)"
)
_PLACEMENT_WORDINGS = ("Cannot assign", "Could not satisfy", "Cannot colocate", "Cannot place", "Could not colocate")
# Colocation: a node that follows its group, not its own request. "... because the node [{{colocation_node X}}
# placed on device ...] was colocated with a group of nodes that required incompatible device 'D'" (TF 0.x-2.x);
# a reference or resource edge between groups (TF 1.x-2.x); a colocation with a node that is not there.
_COLOCATED = " because the node "
_GROUP_DEVICE = lazy.Pattern(r"required incompatible device '([^'\n]*+)'")
# (TensorFlow's "Failed to place the graph without changing the devices of some resources" is a WARNING it
# logs as soft placement moves a resource's group, never an error: logparse.ignored reads it.)
_COLOCATION = ("Cannot place the graph because", "Could not colocate node",
               "Nodes were connected by a reference connection")
_UNKNOWN_COLOCATION = lazy.Pattern(r"Node '([^'\n]++)' expects to be colocated with unknown node")
# TF 1.x's "Cannot assign a device for operation X: Node had no OpKernel registered to support this operation"
_NO_OPKERNEL = "Node had no OpKernel registered"
# TF 1.x (errors::Internal): "Assigned device 'D' does not match any device" / "... does not have registered
# OpKernel support for Op"
_PREASSIGNED = lazy.Pattern(r"Assigned device '([^'\n]++)' does not")
# A log line in which TensorFlow ignored a colocation (soft placement on): it quotes the error, it is none
_IGNORED_COLOCATION = "Ignoring request to colocate node"
# Lines that begin a message of their own rather than go on with one.
_NEW_MESSAGE = lazy.Pattern(
    r"\s*+(?:[\w.]*(?:Error|Exception|Warning)\b|Traceback|File \"|\[\[|[IWEF]\d{4} |\d{4}-\d\d-\d\d)"
)
# The words of TensorFlow's placement errors (a console may cut any of them).
_WORDS = frozenset((
    "cannot", "assign", "device", "devices", "operation", "explicitly", "assigned", "available", "make", "sure",
    "specification", "refers", "valid", "could", "not", "satisfy", "explicit", "because", "supported", "kernel",
    "kernels", "registered", "matching", "process", "colocate", "colocation", "colocation_node", "nodes", "merge",
    "incompatible", "types", "with", "enable_soft_placement", "all", "debug", "info", "group", "following",
    "requested", "assigned"
))


def may_hold_failure(data: bytes) -> bool:
    """Fast: False when ``data`` holds no error TensorFlow words in any way read here."""
    return any(word in data for word in _LIKELY)


def _bracket_list(text: str, after: str) -> tuple[str, ...] | None:
    """The comma-separated items of the first ``[...]`` that follows ``after``, or None."""
    at = text.find(after)
    if at < 0:
        return None
    opening = text.find("[", at + len(after))
    if opening < 0 or text[at + len(after) : opening].strip(" :"):
        return None
    closing = text.find("]", opening)
    if closing < 0:
        return None
    return tuple(d.strip() for d in text[opening + 1 : closing].split(",") if d.strip())


def _unclosed(text: str) -> bool:
    for after in ("available devices are", "All available devices", "Supported device types", "Registered devices:"):
        at = text.find(after)
        if at >= 0 and text.find("[", at) >= 0 and text.find("]", text.find("[", at)) < 0:
            return True
    return False


def _mid_sentence(message: str, line: str) -> bool:
    """A message cut after a letter, and a next line that goes on in lower case (a console
    wrapped it): "... ]. Make" / " sure the device ...", "for operat" / "ion 'b': ..."."""
    rest = line.lstrip()
    return message[-1:].isalnum() and rest[:1].islower() and not _NEW_MESSAGE.match(line) \
        and not _START.match(rest)


def _glue(message: str, line: str) -> str:
    """How a wrapped line joins its message: with no blank where the cut went through a
    word of TensorFlow's wording, a quoted name or a device name; else with one."""
    head, rest = message.rsplit(" ", 1)[-1], line.lstrip()
    first = rest.split(" ", 1)[0]
    if line[:1].isspace() or not head or not first:
        return " "
    left, right = re.search(r"[\w]*$", head).group(), re.match(r"[\w]*", first).group()  # type: ignore[union-attr]
    if (left and right and (left + right).lower() in _WORDS) or message.count("'") % 2:
        return ""
    if "/" in head and try_parse(head) is None and try_parse((head + first).rstrip(".,]")) is not None:
        return ""
    return " "


def _first_line(line: str) -> tuple[str, str] | None:
    """(wording, the message's first line) of a line that reports a failure."""
    if _IGNORED_COLOCATION in line:
        return None
    if m := _START.search(line):
        return m.group(), line[m.start() :].strip()
    end = line.find(_UNKNOWN)
    if end > 0:
        start = line.rfind("/job:", 0, end)
        if start == 0 or (start > 0 and line[start - 1].isspace()):
            return "unknown device", line[start : end + len(_UNKNOWN)]
    return None


def read_failure(lines: Callable[[int], str | None],
                 is_record: Callable[[str], bool] = lambda line: False) -> tuple[PlacementFailure | None, int]:
    """The failure whose first line is ``lines(0)``, and how many lines it spans;
    ``lines(i)`` is the i-th line from there, or None past the text's end."""
    first = _first_line((lines(0) or "")[:MAX_CHARS])
    if first is None:
        return None, 1
    wording, message = first
    used = 1
    placement = wording.startswith(_PLACEMENT_WORDINGS)
    while used < MAX_LINES and len(message) < MAX_CHARS:
        line = lines(used)
        if line is None or not line.strip() or is_record(line):
            break
        if placement:
            if not (message.endswith(":") and "Could not satisfy" not in message) and not _unclosed(message) \
                    and not _WRAPPED_TAIL.match(line) and not _mid_sentence(message, line):
                break
            message = f"{message}{_glue(message, line)}{line.strip()}"
        elif _KERNEL_TAIL.match(line) or (wording.startswith("Malformed") and _EAGER_TAIL.match(line)):
            message = f"{message}\n{line.rstrip()}"
        else:
            break
        used += 1
    message = message[:MAX_CHARS]
    trace = ""  # TensorFlow's "\t [[Node: X = Op[..., _device="..."]]" line after a message
    for i in range(used, used + 3):
        line = lines(i)
        if line is None:
            break
        if _TRACE_NODE.match(line):
            trace = line[:MAX_CHARS]
            break
    return _classify(wording, message, trace), used


def _classify(wording: str, message: str, trace: str) -> PlacementFailure:
    node = requested = None
    available: tuple[str, ...] = ()
    if wording == "unknown device":
        requested = message.partition(_UNKNOWN)[0]
        kind = FailureKind.INVALID_DEVICE_SPEC if tf_rejects(requested) else FailureKind.DEVICE_NOT_FOUND
    elif wording.startswith("Unable to find any devices"):
        if m := _NO_DEVICES.match(message):
            requested = m.group(1)
        kind = FailureKind.INVALID_DEVICE_SPEC if requested and tf_rejects(requested) else FailureKind.DEVICE_NOT_FOUND
    elif wording.startswith("Malformed"):
        kind = FailureKind.INVALID_DEVICE_SPEC
        if m := _MALFORMED.match(message):
            requested = m.group(1)
        if m := _KERNEL_NODE.search(message):
            node = next(g for g in m.groups() if g)
    elif wording.startswith(("Multiple device types", "Unknown attribute")):
        kind = FailureKind.INVALID_DEVICE_SPEC
        if m := _SPEC_ERROR.match(message):
            requested = (m.group(1) or m.group(2) or "").removesuffix(".") or None
    elif wording.startswith(("No OpKernel", "Could not find device", "No registered")):
        kind = FailureKind.NO_KERNEL
        if m := _KERNEL_NODE.search(message):
            node = next(g for g in m.groups() if g)
        if node is None and (m := _TRACE_NODE.match(trace)):
            node = m.group(1)
        if m := _DEVICE_ATTR.search(message) or _DEVICE_ATTR.search(trace):
            requested = m.group(1)
        available = _bracket_list(message, "Registered devices:") or ()
    else:
        return _placement_failure(message)
    return PlacementFailure(kind=kind, node=node, requested_device=device_name(requested), message=message,
                            available_devices=tuple(map(DeviceName, available)), headline=headline(message))


def _placement_failure(message: str) -> PlacementFailure:
    node = None
    if m := _NODE.search(message):
        node = m.group(1)
    requested = None
    available: tuple[str, ...] = ()
    kind = FailureKind.UNSATISFIABLE
    if m := _ASSIGNED.search(message):
        requested, available = m.group(1), _bracket_list(message, "available devices are") or ()
        kind = FailureKind.DEVICE_NOT_FOUND
    group_device = None
    if m := _SATISFY.search(message):
        requested = requested or m.group(2) or None
        rest = message[m.end() :]
        if rest.startswith(_COLOCATED):
            kind = FailureKind.COLOCATION
            if g := _GROUP_DEVICE.search(rest):
                group_device = g.group(1) or None
        elif _NO_KERNEL.search(rest):
            kind = FailureKind.NO_KERNEL
        elif _NOT_REGISTERED in rest or m.group(1):
            kind = FailureKind.DEVICE_NOT_FOUND
        else:  # eager wording: decide from the supported types
            kind = _eager_kind(requested, message)
    if not available:
        available = _available(message) or ()
    if _NO_OPKERNEL in message:
        kind = FailureKind.NO_KERNEL
    if m := _PREASSIGNED.search(message):  # TF 1.x placer: a node a Session had placed before, now impossible
        requested = requested or m.group(1)
        kind = FailureKind.NO_KERNEL if "does not have registered OpKernel support" in message else FailureKind.DEVICE_NOT_FOUND
    if message.startswith("Cannot colocate") or any(w in message for w in _COLOCATION):
        kind = FailureKind.COLOCATION
        if m := _NODE_COLOCATE.search(message):
            node = node or m.group("a") or m.group("c")
    if m := _UNKNOWN_COLOCATION.match(message):
        kind, node = FailureKind.COLOCATION, m.group(1)
    return PlacementFailure(
        kind=kind, node=node, requested_device=device_name(requested), message=message,
        available_devices=tuple(map(DeviceName, available)),
        group_device=device_name(group_device), headline=headline(message),
    )


def _available(message: str) -> tuple[str, ...] | None:
    for after in ("All available devices", "all available devices", "available devices are", "available devices:",
                  "available devices"):
        found = _bracket_list(message, after)
        if found is not None:
            return found
    return None


def _eager_kind(requested: str | None, message: str) -> FailureKind:
    spec = try_parse(requested)
    types = _bracket_list(message, "Supported device types")
    if spec is None or spec.device_type is None or types is None:
        return FailureKind.UNSATISFIABLE
    supported = {t.upper() for t in types}
    names = _available(message) or ()
    existing = {d.device_type for d in map(try_parse, names) if d}
    if spec.device_type in existing and spec.device_type not in supported:
        return FailureKind.NO_KERNEL
    return FailureKind.DEVICE_NOT_FOUND


def failure_from_text(text: str) -> PlacementFailure | None:
    """The first failure in an error message (one line, or TensorFlow's multi-line form)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _first_line(line[:MAX_CHARS]) is not None:
            return read_failure(partial(_line_at, lines, i))[0]
    return None


def _line_at(lines: list[str], start: int, k: int) -> str | None:
    return lines[start + k] if start + k < len(lines) else None
