"""Device requests TensorFlow's placer logged it ignored, and why (never placements).

Every version from 0.x (``simple_placer.cc``) through 1.x (``placer.cc``) to 1.13+
(``colocation_graph.cc``) logs at INFO, one line each, with ``log_device_placement``:

- ``Ignoring device specification D for node 'N' because the input edge from 'M' is a
  reference connection and already has a device field set to E``: N asked for D, and runs
  where its reference (or resource) input M is, on E;
- ``Ignoring request to colocate node 'N' with nodes in colocation group 'G' because soft
  placement is on and an attempt at doing so resulted in the following error: ...``
  (TF 1.13+): N's colocation with G was dropped; the error it quotes is no failure.
"""

from __future__ import annotations

import re

from placement_cli.logparse import lazy
from placement_cli.model import IgnoredRequest

LITERAL = b"Ignoring "  # every line read here holds it: a cheap test before the regex
PATTERN = lazy.Pattern(
    rb"Ignoring device specification (?P<requested>\S*+) for node '(?P<node>[^'\n]++)' because the input edge from "
    rb"'(?P<source>[^'\n]++)' is a reference connection and already has a device field set to (?P<device>\S*+)"
    rb"|Ignoring request to colocate node '(?P<cnode>[^'\n]++)' with nodes in colocation group '(?P<group>[^'\n]++)'"
    rb" because soft placement is on[^\n]*+",
    re.M,
)


def request(m: re.Match[bytes], line: int) -> IgnoredRequest:
    """The request a match of PATTERN reports, on line ``line``."""

    def text(name: str) -> str | None:
        raw = m.group(name)
        return None if raw is None else raw.decode("utf-8", "replace")

    message = m.group().decode("utf-8", "replace").rstrip()
    if m.group("node") is not None:
        return IgnoredRequest(node=text("node") or "", requested=text("requested") or None, cause="reference_input",
                              source=text("source"), device=text("device") or None, line=line, message=message)
    return IgnoredRequest(node=text("cnode") or "", requested=None, cause="colocation", source=text("group"),
                          device=None, line=line, message=message)
