#!/usr/bin/env bash
# The quickstart's validation BLEU against wall-clock minutes, trained in fp32 and in bf16 on
# this machine for the same minutes: what bfloat16 units buy, as a picture.
#
#   bash examples/bible_es_en/bleu_by_minutes.sh [MINUTES] [OUT.png]
#
# Runs the quickstart twice, one after the other, with MINUTES (default 6: the fp32 run's
# 600 updates on 2 cores without bfloat16 units), PRECISION=fp32 then PRECISION=bf16,
# VALIDATIONS=12 and EVALUATE=0 (validation BLEU by greedy search on the 300 validation
# verses; no test set), into runs/bleu-by-minutes-<date-time>/{fp32,bf16}, then draws both
# curves into OUT.png (default: that directory's bleu-by-minutes.png). Needs a CPU with
# bfloat16 units (AMX-BF16 or AVX-512 BF16); elsewhere the bf16 run is refused in one line.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${VENV:-$repo/.venv}
minutes=${1:-6}
runs=$here/runs/bleu-by-minutes-$(date +%Y%m%d-%H%M%S)
out=${2:-$runs/bleu-by-minutes.png}
fail() { echo "bleu_by_minutes: error: $*" >&2; exit 1; }
"$venv/bin/python" -m fconv_plugin.precision bf16 > /dev/null 2>&1 \
    || fail "this CPU has no bfloat16 units (AMX-BF16 or AVX-512 BF16): there is no bf16 curve to draw"
for precision in fp32 bf16; do
    echo "=== the quickstart in $precision for $minutes minutes: $runs/$precision"
    MINUTES=$minutes PRECISION=$precision VALIDATIONS=12 EVALUATE=0 WORK_DIR=$runs/$precision \
        bash "$here/quickstart.sh" | tail -n 1
done
"$venv/bin/python" "$here/plot_training.py" --compare "$runs/fp32/train.log" fp32 "$runs/bf16/train.log" bf16 "$out" \
    "the quickstart (fconv_iwslt_de_en, Bible es-en), $minutes minutes each, $("$venv/bin/python" -c "
import sys; sys.path.insert(0, '$repo/benchmarks'); from harness import machine; print(machine())")"
