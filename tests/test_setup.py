"""setup.py's package list: a wheel holds every folder of the plugin that holds Python modules."""

from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]


def test_every_folder_with_modules_is_a_package_the_wheel_holds():
    packages = set(find_packages(where=str(ROOT), include=["fconv_plugin", "fconv_plugin.*", "fconv_onnx"]))  # as setup.py
    folders = {".".join(path.parent.relative_to(ROOT).parts)
               for top in ("fconv_plugin", "fconv_onnx") for path in (ROOT / top).rglob("*.py")}
    assert folders - packages == set()  # a folder without __init__.py is left out of the wheel
