"""Rendered tables at a fixed width, colour off, against text kept in the repo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rich.console import Console

from conftest import FIXTURES, LOGS
from placement_cli.logparse import parse_paths
from placement_cli.render.table import report_group

GOLDEN = FIXTURES / "golden"
CASES = ["tf0.x/guide_towers.log", "tf1.x/errors_mixed.log", "tf1.x/distributed_xla.log"]


def render(log: Path, summary: bool = False) -> str:
    console = Console(record=True, width=100, color_system=None, file=open(os.devnull, "w"))
    console.print(report_group(parse_paths([str(log)], keep=not summary), run=False, summary=summary))
    return console.export_text()


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    text = render(LOGS / case)
    golden = GOLDEN / (case.replace("/", "__") + ".txt")
    if os.environ.get("PLACEMENT_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()
