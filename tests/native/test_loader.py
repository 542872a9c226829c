"""The compiled loops' loader: which are built, and why any is not; installs without a
compiler; fconv-info. (``FCONV_NATIVE`` and the choice of forms: tests/decoding/test_backend.py.)

Each case runs in a fresh Python process, over a copy of the package where the case needs
one (a build without a compiler, a damaged extension), as a user's installation would be.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fconv_onnx
import fconv_plugin
from fconv_plugin import native, precision
from fconv_plugin import backend
from fconv_plugin.cli.info import bf16_line
from fconv_plugin.native.build import NO_TORCH_AT_BUILD

ROOT = Path(__file__).resolve().parents[2]  # the repository: setup.py and the sources
LOOPS = list(native.LOOPS)


def _python(code: str, cwd=ROOT, env=None, **kwargs) -> subprocess.CompletedProcess:
    environment = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env=environment, **kwargs)


STATES = "import json; from fconv_plugin import backend; print(json.dumps(backend.states()))"


def _copy_of_the_package(destination: Path) -> Path:
    """The package as a checkout has it (no built loops), and setup.py."""
    ignore = shutil.ignore_patterns("*.so", "_build_report.json", "__pycache__")
    for package in (fconv_plugin, fconv_onnx):
        shutil.copytree(Path(package.__file__).parent, destination / package.__name__, ignore=ignore)
    for name in ("setup.py", "README.md"):
        shutil.copy(ROOT / name, destination / name)
    return destination


def test_an_extension_that_does_not_load_is_named_with_its_import_error(tmp_path):
    package = _copy_of_the_package(tmp_path)
    built = Path(native.module("int8_rows").__file__) if native.module("int8_rows") is not None else None
    suffix = built.name.split(".", 1)[1] if built else "cpython-311-x86_64-linux-gnu.so"
    (package / "fconv_plugin" / "native" / f"_int8_rows.{suffix}").write_bytes(b"not a shared object\n" * 8)
    result = _python(STATES, cwd=package, env={"PYTHONPATH": str(package), "FCONV_NATIVE": "1"})
    assert result.returncode == 0, result.stderr
    states = json.loads(result.stdout.splitlines()[-1])
    assert states["int8_rows"].startswith("import error: ")
    assert states["int8_rows"].endswith("(build them again against this torch: fconv-info --build)")
    never_built = ("not built (a checkout never installed; build them against this torch: fconv-info --build, "
                   "or pip install --no-build-isolation -e .)")
    assert states["decoder_step"] == states["beam_candidates"] == never_built


@pytest.mark.slow
def test_an_install_without_a_compiler_succeeds_and_the_loader_says_why(tmp_path):
    """CC=false CXX=false: every loop fails to compile; the build goes on, says one line per
    loop, and the loader names the install's reason."""
    package = _copy_of_the_package(tmp_path)
    build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=package, capture_output=True,
                           text=True, timeout=600, env={**os.environ, "CC": "false", "CXX": "false"})
    assert build.returncode == 0, build.stderr[-3000:]
    notes = [line for line in build.stderr.splitlines() if line.startswith("fconv_plugin: ")]
    assert [note.split()[1] for note in notes] == [f"fconv_plugin.native._{name}" for name in LOOPS]
    suffix = "); the torch operations run instead"
    assert all(" not built (" in note and note.endswith(suffix) for note in notes), notes
    causes = {name: note.split(" not built (", 1)[1][: -len(suffix)] for name, note in zip(LOOPS, notes)}
    assert all(": false failed with exit status 1" in cause for cause in causes.values()), causes  # CC, CXX
    report = json.loads((package / "fconv_plugin" / "native" / "_build_report.json").read_text())
    assert report["openmp"] is False and report["loops"] == causes
    assert not list((package / "fconv_plugin" / "native").glob("*.so"))
    result = _python(STATES, cwd=package, env={"PYTHONPATH": str(package), "FCONV_NATIVE": "1"})
    states = json.loads(result.stdout.splitlines()[-1])
    assert states == {name: f"not built: the install could not compile it ({causes[name]})" for name in LOOPS}
    info = subprocess.run([sys.executable, "-m", "fconv_plugin.cli.info", "--check"], cwd=package, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(package), "FCONV_NATIVE": "1"})
    assert info.returncode == 1
    assert info.stderr.splitlines()[-1] == ("fconv-info: error: compiled loops that do not run: "
                                            "int8_rows, decoder_step, beam_candidates")


@pytest.mark.slow
@pytest.mark.long
def test_a_build_that_saw_no_torch_says_so_and_fconv_info_builds_the_loops(tmp_path):
    """pip's build isolation builds in an environment without torch: the build says why where
    the loader reads it, and ``fconv-info --build``'s compile makes the loop run."""
    package = _copy_of_the_package(tmp_path / "copy")
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "isolated")], check=True, timeout=300)
    isolated = tmp_path / "isolated" / "bin" / "python"  # setuptools, no torch: as pip builds
    build = subprocess.run([str(isolated), "setup.py", "build_ext", "--inplace"], cwd=package, capture_output=True,
                           text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    assert build.stderr.splitlines()[0] == f"fconv_plugin: the compiled loops are not built: {NO_TORCH_AT_BUILD}"
    states = json.loads(_python(STATES, cwd=package, env={"PYTHONPATH": str(package), "FCONV_NATIVE": "1"})
                        .stdout.splitlines()[-1])
    assert states == {name: f"not built: {NO_TORCH_AT_BUILD}" for name in LOOPS}
    built = _python("from fconv_plugin.native.build import build_in_place; build_in_place(['beam_candidates'])",
                    cwd=package, env={"PYTHONPATH": str(package)})
    assert built.returncode == 0 and built.stdout.splitlines()[-1] == "fconv-info: built beam_candidates", built.stderr
    states = json.loads(_python(STATES, cwd=package, env={"PYTHONPATH": str(package), "FCONV_NATIVE": "1"})
                        .stdout.splitlines()[-1])
    assert states == {"beam_candidates": None, **{name: f"not built: {NO_TORCH_AT_BUILD}" for name in LOOPS[:2]}}


def test_fconv_info_names_versions_features_loops_and_threads():
    result = subprocess.run([str(Path(sys.executable).parent / "fconv-info")], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert "compiled loops:" not in result.stderr  # printed, not logged again
    lines = result.stdout.splitlines()
    import fairseq
    import torch

    assert lines[0] == f"fconv_plugin {fconv_plugin.__version__}"
    assert f"torch {torch.__version__}, fairseq {fairseq.__version__}" in lines[1]
    assert all(f"{feature} " in lines[2] for feature in ("AVX2", "AVX-512", "AVX-512 VNNI", "AMX", "AVX-512 BF16",
                                                         "AMX-BF16"))
    assert lines[3] == f"bfloat16 units: {bf16_line(precision.bf16_units())}"
    assert lines[4].startswith(f"threads: {torch.get_num_threads()} ")
    for name in LOOPS:
        why = backend.reason(name)
        expected = "runs" if why is None else f"does not run: {why}"
        assert any(line.split()[:1] == [name] and f" {expected}  (" in line for line in lines), name
    assert any(line.startswith("int8 products: ") for line in lines)
    cpu = torch.device("cpu")
    assert lines[-2:] == [f"  float32 model    {backend.select(cpu, torch.float32).describe()}",
                          f"  int8 model       {backend.select(cpu, torch.float32, int8_weights=True).describe()}"]


def test_the_cpu_features_read_from_cpuinfo(tmp_path):
    from fconv_plugin.cli.info import cpu_features

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma avx512f avx512_vnni amx_tile\n")
    assert cpu_features(str(cpuinfo)) == {"AVX2": "yes", "FMA": "yes", "AVX-512": "yes", "AVX-512 VNNI": "yes",
                                          "AMX": "no", "AVX-512 BF16": "no", "AMX-BF16": "no"}  # amx_int8 missing
    assert set(cpu_features(str(tmp_path / "missing")).values()) == {"unknown"}
