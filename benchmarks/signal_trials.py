"""SIGTERM and SIGINT at random points of a real run: do they always land?

Each trial starts ``python -m taguru_eval run`` (store on, so the checkpoint,
the artifact, the staging and the store's rename are all in the way) against
the reference server on loopback, sends SIGTERM or SIGINT after a random delay
drawn over the length of an undisturbed run (start-up, the cases, the finishing
stages and the store included), and reads how it ended:

* landed — exit 143 (SIGTERM) or 130 (SIGINT), and the one line
  ``taguru: evaluate: terminated`` / ``interrupted`` as stderr's last line;
* lost — any other exit (the run went on to 0 or 3 as if nothing came);
* traceback — stderr holds ``Traceback``, ``Exception ignored``, ``never
  awaited``, ``Task exception`` or ``Unclosed`` (whatever the exit);
* hung — still alive 30 s after the signal (killed, and counted);
* after exit — the run had already ended when the signal was due, or had printed
  its last line (its exit decided) before it was sent (not counted);
* during start-up — the signal met the interpreter's own start-up (``site``, the
  ``-m`` machinery), before the program's first line could record it: SIGTERM's
  default action ends the process (a shell shows 143) and SIGINT raises inside
  Python's imports, as for any Python program (not counted; reported).

The seconds from the signal to the exit are reported too (median, max).

    python benchmarks/signal_trials.py [--trials 200] [--cases 400] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from taguru_refserver.serve import running_server  # noqa: E402

NOISE = ("Traceback", "Exception ignored", "never awaited", "Task exception", "Unclosed")
HANG_S = 30.0


def eval_file(path: Path, count: int) -> Path:
    """``count`` cases cycling through the sake demo's, each under its own id."""
    header, *lines = (ROOT / "data" / "sake" / "eval.jsonl").read_text("utf-8").splitlines()
    cases = [json.loads(line) for line in lines]
    out = [header]
    for n in range(count):
        case = dict(cases[n % len(cases)])
        case["case_id"] = f"{case['case_id']}-{n}"
        out.append(json.dumps(case, ensure_ascii=False))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def command(url: str) -> list[str]:
    return [sys.executable, "-m", "taguru_eval", "run", "--eval", "eval.jsonl", "--context",
            "sake", "--url", url, "--store", "runs", "--quiet"]  # fmt: skip


def env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT),
            "TAGURU_EVAL_CHECKPOINT_BATCH": "50"}  # fmt: skip


def undisturbed(url: str, workdir: Path) -> float:
    started = time.monotonic()
    done = subprocess.run(command(url), cwd=workdir, env=env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return time.monotonic() - started


def trial(url: str, workdir: Path, delay: float, signum: int) -> tuple[str, float | None, str]:
    """One run stopped by ``signum`` after ``delay`` s: (outcome, seconds to exit, stderr)."""
    child = subprocess.Popen(command(url), cwd=workdir, env=env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stderr is not None
    lines: list[tuple[float, str]] = []  # stderr lines as read, with when
    reader = threading.Thread(
        target=lambda: lines.extend((time.monotonic(), line) for line in child.stderr or ()),
        daemon=True,
    )
    reader.start()
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.002)
    if child.poll() is not None:
        child.wait()
        reader.join()
        return "after exit", None, ""
    child.send_signal(signum)
    sent = time.monotonic()
    try:
        child.wait(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        reader.join()
        return "hung", None, "".join(line for _, line in lines)
    took = time.monotonic() - sent
    reader.join()
    err = "".join(line for _, line in lines)
    code, word = (143, "terminated") if signum == signal.SIGTERM else (130, "interrupted")
    if child.returncode == code and lines and lines[-1][1] == f"taguru: evaluate: {word}\n":
        return "landed", took, err
    if _before_the_program(child.returncode, err):
        return "before the program", took, err
    if _outside_the_program(child.returncode):
        return "default action", took, err
    if child.returncode in (0, 3) and lines and lines[-1][0] < sent:
        # Its last line was out before the signal was sent: the run had decided how
        # it ends (the signal met the process's shutdown, where it is blocked).
        return "after exit", None, err
    return "lost", took, f"[exit {child.returncode}] {err}"


def _before_the_program(code: int, err: str) -> bool:
    """The signal met Python's own start-up, before the program's first line could
    record it: SIGTERM's default action (no output at all), or a KeyboardInterrupt
    raised inside the interpreter's imports (no frame of the package)."""
    if code == -signal.SIGTERM and not err:
        return True
    return err.rstrip().endswith("KeyboardInterrupt") and f"{os.sep}taguru_eval{os.sep}" not in err


def _outside_the_program(code: int) -> bool:
    """Ended by the signal's default action: the interpreter had restored it at the
    very end of its shutdown, after the program's last line of code (a shell shows
    130 / 143 all the same)."""
    return code in (-signal.SIGINT, -signal.SIGTERM)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="signal-trials-"))
    eval_file(workdir / "eval.jsonl", args.cases)
    counts = {"landed": 0, "lost": 0, "hung": 0, "after exit": 0, "traceback": 0,
              "before the program": 0, "default action": 0}  # fmt: skip
    seconds: list[float] = []
    examples: list[str] = []
    with running_server(ROOT / "data") as url:
        length = statistics.median(undisturbed(url, workdir) for _ in range(3))
        print(f"an undisturbed run of {args.cases} cases: {length:.2f} s (median of 3)")
        for number in range(args.trials):
            signum = signal.SIGTERM if number % 2 == 0 else signal.SIGINT
            outcome, took, err = trial(url, workdir, rng.uniform(0.0, length * 1.05), signum)
            counts[outcome] += 1
            if took is not None:
                seconds.append(took)
            if any(word in err for word in NOISE) and outcome != "before the program":
                counts["traceback"] += 1
            slow = took is not None and took > 5
            if (outcome in ("lost", "hung") or slow or any(w in err for w in NOISE)) and len(
                examples
            ) < 5:
                examples.append(
                    f"{outcome} ({signal.Signals(signum).name}, {took} s to exit): {err[-800:]}"
                )
    sent = args.trials - counts["after exit"] - counts["before the program"]
    sent -= counts["default action"]
    print(
        f"{args.trials} trials (SIGTERM and SIGINT alternately), {sent} signals sent before "
        f"the run ended, load {os.getloadavg()[0]:.2f}"
    )
    print(
        f"  landed {counts['landed']}, lost {counts['lost']}, tracebacks {counts['traceback']}, "
        f"hung {counts['hung']}, after exit {counts['after exit']}, during Python's start-up "
        f"(before the program's first line) {counts['before the program']}, by the signal's "
        f"default action after the program's last line {counts['default action']}"
    )
    if seconds:
        print(
            f"  signal to exit: median {statistics.median(seconds):.3f} s, max {max(seconds):.3f} s"
        )
    for example in examples:
        print("  e.g. " + example.replace("\n", "\n       "))
    return 0 if counts["lost"] == counts["traceback"] == counts["hung"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
