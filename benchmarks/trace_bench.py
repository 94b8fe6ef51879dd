"""`placement trace SCRIPT` vs the same script run with placement logging on, output to /dev/null.

Prints the overhead ratio (target <= 1.1x), best of N, both measured in this run, interleaved.
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


def run(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "work.py"
        script.write_text(WORK)
        logged = Path(tmp) / "logged.py"
        logged.write_text(BASELINE + WORK)
        base, traced = [], []
        for _ in range(runs):  # interleaved, so a change in the machine's load hits both sides alike
            base.append(run([sys.executable, str(logged)]))
            traced.append(run([sys.executable, "-m", "placement_cli", "trace", str(script)]))
    print(f"script with logging on: {min(base):.2f} s; placement trace: {min(traced):.2f} s; "
          f"overhead {min(traced) / min(base):.2f}x (target <= 1.1x), best of {runs} each")


if __name__ == "__main__":
    main()
