"""One input of diff and check: a log, standard input, or a report saved with --json, told by content."""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import json
import lzma
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import FIXTURES, LOGS
from placement_cli.devices import parse_device
from placement_cli.exceptions import InputError
from placement_cli.logparse import parse_paths
from placement_cli.logparse.saved import read_input, report_from_dict
from placement_cli.model import (AS_REQUESTED, FREE, SOFT_FALLBACK, Cause, Copy, IgnoredRequest, Origin, Placement,
                                 PlacementFailure, Report)
from reports import as_run

SAVED = FIXTURES / "saved"
ALL_LOGS = sorted(p for p in LOGS.rglob("*.log"))


def same_placements(a: Report, b: Report) -> None:
    assert [(p.node, p.op, p.device, p.canonical, p.spec, p.kind, p.line) for p in a.placements] == \
           [(p.node, p.op, p.device, p.canonical, p.spec, p.kind, p.line) for p in b.placements]
    assert [(p.requested, str(p.status), p.reason, p.group) for p in a.placements] == \
           [(p.requested, str(p.status), p.reason, p.group) for p in b.placements]
    assert a.by_device == b.by_device
    assert a.errors == b.errors
    assert a.device_mapping == b.device_mapping


def save(tmp_path: Path, report: Report, run: bool, name: str = "saved.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(replace(report, origin=Origin.RUN if run else Origin.LOG).to_dict()), encoding="utf-8")
    return path


@pytest.mark.parametrize("log", ALL_LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_log_round_trips_through_its_json(tmp_path: Path, log: Path) -> None:
    parsed = parse_paths([str(log)])
    again = read_input(str(save(tmp_path, parsed, run=False)))
    same_placements(parsed, again)
    assert again.to_dict() == parsed.to_dict()
    assert read_input(str(log)).to_dict() == parsed.to_dict()  # a log is read as parse reads it


def run_report() -> Report:
    gpu, cpu = parse_device("/job:localhost/replica:0/task:0/device:GPU:0"), parse_device("/cpu:0")
    return Report(
        placements=(
            Placement("a", "Const", "/job:localhost/replica:0/task:0/device:CPU:0", cpu, "placer", 3,
                      requested="/cpu:0", status=AS_REQUESTED),
            Placement("MatMul", "MatMul", gpu.canonical, gpu, "placer", 4, status=FREE, reason="GPU first"),
            Placement(None, "_MklMatMul", cpu.canonical, cpu, "eager", 9, requested="/gpu:2",
                      status=SOFT_FALLBACK, reason="/gpu:2 does not exist (have: CPU:0)", group="tower_0"),
        ),
        lines=12, result=[[22.0, 28.0], [49.0, 64.0]], log="a: (Const): ...",
        copies=(Copy("a:0", cpu.canonical, gpu.canonical, "float32", (2, 3), 24, "a", "MatMul", True),
                Copy("b:0", cpu.canonical, gpu.canonical)),
    )


def test_a_run_report_round_trips_requests_statuses_and_copies(tmp_path: Path) -> None:
    report = run_report()
    again = read_input(str(save(tmp_path, report, run=True)))
    same_placements(report, again)
    assert again.copies == report.copies
    assert again.result == report.result and again.log == report.log
    assert as_run(again).to_dict() == as_run(report).to_dict()
    assert [p.status for p in again.placements] == [AS_REQUESTED, FREE, SOFT_FALLBACK]
    assert again.knows_requests
    assert not parse_paths([str(LOGS / "tf2.21" / "guide_matmul_plain.log")]).knows_requests


def test_a_failed_run_keeps_its_cause_group_device_and_ignored_requests(tmp_path: Path) -> None:
    """A run that stopped: its errors' cause and colocation group device, and the requests the placer
    ignored, read back as they were saved."""
    report = Report(
        errors=(PlacementFailure("run_failed", None, None, "ResourceExhaustedError: OOM",
                                 cause=Cause("OOM when allocating tensor", "gpu_memory", "CUDA_ERROR_OUT_OF_MEMORY")),
                PlacementFailure("colocation", "v/Assign", "/job:worker/task:0", "Cannot assign a device ...",
                                 group_device="/job:ps/task:0")),
        ignored=(IgnoredRequest("q", "/device:GPU:0", "reference_input", "queue", "/device:CPU:0", 1, "Ignoring ..."),
                 IgnoredRequest("c", None, "colocation", "a", None, 2, "Ignoring request to colocate ...")),
        log="", result=None, run_error="ResourceExhaustedError: OOM")
    again = read_input(str(save(tmp_path, report, run=True)))
    assert again.errors == report.errors
    assert again.ignored == report.ignored
    assert as_run(again).to_dict() == as_run(report).to_dict()


@pytest.mark.parametrize("saved", sorted(SAVED.glob("*.json")), ids=lambda p: p.name)
def test_reports_saved_by_the_real_commands_are_read(saved: Path) -> None:
    data = json.loads(saved.read_text(encoding="utf-8"))
    report = read_input(str(saved))
    assert len(report.placements) == len(data["placements"]) > 0
    assert report.by_device == data["summary"]["by_device"]
    assert [p.to_dict(run=True)["status"] for p in report.placements] == [p["status"] for p in data["placements"]]
    assert report.knows_requests
    again = as_run(report).to_dict()
    for key in ("placements", "errors", "device_mapping", "copies"):
        assert again[key] == data[key], key


def test_summary_only_json_keeps_its_counts(tmp_path: Path) -> None:
    counted = parse_paths([str(LOGS / "tf0.x" / "guide_towers.log")], keep=False)
    again = read_input(str(save(tmp_path, counted, run=False)))
    assert again.by_device == counted.by_device and again.placement_count == 7


def test_the_name_does_not_decide(tmp_path: Path) -> None:
    log = tmp_path / "report.json"  # a log, whatever its name says
    log.write_bytes((LOGS / "tf0.x" / "guide_towers.log").read_bytes())
    assert read_input(str(log)).placement_count == 7
    saved = save(tmp_path, parse_paths([str(LOGS / "tf0.x" / "guide_towers.log")]), False, "run.log")
    assert read_input(str(saved)).placement_count == 7


def test_standard_input_either_way(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    towers = LOGS / "tf0.x" / "guide_towers.log"
    for data in (towers.read_bytes(), save(tmp_path, parse_paths([str(towers)]), False).read_bytes()):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        assert read_input("-").placement_count == 7


@pytest.mark.parametrize("encode", [
    gzip.compress, bz2.compress, lzma.compress,
    lambda b: codecs.BOM_UTF16_LE + b.decode().encode("utf-16-le"), lambda b: codecs.BOM_UTF8 + b,
    lambda b: b"\n\n  " + b,
], ids=["gzip", "bzip2", "xz", "utf16", "utf8-bom", "leading-blanks"])
def test_saved_reports_are_read_as_logs_are(tmp_path: Path, encode) -> None:
    report = run_report()
    path = tmp_path / "x"
    path.write_bytes(encode(json.dumps(as_run(report).to_dict()).encode()))
    assert as_run(read_input(str(path))).to_dict() == as_run(report).to_dict()


@pytest.mark.parametrize(("data", "words"), [
    (b"", "empty input"),
    (b"\x00\x01\x02\x03\x04" * 1000, "binary"),
    (b'{"placements": [', "not valid JSON"),
    (b'{"cases": []}', "`placement errors` catalogue, not a report of placements"),
    (b'{"a": 1}', 'not a report saved by placement --json'),
    (b'{"placements": [{"node": 3}], "summary": {}}', "not as placement writes it"),
    (b'{"placements": [{"device": "nowhere!"}], "summary": {}}', "not as placement writes it"),
    (b'{"placements": [], "summary": {"lines": -1}}', "not as placement writes it"),
    (b"[" * 100000 + b"]" * 100000, None),  # a log to the reader: it does not start like a report
    (b"{" + b"[" * 100000 + b"]" * 100000 + b"}", "not valid JSON"),
], ids=["empty", "binary", "truncated", "errors-catalogue", "other-json", "bad-node", "bad-device",
        "negative", "brackets-log", "deep"])
def test_unreadable_input_is_an_input_error(tmp_path: Path, data: bytes, words: str | None) -> None:
    path = tmp_path / "in.json"
    path.write_bytes(data)
    if words is None:
        assert read_input(str(path)).placement_count == 0
        return
    with pytest.raises(InputError, match=None) as raised:
        read_input(str(path))
    assert words in str(raised.value) and str(path) in str(raised.value)


def test_missing_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_input(str(tmp_path / "nope"))
    with pytest.raises(InputError, match="is a directory"):
        read_input(str(tmp_path))


def test_not_a_dict_is_refused() -> None:
    with pytest.raises(InputError, match="not a report saved"):
        report_from_dict([1, 2])


@pytest.mark.parametrize("chunk", [4096, 65536])
def test_a_tally_in_two_halves_is_the_one_pass_tally_and_the_full_parse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """diff's per-record counts of a big log (two halves at once, copies paired across the split)
    are what one pass counts, and what the full parse's placements say."""
    from collections import Counter

    from placement_cli.logparse import engine, parallel
    from placement_cli.logparse.saved import read_tallied, record_fields
    from test_parse_split import mixed_log

    log = tmp_path / "big.log"
    mixed_log(log, 20000)
    monkeypatch.setattr(engine, "CHUNK", chunk)
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(parallel, "SPLIT_MIN", 1)
    assert parallel.split_tally(str(log)) is not None  # the halves are really counted apart
    split = read_tallied(str(log))
    monkeypatch.setattr(parallel, "SPLIT_MIN", 1 << 60)
    single = read_tallied(str(log))
    assert split.records.counted() == single.records.counted() and split.eager == single.eager
    full = parse_paths([str(log)])
    graph = Counter((p.node, p.op, p.device) for p in full.placements if p.kind != "eager")
    eager = Counter((p.op, p.device) for p in full.placements if p.kind == "eager")
    assert Counter({record_fields(r): n for r, n in split.records.counted().items()}) == graph
    assert Counter({(o.decode(), d.decode()): n for (o, d), n in split.eager.items()}) == eager
    assert split.report.by_device == full.by_device


def test_a_functions_name_across_the_scans_block_boundary_is_found(tmp_path: Path) -> None:
    """diff reads a log's placer lines by thread only where it may run a tf.function: the name is
    found wherever it falls, across the 1 MiB blocks the scan reads too."""
    from placement_cli.logparse.reader import holds_functions

    line = b"Executing op __inference_f_12 in device /job:localhost/replica:0/task:0/device:CPU:0\n"
    for cut in (0, 1, 4, 8, 9):  # "inference" starts ``cut`` bytes before the second block
        at = (1 << 20) - line.index(b"inference") - cut
        log = tmp_path / f"cut{cut}.log"
        log.write_bytes(b"x" * at + line)
        assert holds_functions(str(log)), at
    plain = tmp_path / "plain.log"
    plain.write_bytes(b"x" * ((1 << 20) - 4) + b"infer\n" + b"MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\n")
    assert not holds_functions(str(plain))


def test_text_that_starts_like_json_is_a_log_where_it_holds_placements_and_refused_where_not(tmp_path: Path) -> None:
    """parse, diff and check read one input alike. A log whose program printed its config first (``{'lr': 0.1}``,
    a JSON line) was refused by diff and check ("not valid JSON", exit 2) while parse read its placements; a
    truncated saved report, or a JSON-lines log (its messages escaped in JSON strings), was "no placements
    found" with exit 0 for parse while diff and check said why it was unreadable. Now each is a log where it
    holds placements, and exit 2 with the JSON's reason where it holds none, in all three, from files and
    standard input, compressed too."""
    from typer.testing import CliRunner

    from placement_cli.cli import app

    runner = CliRunner()
    log = (LOGS / "tf2.21" / "guide_matmul_plain.log").read_text()
    saved = runner.invoke(app, ["parse", "--json", str(LOGS / "tf2.21" / "guide_matmul_plain.log")]).stdout
    logs = {"config.log": "{'lr': 0.1, 'epochs': 3}\n" + log, "jsonline.log": '{"lr": 0.1}\n' + log,
            "array.log": '[{"step": 1}]\n' + log}
    bad = {"truncated.json": (saved[: len(saved) // 2], "not valid JSON"),
           "lines.log": ("".join(json.dumps({"message": line}) + "\n" for line in log.splitlines()), "JSON lines")}
    for name, text in {**logs, **{k: v[0] for k, v in bad.items()}}.items():
        (tmp_path / name).write_text(text)
        (tmp_path / (name + ".gz")).write_bytes(gzip.compress(text.encode()))
    plain = str(LOGS / "tf2.21" / "guide_matmul_plain.log")

    def commands(path: str) -> list[list[str]]:
        return [["parse", "--summary", path], ["parse", path], ["diff", path, plain], ["check", path, "--max-on", "CPU=9"]]

    for name in logs:
        for source, stdin in ((str(tmp_path / name), None), (str(tmp_path / (name + ".gz")), None),
                              ("-", (tmp_path / name).read_bytes())):
            for args in commands(source):
                result = runner.invoke(app, args, input=stdin)
                assert result.exit_code == 0, (name, args, result.stdout, result.stderr)
                assert "not valid JSON" not in result.stderr and "JSON lines" not in result.stderr
    for name, (_text, words) in bad.items():
        for source, stdin in ((str(tmp_path / name), None), (str(tmp_path / (name + ".gz")), None),
                              ("-", (tmp_path / name).read_bytes())):
            for args in commands(source):
                result = runner.invoke(app, args, input=stdin)
                assert result.exit_code == 2 and words in result.stderr, (name, args, result.stdout, result.stderr)
                assert "no placements found" not in result.stderr


def test_a_narrowed_report_shown_as_counts_says_no_false_nothing_matched(tmp_path: Path) -> None:
    """``parse --summary`` of a report saved with ``--device CPU:1`` (and its ``--summary --json``) showed the 2
    placements it counts, yet said "no placements match --device CPU:1 (of 4)" on standard error."""
    from typer.testing import CliRunner

    from placement_cli.cli import app

    runner = CliRunner()
    cpu = "/job:localhost/replica:0/task:0/device:CPU:"
    log = tmp_path / "run.log"
    log.write_text("".join(f"{n}: ({op}): {cpu}{d}\n" for n, op, d in
                           (("a", "Const", 1), ("b", "MatMul", 1), ("c", "Const", 0), ("d", "AddV2", 0))))
    narrowed = tmp_path / "cpu1.json"
    narrowed.write_text(runner.invoke(app, ["parse", "--json", "--device", "CPU:1", str(log)]).stdout)
    for args in (["--summary"], ["--summary", "--json"]):
        result = runner.invoke(app, ["parse", *args, str(narrowed)])
        assert result.exit_code == 0 and "no placements match" not in result.stderr, result.stderr
    counts = json.loads(runner.invoke(app, ["parse", "--summary", "--json", str(narrowed)]).stdout)
    assert counts["summary"]["by_device"] == {f"{cpu}1": 2} and counts["filters"]["device"] == "CPU:1"
    shown = runner.invoke(app, ["parse", "--summary", str(narrowed)])
    assert "2 of 4 placements match --device CPU:1" in shown.stdout
    nothing = runner.invoke(app, ["parse", "--summary", "--device", "GPU", str(log)])
    assert "no placements match --device GPU (of 4)" in nothing.stderr  # a filter that matched nothing still says so


def test_a_saved_report_with_an_unknown_error_kind_is_refused(tmp_path: Path) -> None:
    """Kinds are the model's (FailureKind): a kind placement never writes is said, as an unknown
    placement kind is, not shown as if it were one."""
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"placements": [], "device_mapping": [], "summary": {"lines": 1, "placements": 0},
                                "errors": [{"kind": "weird", "node": "x", "requested_device": None, "message": "m",
                                            "available_devices": []}]}))
    with pytest.raises(InputError, match="unknown placement error kind 'weird'"):
        read_input(str(path))


RECORDED = FIXTURES / "recorded"
# What a report's JSON holds that the model does not read back: trace's exit code (the document's,
# not the report's), a cluster run's own fields (a cluster report is read as its placements).
NOT_READ_BACK = {"exit_code", "api", "complete", "error", "gpu_memory", "isolated", "mode", "seconds",
                 "steps_asked", "sync_ops", "tasks", "variables", "workers"}


@pytest.mark.parametrize("path", sorted(p for pattern in ("*.json", "*.json.gz") for p in FIXTURES.rglob(pattern)
                                        if "expected" not in p.parts),
                         ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_saved_fixture_comes_back_as_it_was_saved(path: Path) -> None:
    """A saved report read back and written again is the document it was (what the model holds of it):
    the JSON schema has one writer and one reader, and they agree."""
    from placement_cli.render.json import report_dict

    data = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    again = report_dict(read_input(str(path)))
    saved = {k: v for k, v in data.items() if k not in NOT_READ_BACK}
    if "log" not in data:  # a recorded fixture kept without its (long) log
        again.pop("log", None)
    assert {k: v for k, v in again.items() if k not in NOT_READ_BACK} == saved


def test_a_diverged_training_comes_back_with_its_losses_that_are_not_numbers(tmp_path: Path) -> None:
    """A loss that is not finite is written as null (the document's non_finite names it) and read again
    as not a number: the training still says where it diverged."""
    import math

    from placement_cli.model import Training
    from placement_cli.render.json import dumps, report_dict

    losses = (2.9, 7590.3, float("nan"), float("inf"))
    training = Training(lesson="towers", devices=("/cpu:1", "/cpu:2"), batch=8, steps=4, lr=100.0, dtype="float32",
                        losses=losses)
    report = as_run(Report(title="t", result=None, training=training))
    path = tmp_path / "diverged.json"
    path.write_text(dumps(report_dict(report)))
    again = read_input(str(path))
    assert again.training is not None and again.training.diverged_at == 3
    assert math.isnan(again.training.losses[2]) and again.training.losses[:2] == losses[:2]
    assert json.loads(dumps(again.training.to_dict())) == json.loads(path.read_text())["training"]
