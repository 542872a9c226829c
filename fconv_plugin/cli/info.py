"""fconv-info: what this installation runs on, and which of its compiled loops run.

    fconv-info            # versions, CPU features, bfloat16 units, compiled loops, threads
    fconv-info --check    # the same; exit status 1 unless every compiled loop runs
    fconv-info --build    # compile the loops against the installed torch (an install that left them out)

Versions of Python, torch and fairseq and the plugin; the CPU's features the loops use
(AVX2, AVX-512, AVX-512 VNNI, AMX) and its bfloat16 units, which decide ``--bf16 --cpu``
(``fconv_plugin.precision``); each compiled loop and, for one that does not run, why;
which int8 product runs; which forms of the step and the search a float32 and an int8
model decode with on this CPU (``fconv_plugin.backend``, the one selector); what training
on the CPU does with freed memory (``fconv_plugin.host_memory``); torch's thread count.
"""

import argparse
import platform
import sys
from typing import Dict

import torch

from .. import __version__, host_memory, precision
from .. import backend
from ..native.build import build_in_place

CPU_FLAGS = {  # /proc/cpuinfo's names
    "AVX2": ("avx2",),
    "FMA": ("fma",),
    "AVX-512": ("avx512f",),
    "AVX-512 VNNI": ("avx512_vnni",),
    "AMX": ("amx_tile", "amx_int8"),
    **{name: flags for name, flags in reversed(precision.BF16_UNITS)},  # the bfloat16 units, as --bf16 reads them
}


def cpu_features(cpuinfo: str = "/proc/cpuinfo") -> Dict[str, str]:
    """Each feature the loops use: "yes", "no", or "unknown" where the system does not say."""
    flags = precision.cpu_flags(cpuinfo)
    if flags is None:
        return {name: "unknown" for name in CPU_FLAGS}
    return {name: "yes" if all(flag in flags for flag in needed) else "no" for name, needed in CPU_FLAGS.items()}


def bf16_line(units) -> str:
    """What the CPU's bfloat16 units (``precision.bf16_units``) make of ``--bf16 --cpu``."""
    if units is None:
        return f"none ({precision.UNIT_NAMES}): --bf16 --cpu is refused; train in float32"
    return f"{units}: fairseq-train --cpu --bf16 trains in mixed precision"


def report() -> str:
    import fairseq

    lines = [
        f"fconv_plugin {__version__}",
        f"python {platform.python_version()}, torch {torch.__version__}, fairseq {fairseq.__version__}",
        f"cpu: {platform.processor() or platform.machine()}; "
        + ", ".join(f"{name} {value}" for name, value in cpu_features().items()),
        f"bfloat16 units: {bf16_line(precision.bf16_units())}",
        f"threads: {torch.get_num_threads()} (torch.get_num_threads)",
        f"training memory: {host_memory.describe()}",
        f"training dropout (fconv_plugin/backend.py): {backend.dropout_description()}",
        f"{backend.SWITCH}: {backend.switch_setting()}",
        "compiled loops:",
    ]
    for name, why in backend.states().items():
        lines.append(f"  {name:<16} {'runs' if why is None else 'does not run: ' + why}  ({backend.LOOPS[name]})")
    lines.append(f"int8 products: {backend.int8_products()}")
    lines.append("decoding on this CPU (fconv_plugin/backend.py):")
    for kind, int8_weights in (("float32", False), ("int8", True)):
        chosen = backend.select(torch.device("cpu"), torch.float32, int8_weights=int8_weights, log=False)
        lines.append(f"  {kind + ' model':<16} {chosen.describe()}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="fconv-info", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit with status 1 unless every compiled loop runs")
    parser.add_argument("--build", action="store_true",
                        help="compile the compiled loops in place against the installed torch (needs a C++ compiler), "
                             "then report; exit status 1 unless every loop runs")
    args = parser.parse_args(argv)
    if args.build:
        build_in_place(list(backend.LOOPS))
        backend.forget()
    print(report())
    if backend.switch_problem() is not None:
        print(f"fconv-info: {backend.switch_problem()}", file=sys.stderr)
    inactive = [name for name, why in backend.states().items() if why is not None]
    if (args.check or args.build) and inactive:
        print(f"fconv-info: error: compiled loops that do not run: {', '.join(inactive)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
