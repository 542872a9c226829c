#!/usr/bin/env bash
# The recipe search behind summarise.sh's defaults: one factor at a time against a
# base recipe, every run on the same data with the same number of updates and the
# same fixed generation options, scored on the validation pairs (the choice) and on
# the test pairs (for reference). Prints a markdown table; each run's directory keeps
# its logs and results.json.
#
#   bash examples/summarise_debian/recipe_search.sh [OUT_DIR]    (UPDATES=350 by default)
#   ONLY="copy plain" bash ...   runs just the named variants
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-$here/runs/recipe-search-$(date +%Y%m%d-%H%M%S)}
export UPDATES=${UPDATES:-350}
export GENERATION=${GENERATION:---min-len 4 --no-repeat-ngram-size 2 --lenpen 1.5}
export CURVE=0
# the base's learning rate: the default before this search picked 0.006 (docs/summarisation.md)
export LR=${LR:-0.003}
# the fixed recipe this search was run with (summarise.sh now chooses these from the corpus: recipe_choices.sh)
export SOURCE_WORDS=${SOURCE_WORDS:-40} MERGES=${MERGES:-10000} MAX_LEN_B=${MAX_LEN_B:-40}

# name|knob|knob...: the knobs that differ from the base, summarise.sh's defaults
# (fconv_gigaword_copy at 4 + 4 layers of 128) with lr 0.003; MODEL= is the paper's 6 + 6 of 256
variants=(
    "copy_256x6|MODEL="
    "plain_256x6|ARCH=fconv_gigaword|MODEL="
    "copy_128x4|ARCH=fconv_gigaword_copy"
    "plain_128x4|ARCH=fconv_gigaword"
    # the small model trains ~2.7x as many updates a minute: compare it at about equal time too
    "copy_128x4_equal_time|UPDATES=$(( UPDATES * 27 / 10 ))"
    "copy_source80|SOURCE_WORDS=80"
    "copy_merges5k|MERGES=5000"
    "copy_lr0.001|LR=0.001"
    "copy_lr0.006|LR=0.006"
    "copy_tied|ARCH_ARGS=--share-input-output-embed"
    "copy_smoothing0|SMOOTHING=0"
    "copy_dropout0.2|DROPOUT=0.2"
    "copy_merges20k|MERGES=20000"
)
# shellcheck source=variants.sh
source "$here/variants.sh"
run_variants recipe_search "$out" "${variants[@]}"
