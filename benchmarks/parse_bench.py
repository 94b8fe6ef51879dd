"""`placement parse --summary` on a 1,000,000-line mixed log vs a plain re.match loop.

Prints the speed ratio (target: >= 2x faster than the loop) and the parser's peak
memory (target: < 100 MiB). Both sides run as fresh processes, in the same run.
Usage: python benchmarks/parse_bench.py [LINES]
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASELINE = r"""
import re, sys
from collections import Counter
# The same dialects the parser reads: glog or bare placer lines, and eager lines.
pat = re.compile(r"^(?:.*?placer\.cc:\d+\] )?(\S+?): (?:\((\S*?)\):? ?)?(/job:\S+)\s*$"
                 r"|^.*?Executing op (\S+) (?:in device|on task) (/job:\S+)\s*$")
counts = Counter()
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for line in f:
        m = pat.match(line)
        if m:
            counts[m.group(3) or m.group(5)] += 1
print(sum(counts.values()))
"""

MEASURED = r"""
import resource, runpy, sys
sys.argv = ["placement", "parse", "--summary", sys.argv[1]]
try:
    runpy.run_module("placement_cli", run_name="__main__")
except SystemExit:
    pass
# its own peak from /proc (VmHWM): ru_maxrss of a process started by vfork and exec also holds the
# starting process's peak (Linux keeps the old image's high-water mark)
peak = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")]
sys.stderr.write("PEAK_KIB=%d CHILD_KIB=%d\n" % (peak[0] if peak else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                                                resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
"""

NOISE = [
    "Epoch 3/10",
    "100/100 [==============================] - 1s 5ms/step - loss: 0.2145 - accuracy: 0.9311",
    "W0000 00:00:1795232759.847888    3899 cpu_allocator_impl.cc:83] Allocation of 4194304 exceeds 10% of free system memory.",
    "step 1200, loss = 0.51 (1523.4 examples/sec; 0.084 sec/batch)",
]


def generate(path: Path, lines: int) -> None:
    rng = random.Random(0)
    devices = [f"/job:localhost/replica:0/task:0/device:GPU:{i}" for i in range(4)] + [
        "/job:localhost/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:0/device:CPU:0"]
    ops = ["Const", "MatMul", "Conv2D", "VariableV2", "Identity", "ApplyAdam", "AddN", "Reshape"]
    written = 0
    with path.open("w") as out:
        step = 0
        while written < lines:
            step += 1
            node = f"tower_{step % 8}/layer_{step % 97}/block_{step}/{rng.choice(ops)}_{step % 13}"
            op, dev = rng.choice(ops), rng.choice(devices)
            roll = rng.random()
            if roll < 0.40:  # a placer pair: glog copy, then the stdout copy
                out.write(f"I0000 00:00:1795232759.{step:06d}    3899 placer.cc:162] {node}: ({op}): {dev}\n")
                out.write(f"{node}: ({op}): {dev}\n")
                written += 2
            elif roll < 0.55:  # TF 1.x glog dialect
                out.write(f"2018-03-31 21:43:19.{step % 999999:06d}: I tensorflow/core/common_runtime/placer.cc:874] {node}: ({op}){dev}\n")
                written += 1
            elif roll < 0.65:
                out.write(f"I0000 00:00:1795232759.{step:06d}    3899 execute.cc:1775] Executing op {op} in device {dev}\n")
                written += 1
            elif roll < 0.70:
                out.write(f"{node}: {dev.replace('device:GPU', 'gpu').replace('device:CPU', 'cpu')}\n")
                written += 1
            else:
                out.write(rng.choice(NOISE) + "\n")
                written += 1


def timed(args: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, proc


def main() -> None:
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "mixed.log"
        generate(log, lines)
        size = log.stat().st_size / 2**20
        best_base = best_ours = float("inf")
        peak = child = 0
        for _ in range(3):
            t, _ = timed([sys.executable, "-c", BASELINE, str(log)])
            best_base = min(best_base, t)
            t, proc = timed([sys.executable, "-c", MEASURED, str(log)])
            best_ours = min(best_ours, t)
            peak = int(proc.stderr.rsplit("PEAK_KIB=", 1)[1].split()[0])
            child = int(proc.stderr.rsplit("CHILD_KIB=", 1)[1].split()[0])
    print(f"log: {lines:,} lines, {size:.0f} MiB")
    print(f"baseline re.match loop: {best_base:.3f} s (best of 3, process start included)")
    print(f"placement parse --summary: {best_ours:.3f} s (best of 3, process start included)")
    print(f"ratio: {best_base / best_ours:.2f}x faster (target >= 2x)")
    print(f"peak memory: {peak / 1024:.1f} MiB (target < 100 MiB)")
    if child:
        print(f"  counting child on the second core: {child / 1024:.1f} MiB peak RSS, "
              "much of it pages shared with the parent since the fork")


if __name__ == "__main__":
    main()
