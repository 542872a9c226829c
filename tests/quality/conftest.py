"""The quality job's one table, README against now, at the end of its session."""

from tests.quality.test_readme_results import RESULTS


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    terminalreporter.section("README's results table against this run")
    terminalreporter.write_line(f"{'row':44s} {'metric':8s} {'README':>7s} {'now':>7s} {'diff':>6s}  within")
    for row, metric, readme, now, tolerance in RESULTS:
        inside = "yes" if abs(now - readme) <= tolerance + 1e-9 else "NO"
        terminalreporter.write_line(f"{row:44s} {metric:8s} {readme:7.2f} {now:7.2f} {now - readme:+6.2f}  {inside} (±{tolerance})")
