"""JSON rendering of a Report (the schema SPEC.md fixes)."""

from __future__ import annotations

import json
from typing import Any

from placement_cli.filters import Filtered
from placement_cli.model import Report


def report_dict(report: Report, *, run: bool = False, filtered: Filtered | None = None) -> dict[str, Any]:
    """The report as data. Filtered: ``placements`` and ``summary`` describe what matched, ``filters``
    says which filters applied, and ``summary.unfiltered_placements`` counts them all."""
    data = report.to_dict(run=run)
    if filtered is not None and filtered.filters.active:
        data["filters"] = filtered.filters.to_dict()
        data["summary"]["unfiltered_placements"] = filtered.total
    return data


def render_json(report: Report, *, run: bool = False, filtered: Filtered | None = None,
                ascii_only: bool = False) -> str:
    """One JSON document; run commands add requested/status/reason, result and log."""
    return dumps(report_dict(report, run=run, filtered=filtered), ascii_only=ascii_only)


def dumps(data: Any, *, ascii_only: bool = False) -> str:
    """``ascii_only``: \\u escapes for a stream that cannot encode every character (still lossless)."""
    return json.dumps(data, indent=2, ensure_ascii=ascii_only)
