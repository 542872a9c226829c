import sys

from setuptools import find_packages, setup


def compiled_loops():
    """The compiled loops, built against the installed torch: the int8 layers' fused kernel
    (fconv_plugin/modules/int8_rows.cpp), the decoder's step (fconv_plugin/models/decoder_step.cpp)
    and beam search's candidate selection (fconv_plugin/inference/beam_candidates.cpp). Without torch at build time (an isolated
    build) they are left out and the same arithmetic runs as torch operations, slower."""
    try:
        from torch.utils.cpp_extension import BuildExtension, CppExtension
    except ImportError:
        print("fconv_plugin: torch is not installed here; building without the compiled loops "
              "(install torch first, then this package with --no-build-isolation)", file=sys.stderr)
        return {}
    loops = {
        "fconv_plugin.modules._int8_rows": "fconv_plugin/modules/int8_rows.cpp",
        "fconv_plugin.models._decoder_step": "fconv_plugin/models/decoder_step.cpp",
        "fconv_plugin.inference._beam_candidates": "fconv_plugin/inference/beam_candidates.cpp",
    }
    extensions = [
        # no implicit fused multiply-add (torch's rounding); errno never read, so fma and
        # nearbyint vectorise
        CppExtension(name, [source], include_dirs=["fconv_plugin/modules"],  # int8_rows_api.h
                     extra_compile_args=["-O3", "-ffp-contract=off", "-fno-math-errno", "-fopenmp"],
                     extra_link_args=["-fopenmp"])
        for name, source in loops.items()
    ]
    return {"ext_modules": extensions, "cmdclass": {"build_ext": BuildExtension.with_options(use_ninja=False)}}


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
        "test": ["pytest", "hypothesis", "selenium"],
        "serve": ["fastapi", "uvicorn", "prometheus-client"],  # fconv-serve
        # fconv-export (onnx, onnxscript: torch's exporter) and fconv-onnx-translate (onnxruntime)
        "onnx": ["onnx", "onnxscript", "onnxruntime"],
        # benchmarks/vs_ctranslate2.py: the engine a CPU user would pick instead (not installed by setup_env.sh)
        "bench": ["ctranslate2"],
    },
    package_data={"fconv_plugin.serve": ["static/*"]},
    entry_points={
        "console_scripts": [
            "fconv-translate = fconv_plugin.cli.translate:main",
            "fconv-unk-dict = fconv_plugin.cli.unk_dict:main",
            "fconv-attention = fconv_plugin.cli.attention:main",
            "fconv-quantize = fconv_plugin.cli.quantize:main",
            "fconv-serve = fconv_plugin.serve.main:main",
            "fconv-export = fconv_plugin.export.main:main",
            "fconv-onnx-translate = fconv_onnx.translate:main",
        ]
    },
    license="MIT",
    **compiled_loops(),
)
