"""How much of a report to show, and which hints its failure panels may give."""

from __future__ import annotations

from dataclasses import dataclass

from placement_cli.i18n import _
from placement_cli.model.filtered import Filtered

SCREEN_ROWS = 40  # the default View's rows per screen (the CLI passes the terminal's height)


@dataclass(frozen=True)
class Hints:
    """What a failure panel may suggest: only what the command that shows it offers.

    ``source``: ``options`` (show, tower: placement built the graph, the fix is an option),
    ``program`` (trace, capture(): the fix is in the user's program), ``log`` (parse: a log of a
    past run). ``soft``: None when the command has no --soft, else whether it was given."""

    source: str = "program"
    soft: bool | None = None
    cpus: bool = False

    @classmethod
    def run_command(cls, soft: bool | None) -> Hints:
        return cls(source="options", soft=soft, cpus=True)


@dataclass(frozen=True)
class View:
    """How much of a report to show, and how. The defaults suit a notebook or a test."""

    all_rows: bool = False  # --all: every row, however many
    screen_rows: int = SCREEN_ROWS  # a report of more rows is shown as a digest
    fit: bool = True  # cut node names to the width (a terminal); False keeps them whole (files, pipes)
    hints: Hints | None = None  # None: a run report's hints are for a program, a parsed one's for a log
    filtered: Filtered | None = None  # the filters that narrowed the report, if any
    api: bool = False  # shown by the notebook API: point to report.placements / to_json(), not CLI flags

    def fits(self, rows: int) -> bool:
        """Whether ``rows`` rows are shown one by one (they fit a screen, or --all), not as a digest."""
        return self.all_rows or rows <= self.screen_rows

    @property
    def everything(self) -> str:
        return _("report.to_json() has all") if self.api else _("--json has all")

    @property
    def more_rows(self) -> str:
        return (_("report.placements has every row; report.to_json() everything") if self.api else
                _("--all prints every row (narrowed by --device, --op, --node, --top); --json prints everything"))

    @property
    def narrow(self) -> str:
        return (_("filter report.placements") if self.api else
                _("narrow with --device, --op or --node, or print them all with --all; --json has everything"))
