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
mkdir -p "$out"
for variant in "${variants[@]}"; do
    IFS='|' read -r -a fields <<< "$variant"
    name=${fields[0]} knobs=("${fields[@]:1}")
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then continue; fi
    [ -e "$out/$name/results.json" ] && continue  # done in an earlier, interrupted search
    rm -rf "${out:?}/$name.partial"
    echo "[$(date +%H:%M:%S)] $name: ${knobs[*]}"
    # each knob is one NAME=VALUE word, given to env as it is: never split further or evaluated
    env "${knobs[@]}" WORK_DIR="$out/$name.partial" bash "$here/summarise.sh" > "$out/$name.log" 2>&1 \
        || { echo "recipe_search: $name failed (log: $out/$name.log)" >&2; exit 1; }
    mv "$out/$name.partial" "$out/$name"
done
python - "$out" "${variants[@]}" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print(f"| variant | changed | updates | updates/min | training s | valid ROUGE-L | test ROUGE-1/2/L F1 | test R-L 75-byte recall | rare words copied |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
lead = None
for variant in sys.argv[2:]:
    name, *knobs = variant.split("|")
    knob = " ".join(knobs)
    path = out / name / "results.json"
    if not path.exists():
        continue
    r = json.loads(path.read_text())
    m, lead = r["model"], r["lead"]
    print(f"| {name} | `{knob}` | {r['updates']} | {60 * r['updates'] / r['train_seconds']:.0f} | {r['train_seconds']} | "
          f"{r['valid_rougeL_f1']:.2f} | "
          f"{m['rouge1_f1']:.2f}/{m['rouge2_f1']:.2f}/{m['rougeL_f1']:.2f} | {m['rougeL_r75']:.2f} | {m['copy_rate']:.1f}% |")
if lead:
    print(f"| lead | first sentence | – | – | – | – | {lead['rouge1_f1']:.2f}/{lead['rouge2_f1']:.2f}/{lead['rougeL_f1']:.2f} | "
          f"{lead['rougeL_r75']:.2f} | {lead['copy_rate']:.1f}% |")
PY
