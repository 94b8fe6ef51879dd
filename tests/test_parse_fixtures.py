"""Every recorded log parses to its hand-checked JSON (one fixture pair per dialect)."""

import gzip
import json
from pathlib import Path

import pytest

from conftest import EXPECTED, FIXTURES, LOGS
from placement_cli.logparse import parse_paths

CASES = sorted(LOGS.glob("*/*.log"))


@pytest.mark.parametrize("log", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture(log) -> None:
    expected = json.loads((EXPECTED / log.parent.name / f"{log.stem}.json").read_text())
    assert parse_paths([str(log)]).to_dict() == expected


def test_every_fixture_has_expected_json() -> None:
    assert len(CASES) >= 12
    for log in CASES:
        assert (EXPECTED / log.parent.name / f"{log.stem}.json").exists(), log


@pytest.mark.parametrize("log", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_summary_counts_match_full_parse(log) -> None:
    full = parse_paths([str(log)])
    summary = parse_paths([str(log)], keep=False)
    assert summary.by_device == full.by_device
    assert summary.errors == full.errors


# ------------------------------------------------------------------- the first real GPU run's logs

# What `tools/gpu_check.sh` recorded on an NVIDIA H200 with TensorFlow 2.21 (recorded/h200-tf2.21/README.md):
# each run's report as the command saved it with --json, and TensorFlow's log it was read from.
RECORDED = FIXTURES / "recorded" / "h200-tf2.21"
RUNS = sorted(p.name.split(".")[0] for p in RECORDED.glob("*.json*"))
# What a placement line of a log tells (the rest of a run's placement, its request, status, group
# and reason, comes from the run's graphs, which a log does not hold)
LOG_FIELDS = ("node", "op", "device", "canonical", "job", "replica", "task", "device_type", "device_index",
              "kind", "line")


def _read(path: Path) -> str:
    return (gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()).decode("utf-8")


def _one(folder: Path, stem: str) -> Path:
    found = [p for p in folder.glob(f"{stem}.*") if p.name in (f"{stem}.json", f"{stem}.json.gz", f"{stem}.log",
                                                                 f"{stem}.log.gz")]
    assert len(found) == 1, found
    return found[0]


def test_the_gpu_runs_are_all_here() -> None:
    assert RUNS == ["mirrored", "show", "show-gpu0", "tower", "train"]


@pytest.mark.parametrize("run", RUNS)
def test_a_real_gpu_log_parses_to_the_placements_its_run_reported(run: str) -> None:
    """The parser reads TensorFlow's log of a real GPU run to the very placements (node, op, device,
    line) the run itself reported, beside it, from the same log and its graphs; and the same devices,
    mapping and errors. Compressed logs (the long train and mirrored runs) are read as they are."""
    recorded = json.loads(_read(_one(RECORDED, run)))
    log = _one(LOGS / "tf2.21", "h200_" + run.replace("-", "_"))
    parsed = parse_paths([str(log)]).to_dict()
    assert [{k: p[k] for k in LOG_FIELDS} for p in parsed["placements"]] == \
        [{k: p[k] for k in LOG_FIELDS} for p in recorded["placements"]]
    for key in ("device_mapping", "errors", "summary"):
        assert parsed[key] == recorded[key], key
    assert any(p["device_type"] == "GPU" for p in parsed["placements"])
    assert all("NVIDIA H200" in m["description"] for m in parsed["device_mapping"])


@pytest.mark.parametrize("run", ["show", "show-gpu0", "tower"])
def test_a_gpu_fixtures_expected_json_is_its_runs_not_a_snapshot(run: str) -> None:
    """test_fixture holds the short GPU logs to expected JSON: that JSON is what the run reported."""
    recorded = json.loads(_read(_one(RECORDED, run)))
    expected = json.loads((EXPECTED / "tf2.21" / f"h200_{run.replace('-', '_')}.json").read_text())
    assert expected["placements"] == [{k: p[k] for k in LOG_FIELDS} for p in recorded["placements"]]
    assert {k: v for k, v in expected.items() if k != "placements"} == \
        {k: recorded[k] for k in ("device_mapping", "errors", "summary")}
