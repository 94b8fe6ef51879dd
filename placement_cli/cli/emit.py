"""emit(): where a command's outcome is printed, its pictures written and its notices said."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import typer

from placement_cli import outputs
from placement_cli.cli.funnel import fail, funnel, say, silence_stdout
from placement_cli.cli.outcome import ExitCode, Json, Outcome, Pause, Pictures, Said, Verbatim
from placement_cli.exceptions import Terminated, UsageProblem
from placement_cli.i18n import _
from placement_cli.runtime.capture.wakeup import read_line


class _Printer:
    """stdout for one emit(): a console made when first needed (recording with --svg)."""

    def __init__(self, record: bool) -> None:
        self.record = record
        self._console: Any = None
        self.pausing = True

    @property
    def printed(self) -> bool:
        """Whether anything went to stdout's console (what --svg draws)."""
        return self._console is not None

    @property
    def console(self) -> Any:
        if self._console is None:
            from placement_cli.render.console import make_console  # noqa: PLC0415 - keeps --help fast

            self._console = make_console(record=self.record)
        return self._console

    def show(self, item: Any) -> None:
        if isinstance(item, Said):
            say(item.text)
        elif isinstance(item, Json):
            from placement_cli.render.console import unicode_stream  # noqa: PLC0415 - start-up
            from placement_cli.render.json import write  # noqa: PLC0415 - start-up

            write(item.value, sys.stdout, ascii_only=not unicode_stream(sys.stdout))  # long lists as encoded
            sys.stdout.write("\n")
            sys.stdout.flush()  # a closed or full output fails here, inside the command, with its exit code
        elif isinstance(item, Verbatim):
            self.console.print(item.renderable, soft_wrap=item.soft_wrap)
        elif isinstance(item, Pause):
            self.pause(item.prompt)
        else:
            from placement_cli.render.console import AsciiSafe  # noqa: PLC0415 - start-up

            self.console.print(AsciiSafe(item), crop=False)
            sys.stdout.flush()

    def pause(self, prompt: str) -> None:
        """The prompt goes to the terminal: stdout when it is one, else stderr (> file keeps only the
        steps). End of input: no one to press Enter, go on unpaused."""
        if not self.pausing:
            return
        from placement_cli.render.console import AsciiSafe, is_terminal, make_console  # noqa: PLC0415 - start-up

        asking = self.console if is_terminal(sys.stdout) else make_console(sys.stderr)
        asking.print(AsciiSafe(prompt), end="")
        asking.file.flush()

        if not read_line(sys.stdin):
            asking.print()
            self.pausing = False


def emit(outcome: Outcome) -> None:
    """Print the outcome, write its pictures, say its notices, and exit with its code."""
    if outcome.output_closed:  # | head -1: the report has nowhere to go, which is no error
        silence_stdout()
        raise typer.Exit(int(outcome.code))
    pictures = outcome.pictures
    printer = _Printer(record=pictures.svg is not None)
    code, notices = outcome.code, outcome.notices
    try:
        try:
            for item in outcome.output:
                printer.show(item)
        except BaseException as exc:

            # the slides keep what was shown; nothing shown yet: a file --force would replace stays as it is
            if isinstance(exc, (KeyboardInterrupt, Terminated)) and pictures.svg is not None and printer.printed:
                _save_pictures(printer, pictures, None, code, keep_code=True)
            if isinstance(exc, BrokenPipeError) and not outcome.program_output:  # | head -c took what it wanted
                for notice in notices:
                    say(notice)
            raise
        if outcome.finish is not None:
            ending = outcome.finish()
            code, notices = ending.code, notices + ending.notices
        _save_pictures(printer, pictures, outcome.graph, code, keep_code=outcome.keep_code)
        for notice in notices:
            say(notice)
    except BaseException as exc:  # noqa: BLE001 - the one funnel names every ending
        raise funnel(exc, code) from None
    raise typer.Exit(int(code))


def _save_pictures(printer: _Printer, pictures: Pictures, graph: Any, code: int, *, keep_code: bool) -> None:
    """Write what the command printed (--svg) and the graph (--dot, --graph-svg). A file that cannot
    be written after all (its folder went away, a read-only or full disk) is one line and exit 2, or
    the command's own code; with ``keep_code``, the line only."""

    wanted: list[tuple[str, str, Callable[[], str]]] = []
    if pictures.svg is not None:
        from placement_cli.render.svg import render_svg  # noqa: PLC0415 - start-up

        wanted.append(("--svg", pictures.svg, lambda: render_svg(printer.console, pictures.command)))
    if graph is not None:
        from placement_cli.render.graph import render_dot, render_graph_svg  # noqa: PLC0415 - start-up

        if pictures.dot is not None:
            wanted.append(("--dot", pictures.dot, lambda: render_dot(graph)))
        if pictures.graph_svg is not None:
            wanted.append(("--graph-svg", pictures.graph_svg, lambda: render_graph_svg(graph)))
    timed = (("--timeline", pictures.timeline), ("--chrome-trace", pictures.chrome_trace))
    if any(path is not None for _option, path in timed):
        from placement_cli.render.timeline import render_chrome_trace, render_timeline_svg  # noqa: PLC0415 - start-up

        cost = getattr(graph, "cost", None)
        if cost is None or not cost.steps:  # nothing to draw: said; exit 2, or the command's own code
            why = getattr(graph, "timing_error", None) or (_("no step was measured") if cost is not None else
                                                           _("the run did not reach its measured steps"))
            given = ", ".join(option for option, path in timed if path is not None)
            failed = fail(code or ExitCode.USAGE, _("{options}: no times to draw ({why})").format(options=given, why=why))
            if not keep_code:
                raise failed
        else:
            if pictures.timeline is not None:
                wanted.append(("--timeline", pictures.timeline, lambda: render_timeline_svg(graph)))
            if pictures.chrome_trace is not None:
                wanted.append(("--chrome-trace", pictures.chrome_trace, lambda: render_chrome_trace(graph)))
    if not wanted:
        return

    for option, path, render in wanted:
        try:
            outputs.write_file(path, render(), pictures.force)
        except UsageProblem as exc:  # the file appeared meanwhile: kept, and a failed run keeps its 1
            problem = str(exc)
        except BrokenPipeError:  # --svg /dev/stdout | head -1: the reader has all it wanted
            raise
        except OSError as exc:
            problem = _("{option} {path}: cannot write it ({why})").format(option=option, path=path,
                                                                           why=exc.strerror or exc)
        else:
            continue
        failed = fail(code or ExitCode.USAGE, problem)
        if not keep_code:
            raise failed
