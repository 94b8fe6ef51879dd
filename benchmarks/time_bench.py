"""A timed run (--time) against the same run untimed (target: at most 1.5x its wall time).

Pairs, each side a fresh process, interleaved (both see the same machine load), best of N, output to a pipe:
  tower   placement tower --devices /cpu:1,/cpu:2 --cpus 3          vs the same with --time
  train   placement train                                           vs the same with --time
  trace   placement trace STEP.py (a tf.function called 20 times)   vs the same with --time
Usage: python benchmarks/time_bench.py [N] [tower|train|trace]...
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

STEP = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)

@tf.function
def step(x, y):
    with tf.device("/cpu:1"):
        big = tf.matmul(x, x)
    with tf.device("/cpu:2"):
        small = tf.matmul(y, y)
        return tf.reduce_sum(big) + tf.reduce_sum(small)

x = tf.random.normal([1024, 1024])
y = tf.random.normal([64, 64])
for _ in range(20):
    step(x, y)
"""


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
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "step.py")
        with open(script, "w") as f:
            f.write(STEP)
        cases = {"tower": ["tower", "--devices", "/cpu:1,/cpu:2", "--cpus", "3"], "train": ["train"],
                 "trace": ["trace", script]}
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
