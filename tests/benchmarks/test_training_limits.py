"""benchmarks/training_limits.py's arithmetic, on hand-made cases (its parts' runs: tests/benchmarks/test_quick.py)."""

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _training_limits():
    """The benchmark as a module, imported inside a test: its import sets warning filters, which pytest
    restores after each test."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    import training_limits

    return training_limits


def test_the_pace_summary_sets_the_first_minutes_windows_against_the_rest():
    pace_summary = _training_limits().pace_summary
    # windows of 10 s: the first six are the first minute (196 to 235, median 214), the rest 230 and 240 (median 235);
    # all eight: median (216 + 217) / 2; 240 / 196 = 1.224; 235 / 214 = 1.098
    step_ms = [216, 207, 212, 235, 217, 196, 230, 240]
    assert pace_summary(step_ms, 10.0) == (
        "fastest 196.0, median 216.5, slowest 240.0 (1.22x the fastest); the first minute's median 214.0, "
        "the rest's 235.0 (1.098x)")
    # windows of a second: all eight fall in the first minute, and there is no rest to set against it
    assert pace_summary(step_ms, 1.0) == (
        "fastest 196.0, median 216.5, slowest 240.0 (1.22x the fastest); the first minute's median 216.5")
