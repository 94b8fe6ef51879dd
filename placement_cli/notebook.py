"""A Python API for notebooks and scripts: ``with placement_cli.capture() as report: ...``."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from placement_cli.fdcapture import capture_fds
from placement_cli.logparse import parse_text
from placement_cli.model import Report


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
        return self.report.to_dict()

    def to_json(self) -> str:
        from placement_cli.render.json import render_json  # noqa: PLC0415

        return render_json(self.report)

    def __rich__(self) -> Any:
        from placement_cli.render.table import report_group  # noqa: PLC0415

        return report_group(self.report, run=False)

    def _repr_html_(self) -> str:
        from rich.console import Console  # noqa: PLC0415

        console = Console(record=True, width=110, file=open(os.devnull, "w"))  # noqa: SIM115
        console.print(self.__rich__())
        return console.export_html(inline_styles=True)

    def __repr__(self) -> str:
        return f"<placement report: {self.report.placement_count} placements, {len(self.report.errors)} errors>"


def _enable_logging() -> None:
    """Turn TensorFlow's placement log on; it must happen before TF's context initialises."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        import tensorflow as tf  # noqa: PLC0415
    tf.debugging.set_log_device_placement(True)


@contextmanager
def capture(enable_logging: bool = True) -> Iterator[CapturedReport]:
    """Capture TensorFlow's placement log (fd-level, so also where C++ output never reaches a
    notebook cell) for the code inside the block, and parse it when the block ends."""
    result = CapturedReport()
    captured = None
    try:
        with capture_fds() as captured:
            if enable_logging:
                _enable_logging()
            yield result
    finally:  # also when the block raised: report what was placed so far
        if captured is not None:
            result.report = replace(parse_text(captured.text), log=captured.text)
