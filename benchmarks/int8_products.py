"""int8's products: torch's int8 product against the compiled loops over a packed weight.

``int8_rows.cpp`` multiplies a layer's rows by its int8 weight in one of three ways, all with
the same bits (exact int32 sums): torch's int8 product (``at::_int_mm``, oneDNN), or, over a
weight packed once (``Int8Weight.packed``), its own AMX tiles (where the CPU has them) or its
own AVX-512 VNNI loops. This times torch's product, the AMX tiles and the VNNI loops, and
float32's ``addmm`` beside them, at the quickstart model's product shapes (fc1, fc2 and the
attention projections 256 x 256, the convolutions 768 x 512, fc3 256 x 4576) for a range of
rows, taking turns in one process. Where the VNNI loops stop being faster than torch's product
is where ``kVnniRowsUpTo`` and ``kVnniWideRowsUpTo`` in ``int8_rows.cpp`` hand over to it; the
AMX tiles take every size.

    python benchmarks/int8_products.py [--rows 5,10,20,40,48,64,96,128,256,640] [--repeats 5]

Reported: microseconds per product (median of the repetitions), and torch's product's time
over the AMX tiles' and over the VNNI loops' (above 1: the compiled loops are faster). Above
the VNNI thresholds the "VNNI" column is torch's product again (that is what runs).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from fconv_plugin.deployment.int8 import Int8Weight, fused_rows  # noqa: E402

SHAPES = [(256, 256), (768, 512), (256, 4576)]  # (in, out): fc1/fc2/attention, convolutions, fc3


def per_call_us(function, calls: int) -> float:
    for _ in range(calls // 10):
        function()
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="5,10,20,40,48,64,96,128,256,640")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300, help="products timed in each repetition")
    args = parser.parse_args()
    if fused_rows is None or not fused_rows.vnni:
        sys.exit("int8_products: this needs the compiled loops (pip install -e . --no-build-isolation) "
                 "on a CPU with AVX-512 VNNI")
    amx = fused_rows.amx()
    print(f"{torch.get_num_threads()} threads, torch {torch.__version__}, AMX tiles {'here' if amx else 'not here'}; "
          "microseconds per product")
    print(f"{'in x out':>11} {'rows':>5} {'float32':>9} {'torch int8':>11} {'AMX':>8} {'VNNI':>8} "
          f"{'torch/AMX':>10} {'torch/VNNI':>11}")
    generator = torch.Generator().manual_seed(0)
    for width, out in SHAPES:
        float_weight = torch.randn(out, width, generator=generator)
        bias = torch.randn(out, generator=generator)
        int8 = Int8Weight.from_float(float_weight)
        packed = int8.packed()
        for rows in (int(r) for r in args.rows.split(",")):
            x = torch.randn(rows, width, generator=generator)
            forms = {
                "float32": lambda: torch.addmm(bias, x, float_weight.t()),
                "torch int8": lambda: fused_rows.linear(x, int8.weight, int8.scale, bias),
                "AMX": lambda: fused_rows.linear(x, int8.weight, int8.scale, bias, *packed),
                "VNNI": lambda: fused_rows.linear(x, int8.weight, int8.scale, bias, *packed),
            }
            if not amx:
                del forms["AMX"]
            times = {name: [] for name in forms}
            for repeat in range(args.repeats):
                for name in (list(forms) if repeat % 2 == 0 else reversed(list(forms))):
                    before = fused_rows.use_amx(name == "AMX")
                    try:
                        times[name].append(per_call_us(forms[name], args.calls))
                    finally:
                        fused_rows.use_amx(before)
            us = {name: statistics.median(values) for name, values in times.items()}
            amx_columns = (f"{us['AMX']:>8.1f}", f"{us['torch int8'] / us['AMX']:>9.2f}x") if amx else ("-", "-")
            print(f"{width:>5} x {out:<4} {rows:>5} {us['float32']:>9.1f} {us['torch int8']:>11.1f} "
                  f"{amx_columns[0]:>8} {us['VNNI']:>8.1f} {amx_columns[1]:>10} {us['torch int8'] / us['VNNI']:>10.2f}x")


if __name__ == "__main__":
    main()
