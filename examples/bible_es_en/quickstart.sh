#!/usr/bin/env bash
# Quickstart: Spanish -> English ConvS2S on a real parallel corpus, end to end on a CPU.
#
#   raw verses -> Moses tokenisation (fairseq's own --tokenizer moses) -> subword-nmt BPE
#   -> fairseq-preprocess -> fairseq-train --user-dir fconv_plugin (a number of updates, or of
#   minutes) -> training curve PNG -> fairseq-generate --beam 5 -> detokenise
#   -> sacreBLEU and chrF next to a copy-the-source baseline -> fairseq-interactive
#
# Data: the Reina-Valera 1909 and King James Bibles (both public domain), aligned by
# verse, shipped in data/ (see make_corpus.py for where they come from).
#
# Knobs (environment variables):
#   UPDATES=N    training updates (default 600; see docs/quickstart.md for BLEU at other settings)
#   MINUTES=N    train for N minutes instead (a speed probe's seconds included), the learning rate
#                annealed to 0 as they run out (fairseq-train --lr-scheduler time_budget); the
#                last line names the updates reached and the UPDATES= that reruns them anywhere;
#                UPDATES wins when both are given
#   RECIPE=adam|nag  adam (default): Adam, learning rate warmed up, then decayed linearly
#                to 0 at the last update, label smoothing 0.1. nag: the paper's recipe
#                (NAG, momentum 0.99, lr 0.25 shrunk on plateau); slower to start, see docs/quickstart.md
#   WORK_DIR=D   where everything is written (default: runs/<date-time> beside this
#                script); a WORK_DIR that exists and is not empty is refused, never wiped
#   SEED=N       training seed (default 1)
#   VALIDATIONS=N  validation BLEU N times along the training (default 4; the curve's points)
#   EVALUATE=0   stop after training and its curve, validating once, at the last update (VALIDATIONS=N:
#                N times)
#                (the benchmarks' --quick runs; default 1)
#   VALID=N TEST=N  held-out verse pairs (defaults 300 and 500; the benchmarks' --quick
#                runs hold out fewer, so that what reads the test verses is quick too)
#   TRAIN=N      train on N verse pairs spread evenly over the Bible (default: all of them,
#                29,409; the benchmarks' --quick runs take 2000, so that preparing them is quick)
#   PRECISION=auto|fp32|bf16  training's arithmetic: auto (default) trains in bf16 (fairseq's
#                --bf16: bfloat16 products, float32 weights) on a CPU with bfloat16 units
#                (AMX-BF16 or AVX-512 BF16), else in fp32; translating is float32 either way
#   FCONV_ALLOCATOR=auto|tcmalloc|reuse|system  fairseq-train's memory: auto (default) starts it
#                with tcmalloc preloaded where installed (faster), else glibc's heap kept
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
recipe=${RECIPE:-adam}
seed=${SEED:-1}
evaluate=${EVALUATE:-1}
valid=${VALID:-300}
test=${TEST:-500}
train=${TRAIN:-}
work=${WORK_DIR:-$here/runs/$(date +%Y%m%d-%H%M%S)}
# shellcheck source=../lib/example.sh
source "$repo/examples/lib/example.sh" quickstart

choose_length 600
case "$seed" in ''|*[!0-9]*) fail "SEED must be a whole number, got '$seed'";; esac
case "$evaluate" in 0|1) ;; *) fail "EVALUATE must be 0 or 1, got '$evaluate'";; esac
choose_validations 4
case "$valid" in ''|*[!0-9]*|0) fail "VALID must be a whole number of verse pairs above 0, got '$valid'";; esac
case "$test" in ''|*[!0-9]*|0) fail "TEST must be a whole number of verse pairs above 0, got '$test'";; esac
case "$train" in '') ;; *[!0-9]*|0) fail "TRAIN must be a whole number of verse pairs above 0, got '$train'";; esac
case "$recipe" in
    adam) optimiser=(--optimizer adam --adam-betas "(0.9, 0.98)" --clip-norm 0.1 --lr 0.003 --dropout 0.1
                     --criterion label_smoothed_cross_entropy --label-smoothing 0.1)
          recipe_text="adam: Adam, lr 0.003 warmed up over the first sixth, then decayed linearly to 0 at the end; dropout 0.1, label smoothing 0.1" ;;
    nag) [ "$length" = updates ] || fail "MINUTES needs RECIPE=adam (RECIPE=nag shrinks its learning rate on plateaus, not by the clock)"
         optimiser=(--optimizer nag --momentum 0.99 --clip-norm 0.1 --lr 0.25
                    --lr-scheduler reduce_lr_on_plateau --lr-shrink 0.1 --dropout 0.2 --max-update "$updates")
         recipe_text="nag: the paper's NAG, momentum 0.99, lr 0.25 shrunk on plateaus; dropout 0.2" ;;
    *) fail "RECIPE must be adam or nag, got '$recipe'" ;;
esac
choose_precision  # before anything is written: PRECISION=bf16 on a CPU without the units stops here
choose_allocator  # and FCONV_ALLOCATOR=tcmalloc where it is not installed
make_work_dir "$work" && cd "$work" && work=$(pwd)
# runs/latest names the newest run kept beside this script (not one written elsewhere)
case "$work" in "$here/runs/"*) ln -sfn "$work" "$here/runs/latest" 2>/dev/null || true ;; esac
say_budget
echo "recipe: fconv_iwslt_de_en, $recipe_text; writing to $work"

step "1/8 corpus: split the verse pairs into train / valid / test"
python "$here/split_corpus.py" "$here/data" . --valid "$valid" --test "$test" --max-words 50 ${train:+--train "$train"}

step "2/8 Moses tokenisation (the tokenizer fairseq-interactive --tokenizer moses runs)"
for split in train valid test; do
    for lang in es en; do
        python "$here/moses.py" tokenize "$lang" < "$split.raw.$lang" > "$split.tok.$lang" 2> "tokenise.$split.$lang.log" &
        track "tokenising $split.raw.$lang" "$work/tokenise.$split.$lang.log"
    done
    wait_tracked
done

step "3/8 subword-nmt: joint BPE, 8000 merges"
cat train.tok.es train.tok.en | subword-nmt learn-bpe -s 8000 > codes 2> learn-bpe.log
for split in train valid test; do
    for lang in es en; do
        subword-nmt apply-bpe -c codes < "$split.tok.$lang" > "$split.bpe.$lang" 2> "apply-bpe.$split.$lang.log" &
        track "apply-bpe on $split.tok.$lang" "$work/apply-bpe.$split.$lang.log"
    done
    wait_tracked
done

step "4/8 fairseq-preprocess"
fairseq-preprocess --source-lang es --target-lang en --trainpref train.bpe --validpref valid.bpe \
    --testpref test.bpe --destdir data-bin --workers 2 --thresholdsrc 2 --thresholdtgt 2 > preprocess.log 2>&1 \
    || { tail -n 20 preprocess.log; fail "fairseq-preprocess failed (log: $work/preprocess.log)"; }
preprocess_summary preprocess.log

model=(--arch fconv_iwslt_de_en --max-tokens 3000 --required-batch-size-multiple 1)
# validation BLEU with greedy search, for the curve and checkpoint_best.pt
validating=(--eval-bleu --eval-bleu-args '{"beam": 1, "max_len_a": 1.2, "max_len_b": 10}' --eval-bleu-detok moses
            --eval-bleu-remove-bpe --best-checkpoint-metric bleu --maximize-best-checkpoint-metric)
# the validations inside a MINUTES budget: all but the one at the stop (EVALUATE=0 alone: only that one)
pauses=$(( validations - 1 ))
[ "$evaluate" = 0 ] && [ -z "${VALIDATIONS:-}" ] && pauses=0
if [ "$length" = minutes ]; then
    probing=()  # a validation inside the minutes is timed too
    [ "$pauses" -gt 0 ] && probing=(--validation "$(printf '%q ' "${validating[@]}")")
    probe_speed data-bin fconv_iwslt_de_en "$(printf '%q ' "${model[@]}" "${optimiser[@]}" "${train_precision[@]}")" \
        "${probing[@]}" > probe.tsv
    training_minutes
    updates=$(updates_that_fit "$train_minutes" "$(cut -f2 probe.tsv)" "$pauses" "$(cut -f4 probe.tsv)")
    if [ "$pauses" -gt 0 ]; then
        [ "$updates" -gt "$pauses" ] || fail "MINUTES=$minutes buys ~$updates update(s) here beside $pauses validation(s)" \
            "of $(cut -f4 probe.tsv) s each; give more minutes or fewer VALIDATIONS"
        echo "  the speed probe: $(cut -f2 probe.tsv) s per update here and $(cut -f4 probe.tsv) s per validation and save, in" \
            "${probe_seconds} s; $train_minutes minutes left buy ~$updates updates and $pauses validation(s) before the last"
    else
        echo "  the speed probe: $(cut -f2 probe.tsv) s per update here, in ${probe_seconds} s; $train_minutes minutes left buy ~$updates updates"
    fi
fi
[ "$recipe" = adam ] && length_options 6 || length_args=()
progress_interval
validate_every=$(( (updates + validations - 1) / validations ))
# EVALUATE=0 without VALIDATIONS: one validation, at the end (it picks checkpoint_best.pt)
[ "$evaluate" = 0 ] && [ -z "${VALIDATIONS:-}" ] && validate_every=$updates
if [ "$length" = minutes ]; then
    plan="$train_minutes minutes (~$updates updates), the learning rate annealed to 0 as they run out"
else
    plan="$updates updates"
fi
step "5/8 fairseq-train --user-dir fconv_plugin --arch fconv_iwslt_de_en: $plan, recipe $recipe, $precision
    (progress every $log_every updates, validation BLEU every $validate_every)"
"${training_env[@]}" fairseq-train data-bin --user-dir "$repo/fconv_plugin" "${model[@]}" "${optimiser[@]}" "${length_args[@]}" "${train_precision[@]}" \
    --seed "$seed" \
    --validate-interval-updates "$validate_every" --save-interval-updates "$validate_every" --keep-interval-updates 1 \
    --no-epoch-checkpoints --save-dir checkpoints \
    "${validating[@]}" --validate-interval 1000 --log-format simple --log-interval "$log_every" 2>&1 | tee train.log | training_progress || true
grep -q "done training" train.log || fail "fairseq-train failed (log: $work/train.log)"
reached=$(updates_reached train.log)
trained="$reached updates"
if [ "$length" = minutes ]; then
    trained="$reached updates in $train_minutes minutes (UPDATES=$reached reruns them anywhere)"
    echo "  $(budget_outcome checkpoints "$updates" "$(cut -f2 probe.tsv)")"
fi
python "$here/plot_training.py" train.log training.png "fconv_iwslt_de_en, Bible es-en, $trained, $recipe, $precision"

if [ "$evaluate" = 0 ]; then
    echo "trained in $precision for $trained (EVALUATE=0: not evaluated): $work/checkpoints/checkpoint_best.pt"
    exit 0
fi
test_verses=$(wc -l < test.raw.es)
step "6/8 fairseq-generate --beam 5 on $test_verses held-out verses, detokenise, score"
generate_test checkpoints/checkpoint_best.pt "$test_verses" en python "$here/moses.py" detokenize en
grep -E "Translated" generate.log | sed 's/^.*generate://' || true
model_bleu=$(sacrebleu test.raw.en -i test.hyp.en -m bleu -b -w 2)
model_chrf=$(sacrebleu test.raw.en -i test.hyp.en -m chrf -b -w 2)
copy_bleu=$(sacrebleu test.raw.en -i test.raw.es -m bleu -b -w 2)
copy_chrf=$(sacrebleu test.raw.en -i test.raw.es -m chrf -b -w 2)
echo
echo "on $test_verses held-out verses:            sacreBLEU   chrF"
printf '  %-37s %6s %6s\n' "fconv_plugin (beam 5)" "$model_bleu" "$model_chrf" \
    "baseline: copy the Spanish source" "$copy_bleu" "$copy_chrf"
echo
stride=$(( test_verses >= 5 ? test_verses / 5 : 1 ))
echo "examples (one test verse in $stride):"
for n in $(seq 1 "$stride" "$test_verses" | head -n 5); do
    printf '  es:  %s\n  ref: %s\n  hyp: %s\n\n' "$(sed -n "${n}p" test.raw.es)" "$(sed -n "${n}p" test.raw.en)" \
        "$(sed -n "${n}p" test.hyp.en)"
done

step "7/8 fairseq-interactive on raw sentences (moses tokenizer + subword-nmt BPE)"
printf '%s\n' "Y dijo Dios: Sea la luz: y fué la luz." "El Señor es mi pastor; nada me faltará." \
    "Porque de tal manera amó Dios al mundo, que ha dado á su Hijo unigénito." > interactive.in
fairseq-interactive data-bin --user-dir "$repo/fconv_plugin" --path checkpoints/checkpoint_best.pt \
    --source-lang es --target-lang en --beam 5 \
    --tokenizer moses --bpe subword_nmt --bpe-codes codes < interactive.in 2> interactive.log > interactive.out \
    || { tail -n 20 interactive.log; fail "fairseq-interactive failed (log: $work/interactive.log)"; }
grep '^D-' interactive.out | sed 's/^D-//' | sort -n -k1,1 | cut -f3 \
    | paste -d '\n' <(sed 's/^/  es:  /' interactive.in) <(sed 's/^/  en:  /') <(sed 's/.*//' interactive.in)

step "8/8 outputs"
echo "  curve: $work/training.png   model: $work/checkpoints/checkpoint_best.pt"
echo "  translations: $work/test.hyp.en   logs: $work/{train,generate,interactive}.log"
echo
echo "quickstart finished in $(( $(date +%s) - start )) s, trained in $precision for $trained: BLEU $model_bleu vs copy baseline $copy_bleu"
python -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) + 3 else 'the model did not beat the baseline')" \
    "$model_bleu" "$copy_bleu"
