"""Device requests TensorFlow's placer logged it ignored, and why (never placements).

Every version from 0.x (``simple_placer.cc``) through 1.x (``placer.cc``) to 1.13+
(``colocation_graph.cc``) logs at INFO, one line each, with ``log_device_placement``:

- ``Ignoring device specification D for node 'N' because the input edge from 'M' is a
  reference connection and already has a device field set to E``: N asked for D, and runs
  where its reference (or resource) input M is, on E;
- ``Ignoring request to colocate node 'N' with nodes in colocation group 'G' because soft
  placement is on and an attempt at doing so resulted in the following error: ...``
  (TF 1.13+): N's colocation with G was dropped; the error it quotes is no failure;
- ``Failed to place the graph without changing the devices of some resources. ... Current candidate
  devices are [`` and the candidates on the lines after it, then ``See below for details of this
  colocation group:`` and the group's debug info (TF 1.13+, ``colocation_graph.cc``, always at
  WARNING, soft placement on): the group of a resource was placed off the resource's device. No failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from placement_cli import messages
from placement_cli.devices import device_name, try_parse
from placement_cli.i18n import Message
from placement_cli.logparse import lazy
from placement_cli.model import AS_REQUESTED, WITH_RESOURCE, IgnoredRequest, Placement

LITERAL = b"Ignoring "  # every Ignoring line holds it: a cheap test before the regex
RESOURCES_LITERAL = b"Failed to place the graph without changing the devices of some resources"
# the start of the reference-input wording (the colocation one quotes an error, which error readers keep)
SPEC_LITERAL = b"Ignoring device specification "
PATTERN = lazy.Pattern(
    rb"Ignoring device specification (?P<requested>\S*+) for node '(?P<node>[^'\n]++)' because the input edge from "
    rb"'(?P<source>[^'\n]++)' is a reference connection and already has a device field set to (?P<device>\S*+)"
    rb"|Ignoring request to colocate node '(?P<cnode>[^'\n]++)' with nodes in colocation group '(?P<group>[^'\n]++)'"
    rb" because soft placement is on[^\n]*+"
    # (its candidates on the indented lines after it; ``\n\0``: a row a wrapped line's join took, logparse.rejoin)
    rb"|(?P<resources>" + RESOURCES_LITERAL + rb"\.[^\n]*+(?:(?:\n\x00)*+\n[ \t]++[^\n]*+)*+)",
    re.MULTILINE,
)
_DETAILS = b"\nSee below for details of this colocation group:"
_RESOURCE_DEVICE = lazy.Pattern(rb"resource_device_name_='([^'\n]++)'")
_MEMBER = lazy.Pattern(rb"^[ \t]++(\S++) \([\w.]++\) (/\S++)", re.MULTILINE)  # "  v (VarHandleOp) /device:CPU:7"


def _resources(m: re.Match[bytes], line: int) -> IgnoredRequest:
    """The warning that soft placement put a resource's colocation group off the resource's device:
    the candidate devices from its lines; the group's device and first member with a device request
    from the debug info after it, where the text holds it."""
    message = m.group("resources").replace(b"\n\x00", b"").decode("utf-8", "replace").rstrip()
    opening = message.find("[")
    closing = message.find("]", opening)
    candidates = [d.strip() for d in message[opening + 1 : closing].split(",") if d.strip()] \
        if 0 <= opening < closing else []
    node = requested = None
    text, end = m.string, m.end()
    while text.startswith(b"\n\x00", end):
        end += 2
    if text.startswith(_DETAILS, end):
        window = text[end : end + 8192].replace(b"\n\x00", b"")
        members = window.find(b"Colocation members")
        end = window.find(b"\n\n", members) if members >= 0 else -1
        window = window[: end if end >= 0 else len(window)]
        if found := _RESOURCE_DEVICE.search(window):
            requested = found.group(1).decode("utf-8", "replace")
        if members >= 0 and (found := _MEMBER.search(window, members)):
            node = found.group(1).decode("utf-8", "replace")
            requested = requested or found.group(2).decode("utf-8", "replace")
    return IgnoredRequest(node=node or "", requested=device_name(requested), cause="resource_device", source=None,
                          device=device_name(", ".join(candidates) or None), line=line, message=message)


def request(m: re.Match[bytes], line: int) -> IgnoredRequest:
    """The request a match of PATTERN reports, on line ``line``."""

    def text(name: str) -> str | None:
        raw = m.group(name)
        return None if raw is None else raw.decode("utf-8", "replace")

    if m.group("resources") is not None:
        return _resources(m, line)
    message = m.group().decode("utf-8", "replace").rstrip()
    if m.group("node") is not None:
        return IgnoredRequest(node=text("node") or "", requested=device_name(text("requested") or None),
                              cause="reference_input", source=text("source"), device=device_name(text("device") or None), line=line, message=message)
    return IgnoredRequest(node=text("cnode") or "", requested=None, cause="colocation", source=text("group"),
                          device=None, line=line, message=message)


def settle(placements: tuple[Placement, ...], requests: Iterable[IgnoredRequest]) -> tuple[Placement, ...]:
    """The placements (in line order) with what the placer's ignored-request lines say of them: a
    node that asked for D and follows its reference (or resource) input M to E was put there by
    TensorFlow's rule (ColocateResourceOrRefEdge), soft placement on or off: no fallback. Each line
    goes to the first placement of its node after it (the placer logs it while it places that
    graph), else to its node's only placement (a stdout copy read before the stderr log)."""
    wanted = [r for r in requests if r.cause == "reference_input" and r.requested]
    if not wanted:
        return placements
    by_node: dict[str, list[IgnoredRequest]] = {}
    for r in sorted(wanted, key=lambda r: r.line):
        by_node.setdefault(r.node, []).append(r)
    places: dict[str, list[int]] = {}
    for i, p in enumerate(placements):
        if p.node in by_node and p.kind != "eager":
            places.setdefault(p.node, []).append(i)
    found: dict[int, IgnoredRequest] = {}
    for node, indices in places.items():
        events = sorted([(r.line, 0, r) for r in by_node[node]] + [(placements[i].line, 1, i) for i in indices],
                        key=lambda e: (e[0], e[1]))
        open_request: IgnoredRequest | None = None
        left: list[IgnoredRequest] = []
        for _line, is_placement, item in events:
            if not is_placement:
                if open_request is not None:
                    left.append(open_request)
                open_request = item  # type: ignore[assignment]
            elif open_request is not None:
                found[item], open_request = open_request, None  # type: ignore[index]
        left += [open_request] if open_request is not None else []
        if left and len(indices) == 1 and indices[0] not in found:
            found[indices[0]] = left[-1]
    if not found:
        return placements
    return tuple(_settled(p, found[i]) if i in found else p for i, p in enumerate(placements))


def _settled(p: Placement, request: IgnoredRequest) -> Placement:
    want, there = request.requested.request if request.requested else None, try_parse(request.device)
    if want is not None and want.satisfied_by(p.spec):
        return replace(p, requested=request.requested, status=AS_REQUESTED)
    if there is None or there.satisfied_by(p.spec):
        return replace(p, requested=request.requested, status=WITH_RESOURCE,
                       reason=Message(messages.WITH_REFERENCE_INPUT, source=request.source or "?", device=p.short))
    return replace(p, requested=request.requested)  # elsewhere still: the log does not say why
