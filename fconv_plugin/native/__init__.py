"""The compiled loops and their one loader: which run, and why any does not.

Three C++ extensions, each built when the package is installed with torch present
(``setup.py``; each optional), each with a torch form that is its reference and runs
wherever it is absent:

- ``int8_rows``: the int8 layers' products, embeddings, gate and float64 attention sums
  (reference: ``fconv_plugin/deployment/int8.py``'s torch operations);
- ``decoder_step``: one decoder step over rows (reference: ``DecoderSteps.step`` in
  ``fconv_plugin/models/decoder_steps.py``);
- ``beam_candidates``: beam search's candidates and bookkeeping between steps
  (reference: ``_Bookkeeping`` and ``split_candidates`` in
  ``fconv_plugin/inference/beam_search.py``).

The loops call each other only C++ to C++, through tables of functions each module hands
out (``apis.h``); none calls back into Python. What each buys, end to end, is measured by
``benchmarks/native_loops.py`` (docs/performance.md).

``module(name)`` gives a loop's module, or None where it does not run; the first time a
caller decides which path to take (``announce()``) the log says, in one line, which loops
run and why each other one does not: switched off, not built (with the install's
reason), or an import error with its text. ``fconv-info`` prints the same.
``FCONV_NATIVE=0`` selects the torch forms everywhere, for debugging and tests, and a
comma list of loop names (``FCONV_NATIVE=int8_rows``) runs those loops alone, for
measuring what each buys (``benchmarks/native_loops.py``); it switches nothing off that
keeps results safe: both paths compute the same arithmetic.

This package imports nothing of the plugin: every layer may use it.
"""

import importlib
import json
import logging
import os
from typing import Dict, Optional

from .build import NO_TORCH_AT_BUILD, REPORT

logger = logging.getLogger(__name__)

LOOPS = {
    "int8_rows": "int8 layers' products and float64 sums",
    "decoder_step": "the decoder's step",
    "beam_candidates": "beam search's candidates and bookkeeping",
}
SWITCH = "FCONV_NATIVE"
_REPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), REPORT)

_modules: Dict[str, object] = {}
_reasons: Dict[str, str] = {}
_announced = False


def _selected() -> Optional[set]:
    """The loops ``FCONV_NATIVE`` names (a comma list), or None where it names none (0, 1, unset)."""
    value = os.environ.get(SWITCH, "").strip()
    if value in ("", "0", "1"):
        return None
    names = {name.strip() for name in value.split(",") if name.strip()}
    return names if names and names <= set(LOOPS) else None


def switch_problem() -> Optional[str]:
    """A one-line note when ``FCONV_NATIVE`` holds neither 0, 1 nor a list of loops (it is then taken as 1)."""
    value = os.environ.get(SWITCH, "").strip()
    if value in ("", "0", "1") or _selected() is not None:
        return None
    return (f"{SWITCH}={value!r} is neither 0 (the torch forms), 1 (compiled loops where built) nor a comma "
            f"list of loops ({', '.join(LOOPS)}); taken as 1")


def switched_on(name: Optional[str] = None) -> bool:
    """``FCONV_NATIVE``: unset, empty or 1 runs the compiled loops that are built; 0 the torch
    forms; a comma list of loops those loops alone (``name``: whether that loop may run)."""
    if os.environ.get(SWITCH, "").strip() == "0":
        return False
    selected = _selected()
    return name is None or selected is None or name in selected


def switch_setting() -> str:
    """``FCONV_NATIVE`` in words, for ``fconv-info``."""
    if not switched_on():
        return "off (0): the torch forms run"
    selected = _selected()
    return "on" if selected is None else f"only {', '.join(sorted(selected))}"


def _build_report() -> dict:
    try:
        with open(_REPORT) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _load(name: str):
    if not switched_on():
        return None, f"switched off ({SWITCH}=0)"
    if not switched_on(name):
        return None, f"switched off ({SWITCH}={os.environ.get(SWITCH, '').strip()})"
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
    """The compiled module of loop ``name`` (a key of ``LOOPS``), or None where its torch form runs."""
    if name not in _modules:
        _modules[name], reason = _load(name)
        if reason is not None:
            _reasons[name] = reason
    return _modules[name]


def reason(name: str) -> Optional[str]:
    """Why loop ``name`` does not run here; None where it runs."""
    module(name)
    return _reasons.get(name)


def int8_products() -> str:
    """Which int8 product the compiled int8 layers use on this CPU, or why none."""
    rows = module("int8_rows")
    if rows is None:
        return "torch's operations (torch._int_mm); the compiled loops do not run"
    if rows.amx():
        return "AMX tiles"
    if rows.vnni:
        return "AVX-512 VNNI loops"
    missing = "AVX-512 VNNI" if rows.avx2_fma else "AVX2 and FMA"
    return f"torch._int_mm inside the compiled loops (this CPU has no {missing})"


def states() -> Dict[str, Optional[str]]:
    """Each loop's name and why it does not run (None: it runs)."""
    return {name: reason(name) for name in LOOPS}


def summary() -> str:
    """One line: which loops run, why each other does not."""
    parts = []
    for name, why in states().items():
        parts.append(f"{name} runs" if why is None else f"{name} does not ({why})")
    return "compiled loops: " + "; ".join(parts)


def announce() -> None:
    """Log ``summary()`` once per process: called where a caller first picks a path."""
    global _announced
    if _announced:
        return
    _announced = True
    inactive = any(why is not None for why in states().values())
    level = logging.WARNING if inactive and switched_on() else logging.INFO
    logger.log(level, "fconv_plugin: %s", summary())
    if switch_problem() is not None:
        logger.warning("fconv_plugin: %s", switch_problem())
