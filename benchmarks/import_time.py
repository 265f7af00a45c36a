"""How long does ``import hybridlab`` take, next to ``import numpy`` alone?

Each row runs a fresh interpreter and measures the importing thread's CPU time (wall time
on a shared machine mostly measures the neighbours). Two cases, side by side:

* ``cached``: the ``.pyc`` files exist, as after any normal install: what a user pays;
* ``no .pyc``: ``PYTHONDONTWRITEBYTECODE`` is set and no cache exists, so every module
  is compiled from source on each import (some CI machines run like this).

Target (issue 2): ``import hybridlab`` well under 0.2 s, numpy included.

    python3 benchmarks/import_time.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import json, time
start = time.thread_time()
import {module}
print(json.dumps(time.thread_time() - start))
"""


def cpu_seconds(module: str, env: dict[str, str]) -> float:
    done = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def environments(cache_dir: str) -> dict[str, dict[str, str]]:
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {"cached": {**base, "PYTHONPYCACHEPREFIX": cache_dir},
            "no .pyc": {**base, "PYTHONDONTWRITEBYTECODE": "1",
                        "PYTHONPYCACHEPREFIX": cache_dir + "-empty"}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    cache_dir = tempfile.mkdtemp(prefix="hybridlab-pyc-")
    try:
        envs = environments(cache_dir)
        for module in ("numpy", "hybridlab"):
            cpu_seconds(module, envs["cached"])  # fill the .pyc cache once
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeats):  # interleaved, so load changes hit every row alike
            for case, env in envs.items():
                for module in ("numpy", "hybridlab"):
                    times.setdefault((case, module), []).append(cpu_seconds(module, env))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    print(f"import CPU time (importing thread), median of {args.repeats} fresh interpreters")
    print(f"{'':10}{'numpy ms':>10}{'hybridlab ms':>14}{'hybridlab - numpy':>19}")
    for case in envs:
        numpy_ms = statistics.median(times[(case, "numpy")]) * 1e3
        ours_ms = statistics.median(times[(case, "hybridlab")]) * 1e3
        print(f"{case:10}{numpy_ms:10.1f}{ours_ms:14.1f}{ours_ms - numpy_ms:19.1f}")
    cached_ms = statistics.median(times[("cached", "hybridlab")]) * 1e3
    print(f"target: import hybridlab (numpy included, .pyc cached) well under 200 ms: "
          f"{cached_ms:.1f} ms, {'met' if cached_ms < 200 else 'MISSED'}")


if __name__ == "__main__":
    main()
