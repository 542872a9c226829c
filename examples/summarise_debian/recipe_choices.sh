#!/usr/bin/env bash
# Each of summarise.sh's corpus-dependent choices (recipe.py) against the fixed value the
# recipe had before (chosen on Debian), one at a time, on one corpus, side by side: the
# adaptive recipe, the same with one choice put back, and the old recipe whole (which
# summarised with the checkpoint of lowest validation loss). Every run chooses its
# decoding settings on validation.
# Prints a markdown table (docs/summarisation.md); each run's directory keeps its logs.
#
#   CORPUS=data/docstrings.tsv.xz bash examples/summarise_debian/recipe_choices.sh [OUT_DIR]
#   ONLY="adaptive fixed" ...   runs just the named variants
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-$here/runs/recipe-choices-$(date +%Y%m%d-%H%M%S)}
variants=(
    "adaptive"
    "fixed_source_words|SOURCE_WORDS=40"
    "fixed_merges|MERGES=10000"
    "fixed_max_len_b|MAX_LEN_B=40"
    "fixed_updates|UPDATES=1000"
    "fixed_checkpoint|CHECKPOINT=loss"
    "fixed|SOURCE_WORDS=40|MERGES=10000|MAX_LEN_B=40|UPDATES=1000|CHECKPOINT=loss"
)
# shellcheck source=variants.sh
source "$here/variants.sh"
run_variants recipe_choices "$out" "${variants[@]}"
