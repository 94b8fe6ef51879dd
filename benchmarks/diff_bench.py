"""`placement diff` of two 1,000,000-line logs vs two `placement parse --summary` runs of them.

The second log is the first with one placement in fifty moved (both of its copies), so the diff
has real work (about 1,300 moved ops). Prints the ratio (target: diff <= 1.5x the two parse runs);
every side runs as fresh processes, in the same run, best of 3.
Usage: python benchmarks/diff_bench.py [LINES]
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from parse_bench import generate  # noqa: E402 - the same mixed log parse's benchmark reads

_BLOCK = re.compile(rb"block_(\d+)/")


def moved_copy(source: Path, target: Path) -> None:
    """``source`` with every placement of a node whose block number is a multiple of 50 moved from
    GPU:1 to GPU:0 (glog and stdout copies alike)."""
    with source.open("rb") as src, target.open("wb") as out:
        for line in src:
            m = _BLOCK.search(line)
            if m is not None and int(m.group(1)) % 50 == 0:
                line = line.replace(b"device:GPU:1", b"device:GPU:0")
            out.write(line)


def timed(args: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return elapsed, proc.stdout


def main() -> None:
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    placement = [sys.executable, "-m", "placement_cli"]
    with tempfile.TemporaryDirectory() as tmp:
        old, new = Path(tmp) / "old.log", Path(tmp) / "new.log"
        generate(old, lines)
        moved_copy(old, new)
        size = old.stat().st_size / 2**20
        best_parse = best_diff = float("inf")
        summary = ""
        for _ in range(3):
            t1, _out = timed([*placement, "parse", "--summary", str(old)])
            t2, _out = timed([*placement, "parse", "--summary", str(new)])
            best_parse = min(best_parse, t1 + t2)
            t, out = timed([*placement, "diff", "--json", str(old), str(new)], ok=(1,))
            best_diff = min(best_diff, t)
            summary = out
    import json  # noqa: PLC0415

    found = json.loads(summary)["summary"]
    print(f"logs: {lines:,} lines each, {size:.0f} MiB")
    print(f"diff found: {found['moved']} moved, {found['removed']} only in OLD, {found['added']} only in NEW, "
          f"{found['unchanged']} unchanged")
    print(f"two parse --summary runs: {best_parse:.3f} s (best of 3, process starts included)")
    print(f"placement diff: {best_diff:.3f} s (best of 3, process start included)")
    print(f"ratio: {best_diff / best_parse:.2f}x the two parse runs (target <= 1.5x)")


if __name__ == "__main__":
    main()
