"""Tables against JSON for one big log: `placement parse` (a digest), `parse --all` (every row) and
`parse --json`, each a fresh process writing to a file, in the same run.

Prints each time and its ratio to --json (target: tables within 2x of --json).
Usage: python benchmarks/render_bench.py [PLACEMENTS] [REPEATS]
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEVICES = [f"/job:localhost/replica:0/task:0/device:GPU:{i}" for i in range(4)] + [
    "/job:localhost/replica:0/task:0/device:CPU:0"]
OPS = ["Const", "MatMul", "Conv2D", "VariableV2", "Identity", "ApplyAdam", "AddN", "Reshape"]


def generate(path: Path, placements: int) -> None:
    """Placer lines as TF 2.x writes them (a glog copy and a stdout copy each), long scoped names."""
    rng = random.Random(0)
    with path.open("w") as out:
        for step in range(placements):
            op, device = rng.choice(OPS), rng.choice(DEVICES)
            node = f"tower_{step % 8}/gradients/layer_{step % 97}/block_{step}/{op}_grad/{op}_{step % 13}"
            out.write(f"I0000 00:00:1795232759.{step % 999999:06d}    3899 placer.cc:162] {node}: ({op}): {device}\n")
            out.write(f"{node}: ({op}): {device}\n")


def timed(args: list[str], sink: Path) -> float:
    env = {**os.environ, "COLUMNS": "120"}
    start = time.perf_counter()
    with sink.open("w") as out:
        subprocess.run([sys.executable, "-m", "placement_cli", *args], stdout=out, check=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    placements = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with tempfile.TemporaryDirectory() as tmp:
        log, sink = Path(tmp) / "big.log", Path(tmp) / "out"
        generate(log, placements)
        runs = {"--json": ["parse", "--json", str(log)], "table (digest)": ["parse", str(log)],
                "table --all": ["parse", "--all", str(log)]}
        best = {name: float("inf") for name in runs}
        for _ in range(repeats):  # interleaved, best of each
            for name, args in runs.items():
                best[name] = min(best[name], timed(args, sink))
        print(f"parse of {placements} placements ({log.stat().st_size / 2**20:.1f} MiB), best of {repeats}:")
        for name, seconds in best.items():
            print(f"  {name:<16} {seconds:6.2f} s   {seconds / best['--json']:.2f}x --json")


if __name__ == "__main__":
    main()
