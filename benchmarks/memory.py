"""Peak memory of a benchmark's child process, read from /proc (Linux).

tracemalloc would miss what Polars, Arrow and numba allocate, so the
children report their resident set instead.
"""

from __future__ import annotations


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
