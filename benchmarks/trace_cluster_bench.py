"""`placement trace --cluster worker=2 SCRIPT` against the same two tasks started by hand (target <= 1.5x).

By hand: two ``python SCRIPT`` processes started together, each with its TF_CONFIG on loopback ports
(TensorFlow's multi-worker tutorial's two terminals), placement logging on as the script asks for it,
timed until both have exited. Traced: placement's launch to its report (every task started, traced,
parsed, reported). The script is a MultiWorkerMirroredStrategy custom loop (tests/fixtures/distributed/
mwms.py). Output goes to /dev/null. Runs are interleaved; each side's best of N is compared.
Usage: python benchmarks/trace_cluster_bench.py [N]
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = str(Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "distributed" / "mwms.py")
# By hand, placement logging is switched on as a user would: in the script's environment through a
# sitecustomize-free one-liner before the script runs (the same logging work as traced).
LOGGING = ("import tensorflow as tf, runpy, sys; tf.debugging.set_log_device_placement(True); "
           "sys.argv = [sys.argv[1]]; runpy.run_path(sys.argv[0], run_name='__main__')")


def by_hand() -> float:
    probes = [socket.socket() for _ in range(2)]
    for s in probes:
        s.bind(("127.0.0.1", 0))
    cluster = {"worker": [f"localhost:{s.getsockname()[1]}" for s in probes]}
    for s in probes:
        s.close()
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", LOGGING, SCRIPT], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})})
             for i in range(2)]
    codes = [p.wait() for p in procs]
    elapsed = time.perf_counter() - start
    assert codes == [0, 0], codes
    return elapsed


def traced() -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "placement_cli", "trace", "--cluster", "worker=2", SCRIPT],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.returncode
    return elapsed


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    hand, trace = [], []
    for _ in range(runs):
        hand.append(by_hand())
        trace.append(traced())
    ratio = min(trace) / min(hand)
    print(f"by hand: best {min(hand):.2f} s of {runs}; traced: best {min(trace):.2f} s; "
          f"ratio {ratio:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
