"""fconv-serve and fconv-export without a part of their extra: one line that names what is
missing and the install command, exit status 2, before a model is read or a port opened.
Each part is made unimportable in a fresh process (a package of that name that raises
ImportError, first on the path), as a user's environment without it would be."""

import subprocess
import sys

import pytest

from fconv_plugin.export.main import PARTS as EXPORT_PARTS
from fconv_plugin.serve.main import PARTS as SERVE_PARTS

pytestmark = pytest.mark.slow  # a fresh Python per case (about 4 s each)

COMMANDS = {"fconv-serve": ("fconv_plugin.serve.main", "serve", SERVE_PARTS),
            "fconv-export": ("fconv_plugin.export.main", "onnx", EXPORT_PARTS)}


def _run_without(command, modules, tmp_path):
    for module in modules:
        (tmp_path / module).mkdir()
        (tmp_path / module / "__init__.py").write_text(  # what Python raises for a module that is not there
            f"raise ModuleNotFoundError(\"No module named '{module}'\", name={module!r})\n")
    entry, _, _ = COMMANDS[command]
    script = f"import sys; sys.argv = [{command!r}, 'data-bin', '--path', 'missing.pt']; import {entry} as m; m.main()"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})


CASES = [(command, module) for command, (_, _, parts) in COMMANDS.items() for module in parts]


@pytest.mark.parametrize("command,module", CASES, ids=[f"{c}-{m}" for c, m in CASES])
def test_a_missing_part_is_named_with_the_extra_that_installs_it(command, module, tmp_path):
    _, extra, parts = COMMANDS[command]
    result = _run_without(command, [module], tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip() == (f"{command}: error: {parts[module]} is not installed and {command} needs it: "
                                     f"pip install 'fconv_plugin[{extra}]'")
    assert result.stdout == ""


def test_every_missing_part_is_named_in_the_one_line(tmp_path):
    result = _run_without("fconv-serve", ["py3langid", "docx", "python_multipart"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == ("fconv-serve: error: python-multipart, py3langid and python-docx are not installed "
                                     "and fconv-serve needs them: pip install 'fconv_plugin[serve]'")
