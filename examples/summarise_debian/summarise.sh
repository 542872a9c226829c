#!/usr/bin/env bash
# Abstractive summarisation with ConvS2S, end to end on a CPU: Debian package
# descriptions -> their one-line synopses (the paper's second task, §5.4), or any
# document -> summary pairs (CORPUS=; data/ also ships Python docstrings and Perl manuals).
#
#   shipped pairs -> split by group (source package), Moses tokenisation, lower case
#   -> the recipe chosen from the training split's statistics (recipe.py: source cut,
#      BPE merges, --max-len-b, updates; printed in one block before training)
#   -> subword-nmt BPE (joint) -> fairseq-preprocess --joined-dictionary
#   -> fairseq-train --user-dir fconv_plugin --arch fconv_gigaword_copy (a fixed number
#      of updates; the decoder can copy source words) -> training curve, and the kept
#      checkpoint with the best validation ROUGE-L
#   -> generation settings chosen on the validation set -> fairseq-generate on the
#      test set -> ROUGE (rouge-score) and the copy rate, next to lead baselines
#
# Knobs (environment variables); docs/summarisation.md has the measurements behind the defaults.
# UPDATES, MERGES, SOURCE_WORDS and MAX_LEN_B are chosen from the corpus unless set:
#   UPDATES=N    training updates (default: ~10 epochs, 600 to 2300: 15 minutes on 2 cores)
#   MINUTES=N    train for N minutes instead (a speed probe's seconds included), the learning rate
#                annealed to 0 as they run out (fairseq-train --lr-scheduler time_budget); the last
#                line names the updates reached and the UPDATES= that reruns them; UPDATES wins
#   PRECISION=auto|fp32|bf16  training's arithmetic: auto (default) trains in bf16 (fairseq's
#                --bf16: bfloat16 products, float32 weights) on a CPU with bfloat16 units
#                (AMX-BF16 or AVX-512 BF16), else in fp32; summarising is float32 either way
#   FCONV_ALLOCATOR=auto|tcmalloc|reuse|system  fairseq-train's memory: auto (default) starts it
#                with tcmalloc preloaded where installed (faster), else glibc's heap kept
#   ARCH=NAME    fconv_gigaword_copy (default: copies source words) or fconv_gigaword
#   MODEL="..."  layer and embedding options (default: 4 + 4 layers of 128, which beat the
#                paper's 6 + 6 of 256 here; MODEL= for the architecture's own sizes)
#   MERGES=N     BPE merges (default: word types seen 10+ times)   MAX_LEN_B=N  longest summary, BPE tokens
#   SOURCE_WORDS=N  document tokens kept (default: 6 x the median summary, 20 to 400)
#   LR=X DROPOUT=X SMOOTHING=X   Adam's peak learning rate, dropout, label smoothing
#                (defaults 0.006, 0.1, 0.1)    MAX_TOKENS=N  tokens per batch (default 4000)
#   GENERATION="--min-len 4 ..."  fixed generation options instead of the validation search
#   CURVE=0      no training curve (recipe_search.sh: it costs a greedy decode per checkpoint);
#                the checkpoint is then the one with the best validation loss
#   CHECKPOINT=rouge-l|loss|last   the checkpoint summarised with: the best validation ROUGE-L
#                on the curve (default), the lowest validation loss, or the last
#   CORPUS=F     another corpus in the same TSV form (group <TAB> summary <TAB> document, .xz), e.g.
#                data/docstrings.tsv.xz or data/perl_manuals.tsv.xz (corpora/ builds them)
#   WORK_DIR=D   where everything is written (default: runs/<date-time> beside this
#                script); a WORK_DIR that exists and is not empty is refused, never wiped
#   SEED=N       training seed (default 1)
#   VALID=N TEST=N   held-out pairs (defaults 500 and 1500; tests use fewer)
#   ARCH_ARGS="..."  extra model options, split at spaces, never globbed or evaluated
#                (tests use a tiny model: "--encoder-layers [(32,3)]*2 ...")
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
arch=${ARCH:-fconv_gigaword_copy}
model=${MODEL-"--encoder-layers [(128,3)]*4 --decoder-layers [(128,3)]*4 --encoder-embed-dim 128 --decoder-embed-dim 128 --decoder-out-embed-dim 128"}
lr=${LR:-0.006}
dropout=${DROPOUT:-0.1}
smoothing=${SMOOTHING:-0.1}
max_tokens=${MAX_TOKENS:-4000}
seed=${SEED:-1}
n_valid=${VALID:-500}
n_test=${TEST:-1500}
corpus=${CORPUS:-$here/data/descriptions.tsv.xz}
work=${WORK_DIR:-$here/runs/$(date +%Y%m%d-%H%M%S)}
# shellcheck source=../lib/example.sh
source "$repo/examples/lib/example.sh" summarise

for knob in SEED VALID TEST MERGES SOURCE_WORDS MAX_LEN_B MAX_TOKENS; do
    value=${!knob:-1}
    case "$value" in ''|*[!0-9]*) fail "$knob must be a whole number, got '$value'";; esac
done
for knob in LR DROPOUT SMOOTHING; do
    value=${!knob:-0.1}
    [[ "$value" =~ ^[0-9]*\.?[0-9]+$ ]] || fail "$knob must be a decimal number like 0.1, got '$value'"
done
case "$arch" in fconv_gigaword|fconv_gigaword_copy) ;; *) fail "ARCH must be fconv_gigaword_copy or fconv_gigaword, got '$arch'";; esac
checkpoint_rule=${CHECKPOINT:-rouge-l}
case "$checkpoint_rule" in rouge-l|loss|last) ;; *) fail "CHECKPOINT must be rouge-l, loss or last, got '$checkpoint_rule'";; esac
choose_length ""  # UPDATES, MINUTES, or (neither) the recipe's updates
choose_precision  # before anything is written: PRECISION=bf16 on a CPU without the units stops here
choose_allocator  # and FCONV_ALLOCATOR=tcmalloc where it is not installed
make_work_dir "$work" && cd "$work"
say_budget
echo "recipe: $arch, chosen from the corpus (recipe.py, printed before training; knobs override); writing to $work"

recipe() {  # recipe STAGE options...: recipe.py's choices into the shell's variables
    read_recipe "$here/recipe.py" "source_words merges max_summary_tokens updates" "$@" --max-tokens "$max_tokens"
}

step "1/7 split by group (Debian: source package), tokenise (fairseq's --tokenizer moses), lower-case"
python "$here/prepare.py" "$corpus" . --valid "$n_valid" --test "$n_test" 2> prepare.log \
    || fail "$(tail -n 1 prepare.log) (the whole log: $work/prepare.log)"
recipe words . ${SOURCE_WORDS:+--source-words "$SOURCE_WORDS"} ${MERGES:+--merges "$MERGES"}

step "2/7 subword-nmt joint BPE ($merges merges), fairseq-preprocess --joined-dictionary"
cat train.desc train.syn | subword-nmt learn-bpe -s "$merges" > codes 2> learn-bpe.log
for split in train valid test; do
    for side in desc syn; do
        subword-nmt apply-bpe -c codes < "$split.$side" > "$split.bpe.$side" 2> "apply-bpe.$split.$side.log" &
        track "apply-bpe on $split.$side" "$work/apply-bpe.$split.$side.log"
    done
    wait_tracked
done
fairseq-preprocess --source-lang desc --target-lang syn --trainpref train.bpe --validpref valid.bpe \
    --testpref test.bpe --destdir data-bin --joined-dictionary --thresholdsrc 2 --workers 2 \
    > preprocess.log 2>&1 || { tail -n 20 preprocess.log; fail "fairseq-preprocess failed"; }
grep -E "\] (Dictionary|train\.bpe)" preprocess.log | sed "s/^.*preprocess://" | head -n 3
recipe bpe . ${MAX_LEN_B:+--max-len-b "$MAX_LEN_B"} ${UPDATES:+--updates "$UPDATES"}
read -r -a arch_args <<< "$model ${ARCH_ARGS:-}"
objective=(--optimizer adam --adam-betas '(0.9, 0.98)' --clip-norm 0.1 --lr "$lr"
           --criterion label_smoothed_cross_entropy --label-smoothing "$smoothing" --dropout "$dropout")
# the curve's points: a loss-only validation and a kept checkpoint every 1/validations of the updates, the last at the
# end; with MINUTES all but that last one pause inside the budget
validations=4
pauses=$(( validations - 1 ))
if [ "$length" = minutes ]; then
    probe_speed data-bin "$arch" "$(printf '%q ' --arch "$arch" "${arch_args[@]}" "${objective[@]}" --max-tokens "$max_tokens" \
        --required-batch-size-multiple 1 "${train_precision[@]}")" --validation "" > probe.tsv  # loss-only validations
    training_minutes
    updates=$(updates_that_fit "$train_minutes" "$(cut -f2 probe.tsv)" "$pauses" "$(cut -f4 probe.tsv)")
    python -c "import json, sys
r = json.load(open('recipe.json'))
r['updates'] = {'value': int(sys.argv[1]), 'why': f'what MINUTES={sys.argv[2]} buy: {sys.argv[3]} minutes of training after the speed probe, at {sys.argv[4]} s per update beside {sys.argv[6]} validations of {sys.argv[5]} s each'}
json.dump(r, open('recipe.json', 'w'), indent=1)" "$updates" "$minutes" "$train_minutes" "$(cut -f2 probe.tsv)" "$(cut -f4 probe.tsv)" \
        "$pauses"
fi
length_options 8
progress_interval
validate_every=$(( (updates + validations - 1) / validations ))
echo
echo "  the recipe, chosen from this corpus's training split (recipe.json; set a knob to override):"
python -c "import json, sys
for name, choice in json.load(open('recipe.json')).items():
    print(f\"    {name + ':':16s}{choice['value']:>7}   {choice['why']}\")"

if [ "$length" = minutes ]; then
    plan="$train_minutes minutes (~$updates updates), the learning rate annealed to 0 as they run out"
else
    plan="$updates updates"
fi
step "3/7 fairseq-train --arch $arch: $plan, $precision (progress every $log_every)"
train_start=$(date +%s)
"${training_env[@]}" fairseq-train data-bin --user-dir "$repo/fconv_plugin" --arch "$arch" "${arch_args[@]}" "${objective[@]}" \
    "${length_args[@]}" "${train_precision[@]}" --max-tokens "$max_tokens" --seed "$seed" --required-batch-size-multiple 1 \
    --validate-interval-updates "$validate_every" --save-interval-updates "$validate_every" \
    --keep-interval-updates "$validations" --no-epoch-checkpoints --save-dir checkpoints --validate-interval 1000 \
    --log-format simple --log-interval "$log_every" 2>&1 | tee train.log | training_progress || true
grep -q "done training" train.log || fail "fairseq-train failed (log: $work/train.log)"
train_seconds=$(( $(date +%s) - train_start ))
expected_updates=$updates
updates=$(updates_reached train.log)
[ "$length" = minutes ] && echo "  $(budget_outcome checkpoints "$expected_updates" "$(cut -f2 probe.tsv)")"

generate() {  # [checkpoint=C] generate SUBSET OUT extra-options...: detokenised summaries, one per line, in order
    local subset=$1 out=$2
    shift 2
    fairseq-generate data-bin --user-dir "$repo/fconv_plugin" --path "${checkpoint:-$chosen_checkpoint}" \
        --gen-subset "$subset" --beam 5 --remove-bpe --max-tokens 8000 --max-len-b "$max_summary_tokens" \
        --required-batch-size-multiple 1 "$@" \
        > "$out.generate" 2> "$out.log" || { tail -n 20 "$out.log"; fail "fairseq-generate failed (log: $work/$out.log)"; }
    grep '^H-' "$out.generate" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 \
        | python "$repo/examples/bible_es_en/moses.py" detokenize en > "$out" 2>/dev/null
    # fairseq drops a last batch smaller than --required-batch-size-multiple (issue #5036)
    [ "$(wc -l < "$out")" -eq "$(wc -l < "$subset.syn")" ] \
        || fail "fairseq-generate summarised $(wc -l < "$out") of $(wc -l < "$subset.syn") $subset pairs"
}

rouge_l_of() {  # rouge_l_of HYPOTHESES: ROUGE-L F1 on the validation pairs
    python "$here/score.py" valid.raw.syn "$1" --json | python -c "import json, sys; print(round(json.load(sys.stdin)['rougeL_f1'], 2))"
}

chosen_checkpoint=checkpoints/checkpoint_best.pt
[ "$checkpoint_rule" = last ] && chosen_checkpoint=checkpoints/checkpoint_last.pt
if [ "${CURVE:-1}" = 0 ]; then
step "4/7 the training curve: skipped (CURVE=0); the checkpoint: $chosen_checkpoint"
else
step "4/7 the training curve: greedy ROUGE-L of each kept checkpoint on the validation pairs"
: > curve.tsv
declare -A kept_at=()
for kept in checkpoints/checkpoint_[0-9]*_[0-9]*.pt; do
    [ -e "$kept" ] || continue
    at=${kept##*_} at=${at%.pt}
    kept_at[$at]=$kept
done
[ -n "${kept_at[$updates]:-}" ] || kept_at[$updates]=checkpoints/checkpoint_last.pt  # training stops at --max-update
# (an interval that ends an epoch is saved under the epoch's name, which --no-epoch-checkpoints
# drops: fairseq's checkpoint_utils; the curve then has three points)
for at in "${!kept_at[@]}"; do
    checkpoint=${kept_at[$at]} generate valid valid.curve.hyp --beam 1  # the later --beam wins
    rouge_l=$(rouge_l_of valid.curve.hyp)
    printf '%s\t%s\n' "$at" "$rouge_l" >> curve.tsv
done
sort -n -o curve.tsv curve.tsv
sed 's/^/  updates /; s/\t/: ROUGE-L F1 /' curve.tsv
# the best validation ROUGE-L (the later checkpoint on a tie), not the last or the lowest loss
best_at=$(sort -t$'\t' -k2,2g -k1,1n curve.tsv | tail -n 1 | cut -f1)
if [ "$checkpoint_rule" = rouge-l ]; then
    chosen_checkpoint=${kept_at[$best_at]}
    echo "  chosen: the checkpoint after $best_at updates ($chosen_checkpoint)"
else
    echo "  chosen: $chosen_checkpoint (CHECKPOINT=$checkpoint_rule; the best ROUGE-L was after $best_at updates)"
fi
python "$here/plot_training.py" train.log curve.tsv training.png "$arch, $updates updates" | sed 's/^/  /'
fi

if [ -n "${GENERATION:-}" ]; then
step "5/7 generation settings: GENERATION=\"$GENERATION\" (no search)"
best_setting=$GENERATION
# shellcheck disable=SC2086
generate valid valid.hyp $best_setting
best_rouge_l=$(rouge_l_of valid.hyp)
echo "  validation ROUGE-L F1 $best_rouge_l"
else
step "5/7 generation settings, chosen by ROUGE-L F1 on the $(wc -l < valid.syn) validation pairs"
best_setting="" best_rouge_l=-1
for min_len in 1 4; do
    for no_repeat in 0 2; do
        for lenpen in 1.0 1.5; do
            setting="--min-len $min_len --no-repeat-ngram-size $no_repeat --lenpen $lenpen"
            # shellcheck disable=SC2086
            generate valid "valid.hyp" $setting
            rouge_l=$(rouge_l_of valid.hyp)
            printf '  %-52s ROUGE-L F1 %s\n' "$setting" "$rouge_l"
            if python -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)" "$rouge_l" "$best_rouge_l"; then
                best_setting=$setting best_rouge_l=$rouge_l
            fi
        done
    done
done
echo "  chosen: $best_setting"
fi

step "6/7 fairseq-generate --beam 5 $best_setting on $(wc -l < test.syn) test pairs, ROUGE"
# shellcheck disable=SC2086
generate test test.hyp $best_setting
# a hypothesis of --max-len-b tokens may have been cut there (fairseq ends it with </s>): say how many
capped=$(awk -F'\t' -v limit="$max_summary_tokens" '/^P-/ { if (split($2, s, " ") - 1 >= limit) n++ } END { print n + 0 }' \
    test.hyp.generate)
echo "  $capped of $(wc -l < test.hyp) test summaries reached the $max_summary_tokens-token limit (--max-len-b) and may be cut there"
typical=$(python -c "import statistics; print(round(statistics.median(len(l.split()) for l in open('train.syn'))))")
copying=(--copy-from test.raw.desc --frequent-words train.syn train.desc)
model=$(python "$here/score.py" test.raw.syn test.hyp "${copying[@]}" --json)
lead=$(python "$here/score.py" test.raw.syn --lead "$typical" test.raw.desc "${copying[@]}" --json)
first=$(python "$here/score.py" test.raw.syn --first "$typical" test.raw.desc "${copying[@]}" --json)
python - "$model" "$lead" "$first" "$typical" "$arch" <<'EOF'
import json, sys
model, lead, first = (json.loads(a) for a in sys.argv[1:4])
n, arch = sys.argv[4:6]
print(f"{'':44s} ROUGE-1/2/L F1        75-byte recall R-1/2/L   rare source words copied")
for name, s in ((f"{arch} (beam 5)", model), (f"lead: first sentence cut to {n} words", lead),
                (f"first {n} words", first)):
    print(f"  {name:42s} {s['rouge1_f1']:5.2f}/{s['rouge2_f1']:5.2f}/{s['rougeL_f1']:5.2f}"
          f"     {s['rouge1_r75']:5.2f}/{s['rouge2_r75']:5.2f}/{s['rougeL_r75']:5.2f}     {s['copy_rate']:5.1f}%")
EOF
echo
echo "examples (every 300th test pair):"
for n in 1 301 601 901 1201; do
    [ "$n" -le "$(wc -l < test.hyp)" ] || break
    printf '  document: %.160s...\n  summary:  %s\n  model:    %s\n\n' "$(sed -n "${n}p" test.raw.desc)" \
        "$(sed -n "${n}p" test.raw.syn)" "$(sed -n "${n}p" test.hyp)"
done

python - "$model" "$lead" "$first" "$arch" "$updates" "$train_seconds" "$best_rouge_l" "$best_setting" \
    "$chosen_checkpoint" > results.json <<'EOF'
import json, sys
model, lead, first = (json.loads(a) for a in sys.argv[1:4])
arch, updates, seconds, valid_rouge_l, generation, checkpoint = sys.argv[4:10]
recipe = {name: choice["value"] for name, choice in json.load(open("recipe.json")).items()}
json.dump({"arch": arch, "updates": int(updates), "train_seconds": int(seconds), "valid_rougeL_f1": float(valid_rouge_l),
           "generation": generation, "checkpoint": checkpoint, "recipe": recipe,
           "model": model, "lead": lead, "first": first}, sys.stdout, indent=1)
EOF

step "7/7 outputs"
echo "  model: $work/$chosen_checkpoint   summaries: $work/test.hyp   logs: $work/*.log"
echo "  training curve: $work/training.png"
echo "  scores: $work/results.json"
echo
f1() { python -c "import json, sys; s = json.loads(sys.argv[1]); print('/'.join(f'{s[m]:.2f}' for m in ('rouge1_f1', 'rouge2_f1', 'rougeL_f1')))" "$1"; }
trained="$updates updates"
[ "$length" = minutes ] && trained="$updates updates in $train_minutes minutes (UPDATES=$updates reruns them anywhere)"
echo "summarisation finished in $(( $(date +%s) - start )) s, trained in $precision for $trained: ROUGE-1/2/L F1 $(f1 "$model") vs lead $(f1 "$lead")"
