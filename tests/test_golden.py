"""Rendered tables at fixed widths, colour off, against text kept in the repo.

Parsed logs, and run reports built from recorded placements and facts (no TensorFlow): at 40, 80 and
120 columns as a terminal shows them, whole as a file gets them, and as a digest when they are long.
PLACEMENT_UPDATE_GOLDEN=1 rewrites the expected files."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from conftest import FIXTURES, LOGS
from placement_cli.logparse import parse_paths
from placement_cli.logparse.saved import report_from_dict
from placement_cli.model import Origin, Report
from placement_cli.render.table import Hints, View, report_group
from reports import big_report, tower_report, trace_report

GOLDEN = FIXTURES / "golden"
CASES = ["tf0.x/guide_towers.log", "tf1.x/errors_mixed.log", "tf1.x/distributed_xla.log", "tf2.21/ps_worker_cluster.log",
         "tf2.21/h200_tower.log"]  # the last: a real GPU run's log, as parse shows it
WIDTHS = [40, 80, 120]


def render_report(report: Report, *, run: bool, width: int = 100, summary: bool = False,
                  view: View | None = None) -> str:
    console = Console(record=True, width=width, color_system=None, file=open(os.devnull, "w"))
    report = replace(report, origin=Origin.RUN if run else Origin.LOG)
    console.print(report_group(report, summary=summary, view=view), crop=False)
    return console.export_text()


def render(log: Path, summary: bool = False) -> str:
    return render_report(parse_paths([str(log)], keep=not summary), run=False, summary=summary)


def check(name: str, text: str) -> None:
    golden = GOLDEN / f"{name}.txt"
    if os.environ.get("PLACEMENT_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    check(case.replace("/", "__"), render(LOGS / case))


@pytest.mark.parametrize("width", WIDTHS)
def test_trace_report_at_terminal_widths(width: int) -> None:
    check(f"run__trace__{width}", render_report(trace_report(), run=True, width=width))


def test_trace_report_to_a_file_keeps_every_name_whole() -> None:
    check("run__trace__file", render_report(trace_report(), run=True, width=80, view=View(fit=False)))


@pytest.mark.parametrize("width", [80])
def test_tower_report(width: int) -> None:
    view = View(hints=Hints.run_command(soft=True))
    check(f"run__towers__{width}", render_report(tower_report(), run=True, width=width, view=view))


@pytest.mark.parametrize("width", WIDTHS)
def test_digest_of_a_long_report(width: int) -> None:
    check(f"run__digest__{width}", render_report(big_report(), run=True, width=width))


def test_several_tasks_digest_reads_per_task() -> None:
    """A ps/worker cluster's log longer than a screen: the digest counts per task, then per device."""
    report = parse_paths([str(LOGS / "tf2.21" / "ps_worker_cluster.log")])
    check("tf2.21__ps_worker_cluster__digest", render_report(report, run=False, view=View(screen_rows=10)))


# The first real GPU run (NVIDIA H200, TensorFlow 2.21; tests/fixtures/recorded/h200-tf2.21): each
# golden is what that run printed after TensorFlow's log, at its terminal's 160 columns, so the
# tables rendered again from its saved report must be the very text the GPU machine showed.
GPU_RUNS = ["show", "show-gpu0", "tower"]


@pytest.mark.parametrize("run", GPU_RUNS)
def test_gpu_run_tables_are_what_the_gpu_machine_printed(run: str) -> None:
    saved = json.loads((FIXTURES / "recorded" / "h200-tf2.21" / f"{run}.json").read_text())
    report = report_from_dict(saved)
    text = render_report(report, run=True, width=160, view=View(hints=Hints.run_command(soft=False)))
    check(f"h200__{run}", text)
