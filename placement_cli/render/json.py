"""JSON rendering of a Report (the schema SPEC.md fixes)."""

from __future__ import annotations

import json
from typing import Any

from placement_cli.model import Report


def render_json(report: Report, *, run: bool = False) -> str:
    """One JSON document; run commands add requested/status/reason, result and log."""
    return dumps(report.to_dict(run=run))


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)
