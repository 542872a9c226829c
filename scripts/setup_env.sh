#!/usr/bin/env bash
# Create a virtual environment with everything fconv_plugin needs, from scratch.
# Usage: bash scripts/setup_env.sh [VENV_DIR]   (default: .venv in the repo root)
#
# Order matters on this platform:
#   1. torch 2.13.0 first (the CPU wheel); anything that asks for torch before it
#      would pull a multi-GB CUDA build.
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

"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet --upgrade pip
"${pip[@]}" install --quiet torch==2.13.0
"${pip[@]}" install --quiet "numpy>=1.24" "cython>=3" "setuptools>=68" wheel
"${pip[@]}" install --quiet --no-build-isolation --no-deps fairseq-fixed==0.12.3.1
"${pip[@]}" install --quiet hydra-core==1.3.2 omegaconf==2.3.0 bitarray cffi regex tqdm packaging \
    scikit-learn "sacrebleu>=2.0" sacremoses subword-nmt matplotlib rouge-score pytest
"${pip[@]}" install --quiet --no-deps --no-build-isolation -e "$repo_root"
"$venv/bin/python" -c "import fairseq, torch, fconv_plugin; print('fconv_plugin ready: torch', torch.__version__, 'fairseq', fairseq.__version__)"
