"""What the benchmarks' child processes share: their peak memory and their report line.

Each measured path runs in a fresh child (the script itself with ``--child``),
which prints one ``RESULT {json}`` line. tracemalloc would miss what Polars,
Arrow and numba allocate, so the children read their resident set from /proc.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

RESULT = "RESULT "


def status_kib(field: str) -> int:
    """A ``/proc/self/status`` field in KiB (``VmRSS``, ``VmHWM``), -1 when absent."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_peak() -> bool:
    """Reset VmHWM to the current resident set; False where the kernel refuses."""
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def print_result(values: dict[str, Any]) -> None:
    """The child's one result line."""
    print(RESULT + json.dumps(values))


def run_child(script: str, arguments: list[str]) -> dict[str, Any] | str:
    """Run ``script --child ARGUMENTS`` and return its report, or why there is none."""
    command = [sys.executable, str(Path(script).resolve()), "--child", *arguments]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    for line in completed.stdout.splitlines():
        if line.startswith(RESULT):
            values: dict[str, Any] = json.loads(line[len(RESULT) :])
            return values
    tail = (completed.stderr or completed.stdout).strip().splitlines()[-5:]
    return f"child exited {completed.returncode}: " + " | ".join(tail)
