"""`--summary` on two cores counts exactly what one pass counts, copies paired across the split."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from placement_cli.logparse import engine, parallel, parse_paths

DEV = "/job:localhost/replica:0/task:0/device:{}"


def mixed_log(path: Path, placements: int) -> None:
    rng = random.Random(1)
    lines = []
    for i in range(placements):
        node, dev = f"n{i % 700}/op_{i}", DEV.format(rng.choice(["CPU:0", "GPU:0", "GPU:1"]))
        glog = f"I0000 00:00:1.{i:06d}  1 placer.cc:162] {node}: (Const): {dev}"
        bare = f"{node}: (Const): {dev}"
        roll = rng.random()
        if roll < 0.6:
            lines += [glog, "noise line", bare] if rng.random() < 0.5 else [bare, glog]
        elif roll < 0.8:
            lines.append(glog)
        elif roll < 0.9:
            lines.append(bare)
        else:
            lines.append(f"I0000 00:00:1.0  1 execute.cc:1775] Executing op MatMul in device {dev}")
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("chunk", [4096, 65536])
def test_split_count_equals_single_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    log = tmp_path / "big.log"
    mixed_log(log, 20000)
    monkeypatch.setattr(engine, "CHUNK", chunk)
    monkeypatch.setattr(parallel, "SPLIT_MIN", 1)
    assert parallel.can_split(str(log))
    split = parallel.count_split(str(log))
    full = parse_paths([str(log)], keep=True)
    assert split.by_device == full.by_device
    assert split.lines == full.lines
    assert split.placement_count == len(full.placements)


def test_small_files_are_not_split(tmp_path: Path) -> None:
    log = tmp_path / "small.log"
    mixed_log(log, 10)
    assert not parallel.can_split(str(log))
