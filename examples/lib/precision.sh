# PRECISION=auto|fp32|bf16 for the examples' training, decided by the plugin from this CPU's
# bfloat16 units (fconv_plugin/precision.py): auto trains in bf16 where the CPU has them
# (AMX-BF16 or AVX-512 BF16), else in fp32; bf16 on a CPU without them is refused.
# Decoding stays float32 either way (docs/performance.md#training-in-bfloat16).
#
# choose_precision sets: precision (fp32 or bf16), precision_reason, and
# train_precision, the array of fairseq-train options it takes (--cpu --bf16, or none).
choose_precision() {
    local choice errors status=0
    errors=$(mktemp)
    choice=$(python -m fconv_plugin.precision "${PRECISION:-auto}" 2> "$errors") || status=$?
    if [ "$status" -ne 0 ]; then
        choice=$(tail -n 1 "$errors")
        rm -f "$errors"
        fail "${choice#error: }"
    fi
    rm -f "$errors"
    precision=${choice%%$'\t'*}
    precision_reason=${choice#*$'\t'}
    train_precision=()
    [ "$precision" = bf16 ] && train_precision=(--cpu --bf16)
    return 0
}
