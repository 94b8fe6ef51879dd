"""`placement parse`: pairing, dialect mixing, bad input, hostile text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import LOGS
from placement_cli.cli import app

runner = CliRunner()

STDOUT_COPY = "MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\n"
GLOG_COPY = "I0000 00:00:1795232759.847888    3899 placer.cc:162] MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\n"


def parse_json(*args: str, stdin: str | bytes | None = None) -> dict:
    result = runner.invoke(app, ["parse", "--json", *args], input=stdin)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def write(tmp_path: Path, content: str | bytes, name: str = "x.log") -> str:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    return str(path)


def test_stdout_and_glog_copies_count_once(tmp_path: Path) -> None:
    data = parse_json(write(tmp_path, GLOG_COPY + "noise\n" + STDOUT_COPY))
    assert data["summary"]["placements"] == 1
    assert data["placements"][0]["line"] == 1
    assert data["placements"][0]["kind"] == "placer"


def test_second_placement_of_same_node_counts_again(tmp_path: Path) -> None:
    data = parse_json(write(tmp_path, (GLOG_COPY + STDOUT_COPY) * 2))
    assert data["summary"]["placements"] == 2
    assert [p["line"] for p in data["placements"]] == [1, 3]


def test_buffered_stdout_copies_arrive_late_and_still_pair(tmp_path: Path) -> None:
    glog = "".join(GLOG_COPY.replace("MatMul: (MatMul)", f"n{i}: (Const)") for i in range(50))
    bare = "".join(STDOUT_COPY.replace("MatMul: (MatMul)", f"n{i}: (Const)") for i in range(50))
    data = parse_json(write(tmp_path, glog + "training...\n" + bare))
    assert data["summary"]["placements"] == 50


def test_only_one_copy_form_counts_each_line(tmp_path: Path) -> None:
    assert parse_json(write(tmp_path, STDOUT_COPY * 3))["summary"]["placements"] == 3


def test_files_are_one_stream_so_split_stdout_and_stderr_pair(tmp_path: Path) -> None:
    data = parse_json(write(tmp_path, GLOG_COPY, "err.log"), write(tmp_path, STDOUT_COPY, "out.log"))
    assert data["summary"]["placements"] == 1


def test_stdin(tmp_path: Path) -> None:
    data = parse_json("-", stdin=(LOGS / "tf0.x" / "guide_towers.log").read_bytes())
    assert data["summary"]["placements"] == 7
    assert len(data["device_mapping"]) == 4
    assert data["device_mapping"][2]["description"] == "device: 2, name: Tesla K20m, pci bus id: 0000:83:00.0"


def test_all_dialects_mixed_in_one_file_with_noise(tmp_path: Path) -> None:
    mixed = "\n".join(
        (p.read_text(errors="replace") + "\nrandom noise: 1/2 [==>..]\n") for p in sorted(LOGS.glob("*/*.log"))
    )
    data = parse_json(write(tmp_path, mixed))
    kinds = {p["kind"] for p in data["placements"]}
    assert kinds == {"placer", "eager", "legacy"}
    assert {e["kind"] for e in data["errors"]} >= {"device_not_found", "no_kernel", "colocation"}
    jobs = {p["job"] for p in data["placements"]}
    assert jobs == {"localhost", "ps", "worker"}


def test_summary_table(tmp_path: Path) -> None:
    result = runner.invoke(app, ["parse", "--summary", str(LOGS / "tf0.x" / "guide_towers.log")])
    assert result.exit_code == 0
    assert "GPU:3" in result.stdout and "AddN" not in result.stdout


def test_table_shows_short_and_full_device_names() -> None:
    result = runner.invoke(app, ["parse", str(LOGS / "tf1.x" / "distributed_xla.log")], env={"COLUMNS": "140"})
    assert result.exit_code == 0
    assert "ps/0 CPU:0" in result.stdout
    assert "worker/1 CPU:0" in result.stdout
    assert "/job:ps/replica:0/task:0/device:CPU:0" in result.stdout


@pytest.mark.parametrize(
    ("content", "needle"),
    [(None, "no such file"), ("DIR", "is a directory"), (b"", "empty input"), (b"\x00\x01\x02garbage\x00" * 10, "not a text log")],
)
def test_bad_input_is_exit_2_one_line(tmp_path: Path, content, needle: str) -> None:
    if content is None:
        path = str(tmp_path / "missing.log")
    elif content == "DIR":
        path = str(tmp_path)
    else:
        path = write(tmp_path, content)
    result = runner.invoke(app, ["parse", path])
    assert result.exit_code == 2
    assert result.stdout == ""
    message = result.stderr.strip()
    assert needle in message and path in message
    assert len(message.splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_no_placements_is_exit_0_with_message() -> None:
    path = str(LOGS / "misc" / "noise_only.log")
    result = runner.invoke(app, ["parse", "--json", path])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["placements"] == [] and data["errors"] == [] and data["device_mapping"] == []
    assert f"no placements found in {path}" in result.stderr


def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path) -> None:
    gbk = "/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: 显卡\n".encode("gbk")
    noise = "张量: (Const): /job:localhost/replica:0/task:0/device:CPU:0\n".encode("gbk")  # no TF node name
    data = parse_json(write(tmp_path, b"\xd5\xfd\xd4\xda\xd4\xcb\xd0\xd0\r\n" + gbk + noise + STDOUT_COPY.encode()))
    assert data["summary"]["placements"] == 1
    assert data["placements"][0]["line"] == 4
    assert "\ufffd" in data["device_mapping"][0]["description"]


def test_utf16_windows_log(tmp_path: Path) -> None:
    data = parse_json(write(tmp_path, ("\ufeff" + STDOUT_COPY).encode("utf-16-le")))
    assert data["summary"]["placements"] == 1


def test_ten_megabyte_single_line(tmp_path: Path) -> None:
    path = write(tmp_path, "x" * 10_000_000 + "\n" + STDOUT_COPY + "y: " * 1_000_000)
    data = parse_json(path)
    assert data["summary"]["placements"] == 1
    assert data["placements"][0]["line"] == 2


def test_markup_is_shown_literally_and_escape_codes_are_what_a_terminal_showed(tmp_path: Path) -> None:
    hostile = ("Executing op [red]x in device /job:localhost/replica:0/task:0/device:CPU:0\n"  # no op name
               "Executing op MatMul in device /job:[b]w\x1b[0m/replica:0/task:0/device:CPU:0\n")
    result = runner.invoke(app, ["parse", write(tmp_path, hostile)], env={"COLUMNS": "140"})
    assert result.exit_code == 0
    assert "[b]w" in result.stdout and "[red]x" not in result.stdout
    assert "\x1b" not in result.stdout
    data = parse_json(write(tmp_path, hostile))
    assert [(p["op"], p["job"]) for p in data["placements"]] == [("MatMul", "[b]w")]


def test_node_names_follow_tensorflows_rule(tmp_path: Path) -> None:
    """TF's IsValidNodeName: what a flushed notebook leaves of a line is not a node."""
    lines = [
        "(Mul): /job:localhost/replica:0/task:0/device:GPU:0",
        "l): /job:localhost/replica:0/task:0/device:GPU:0",
        "[red]x: (Const): /job:localhost/replica:0/task:0/device:CPU:0",
        "-x: (Const): /job:localhost/replica:0/task:0/device:CPU:0",
        "_arg_x_0_0: (_Arg): /job:localhost/replica:0/task:0/device:CPU:0",
        "tower_0/MatMul>grad.1-x: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0",
        "    indented/in_a_mail: (Const): /job:localhost/replica:0/task:0/device:CPU:0",
    ]
    data = parse_json(write(tmp_path, "\n".join(lines) + "\n"))
    assert [p["node"] for p in data["placements"]] == ["_arg_x_0_0", "tower_0/MatMul>grad.1-x", "indented/in_a_mail"]


def test_json_output_is_pure_json_on_stdout() -> None:
    result = runner.invoke(app, ["parse", "--json", str(LOGS / "tf2.21" / "guide_matmul_gpu2.log")])
    data = json.loads(result.stdout)
    assert set(data) == {"placements", "device_mapping", "errors", "summary"}
    error = data["errors"][0]
    assert set(error) == {"kind", "node", "requested_device", "message", "available_devices"}
    assert error["node"] == "MatMul"
    assert error["requested_device"] == "/device:GPU:2"


@pytest.mark.parametrize("at", [1, 7, 8, 9])
def test_pairing_blocks_do_not_cut_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int) -> None:
    """Copies pair within blocks of lines; a block's end falls anywhere, even inside a wrapped mapping line."""
    from placement_cli.logparse import engine

    monkeypatch.setattr(engine, "PAIR_LINES", 8)
    lines = [f"noise {i}" for i in range(at - 1)] + [
        "/job:localhost/replica:0/task:0/device:GPU:0 -> device: 0, name: Tesla K40c, pci bus",
        "id: 0000:05:00.0",
    ] + [GLOG_COPY.rstrip("\n"), STDOUT_COPY.rstrip("\n")] * 3
    data = parse_json(write(tmp_path, "\n".join(lines) + "\n"))
    assert data["device_mapping"][0]["description"].endswith("pci bus id: 0000:05:00.0")
    assert data["summary"]["placements"] == 3


def test_a_saved_report_is_parsed_as_the_report_it_is(tmp_path: Path) -> None:
    """``parse report.json`` (a report saved with --json, which diff and check read) said "no placements
    found" with exit 0: the JSON was read as a log, one long line. It shows the report's placements (its
    statuses and reasons kept), filtered and summarised as a log's; with other files it is exit 2."""
    saved = Path(__file__).parent / "fixtures" / "saved" / "trace.json"
    report = json.loads(saved.read_text())
    data = parse_json(str(saved))
    assert data["summary"]["placements"] == len(report["placements"]) > 0
    assert [(p["node"], p["status"]) for p in data["placements"]] == \
        [(p["node"], p["status"]) for p in report["placements"]]
    summary = parse_json("--summary", str(saved))  # counts only, as a log's --summary --json
    assert summary["summary"]["by_device"] == report["summary"]["by_device"] and summary["placements"] == []
    assert parse_json("--op", "Sum", str(saved))["summary"]["placements"] == \
        sum(p["op"] == "Sum" for p in report["placements"])
    assert parse_json("-", stdin=saved.read_bytes())["summary"]["placements"] == len(report["placements"])
    counts = write(tmp_path, json.dumps(summary), "counts.json")  # a --summary report: no node to filter
    narrowed = runner.invoke(app, ["parse", "--op", "Sum", counts])
    assert narrowed.exit_code == 2 and "holds only counts per device" in narrowed.stderr
    mixed = runner.invoke(app, ["parse", write(tmp_path, STDOUT_COPY + GLOG_COPY), str(saved)])
    assert mixed.exit_code == 2 and "saved with --json" in mixed.stderr and "no placements" not in mixed.stderr
