"""README's two commands are the ones the repository actually runs."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bash_blocks(text):
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_ci_runs_exactly_the_readme_test_command():
    readme_commands = [block.strip() for block in _bash_blocks((ROOT / "README.md").read_text())]
    test_command = next(c for c in readme_commands if "pytest" in c)
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_quickstart_command_points_at_existing_scripts():
    readme = (ROOT / "README.md").read_text()
    quickstart = next(c for c in _bash_blocks(readme) if "quickstart" in c).strip()
    for path in re.findall(r"bash (\S+\.sh)", quickstart):
        assert (ROOT / path).is_file(), path
