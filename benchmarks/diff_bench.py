"""`placement diff` of two 1,000,000-line logs vs two `placement parse --summary` runs of them.

Two cases, each against the two parse runs of its own logs:
- "moved": the second log is the first with one placement in fifty moved (both of its copies), so the
  diff has real work (about 1,300 moved ops);
- "renamed": every node of the second log renamed (``block_`` -> ``blk_``), so no name is on both sides:
  every placement is only in OLD or only in NEW, and every one is a row of the JSON.
Prints each ratio (target: diff <= 1.5x the two parse runs; the median of the rounds' ratios, each
round's diff against the two parse runs just before it) and the diff's peak memory (target: under
200 MB). Every side runs as fresh processes, in the same run, 3 rounds (``--runs N``).
Usage: python benchmarks/diff_bench.py [LINES] [--runs N]
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from parse_bench import generate

_BLOCK = re.compile(rb"block_(\d+)/")
# the command as a child of this one, its peak memory (its own and its forked half's) on stderr's last line
MEASURED = r"""
import resource, runpy, sys
sys.argv = ["placement", *sys.argv[1:]]
try:
    runpy.run_module("placement_cli", run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stdout.flush()
# its own peak from /proc (VmHWM): ru_maxrss of a process started by vfork and exec also holds the
# starting process's peak (Linux keeps the old image's high-water mark), here this benchmark's own
peak = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")]
sys.stderr.write("\nPEAK_KIB=%d CHILD_KIB=%d\n" % (peak[0] if peak else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                                                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""


def moved_copy(source: Path, target: Path) -> None:
    """``source`` with every placement of a node whose block number is a multiple of 50 moved from
    GPU:1 to GPU:0 (glog and stdout copies alike)."""
    with source.open("rb") as src, target.open("wb") as out:
        for line in src:
            m = _BLOCK.search(line)
            if m is not None and int(m.group(1)) % 50 == 0:
                line = line.replace(b"device:GPU:1", b"device:GPU:0")
            out.write(line)


def renamed_copy(source: Path, target: Path) -> None:
    """``source`` with every node renamed: no name is on both sides."""
    target.write_bytes(source.read_bytes().replace(b"block_", b"blk_"))


def timed(args: list[str], ok: tuple[int, ...] = (0,)) -> tuple[float, str, int]:
    """``args`` run and timed with its output in a file, as ``placement diff --json A B > out.json`` writes
    it (read back after the clock stopped: a pipe read here would time this process's reading too)."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", MEASURED, *args], stdout=out, stderr=subprocess.PIPE, text=True,
                              check=False)
        elapsed = time.perf_counter() - start
        out.seek(0)
        stdout = out.read().decode()
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    peak = re.search(r"PEAK_KIB=(\d+) CHILD_KIB=(\d+)", proc.stderr)
    return elapsed, stdout, max(int(peak.group(1)), int(peak.group(2))) if peak else 0


def case(old: Path, new: Path, runs: int) -> tuple[float, float, float, int, dict]:
    """Best parse pair, best diff, the median of each round's ratio (its diff against its own two parse
    runs, run right before: a shared machine's speed drifts between rounds), the diff's peak memory."""
    best_parse = best_diff = float("inf")
    peak, summary, ratios = 0, "", []
    for _ in range(runs):
        t1, _out, _peak = timed(["parse", "--summary", str(old)])
        t2, _out, _peak = timed(["parse", "--summary", str(new)])
        best_parse = min(best_parse, t1 + t2)
        t, summary, used = timed(["diff", "--json", str(old), str(new)], ok=(1,))
        best_diff = min(best_diff, t)
        ratios.append(t / (t1 + t2))
        peak = max(peak, used)
    return best_parse, best_diff, statistics.median(ratios), peak, json.loads(summary)["summary"]


def main() -> None:
    args = sys.argv[1:]
    runs = 3
    if "--runs" in args:
        at = args.index("--runs")
        runs = int(args[at + 1])
        del args[at : at + 2]
    lines = int(args[0]) if args else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        old, moved, renamed = Path(tmp) / "old.log", Path(tmp) / "moved.log", Path(tmp) / "renamed.log"
        generate(old, lines)
        moved_copy(old, moved)
        renamed_copy(old, renamed)
        size = old.stat().st_size / 2**20
        print(f"logs: {lines:,} lines each, {size:.0f} MiB")
        for name, new in (("moved", moved), ("renamed", renamed)):
            best_parse, best_diff, ratio, peak, found = case(old, new, runs)
            print(f"[{name}] diff found: {found['moved']} moved, {found['removed']} only in OLD, "
                  f"{found['added']} only in NEW, {found['unchanged']} unchanged")
            print(f"[{name}] two parse --summary runs: {best_parse:.3f} s; placement diff --json: {best_diff:.3f} s "
                  f"(best of {runs}, process starts included)")
            print(f"[{name}] ratio: {ratio:.2f}x the two parse runs, the median of the rounds' (target <= 1.5x; "
                  f"best against best {best_diff / best_parse:.2f}x); diff's peak memory {peak / 1024:.0f} MiB "
                  f"(target < 200 MB)")


if __name__ == "__main__":
    main()
