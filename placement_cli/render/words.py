"""Where the CLI took ``one_line`` from; it lives in placement_cli.messages now."""

from __future__ import annotations

from placement_cli.messages import one_line

__all__ = ["one_line"]
