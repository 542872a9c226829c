#!/usr/bin/env bash
# Quickstart: Spanish -> English ConvS2S on a real parallel corpus, end to end on a CPU.
#
#   raw verses -> sacremoses tokenisation -> subword-nmt BPE -> fairseq-preprocess
#   -> fairseq-train --user-dir fconv_plugin (NAG, momentum 0.99, clip-norm 0.1,
#      learning rate shrunk on plateau) -> fairseq-generate --beam 5 -> detokenise
#   -> sacreBLEU next to a copy-the-source baseline -> fairseq-interactive on raw text
#
# Data: the Reina-Valera 1909 and King James Bibles (both public domain), aligned by
# verse, shipped in data/ (see make_corpus.py for where they come from).
# Run from anywhere after scripts/setup_env.sh; TRAIN_MINUTES (default 7) bounds training.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${VENV:-$repo/.venv}
export PATH="$venv/bin:$PATH"
work=${WORK_DIR:-$here/work}
train_minutes=${TRAIN_MINUTES:-7}
start=$(date +%s)
step() { echo; echo "=== [$(( $(date +%s) - start ))s] $*"; }

rm -rf "$work" && mkdir -p "$work" && cd "$work"

step "1/7 corpus: split the verse pairs into train / valid / test"
python "$here/split_corpus.py" "$here/data" . --valid 300 --test 500 --max-words 60

step "2/7 sacremoses tokenisation"
for split in train valid test; do
    for lang in es en; do
        sacremoses -l "$lang" -j 2 tokenize -x < "$split.raw.$lang" > "$split.tok.$lang"
    done
done

step "3/7 subword-nmt: joint BPE, 8000 merges"
cat train.tok.es train.tok.en | subword-nmt learn-bpe -s 8000 > codes
for split in train valid test; do
    for lang in es en; do
        subword-nmt apply-bpe -c codes < "$split.tok.$lang" > "$split.bpe.$lang"
    done
done

step "4/7 fairseq-preprocess"
fairseq-preprocess --source-lang es --target-lang en --trainpref train.bpe --validpref valid.bpe \
    --testpref test.bpe --destdir data-bin --workers 2 --thresholdsrc 2 --thresholdtgt 2 > preprocess.log
tail -n 4 preprocess.log

step "5/7 fairseq-train --user-dir fconv_plugin --arch fconv_iwslt_de_en (at most ${train_minutes} min)"
fairseq-train data-bin --user-dir "$repo/fconv_plugin" --arch fconv_iwslt_de_en \
    --optimizer nag --momentum 0.99 --clip-norm 0.1 --lr 0.25 \
    --lr-scheduler reduce_lr_on_plateau --lr-shrink 0.1 --stop-min-lr 1e-4 \
    --dropout 0.2 \
    --max-tokens 3000 --max-epoch 50 --stop-time-hours "$(python -c "print($train_minutes / 60)")" \
    --validate-interval-updates 400 --save-interval-updates 400 --keep-interval-updates 1 \
    --no-epoch-checkpoints --save-dir checkpoints --seed 1 \
    --log-format simple --log-interval 100

step "6/7 fairseq-generate --beam 5 on $(wc -l < test.raw.es) held-out verses, detokenise, score"
fairseq-generate data-bin --user-dir "$repo/fconv_plugin" --path checkpoints/checkpoint_best.pt \
    --gen-subset test --beam 5 --remove-bpe --max-tokens 6000 > generate.out
grep '^H-' generate.out | sed 's/^H-//' | sort -n -k1,1 | cut -f3 \
    | sacremoses -l en -j 2 detokenize > test.hyp.en
model_bleu=$(sacrebleu test.raw.en -i test.hyp.en -m bleu -b -w 2)
copy_bleu=$(sacrebleu test.raw.en -i test.raw.es -m bleu -b -w 2)
echo
echo "sacreBLEU on the test verses:"
printf '  %-34s %6s\n' "fconv_plugin (beam 5)" "$model_bleu" "baseline: copy the Spanish source" "$copy_bleu"
paste -d '\n' <(head -n 3 test.raw.es | sed 's/^/  es:  /') <(head -n 3 test.raw.en | sed 's/^/  ref: /') \
    <(head -n 3 test.hyp.en | sed 's/^/  hyp: /') /dev/null /dev/null

step "7/7 fairseq-interactive on raw sentences (moses tokenizer + subword-nmt BPE)"
printf '%s\n' "Y dijo Dios: Sea la luz: y fué la luz." "El Señor es mi pastor; nada me faltará." \
    "Porque de tal manera amó Dios al mundo." \
| fairseq-interactive data-bin --user-dir "$repo/fconv_plugin" --path checkpoints/checkpoint_best.pt \
    --source-lang es --target-lang en --beam 5 \
    --tokenizer moses --bpe subword_nmt --bpe-codes codes 2>/dev/null | grep -E '^(S|D)-'

echo
echo "quickstart finished in $(( $(date +%s) - start )) s: BLEU $model_bleu vs copy baseline $copy_bleu"
python -c "import sys; sys.exit(0 if float('$model_bleu') > float('$copy_bleu') + 3 else 'the model did not beat the baseline')"
