import os
import re
import sys
import tempfile
import threading

from setuptools import find_packages, setup


NATIVE = "fconv_plugin/native"
LOOPS = ("int8_rows", "decoder_step", "beam_candidates")  # fconv_plugin/native/<name>.cpp


def _native_build():
    """fconv_plugin/native/build.py, read by path: the loops' flags and their build report
    (importing the package would import torch and fairseq, which a build may lack)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fconv_native_build", os.path.join(NATIVE, "build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NATIVE_BUILD = _native_build()
REPORT = NATIVE_BUILD.REPORT  # what this install built, read by fconv_plugin/native/__init__.py


def _first_line(error: BaseException) -> str:
    """The error in one short line; a failed command by its program and exit status."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    command = re.match(r"[Cc]ommand '\[?'?([^',\]]+).*(?:exit status|exit code) (-?\d+)", text)
    if command:
        text = f"{os.path.basename(command.group(1))} failed with exit status {command.group(2)}"
    return f"{type(error).__name__}: {text}"[:300]


def compiled_loops():
    """The compiled loops (fconv_plugin/native/*.cpp), built against the installed torch, each
    optional: one that cannot be built (no torch at build time, no usable compiler, a
    compiler that rejects the code) is left out with one line on stderr, the install goes
    on, and the loader names the reason (``fconv-info``); the same arithmetic then runs as
    torch operations. OpenMP only where the compiler accepts it."""
    try:
        from torch.utils.cpp_extension import BuildExtension, CppExtension
    except ImportError:
        # said where the loader reads it too: pip hides a build's output unless it fails
        print(f"fconv_plugin: the compiled loops are not built: {NATIVE_BUILD.NO_TORCH_AT_BUILD}", file=sys.stderr)
        NATIVE_BUILD.write_report({name: NATIVE_BUILD.NO_TORCH_AT_BUILD for name in LOOPS}, False, None,
                                  directory=NATIVE)
        return {}

    class OptionalLoops(BuildExtension):
        """torch's extension builder, each loop optional, its outcome written beside it."""

        def finalize_options(self):
            super().finalize_options()
            if not self.parallel:  # the loops compile side by side, one a core (build_ext -j N chooses)
                self.parallel = max(1, min(len(LOOPS), os.cpu_count() or 1))

        def run(self):
            self._outcome = {}
            self._in_tree = bool(self.inplace)  # setuptools builds into build/, then copies in place
            try:
                super().run()
            except Exception as error:  # before any loop compiled (the compiler's checks)
                for extension in self.extensions:
                    if extension.name not in self._outcome:
                        self._failed(extension, error)
            self._write_report()

        def build_extension(self, extension):
            flags = self._openmp_flags()
            extension.extra_compile_args = extension.extra_compile_args + flags
            extension.extra_link_args = extension.extra_link_args + flags
            try:
                super().build_extension(extension)
                self._outcome[extension.name] = None
            except Exception as error:  # compiler missing or refusing: the loop is left out
                self._failed(extension, error)

        def _failed(self, extension, error):
            self._outcome[extension.name] = _first_line(error)
            print(f"fconv_plugin: {extension.name} not built ({_first_line(error)}); "
                  "the torch operations run instead", file=sys.stderr)
            for stale in {self.get_ext_fullpath(extension.name), self._in_tree_path(extension.name)}:
                if os.path.exists(stale):  # an earlier build's loop would hide the failure
                    os.remove(stale)

        def copy_extensions_to_source(self):  # only the loops that were built
            every = self.extensions
            self.extensions = [e for e in every if self._outcome.get(e.name, "absent") is None]
            try:
                super().copy_extensions_to_source()
            finally:
                self.extensions = every

        def _in_tree_path(self, name):
            package = name.rpartition(".")[0]
            directory = self.get_finalized_command("build_py").get_package_dir(package)
            return os.path.join(directory, os.path.basename(self.get_ext_filename(name)))

        _probing = threading.Lock()  # the loops build in threads; the compiler is asked once

        def _openmp_flags(self):
            with self._probing:
                if not hasattr(self, "_openmp"):
                    self._openmp = list(NATIVE_BUILD.OPENMP) if self._compiles(
                        "int main() { return omp_get_max_threads(); }", "#include <omp.h>", NATIVE_BUILD.OPENMP) else []
            return self._openmp

        def _compiles(self, body, header, flags):
            with tempfile.TemporaryDirectory() as scratch:
                source = os.path.join(scratch, "probe.cpp")
                with open(source, "w") as f:
                    f.write(f"{header}\n{body}\n")
                try:
                    objects = self.compiler.compile([source], output_dir=scratch, extra_postargs=flags)
                    self.compiler.link_executable(objects, "probe", output_dir=scratch, extra_postargs=flags,
                                                  target_lang="c++")
                    return True
                except Exception:
                    return False

        def _write_report(self):
            if not self.extensions:
                return
            loops = {name.rsplit("._", 1)[-1]: reason for name, reason in self._outcome.items()}
            first = self.extensions[0].name
            directories = {os.path.dirname(self.get_ext_fullpath(first))}
            if self._in_tree:
                directories.add(os.path.dirname(self._in_tree_path(first)) or ".")
            for directory in directories:
                os.makedirs(directory, exist_ok=True)
                NATIVE_BUILD.write_report(loops, bool(getattr(self, "_openmp", [])), __import__("torch").__version__,
                                          directory=directory)

    extensions = [
        CppExtension(f"fconv_plugin.native._{name}", [f"{NATIVE}/{name}.cpp"], include_dirs=[NATIVE],
                     extra_compile_args=list(NATIVE_BUILD.COMPILE_ARGS))
        for name in LOOPS
    ]
    return {"ext_modules": extensions, "cmdclass": {"build_ext": OptionalLoops.with_options(use_ninja=False)}}


setup(
    name="fconv_plugin",
    version="0.1.0",
    description="ConvS2S (Gehring et al. 2017) as a fairseq plugin (--user-dir)",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["fconv_plugin", "fconv_plugin.*", "fconv_onnx"]),
    # built and tested on Python 3.11 only (scripts/setup_env.sh; versions in constraints.txt)
    python_requires=">=3.11",
    install_requires=[
        # torch.serialization.safe_globals (the scoped checkpoint allowance) is torch >= 2.5.
        # Install torch first (the CPU build: torch==2.13.0+cpu): a plain "torch" requirement
        # resolved by pip pulls a multi-GB CUDA build.
        "torch>=2.5",
        # fairseq 0.12.2 cannot be imported on Python >= 3.11; fairseq-fixed is the
        # same code base (same `import fairseq`, same console scripts) made to work there.
        # It compiles extensions: install it with --no-build-isolation --no-deps after torch,
        # numpy and cython (as scripts/setup_env.sh does).
        "fairseq-fixed==0.12.3.1",
        "numpy",
        "sacremoses",
        "subword-nmt",
        "sacrebleu>=2.0",
        "matplotlib",  # fconv-attention and the examples' training curves
        "rouge-score",  # the summarisation example
        "sentencex",  # documents: sentence splitting (inference/documents.py)
        "tqdm",  # fconv-translate's progress
    ],
    extras_require={
        "test": ["pytest", "pytest-xdist", "hypothesis", "selenium", "libretranslatepy", "deep-translator", "libretranslate-aio", "schemathesis"],
        # fconv-serve: py3langid for /detect, python-docx for /translate_file, python-multipart for forms
        "serve": ["fastapi", "uvicorn", "prometheus-client", "python-multipart", "py3langid", "python-docx"],
        # fconv-export (onnx, onnxscript: torch's exporter) and fconv-onnx-translate (onnxruntime)
        "onnx": ["onnx", "onnxscript", "onnxruntime"],
        # benchmarks/vs_ctranslate2.py: the engine a CPU user would pick instead (setup_env.sh installs it:
        # the benchmarks' --quick runs are tests)
        "bench": ["ctranslate2"],
    },
    package_data={"fconv_plugin.serve": ["static/*"], "fconv_plugin.native": ["*.cpp", "*.h", REPORT]},
    entry_points={
        "console_scripts": [
            "fconv-translate = fconv_plugin.cli.translate:main",
            "fconv-unk-dict = fconv_plugin.cli.unk_dict:main",
            "fconv-attention = fconv_plugin.cli.attention:main",
            "fconv-quantize = fconv_plugin.cli.quantize:main",
            "fconv-serve = fconv_plugin.serve.main:main",
            "fconv-export = fconv_plugin.export.main:main",
            "fconv-onnx-translate = fconv_onnx.translate:main",
            "fconv-info = fconv_plugin.cli.info:main",
        ]
    },
    license="MIT",
    **compiled_loops(),
)
