"""Runs placement's run commands many times in ONE process, so tests share one TensorFlow start-up:
each command as it is, then again with each private TensorFlow API missing in turn.

Usage: python lesson_driver.py  ->  one JSON document on stdout:
{"runs": [{"api": null|name, "args": [...], "exit_code": int, "stdout": str, "stderr": str}],
 "partitions": {"<args joined>": [{"name", "op", "device"}]}}   (the executed graphs of --copies runs)

Every command gets ``--cpus 3``: TensorFlow's logical devices are fixed at its first start-up.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

from typer.testing import CliRunner

from placement_cli.cli import app
from placement_cli.runtime import private, stepstats

# The commands whose answers are checked as they are (the lessons' own tests read these).
LESSONS = [
    ["show", "--inputs-on", "/cpu:0"],
    ["show", "--device", "/cpu:0"],
    ["show", "--device", "/gpu:2"],
    ["show", "--device", "/gpu:2", "--soft"],
    ["show", "--mode", "eager", "--device", "/cpu:1"],
    ["show", "--mode", "eager", "--device", "/cpu:0"],
    ["show", "--mode", "eager", "--device", "/gpu:2"],
    ["show", "--mode", "eager", "--device", "/job:ps/task:3/cpu:0"],
    ["show", "--mode", "eager", "--device", "/gpu:2", "--soft"],
    ["tower", "--devices", "/cpu:1,/cpu:2"],
    ["tower", "--devices", "/cpu:1,/cpu:2", "--copies"],
    ["tower", "--gpus", "0-3", "--soft"],
    ["tower", "--mode", "eager", "--soft"],
    ["tower", "--devices", "/cpu:0", "--reduce-on", "/gpu:3"],
    ["tower", "--mode", "eager", "--devices", "/cpu:0", "--reduce-on", "/gpu:3"],
    ["tower", "--devices", "/cpu:1,/cpu:2", "--copies", "--time", "--time-steps", "3"],
    ["show", "--mode", "eager", "--device", "/cpu:1", "--time", "--time-steps", "2"],
]
# The commands run again with each private API missing: every path that API serves.
WITHOUT_EACH_API = [
    ["show", "--device", "/cpu:0"],
    ["show", "--device", "/gpu:2", "--soft"],
    ["show", "--mode", "eager", "--device", "/cpu:1"],
    ["tower", "--mode", "eager", "--soft"],
    ["tower", "--devices", "/cpu:1,/cpu:2", "--copies"],
    ["errors"],
]

executed: dict[str, list[dict[str, str]]] = {}
_executed_ops = stepstats.executed_ops
_current: list[str] = []


def _recording(graphs: Any) -> Any:
    executed[" ".join(_current)] = [{"name": n.name, "op": n.op, "device": n.device} for g in graphs for n in g.node]
    return _executed_ops(graphs)


stepstats.executed_ops = _recording  # the executed graphs of the --copies runs, as TensorFlow ran them


def run(args: list[str], api: str | None) -> dict[str, Any]:
    full = [*args, "--json"] if args[0] == "errors" else [*args, "--cpus", "3", "--json"]
    _current[:] = full
    with private.disabled(*([api] if api else [])):
        result = CliRunner(env={"COLUMNS": "120", "NO_COLOR": "1"}).invoke(app, full)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return {"api": api, "args": args, "exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr}


def main() -> None:
    # TensorFlow's Python logger keeps the stderr of the first command CliRunner ran, closed since:
    # its deprecation warnings would print "Logging error" tracebacks into later commands' stderr.
    logging.raiseExceptions = False
    runs = [run(args, None) for args in [*LESSONS, ["errors"]]]
    runs += [run(args, api) for api in private.APIS for args in WITHOUT_EACH_API]
    out = json.dumps({"runs": runs, "partitions": executed})
    os.write(1, out.encode())  # not sys.stdout: CliRunner swapped it in and out


if __name__ == "__main__":
    sys.exit(main())
