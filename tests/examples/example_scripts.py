"""The example scripts' modules, loaded from their files (examples/ is not a package)."""

import importlib.util
from pathlib import Path
from types import ModuleType

SUMMARISE = Path(__file__).resolve().parents[2] / "examples" / "summarise_debian"


def load(path: Path) -> ModuleType:
    """The module in ``path``, executed once per call (its main() is not run)."""
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
