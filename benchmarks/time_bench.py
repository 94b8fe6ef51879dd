"""A timed run (--time) against the same run untimed (target: at most 1.5x its wall time).

Pairs, each side a fresh process, interleaved (both see the same machine load), best of N, output to a pipe:
  tower   placement tower --devices /cpu:1,/cpu:2 --cpus 3          vs the same with --time
  train   placement train                                           vs the same with --time
  trace   placement trace samples/two_matmuls.py (its step called 8 times) vs the same with --time
Usage: python benchmarks/time_bench.py [N] [tower|train|trace]...
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "samples", "two_matmuls.py")


def once(args: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args[:6])}... failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return elapsed


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 3
    wanted = [a for a in sys.argv[1:] if not a.isdigit()] or ["tower", "train", "trace"]
    cli = [sys.executable, "-m", "placement_cli"]
    cases = {"tower": ["tower", "--devices", "/cpu:1,/cpu:2", "--cpus", "3"], "train": ["train"],
             "trace": ["trace", SAMPLE]}
    for name in wanted:
        plain_times, timed_times = [], []
        args = cases[name]
        timed = [*args[:-1], "--time", args[-1]] if name == "trace" else [*args, "--time"]
        for _ in range(runs):
            plain_times.append(once([*cli, *args]))
            timed_times.append(once([*cli, *timed]))
        plain, with_time = min(plain_times), min(timed_times)
        print(f"{name}: untimed {plain:.2f} s, --time {with_time:.2f} s: {with_time / plain:.2f}x "
              f"(target <= 1.5x; best of {runs}, interleaved)")


if __name__ == "__main__":
    main()
