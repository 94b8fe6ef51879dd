"""A Python API for notebooks and scripts: ``with placement_cli.capture() as report: ...``."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from placement_cli.runtime.fdcapture import capture_fds
from placement_cli.logparse import parse_text
from placement_cli.model import Report
from placement_cli.why import Facts, explain, facts_from_dict


class CapturedReport:
    """Empty inside the ``with`` block; the parsed placement log once it ends."""

    def __init__(self) -> None:
        self.report = Report()

    @property
    def placements(self) -> tuple[Any, ...]:
        return self.report.placements

    @property
    def errors(self) -> tuple[Any, ...]:
        return self.report.errors

    @property
    def by_device(self) -> dict[str, int]:
        return self.report.by_device

    @property
    def log(self) -> str:
        return self.report.log or ""

    def to_dict(self) -> dict[str, Any]:
        return self.report.to_dict(run=True)

    def to_json(self) -> str:
        from placement_cli.render.json import render_json  # noqa: PLC0415

        return render_json(self.report, run=True)

    def __rich__(self) -> Any:
        from placement_cli.render.table import report_group  # noqa: PLC0415

        return report_group(self.report, run=True)

    def _repr_html_(self) -> str:
        from rich.console import Console  # noqa: PLC0415

        console = Console(record=True, width=110, file=open(os.devnull, "w"))  # noqa: SIM115
        console.print(self.__rich__())
        return console.export_html(inline_styles=True)

    def __repr__(self) -> str:
        return f"<placement report: {self.report.placement_count} placements, {len(self.report.errors)} errors>"


def _recorder() -> Any:
    """Placement logging on, Sessions made to log, graphs kept: before TF's context starts, or it logs nothing."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        import tensorflow as tf  # noqa: PLC0415
    from placement_cli.runtime.recording import Recorder  # noqa: PLC0415

    return Recorder(tf, copies=False)


@contextmanager
def capture(enable_logging: bool = True) -> Iterator[CapturedReport]:
    """Capture TensorFlow's placement log (fd-level, so also where C++ output never reaches a
    notebook cell) for the code inside the block, then parse it and say why ops sit where they do."""
    result = CapturedReport()
    captured = None
    recorder = None
    try:
        with capture_fds() as captured:
            undo = None
            if enable_logging:
                recorder = _recorder()
                undo = recorder.install()
            try:
                yield result
            finally:
                if undo is not None:
                    undo()
    finally:  # also when the block raised: report what was placed so far
        if captured is not None:
            report = parse_text(captured.text)
            facts = facts_from_dict(recorder.facts()) if recorder is not None else Facts()
            result.report = replace(report, placements=explain(report.placements, facts), log=captured.text)
