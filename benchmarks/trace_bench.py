"""`placement trace SCRIPT` vs the same script run with placement logging on, output to /dev/null.

Prints the overhead ratio (target <= 1.1x), best of N, both measured in this run.
Usage: python benchmarks/trace_bench.py [N]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORK = """
import tensorflow as tf
@tf.function
def step(x, w):
    return tf.nn.relu(tf.matmul(x, w))
x, w = tf.ones([64, 64]), tf.ones([64, 64])
for i in range(200):
    y = step(x, w)
    if i % 20 == 0:
        print("step", i, float(tf.reduce_sum(y)))
"""

BASELINE = "import tensorflow as tf\ntf.debugging.set_log_device_placement(True)\n"


def best(args: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "work.py"
        script.write_text(WORK)
        logged = Path(tmp) / "logged.py"
        logged.write_text(BASELINE + WORK)
        base = best([sys.executable, str(logged)], runs)
        traced = best([sys.executable, "-m", "placement_cli", "trace", str(script)], runs)
    print(f"script with logging on: {base:.2f} s; placement trace: {traced:.2f} s; "
          f"overhead {traced / base:.2f}x (target <= 1.1x)")


if __name__ == "__main__":
    main()
