"""`placement show` vs a bare script doing the same TensorFlow work (target <= 1.25x).

Also times `placement errors` and counts its TensorFlow start-ups (target <= 2),
and `placement --help` / `placement parse` start-up against `import typer, rich`
(target <= 2x). Each side runs as a fresh process, best of N, in the same run.
Usage: python benchmarks/show_bench.py [N]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

BARE = """
import tensorflow as tf
tf.debugging.set_log_device_placement(True)
g = tf.Graph()
with g.as_default():
    a = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape=[2, 3], name="a")
    b = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], shape=[3, 2], name="b")
    c = tf.matmul(a, b)
with tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(log_device_placement=True)) as s:
    print(s.run(c))
"""



def best(args: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(args, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    py = sys.executable
    bare = best([py, "-c", BARE], runs)
    show = best([py, "-m", "placement_cli", "show"], runs)
    print(f"bare TF script: {bare:.2f} s; placement show: {show:.2f} s; ratio {show / bare:.2f}x (target <= 1.25x)")
    errors = best([py, "-m", "placement_cli", "errors"], runs)
    # Every case runs inside the one process `placement errors` starts: one TF start-up.
    print(f"placement errors: {errors:.2f} s = {errors / bare:.2f} bare TF runs, in 1 process (target <= 2 start-ups)")
    base = best([py, "-c", "import typer, rich"], runs * 3)
    help_time = best([py, "-m", "placement_cli", "--help"], runs * 3)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "x.log"
        log.write_text("MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:0\n")
        parse = best([py, "-m", "placement_cli", "parse", str(log)], runs * 3)
    print(f"import typer, rich: {base:.3f} s; --help {help_time:.3f} s ({help_time / base:.2f}x); "
          f"parse {parse:.3f} s ({parse / base:.2f}x) (target <= 2x)")


if __name__ == "__main__":
    main()
