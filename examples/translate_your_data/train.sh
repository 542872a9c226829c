#!/usr/bin/env bash
# Train ConvS2S on your own parallel text and score it: raw text in, model and BLEU out.
#
#   bash examples/translate_your_data/train.sh SRC TGT TRAIN VALID TEST
#   MINUTES=30 bash examples/translate_your_data/train.sh SRC TGT TRAIN VALID TEST
#
# SRC, TGT: language codes (e.g. de en), used as file suffixes and for Moses' rules.
# TRAIN, VALID, TEST: path prefixes of line-aligned raw text, one sentence a line:
#   TRAIN.SRC and TRAIN.TGT (e.g. corpus/train.de, corpus/train.en), and so on.
#
# Every step is a fairseq or listed-library command:
#   fairseq's Moses tokenizer (the one --tokenizer moses runs) -> subword-nmt joint BPE
#   -> fairseq-preprocess -> fairseq-train --user-dir fconv_plugin -> fairseq-generate
#   -> Moses detokenizer -> sacreBLEU (BLEU and chrF)
# The recipe (recipe.py: model width and depth, BPE merges, batch, dropout, learning rate) is
# chosen from the corpus and from the updates the training buys: with MINUTES, what a short
# speed probe of each candidate model on this CPU says the minutes buy it. It is printed in
# one block before training; every choice is a knob below.
#
# Knobs (environment variables):
#   MINUTES=N        train for N minutes (the speed probe's seconds included) and make the best
#                    of them on this CPU: the learning rate anneals to 0 as they run out
#                    (fairseq-train --lr-scheduler time_budget); the last line names the updates
#                    reached and the UPDATES= that reruns them anywhere
#   UPDATES=N        train for N updates (default 2000 without MINUTES; wins over MINUTES)
#   VALIDATIONS=N    validation BLEU N times along the training (default 4; with MINUTES 1, at the
#                    end, under 20 minutes, else 3): with MINUTES all but the last are pauses the
#                    speed probe times and the recipe takes from the minutes before they buy updates
#   MODEL=w128|w256|w384  the recipe's model: fconv_iwslt_de_en (w256) or that 128 or 384 wide
#   ARCH=name        any other architecture instead (docs/your-data.md: "Choosing an architecture")
#   ARCH_ARGS="..."  extra model options, split at spaces, never globbed or evaluated
#   BPE_MERGES=N     subword-nmt merges        MAX_TOKENS=N  tokens per batch
#   DROPOUT=X        dropout                   LR=X          peak learning rate of Adam
#   SEED=N           training seed (default 1)
#   PRECISION=auto|fp32|bf16  training's arithmetic: auto (default) trains in bf16 (fairseq's
#                    --bf16: bfloat16 products, float32 weights) on a CPU with bfloat16 units
#                    (AMX-BF16 or AVX-512 BF16), else in fp32; translating is float32 either way
#   FCONV_ALLOCATOR=auto|tcmalloc|reuse|system  fairseq-train's memory: auto (default) starts it
#                    with tcmalloc preloaded where installed (faster), else glibc's heap kept
#   WORK_DIR=D       where everything goes (default runs/<date-time> beside this script);
#                    a WORK_DIR that exists and is not empty is refused, never wiped
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
moses="$repo/examples/bible_es_en/moses.py"
# shellcheck source=../lib/example.sh
source "$repo/examples/lib/example.sh" translate_your_data

[ $# -eq 5 ] || fail "usage: train.sh SRC TGT TRAIN VALID TEST (prefixes of PREFIX.SRC / PREFIX.TGT raw text)"
src=$1 tgt=$2
[ "$src" != "$tgt" ] || fail "source and target language must differ, got '$src' twice"
seed=${SEED:-1}
for knob in MAX_TOKENS BPE_MERGES SEED; do
    case "${!knob:-1}" in ''|*[!0-9]*) fail "$knob must be a whole number, got '${!knob}'";; esac
done
for knob in LR DROPOUT; do
    [[ "${!knob:-0.1}" =~ ^[0-9]*\.?[0-9]+$ ]] || fail "$knob must be a decimal number like 0.1, got '${!knob}'"
done
case "${MODEL:-w256}" in w128|w256|w384) ;; *) fail "MODEL must be w128, w256 or w384, got '$MODEL'";; esac
[ -z "${MODEL:-}" ] || [ -z "${ARCH:-}" ] || fail "MODEL and ARCH both name the model; set one"
choose_length 2000
# validation BLEU (greedy search) along the way, for the curve and checkpoint_best.pt; with MINUTES each
# but the one at the stop is a pause taken from training (about a minute for 1,000 sentences on one core),
# so by default only that one under 20 minutes (the learning rate annealed to 0 makes the last checkpoint
# the best), else 2 + the end
default_validations=4
if [ "$length" = minutes ]; then
    default_validations=3
    python -c "import sys; sys.exit(0 if float(sys.argv[1]) < 20 else 1)" "$minutes" && default_validations=1
fi
choose_validations "$default_validations"
pauses=0
[ "$length" = minutes ] && pauses=$(( validations - 1 ))
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
choose_allocator  # and FCONV_ALLOCATOR=tcmalloc where it is not installed
make_work_dir "$work"
for split in train valid test; do  # absolute paths before leaving for the work directory
    prefix[$split]=$(cd "$(dirname "${prefix[$split]}")" && pwd)/$(basename "${prefix[$split]}")
done
cd "$work"
say_budget
echo "recipe: chosen from the corpus and the $length (recipe.py, printed before training; knobs override); writing to $work"

recipe() {  # recipe STAGE options...: recipe.py's choices into the shell's variables
    read_recipe "$here/recipe.py" "merges model model_options max_tokens dropout lr expected_updates" "$@"
}

step "1/7 Moses tokenisation (fairseq's, as fairseq-interactive --tokenizer moses runs it)"
for split in train valid test; do
    for lang in "$src" "$tgt"; do
        python "$moses" tokenize "$lang" < "${prefix[$split]}.$lang" > "$split.tok.$lang" 2> "tokenise.$split.$lang.log" &
        track "tokenising ${prefix[$split]}.$lang" "$work/tokenise.$split.$lang.log"
    done
    wait_tracked
    echo "  $split: $(wc -l < "$split.tok.$src") sentence pairs"
done

recipe corpus . "$src" "$tgt" ${BPE_MERGES:+--merges "$BPE_MERGES"}

step "2/7 subword-nmt: joint BPE, $merges merges"
cat train.tok.$src train.tok.$tgt | subword-nmt learn-bpe -s "$merges" > codes 2> learn-bpe.log
for split in train valid test; do
    for lang in "$src" "$tgt"; do
        subword-nmt apply-bpe -c codes < "$split.tok.$lang" > "$split.bpe.$lang" 2> "apply-bpe.$split.$lang.log" &
        track "apply-bpe on $split.tok.$lang" "$work/apply-bpe.$split.$lang.log"
    done
    wait_tracked
done

step "3/7 fairseq-preprocess"
fairseq-preprocess --source-lang "$src" --target-lang "$tgt" --trainpref train.bpe --validpref valid.bpe \
    --testpref test.bpe --destdir data-bin --workers 2 > preprocess.log 2>&1 \
    || { tail -n 20 preprocess.log; fail "fairseq-preprocess failed (log: $work/preprocess.log)"; }
preprocess_summary preprocess.log

validating=(--skip-invalid-size-inputs-valid-test --eval-bleu --eval-bleu-args '{"beam": 1, "max_len_a": 1.2, "max_len_b": 10}'
            --eval-bleu-detok moses --eval-bleu-remove-bpe --best-checkpoint-metric bleu --maximize-best-checkpoint-metric)
objective=(--optimizer adam --adam-betas "(0.9, 0.98)" --clip-norm 0.1
           --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-source-positions 1024 --max-target-positions 1024)
model_knob=${MODEL:-${ARCH:-}}  # ARCH: any architecture, given; MODEL: one of the recipe's
knobs=(${model_knob:+--model "$model_knob"} ${MAX_TOKENS:+--max-tokens "$MAX_TOKENS"} ${DROPOUT:+--dropout "$DROPOUT"} ${LR:+--lr "$LR"})
if [ "$length" = minutes ]; then
    step "4/7 the speed probe: seconds per update of each candidate model on this data, $precision"
    shared=$(printf '%q ' "${objective[@]}" --max-tokens "${MAX_TOKENS:-3000}" --required-batch-size-multiple 1 --lr 0.003 "${train_precision[@]}")
    probing=()  # the validations inside the minutes: one timed per candidate, over 4 batches scaled to the set
    [ "$pauses" -gt 0 ] && probing=(--validation "$(printf '%q ' "${validating[@]}")" --validation-batches 4)
    : > probe.tsv
    probe_seconds_total=0
    while true; do  # the two narrowest candidates, then a wider one while the minutes could pay for it
        probe=()
        while IFS=$'\t' read -r name options; do
            probe+=("$name" "$options ${ARCH_ARGS:-} $shared")
        done < <(python "$here/recipe.py" candidates --minutes "$minutes" --probe probe.tsv --pauses "$pauses" \
                 ${model_knob:+--model "$model_knob"})
        [ ${#probe[@]} -gt 0 ] || break
        probe_speed data-bin "${probe[@]}" "${probing[@]}" >> probe.tsv
        probe_seconds_total=$(python -c "import sys; print(round(float(sys.argv[1]) + float(sys.argv[2]), 1))" "$probe_seconds_total" "$probe_seconds")
    done
    probe_seconds=$probe_seconds_total
    awk -F'\t' '{ printf "  %-18s %.3f s per update, %.1f M parameters%s\n", $1, $2, $3 / 1e6,
                   (NF > 3 ? sprintf(", %.1f s per validation and save", $4) : "") }' probe.tsv
    training_minutes
    echo "  the probe took ${probe_seconds} s: $train_minutes minutes are left for training"
    recipe model . "$src" "$tgt" --minutes "$train_minutes" --probe probe.tsv --probe-tokens "${MAX_TOKENS:-3000}" \
        --pauses "$pauses" "${knobs[@]}"
else
    recipe model . "$src" "$tgt" --updates "$updates" "${knobs[@]}"
fi
echo
echo "  the recipe (recipe.json; set a knob to override):"
python -c "import json
for name, choice in json.load(open('recipe.json')).items():
    print(f\"    {name + ':':18s}{str(choice['value']):>8}   {choice['why']}\")"
if [ "$length" = minutes ]; then
    updates=$expected_updates
    if [ "$pauses" -gt 0 ]; then
        [ "$updates" -gt "$pauses" ] || fail "MINUTES=$minutes buys ~$updates update(s) here beside $pauses validation(s)" \
            "along the way (the probe's figures above); give more minutes or fewer VALIDATIONS"
    else
        [ "$updates" -gt 0 ] || fail "MINUTES=$minutes buys no update here (the probe's figures above); give more minutes"
    fi
fi
read -r -a model_args <<< "$model_options ${ARCH_ARGS:-}"
length_options 6

validate_every=$(( (updates + validations - 1) / validations ))
validation_plan="validation BLEU every $validate_every"
if [ "$validations" = 1 ]; then
    validate_every=1000000 validation_plan="validation BLEU at the end"  # fairseq validates and saves when the budget stops it
fi
progress_interval
if [ "$length" = minutes ]; then
    plan="$train_minutes minutes (~$updates updates), learning rate annealed to 0 as they run out"
else
    plan="$updates updates"
fi
step "5/7 fairseq-train $model: $plan, $precision (progress every $log_every, $validation_plan)"
"${training_env[@]}" fairseq-train data-bin --user-dir "$repo/fconv_plugin" "${model_args[@]}" "${train_precision[@]}" "${objective[@]}" \
    --lr "$lr" --dropout "$dropout" "${length_args[@]}" --max-tokens "$max_tokens" --seed "$seed" \
    --required-batch-size-multiple 1 --max-tokens-valid "$max_tokens" "${validating[@]}" \
    --validate-interval-updates "$validate_every" --save-interval-updates "$validate_every" --keep-interval-updates 1 \
    --no-epoch-checkpoints --save-dir checkpoints --validate-interval 1000000 \
    --log-format simple --log-interval "$log_every" 2>&1 | tee train.log | training_progress || true
grep -q "done training" train.log || { tail -n 20 train.log; fail "fairseq-train failed (log: $work/train.log)"; }
reached=$(updates_reached train.log)
[ "$length" = minutes ] && echo "  $(budget_outcome checkpoints "$expected_updates")"

test_lines=$(wc -l < test.tok.$src)
step "6/7 fairseq-generate --beam 5 on $test_lines test sentences, detokenise, sacreBLEU"
generate_test checkpoints/checkpoint_best.pt "$test_lines" "$tgt" python "$moses" detokenize "$tgt"
# BLEU's tokenizer as the field reports the target language (13a; zh, ja-mecab, ko-mecab; char where a package is missing)
IFS=$'\t' read -r bleu_tok bleu_tok_why < <(python "$repo/examples/lib/bleu_tokenizer.py" "$tgt")
bleu=$(sacrebleu "${prefix[test]}.$tgt" -i test.hyp.$tgt -m bleu -tok "$bleu_tok" -b -w 2)
chrf=$(sacrebleu "${prefix[test]}.$tgt" -i test.hyp.$tgt -m chrf -b -w 2)
copy_bleu=$(sacrebleu "${prefix[test]}.$tgt" -i "${prefix[test]}.$src" -m bleu -tok "$bleu_tok" -b -w 2)
copy_chrf=$(sacrebleu "${prefix[test]}.$tgt" -i "${prefix[test]}.$src" -m chrf -b -w 2)
echo "  sacreBLEU $bleu, chrF $chrf (detokenised output against ${prefix[test]}.$tgt; BLEU's tokenizer $bleu_tok: $bleu_tok_why)"
echo "  baseline, copy the source: sacreBLEU $copy_bleu, chrF $copy_chrf"

step "7/7 outputs"
echo "  model: $work/checkpoints/checkpoint_best.pt   dictionaries: $work/data-bin   BPE codes: $work/codes"
echo "  test translations: $work/test.hyp.$tgt   logs: $work/{preprocess,train,generate}.log   recipe: $work/recipe.json"
echo "  translate new text:"
echo "    fairseq-interactive $work/data-bin --user-dir $repo/fconv_plugin --path $work/checkpoints/checkpoint_best.pt \\"
echo "        --source-lang $src --target-lang $tgt --beam 5 --tokenizer moses --bpe subword_nmt --bpe-codes $work/codes"
model_knob_name=MODEL
[ -n "${ARCH:-}" ] && model_knob_name=ARCH
rerun="UPDATES=$reached $model_knob_name=$model BPE_MERGES=$merges MAX_TOKENS=$max_tokens DROPOUT=$dropout LR=$lr"
[ "$length" = minutes ] && echo "  to rerun it anywhere by updates: $rerun bash $0 ..."
echo
echo "translate_your_data finished in $(( $(date +%s) - start )) s: $model, $reached updates${minutes:+ in $train_minutes minutes ($rerun reruns them)}, $precision, BLEU $bleu chrF $chrf"
