#!/usr/bin/env bash
# Train ConvS2S on your own parallel text and score it: raw text in, model and BLEU out.
#
#   bash examples/translate_your_data/train.sh SRC TGT TRAIN VALID TEST
#
# SRC, TGT: language codes (e.g. de en), used as file suffixes and for Moses' rules.
# TRAIN, VALID, TEST: path prefixes of line-aligned raw text, one sentence a line:
#   TRAIN.SRC and TRAIN.TGT (e.g. corpus/train.de, corpus/train.en), and so on.
#
# Every step is a fairseq or listed-library command:
#   fairseq's Moses tokenizer (the one --tokenizer moses runs) -> subword-nmt joint BPE
#   -> fairseq-preprocess -> fairseq-train --user-dir fconv_plugin -> fairseq-generate
#   -> Moses detokenizer -> sacreBLEU (BLEU and chrF)
#
# Knobs (environment variables):
#   ARCH=name        model (default fconv_iwslt_de_en; docs/your-data.md: "Choosing an architecture")
#   ARCH_ARGS="..."  extra model options, split at spaces, never globbed or evaluated
#   UPDATES=N        training updates (default 2000); the learning rate decays to 0 at the last
#   LR=X             peak learning rate of Adam (default 0.003; 0.001 for the 512-wide models)
#   MAX_TOKENS=N     tokens per batch (default 3000)
#   BPE_MERGES=N     subword-nmt merges (default 8000; ~30000 for millions of sentences)
#   SEED=N           training seed (default 1)
#   PRECISION=auto|fp32|bf16  training's arithmetic: auto (default) trains in bf16 (fairseq's
#                    --bf16: bfloat16 products, float32 weights) on a CPU with bfloat16 units
#                    (AMX-BF16 or AVX-512 BF16), else in fp32; translating is float32 either way
#   WORK_DIR=D       where everything goes (default runs/<date-time> beside this script);
#                    a WORK_DIR that exists and is not empty is refused, never wiped
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${VENV:-$repo/.venv}
export PATH="$venv/bin:$PATH"
moses="$repo/examples/bible_es_en/moses.py"
start=$(date +%s)
step() { echo; echo "=== [$(( $(date +%s) - start ))s] $*"; }
fail() { echo "translate_your_data: error: $*" >&2; exit 1; }
# shellcheck source=../lib/jobs.sh
source "$repo/examples/lib/jobs.sh"
# shellcheck source=../lib/fairseq_logs.sh
source "$repo/examples/lib/fairseq_logs.sh"
# shellcheck source=../lib/precision.sh
source "$repo/examples/lib/precision.sh"

[ $# -eq 5 ] || fail "usage: train.sh SRC TGT TRAIN VALID TEST (prefixes of PREFIX.SRC / PREFIX.TGT raw text)"
src=$1 tgt=$2
[ "$src" != "$tgt" ] || fail "source and target language must differ, got '$src' twice"
arch=${ARCH:-fconv_iwslt_de_en}
updates=${UPDATES:-2000}
lr=${LR:-0.003}
max_tokens=${MAX_TOKENS:-3000}
merges=${BPE_MERGES:-8000}
seed=${SEED:-1}
for knob in updates max_tokens merges seed; do
    case "${!knob}" in ''|*[!0-9]*) fail "${knob^^} must be a whole number, got '${!knob}'";; esac
done
declare -A prefix=([train]=$3 [valid]=$4 [test]=$5)
for split in train valid test; do
    for lang in "$src" "$tgt"; do
        [ -s "${prefix[$split]}.$lang" ] || fail "$split text ${prefix[$split]}.$lang is missing or empty"
    done
    lines_src=$(wc -l < "${prefix[$split]}.$src") lines_tgt=$(wc -l < "${prefix[$split]}.$tgt")
    [ "$lines_src" -eq "$lines_tgt" ] \
        || fail "${prefix[$split]}.$src has $lines_src lines but ${prefix[$split]}.$tgt has $lines_tgt; give line-aligned text"
done
work=${WORK_DIR:-$here/runs/$(date +%Y%m%d-%H%M%S)}
choose_precision  # before anything is written: PRECISION=bf16 on a CPU without the units stops here
if [ -e "$work" ] && [ -n "$(ls -A "$work" 2>/dev/null)" ]; then
    fail "WORK_DIR $work exists and is not empty; choose a new directory (nothing was deleted)"
fi
mkdir -p "$work"
for split in train valid test; do  # absolute paths before leaving for the work directory
    prefix[$split]=$(cd "$(dirname "${prefix[$split]}")" && pwd)/$(basename "${prefix[$split]}")
done
cd "$work"
echo "writing to $work"
echo "training precision: $precision ($precision_reason)"

step "1/6 Moses tokenisation (fairseq's, as fairseq-interactive --tokenizer moses runs it)"
for split in train valid test; do
    for lang in "$src" "$tgt"; do
        python "$moses" tokenize "$lang" < "${prefix[$split]}.$lang" > "$split.tok.$lang" 2> "tokenise.$split.$lang.log" &
        track "tokenising ${prefix[$split]}.$lang" "$work/tokenise.$split.$lang.log"
    done
    wait_tracked
    echo "  $split: $(wc -l < "$split.tok.$src") sentence pairs"
done

step "2/6 subword-nmt: joint BPE, $merges merges"
cat train.tok.$src train.tok.$tgt | subword-nmt learn-bpe -s "$merges" > codes 2> learn-bpe.log
for split in train valid test; do
    for lang in "$src" "$tgt"; do
        subword-nmt apply-bpe -c codes < "$split.tok.$lang" > "$split.bpe.$lang" 2> "apply-bpe.$split.$lang.log" &
        track "apply-bpe on $split.tok.$lang" "$work/apply-bpe.$split.$lang.log"
    done
    wait_tracked
done

step "3/6 fairseq-preprocess"
fairseq-preprocess --source-lang "$src" --target-lang "$tgt" --trainpref train.bpe --validpref valid.bpe \
    --testpref test.bpe --destdir data-bin --workers 2 > preprocess.log 2>&1 \
    || { tail -n 20 preprocess.log; fail "fairseq-preprocess failed (log: $work/preprocess.log)"; }
preprocess_summary preprocess.log

validate_every=$(( (updates + 3) / 4 ))
log_every=$(( updates / 10 < 10 ? 10 : (updates / 10 > 100 ? 100 : updates / 10) ))
step "4/6 fairseq-train --arch $arch: $updates updates, $precision (progress every $log_every, validation BLEU every $validate_every)"
read -r -a arch_args <<< "${ARCH_ARGS:-}"
fairseq-train data-bin --user-dir "$repo/fconv_plugin" --arch "$arch" "${arch_args[@]}" "${train_precision[@]}" \
    --optimizer adam --adam-betas "(0.9, 0.98)" --clip-norm 0.1 --lr "$lr" \
    --lr-scheduler polynomial_decay --warmup-updates "$(( updates / 6 ))" --total-num-update "$updates" \
    --end-learning-rate 0 --dropout 0.1 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 \
    --max-tokens "$max_tokens" --max-update "$updates" --seed "$seed" --required-batch-size-multiple 1 \
    --max-source-positions 1024 --max-target-positions 1024 \
    --skip-invalid-size-inputs-valid-test --max-tokens-valid "$max_tokens" \
    --validate-interval-updates "$validate_every" --save-interval-updates "$validate_every" --keep-interval-updates 1 \
    --no-epoch-checkpoints --save-dir checkpoints --validate-interval 1000000 \
    --eval-bleu --eval-bleu-args '{"beam": 1, "max_len_a": 1.2, "max_len_b": 10}' \
    --eval-bleu-detok moses --eval-bleu-remove-bpe --best-checkpoint-metric bleu --maximize-best-checkpoint-metric \
    --log-format simple --log-interval "$log_every" 2>&1 | tee train.log | training_progress || true
grep -q "done training" train.log || { tail -n 20 train.log; fail "fairseq-train failed (log: $work/train.log)"; }

test_lines=$(wc -l < test.tok.$src)
step "5/6 fairseq-generate --beam 5 on $test_lines test sentences, detokenise, sacreBLEU"
fairseq-generate data-bin --user-dir "$repo/fconv_plugin" --path checkpoints/checkpoint_best.pt \
    --gen-subset test --beam 5 --remove-bpe --max-tokens 6000 --required-batch-size-multiple 1 \
    > generate.out 2> generate.log || { tail -n 20 generate.log; fail "fairseq-generate failed (log: $work/generate.log)"; }
grep '^H-' generate.out | sed 's/^H-//' | sort -n -k1,1 | cut -f3 > test.hyp.tok.$tgt
[ "$(wc -l < test.hyp.tok.$tgt)" -eq "$test_lines" ] \
    || fail "fairseq-generate translated $(wc -l < test.hyp.tok.$tgt) of $test_lines sentences (log: $work/generate.log)"
python "$moses" detokenize "$tgt" < test.hyp.tok.$tgt > test.hyp.$tgt
bleu=$(sacrebleu "${prefix[test]}.$tgt" -i test.hyp.$tgt -m bleu -b -w 2)
chrf=$(sacrebleu "${prefix[test]}.$tgt" -i test.hyp.$tgt -m chrf -b -w 2)
echo "  sacreBLEU $bleu, chrF $chrf (detokenised output against ${prefix[test]}.$tgt)"

step "6/6 outputs"
echo "  model: $work/checkpoints/checkpoint_best.pt   dictionaries: $work/data-bin   BPE codes: $work/codes"
echo "  test translations: $work/test.hyp.$tgt   logs: $work/{preprocess,train,generate}.log"
echo "  translate new text:"
echo "    fairseq-interactive $work/data-bin --user-dir $repo/fconv_plugin --path $work/checkpoints/checkpoint_best.pt \\"
echo "        --source-lang $src --target-lang $tgt --beam 5 --tokenizer moses --bpe subword_nmt --bpe-codes $work/codes"
echo
echo "translate_your_data finished in $(( $(date +%s) - start )) s: $arch, $updates updates, $precision, BLEU $bleu chrF $chrf"
