"""Runs many placement commands in ONE Python process, so that they share one TensorFlow start-up.

Usage: python cli_batch.py < request  ->  one JSON list on stdout, a result per command, in order:
    request: {"commands": [{"args": [...], "env": {...}}, ...]}
    result:  {"args": [...], "exit_code": int, "stdout": str, "stderr": str}

Each command runs through the typer app (CliRunner, prog_name "placement", as the entry point names it);
what it writes at file-descriptor level meanwhile (TensorFlow's C++ log outside the commands' own
capture) is added to its stdout and stderr, so a test sees what the real entry point would print.
A command's ``env`` is set for that command only (COLUMNS, --lang's LANG, ...); TensorFlow reads its
settings once per process, so they belong to the batch's own environment (``run_batch(env=...)``), and
every command of a batch must ask for the same logical devices (--cpus, --virtual-gpus) and XLA devices
or none (an XLA device in a device option, `errors`): TensorFlow fixes them at its first start-up. A command that asks for others is an error of the batch, never
answered with the first command's devices.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import traceback
from typing import Any

from typer.testing import CliRunner

from placement_cli.cli import app
from placement_cli.runtime import startup

class BatchError(BaseException):
    """A batch that cannot answer as fresh processes would (neither the app nor CliRunner catches it)."""


_devices: list[tuple[Any, Any]] = []  # the logical devices the first TensorFlow start-up made
_start = startup.tensorflow


_calls: list[int] = [0]  # the current command's start-ups asked for (its first one says if it wants XLA devices)


def _same_devices(options: Any) -> Any:
    _calls[0] += 1
    asked = (options.cpus, options.virtual_gpus, options.xla if _calls[0] == 1 else _devices[0][2])
    if _devices and _devices[0] != asked:
        raise BatchError(f"a command asks for (--cpus, --virtual-gpus, XLA devices) {asked} in a batch started with "
                         f"{_devices[0]}: give it its own batch")
    _devices[:1] = [asked]
    return _start(options)


startup.tensorflow = _same_devices


def _check_guarded() -> None:
    """Every module that starts TensorFlow reached it through the check (none imported the function
    before it was replaced): else the check would be silently skipped."""
    bypassing = [name for name, module in list(sys.modules.items())
                 if name.startswith("placement_cli") and getattr(module, "tensorflow", None) is _start]
    if bypassing:
        raise BatchError(f"{bypassing} start TensorFlow without the batch's check of the logical devices")


class _CurrentStderr:
    """TensorFlow's Python logger keeps the stream it found at its first use: the first command's
    stderr, closed since. It writes to each command's own stderr instead."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _rebind_loggers() -> None:
    loggers = [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values()
                                      if isinstance(v, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            if type(handler) is logging.StreamHandler and handler.stream not in (sys.__stderr__, sys.__stdout__):
                handler.stream = _CurrentStderr()


def _read_new(file: Any, start: int) -> str:
    file.flush()
    file.seek(start)
    return file.read().decode("utf-8", "replace")


def run(args: list[str], env: dict[str, str], fd_out: Any, fd_err: Any) -> dict[str, Any]:
    if any(key.startswith("TF_") for key in env):
        raise BatchError(f"{sorted(env)}: TensorFlow's settings are read once a process: give the batch them")
    out_at, err_at = os.fstat(1).st_size, os.fstat(2).st_size
    _calls[0] = 0
    result = CliRunner(env=env).invoke(app, args, prog_name="placement")
    _check_guarded()
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        # what Python prints for an exception that escaped the entry point (its exit code is 1)
        stderr += "".join(traceback.format_exception(result.exception))
    _rebind_loggers()
    # a command that silenced a closed stdout (dup2 of /dev/null onto fd 1) gets the files back
    os.dup2(fd_out.fileno(), 1)
    os.dup2(fd_err.fileno(), 2)
    return {"args": args, "exit_code": result.exit_code,
            "stdout": result.stdout + _read_new(fd_out, out_at), "stderr": stderr + _read_new(fd_err, err_at)}


def main() -> None:
    request = json.load(sys.stdin)
    if request.get("xla_flag"):  # what placement adds to TF_XLA_FLAGS (the switch off: a TF without XLA devices)
        startup.XLA_DEVICES_FLAG = request["xla_flag"]
    answer, errors = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as fd_out, tempfile.TemporaryFile() as fd_err:
        os.dup2(fd_out.fileno(), 1)
        os.dup2(fd_err.fileno(), 2)
        try:
            results = [run(c["args"], c.get("env") or {}, fd_out, fd_err) for c in request["commands"]]
        finally:
            os.dup2(errors, 2)  # a failing batch's traceback reaches the test
    with os.fdopen(answer, "w", encoding="utf-8") as out:
        json.dump(results, out)


if __name__ == "__main__":
    main()
