"""`placement cluster --ps 2 --workers 4`: launch-to-report time against one `import tensorflow`,
and the private memory of each task.

The issue's target: under 2x one TensorFlow import plus the training itself. The training's share
is reported too (the supervisor's own `seconds`, from the first task's start to the last result,
minus the slowest task's ready time). Private memory per task is what /proc/PID/smaps_rollup says
(Private_Clean + Private_Dirty), read by the supervisor before it kills a task (a worker reads its
own just before it exits). Runs interleaved, best of N, in the same run.
Usage: python benchmarks/cluster_bench.py [N] [STEPS]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time


def timed(args: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    steps = sys.argv[2] if len(sys.argv) > 2 else "5"
    py = sys.executable
    imports, clusters, trainings = [], [], []
    memory: dict[str, list[int]] = {}
    for _ in range(runs):
        seconds, _ = timed([py, "-c", "import tensorflow"])
        imports.append(seconds)
        seconds, done = timed([py, "-m", "placement_cli", "cluster", "--ps", "2", "--workers", "4",
                               "--steps", steps, "--json"])
        if done.returncode != 0:
            sys.exit(f"placement cluster failed ({done.returncode}): {done.stderr.strip()}")
        clusters.append(seconds)
        data = json.loads(done.stdout)
        ready = max(float(m) for m in re.findall(r"\(pid \d+, ([\d.]+) s\)", done.stderr))
        trainings.append(max(0.0, data["seconds"] - ready))
        for task in data["tasks"]:
            if task.get("private_kib"):
                memory.setdefault(f"{task['job']}/{task['task']}", []).append(task["private_kib"])
    imp, clu, train = min(imports), min(clusters), min(trainings)
    print(f"import tensorflow: {imp:.2f} s; placement cluster --ps 2 --workers 4 --steps {steps}: {clu:.2f} s "
          f"(launch to report), of which training ~{train:.2f} s")
    print(f"ratio {clu / imp:.2f}x one import; without the training {(clu - train) / imp:.2f}x (target < 2x)")
    for name, values in sorted(memory.items()):
        print(f"  {name}: private memory {min(values) / 1024:.0f}-{max(values) / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
