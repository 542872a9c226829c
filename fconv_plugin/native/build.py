"""Compiling the loops: the flags every build uses, and the in-place build ``fconv-info --build``.

``setup.py`` builds the loops when the package is installed with torch present. An install
whose build saw no torch leaves them out: pip's default build isolation builds in a fresh
environment without it (``pip install .``, and ``pip install -e .`` with pips that build
editable installs that way). ``build_in_place`` then compiles them against the torch that
is installed, with torch's ``cpp_extension`` and the same flags, into this folder, and
writes the build report the loader reads (``_build_report.json``).

This file imports nothing of the plugin (setup.py reads its flags before anything is
installed).
"""

import json
import os
import shutil
import tempfile
from typing import Callable, Dict, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = "_build_report.json"
# no implicit fused multiply-add (torch's rounding); errno never read, so fma and nearbyint vectorise
COMPILE_ARGS = ["-O3", "-ffp-contract=off", "-fno-math-errno"]
OPENMP = ["-fopenmp"]
NO_TORCH_AT_BUILD = ("no torch where the package was built (pip's build isolation builds without it); "
                     "build them against this torch: fconv-info --build")


def report_path(directory: str = HERE) -> str:
    return os.path.join(directory, REPORT)


def write_report(loops: Dict[str, Optional[str]], openmp: bool, torch_version: Optional[str],
                 directory: str = HERE) -> None:
    """What a build made of each loop (None: built; else why not), where the loader reads it."""
    with open(report_path(directory), "w") as f:
        json.dump({"torch": torch_version, "openmp": openmp, "loops": loops}, f, indent=1)


def _compile(name: str, flags: Sequence[str], scratch: str) -> str:
    """Loop ``name`` compiled with the loops' flags; the built file."""
    return compile_extension(f"fconv_plugin.native._{name}", os.path.join(HERE, f"{name}.cpp"), flags, scratch)


def compile_extension(module: str, source: str, flags: Sequence[str], scratch: str) -> str:
    """One C++ file compiled by torch's cpp_extension (setuptools, no ninja) into ``scratch``, with
    ``COMPILE_ARGS`` and ``flags``, as the Python module ``module``; the built file. The loops' build,
    and benchmarks' candidates compiled on the machine they measure."""
    from setuptools import Distribution
    from torch.utils.cpp_extension import BuildExtension, CppExtension

    extension = CppExtension(module, [source], include_dirs=[HERE],
                             extra_compile_args=COMPILE_ARGS + list(flags), extra_link_args=list(flags))
    distribution = Distribution({"name": "fconv_plugin_loops", "ext_modules": [extension],
                                 "cmdclass": {"build_ext": BuildExtension.with_options(use_ninja=False)}})
    command = distribution.get_command_obj("build_ext")
    command.build_lib, command.build_temp = os.path.join(scratch, "lib"), os.path.join(scratch, "temp")
    distribution.run_command("build_ext")
    return command.get_ext_fullpath(extension.name)


def build_in_place(loops: Sequence[str], say: Callable[[str], None] = print) -> Dict[str, Optional[str]]:
    """Compile ``loops`` against the installed torch into this folder, each on its own (one
    that fails is said in one line and left out); OpenMP where the compiler takes it. Writes
    and returns the report: None for each loop built, else why not."""
    import torch

    outcome: Dict[str, Optional[str]] = {}
    openmp = True
    for name in loops:
        with tempfile.TemporaryDirectory() as scratch:
            try:
                try:
                    built = _compile(name, OPENMP if openmp else [], scratch)
                except Exception:
                    if not openmp:
                        raise
                    openmp = False  # a compiler without OpenMP: the loops run on one thread
                    built = _compile(name, [], scratch)
                shutil.copy(built, os.path.join(HERE, os.path.basename(built)))
                outcome[name] = None
                say(f"fconv-info: built {name}")
            except Exception as error:
                lines = [line for line in str(error).splitlines() if line.strip()]
                outcome[name] = f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]
                say(f"fconv-info: {name} not built ({outcome[name]})")
    try:  # the loops not built now keep what the install said of them
        with open(report_path()) as f:
            earlier = json.load(f).get("loops") or {}
    except (OSError, ValueError):
        earlier = {}
    write_report({**earlier, **outcome}, openmp, torch.__version__)
    return outcome
