"""`placement parse` of several tasks' logs groups its tables by job/task; one task's log is unchanged."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from conftest import LOGS
from placement_cli.cli import app

CLUSTER = LOGS / "tf2.21" / "ps_worker_cluster.log"


def parse(*args: str) -> str:
    result = CliRunner().invoke(app, ["parse", *args], env={"COLUMNS": "160", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_logs_of_each_task_given_as_several_files_are_grouped_per_task(tmp_path: Path) -> None:
    """A ps/worker cluster's logs, one FILE per task: a task column, then counts per task and per device."""
    lines = CLUSTER.read_text().splitlines(keepends=True)
    ps, worker = tmp_path / "ps.log", tmp_path / "worker.log"
    ps.write_text("".join(line for line in lines if "/job:ps/" in line))
    worker.write_text("".join(line for line in lines if "/job:worker/" in line))
    out = parse(str(ps), str(worker), "--all")
    header = next(line for line in out.splitlines() if "node" in line and "assigned" in line)
    assert header.split()[1] == "task"
    rows = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│") and "logged" in line]
    assert rows == sorted(rows, key=lambda task: task != "ps/0") and set(rows) == {"ps/0", "worker/0"}
    per_task = out.split("Per task", 1)[1].split("Per device", 1)[0]
    assert "│ ps/0     │       1 │  16 │   48% │" in per_task and "│ worker/0 │       1 │  17 │   52% │" in per_task
    summary = parse(str(ps), str(worker), "--summary")
    assert "Per task" in summary and "ps/0" in summary


def test_one_tasks_log_has_no_task_column() -> None:
    out = parse(str(LOGS / "tf2.21" / "guide_matmul_plain.log"))
    assert "Per task" not in out and "task" not in out.split("Per device")[0]
