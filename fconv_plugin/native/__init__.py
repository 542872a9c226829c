"""The compiled loops and their one loader: which are built, and why any is not.

Three C++ extensions, each built when the package is installed with torch present
(``setup.py``; each optional), each with a torch form that is its reference and runs
wherever it is absent:

- ``int8_rows``: the int8 layers' products, embeddings, gate and float64 attention sums
  (reference: ``fconv_plugin/deployment/int8.py``'s torch operations);
- ``decoder_step``: one decoder step over rows (reference: ``DecoderSteps.step`` in
  ``fconv_plugin/decoding/steps.py``);
- ``beam_candidates``: beam search's candidates and bookkeeping between steps
  (reference: ``_Bookkeeping`` and ``split_candidates`` in
  ``fconv_plugin/decoding/search.py``).

The loops call each other only C++ to C++, through tables of functions each module hands
out (``apis.h``); none calls back into Python. What each buys, end to end, is measured by
``benchmarks/native_loops.py`` (docs/performance.md).

``module(name)`` gives a loop's module, or None where it is not built or does not import
(``reason(name)`` says why: not built, with the install's reason, or the import error's
text). Which form runs is decided in one place, ``fconv_plugin/backend.py``,
the only caller of this loader; it reads ``FCONV_NATIVE`` too.

This package imports nothing of the plugin: every layer may use it.
"""

import importlib
import json
import os
from typing import Dict, Optional

from .build import NO_TORCH_AT_BUILD, REPORT

LOOPS = {
    "int8_rows": "int8 layers' products and float64 sums",
    "decoder_step": "the decoder's step",
    "beam_candidates": "beam search's candidates and bookkeeping",
}
_REPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), REPORT)

_modules: Dict[str, object] = {}
_reasons: Dict[str, str] = {}


def _build_report() -> dict:
    try:
        with open(_REPORT) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _load(name: str):
    try:
        return importlib.import_module(f"{__name__}._{name}"), None
    except ImportError as error:
        failure = (_build_report().get("loops") or {}).get(name) or "absent"
        if getattr(error, "name", None) == f"{__name__}._{name}":  # no such module: never built
            if failure == "absent":
                return None, ("not built (a checkout never installed; build them against this torch: "
                              "fconv-info --build, or pip install --no-build-isolation -e .)")
            if failure == NO_TORCH_AT_BUILD:
                return None, f"not built: {failure}"
            return None, f"not built: the install could not compile it ({failure})"
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return None, f"import error: {first_line} (build them again against this torch: fconv-info --build)"


def forget() -> None:
    """Ask again at the next ``module`` call (after ``fconv-info --build`` built the loops)."""
    _modules.clear()
    _reasons.clear()


def module(name: str):
    """The compiled module of loop ``name`` (a key of ``LOOPS``), or None where it is not built or does not import."""
    if name not in _modules:
        _modules[name], reason = _load(name)
        if reason is not None:
            _reasons[name] = reason
    return _modules[name]


def reason(name: str) -> Optional[str]:
    """Why loop ``name`` is not loaded here; None where it is."""
    module(name)
    return _reasons.get(name)
