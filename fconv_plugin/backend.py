"""Which form of each decoding part runs: the one place that decides it.

Every part of decoding has a torch form, the reference, and a compiled form that computes
the same bits (``fconv_plugin/native/``, each optional at install):

- the int8 layers' products, embeddings, gate and float64 attention sums
  (``int8_rows``; torch form: ``deployment/int8.py``);
- the decoder's step (``decoder_step``; torch form: ``decoding/steps.py``);
- beam search's candidates and bookkeeping between steps (``beam_candidates``; torch
  form: ``decoding/search.py``).

Training has one choice of form, its dropout's draws (``training_dropout``,
``modules/dropout.py``): torch's own in float32, fairseq's masks for a seed; in bfloat16,
16-bit draws where torch's Bernoulli draws would run on one core (outside Intel's CPUs,
where they are MKL's, on every core). Both give the same distribution, not the same masks.
``FCONV_DROPOUT=torch`` or ``16bit`` sets bfloat16's draws (for side-by-side runs:
``benchmarks/training_limits.py --dropout``); anything else is refused in one line.

This module is the only code that reads what decides between them: ``FCONV_NATIVE``, ``FCONV_DROPOUT``,
which loops the install built (``native``'s loader), the CPU's int8 features, the
precision and device of the tensors, int8 weights, and whether an exporter is tracing.
``select`` returns, for one search, the compiled module of each part or None where its
torch form runs; ``int8_loops`` answers the int8 layers for one operation.
``fconv-info`` prints ``states`` and ``describe``; the log says ``summary`` once, where a
caller first picks a path (``announce``).

``FCONV_NATIVE=0`` selects the torch forms everywhere, for debugging and tests; a comma
list of loop names (``FCONV_NATIVE=int8_rows``) runs those loops alone, for measuring
what each buys (``benchmarks/native_loops.py``); it switches nothing off that keeps
results safe: both forms compute the same arithmetic.

This module imports nothing of the plugin but ``native``, ``precision`` (the CPU's flags) and the error
type: the int8 layers below the model
ask it as the step and the search above do.
"""

import logging
import os
from dataclasses import dataclass
from typing import Dict, Optional

import torch

from . import native, precision
from .errors import FConvError

logger = logging.getLogger(__name__)

SWITCH = "FCONV_NATIVE"
LOOPS = native.LOOPS
TORCH_DRAWS = "torch's Bernoulli draws"  # training's dropout forms (training_dropout)
SIXTEEN_BIT_DRAWS = "16-bit draws"
DROPOUT_DRAWS = (TORCH_DRAWS, SIXTEEN_BIT_DRAWS)
DROPOUT_SWITCH = "FCONV_DROPOUT"
DROPOUT_SETTINGS = {"torch": TORCH_DRAWS, "16bit": SIXTEEN_BIT_DRAWS}
_announced = False
_loops: Dict[str, object] = {}  # each loop's module or None, read once per process (``forget``: again)


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


def loop(name: str):
    """Compiled loop ``name``'s module where it is built and switched on; else None."""
    if name not in _loops:
        _loops[name] = native.module(name) if switched_on(name) else None
    return _loops[name]


def reason(name: str) -> Optional[str]:
    """Why loop ``name`` does not run here (switched off, not built, an import error); None where it runs."""
    if not switched_on():
        return f"switched off ({SWITCH}=0)"
    if not switched_on(name):
        return f"switched off ({SWITCH}={os.environ.get(SWITCH, '').strip()})"
    return native.reason(name)


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


def forget() -> None:
    """Ask the loader again (after ``fconv-info --build`` built the loops)."""
    _loops.clear()
    native.forget()


def cpu_vendor(cpuinfo: str = "/proc/cpuinfo") -> Optional[str]:
    """The CPU's vendor as the kernel names it (GenuineIntel, AuthenticAMD); None where it does not say."""
    return precision.cpu_info_field("vendor_id", cpuinfo)


def dropout_setting() -> Optional[str]:
    """bfloat16's draws as ``FCONV_DROPOUT`` sets them (None: unset, the CPU decides); else the refusal."""
    value = os.environ.get(DROPOUT_SWITCH, "").strip()
    if value and value not in DROPOUT_SETTINGS:
        raise FConvError(f"{DROPOUT_SWITCH}={value!r} is neither torch (torch's Bernoulli draws) nor 16bit "
                         f"(16-bit draws); unset it to let the CPU decide")
    return DROPOUT_SETTINGS.get(value)


def training_dropout(dtype: torch.dtype, vendor: Optional[str] = None, mkl: Optional[bool] = None) -> str:
    """The dropout draws a training step computing in ``dtype`` uses (``modules/dropout.py``): torch's in
    float32 (fairseq's masks for a seed); in bfloat16 what ``FCONV_DROPOUT`` sets, else torch's where it
    draws Bernoulli masks with MKL on every core (an Intel CPU and a torch built with MKL), else 16-bit
    draws (a quarter of the generator's calls). ``vendor``, ``mkl``: this machine's unless given."""
    if dtype == torch.float32:
        return TORCH_DRAWS
    if dropout_setting() is not None:
        return dropout_setting()
    vendor = cpu_vendor() if vendor is None else vendor
    mkl = torch.backends.mkl.is_available() if mkl is None else mkl
    return TORCH_DRAWS if vendor == "GenuineIntel" and mkl else SIXTEEN_BIT_DRAWS


def dropout_description() -> str:
    """``training_dropout`` on this machine in words, for ``fconv-info``."""
    why = {TORCH_DRAWS: "torch draws them with MKL on every core here",
           SIXTEEN_BIT_DRAWS: "a quarter of the generator's calls; torch's run on one core here"}
    try:
        chosen = training_dropout(torch.bfloat16)
    except FConvError as refusal:
        return str(refusal)
    reason = f"{DROPOUT_SWITCH}={os.environ[DROPOUT_SWITCH].strip()}" if dropout_setting() else why[chosen]
    return f"float32 {TORCH_DRAWS} (fairseq's masks for a seed); bfloat16 {chosen} ({reason})"


def tracing() -> bool:
    """Whether an exporter is tracing the model: a traced graph holds torch operations only."""
    return torch.compiler.is_compiling()


def int8_products() -> str:
    """Which int8 product the compiled int8 layers use on this CPU, or why none."""
    rows = loop("int8_rows")
    if rows is None:
        return "torch's operations (torch._int_mm); the compiled loops do not run"
    if rows.amx():
        return "AMX tiles"
    if rows.vnni:
        return "AVX-512 VNNI loops"
    missing = "AVX-512 VNNI" if rows.avx2_fma else "AVX2 and FMA"
    return f"torch._int_mm inside the compiled loops (this CPU has no {missing})"


def int8_loops(*float32_operands: torch.Tensor):
    """The compiled int8 loops (``int8_rows``) for one operation of an int8 layer, or None
    where its torch form runs: not built or switched off, an exporter tracing, or an
    operand in ``float32_operands`` that is not float32."""
    rows = loop("int8_rows")
    if rows is None or tracing():
        return None
    if any(operand.dtype != torch.float32 for operand in float32_operands):
        return None
    return rows


def packed_int8_products() -> bool:
    """Whether the compiled int8 loops multiply by packed weights on this CPU (AMX tiles or
    AVX-512 VNNI); else torch's int8 product runs, inside them or not."""
    rows = int8_loops()
    return rows is not None and bool(rows.vnni)


@dataclass(frozen=True)
class Backend:
    """What runs for one search: each compiled part's module, or None where its torch form runs."""

    step: Optional[object]  # decoder_step: the decoder's step and the search's state
    int8: Optional[object]  # int8_rows: an int8 model's layers inside that step
    candidates: Optional[object]  # beam_candidates: candidates, bookkeeping, whole steps with ``step``
    int8_weights: bool = False  # what it was chosen for

    def describe(self) -> str:
        """The choice in words, as ``fconv-info`` prints it."""
        step = "compiled (decoder_step)" if self.step is not None else "torch (decoding/steps.py)"
        search = ("compiled (beam_candidates" + (", whole steps with the compiled step)" if self.step is not None
                                                 else ")")
                  if self.candidates is not None else "torch (decoding/search.py)")
        layers = ""
        if self.int8_weights:
            form = "compiled (int8_rows)" if self.int8 is not None else "torch (deployment/int8.py)"
            layers = f"; int8 layers {form}"
        return f"step {step}; search {search}{layers}"


def select(device: torch.device, dtype: torch.dtype, int8_weights: bool = False, log: bool = True) -> Backend:
    """The forms a search runs for a model whose encoder output has ``device`` and ``dtype``
    (``int8_weights``: its layers are int8). The compiled forms run on the CPU alone; the
    compiled step in float32, not while an exporter traces, and for an int8 model only
    with the compiled int8 loops it calls. ``log``: say the loops' states once per process
    (``announce``; fconv-info prints them instead)."""
    if log:
        announce()
    on_cpu = torch.device(device).type == "cpu"
    int8 = int8_loops() if int8_weights else None
    step = loop("decoder_step") if on_cpu and dtype == torch.float32 and not tracing() else None
    if int8_weights and int8 is None:
        step = None
    return Backend(step=step, int8=int8, candidates=loop("beam_candidates") if on_cpu else None,
                   int8_weights=int8_weights)
