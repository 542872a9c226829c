"""Which precision a CPU trains in: bfloat16 where it has bfloat16 units, else float32.

bfloat16 pays on a CPU only where it has units for it: AMX-BF16 (Intel Xeons from
Sapphire Rapids on) or AVX-512 BF16 (Cooper Lake, AMD Zen 4 and later). Elsewhere torch
emulates the products, about 35x slower than float32 on this project's AVX2 machine
(``benchmarks/bench_fconv.py --train-only`` measures both peaks). So ``--bf16`` on a CPU
is decided here, once, from the CPU's flags, and a CPU without the units is refused in
one line that says what to do.

This module imports nothing of the plugin but its error type: every layer may ask it.
"""

from typing import Callable, FrozenSet, Iterable, Optional, Tuple

from .errors import FConvError

# the units, best first, each with the /proc/cpuinfo flags it needs
BF16_UNITS = (("AMX-BF16", ("amx_bf16", "amx_tile")), ("AVX-512 BF16", ("avx512_bf16",)))
UNIT_NAMES = " or ".join(name for name, _ in BF16_UNITS)


def cpu_info_field(field: str, cpuinfo: str = "/proc/cpuinfo") -> Optional[str]:
    """The first processor's ``field`` (``flags``, ``vendor_id``) as the kernel lists it; None where it does not say."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> Optional[FrozenSet[str]]:
    """The CPU's feature flags as the kernel lists them; None where the system does not say."""
    flags = cpu_info_field("flags", cpuinfo)
    return None if flags is None else frozenset(flags.split())


def bf16_units(flags: Optional[Iterable[str]] = None) -> Optional[str]:
    """The CPU's bfloat16 unit ("AMX-BF16" or "AVX-512 BF16"), or None where it has none or
    the system does not say. ``flags``: the CPU's flags (default: this machine's)."""
    flags = cpu_flags() if flags is None else frozenset(flags)
    if flags is None:
        return None
    for name, needed in BF16_UNITS:
        if all(flag in flags for flag in needed):
            return name
    return None


def check_cpu_bf16(units: Optional[str], option: str = "--bf16") -> str:
    """``units`` (``bf16_units()``) if bfloat16 pays on this CPU; else the one-line refusal."""
    if units is None:
        raise FConvError(
            f"{option} on the CPU needs bfloat16 units ({UNIT_NAMES}) and this CPU has none "
            f"(bfloat16 would run many times slower than float32 here); drop {option} to run in float32"
        )
    return units


def on_the_cpu(cpu_option: bool) -> bool:
    """Whether a command runs on the CPU, as fairseq decides it: ``--cpu``, or no GPU to use.
    The one test of it, for training's ``--bf16`` and for decoding."""
    import torch

    return bool(cpu_option) or not torch.cuda.is_available()


def decoding_precision(half: Optional[str], on_cpu: bool, int8: bool = False, what: str = "translating",
                       units: Callable[[], Optional[str]] = None) -> Tuple[Optional[str], Optional[str]]:
    """The one decision of what a model decodes in, for fairseq's commands and the inference
    core: (``half``, the half-precision option to apply, or None for float32; a note for the
    log, or None). ``half``: "--fp16", "--bf16" (or "--memory-efficient-bf16") as asked.

    Half precision is for GPUs and int8 (fconv-quantize) for CPUs: other pairings get a
    one-line error. ``--bf16`` on a CPU is training's: ``what`` runs in float32, with a note
    (bfloat16 decoding has not been measured to pay on a CPU); a CPU without bfloat16 units
    (``units``, default ``bf16_units``) is refused, as in training."""
    if int8 and half:
        raise FConvError(f"an int8 model (fconv-quantize) computes in int8 and float32; drop {half}")
    if int8 and not on_cpu:
        raise FConvError("an int8 model (fconv-quantize) runs on the CPU; add --cpu")
    if half in ("--bf16", "--memory-efficient-bf16") and on_cpu:
        found = check_cpu_bf16((units or bf16_units)(), half)
        return None, (f"fconv_plugin: {half} on the CPU ({found}) is for training; {what} runs in float32 "
                      "(for a faster CPU translator, int8 weights: fconv-quantize)")
    if half and on_cpu:
        raise FConvError(f"{half} needs a GPU and none is in use; drop {half} (or --cpu) to translate in float32")
    return half, None


SETTINGS = ("auto", "fp32", "bf16")


def choose_training_precision(setting: str, units: Optional[str]) -> Tuple[str, str]:
    """The examples' ``PRECISION=auto|fp32|bf16``: (the precision to train in, why), ``units``
    the CPU's (``bf16_units()``). auto takes bf16 where the CPU has the units; bf16 on a
    CPU without them gets the one-line refusal."""
    if setting not in SETTINGS:
        raise FConvError(f"PRECISION must be one of {', '.join(SETTINGS)}, got {setting!r}")
    if setting == "fp32" or (setting == "auto" and units is None):
        reason = "asked for" if setting == "fp32" else "this CPU has no bfloat16 units"
        return "fp32", reason
    check_cpu_bf16(units, "PRECISION=bf16")
    return "bf16", f"{units} units" + ("" if setting == "bf16" else ", chosen by PRECISION=auto")


def main(argv=None) -> int:
    """``python -m fconv_plugin.precision SETTING``: one tab-separated line, the precision and why."""
    import sys

    arguments = sys.argv[1:] if argv is None else argv
    setting = arguments[0] if arguments else "auto"
    try:
        chosen, reason = choose_training_precision(setting, bf16_units())
    except FConvError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{chosen}\t{reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
