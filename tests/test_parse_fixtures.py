"""Every recorded log parses to its hand-checked JSON (one fixture pair per dialect)."""

import json

import pytest

from conftest import EXPECTED, LOGS
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
