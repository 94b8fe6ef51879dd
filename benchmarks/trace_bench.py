"""`placement trace SCRIPT` against the script alone, for three kinds of program.

1. A TensorFlow script of tf.function steps: traced, against the same script run with placement
   logging on (target <= 1.1x).
1b. An eager-heavy TensorFlow script (thousands of tiny eager ops under device scopes): the same
   comparison. trace records each eager op's request with an op callback, which puts every eager op
   on TensorFlow's callback path: this one is measured and reported, with no target (see
   docs/benchmarks.md for the numbers and the choice).
2. An output-heavy script (no TensorFlow) printing MB megabytes: traced, against plain
   ``python script.py`` (target <= 1.2x): the cost of passing output through.

Output goes to /dev/null in every run. Runs are interleaved (a change in the machine's load hits
both sides alike); each side's best of N is compared; both ratios are printed.
Usage: python benchmarks/trace_bench.py [N] [MB]
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

# thousands of tiny eager ops, a device scope around some: the op callback's worst case
EAGER = """
import tensorflow as tf
x, w = tf.ones([8, 8]), tf.ones([8, 8])
for i in range(10000):
    with tf.device("/cpu:0"):
        y = tf.matmul(x, w)
    y = tf.nn.relu(y) + x
    if i % 1000 == 0:
        print("step", i, float(tf.reduce_sum(y)))
"""

BASELINE = "import tensorflow as tf\ntf.debugging.set_log_device_placement(True)\n"

# about 64 bytes a line, printed as a chatty program would: one print per line
OUTPUT = """
import sys
line = "x" * 52
for i in range({lines}):
    print("line", i, line)
"""


def run(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def compare(name: str, alone: list[str], traced: list[str], runs: int, target: float | None) -> None:
    base, trace = [], []
    for _ in range(runs):
        base.append(run(alone))
        trace.append(run(traced))
    print(f"{name}: alone {min(base):.2f} s; placement trace {min(trace):.2f} s; "
          f"overhead {min(trace) / min(base):.2f}x ({'no target' if target is None else f'target <= {target}x'}), "
          f"best of {runs} each", flush=True)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    megabytes = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    trace = [sys.executable, "-m", "placement_cli", "trace"]
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "work.py"
        script.write_text(WORK)
        logged = Path(tmp) / "logged.py"
        logged.write_text(BASELINE + WORK)
        chatty = Path(tmp) / "chatty.py"
        chatty.write_text(OUTPUT.format(lines=megabytes * 1_000_000 // 64))
        compare("TensorFlow script (alone: with logging on)", [sys.executable, str(logged)],
                [*trace, str(script)], runs, 1.1)
        eager = Path(tmp) / "eager.py"
        eager.write_text(EAGER)
        eager_logged = Path(tmp) / "eager_logged.py"
        eager_logged.write_text(BASELINE + EAGER)
        compare("eager-heavy TensorFlow script (alone: with logging on)", [sys.executable, str(eager_logged)],
                [*trace, str(eager)], runs, None)
        compare(f"output-heavy script ({megabytes} MB)", [sys.executable, str(chatty)],
                [*trace, str(chatty)], runs, 1.2)


if __name__ == "__main__":
    main()
