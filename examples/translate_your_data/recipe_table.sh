#!/usr/bin/env bash
# The recipe against the defaults train.sh had before it (fconv_iwslt_de_en, 8,000 BPE merges,
# 3,000-token batches, dropout 0.1, Adam's lr 0.003), given the same minutes, on the two
# corpora data/ ships (Debian's translated package descriptions, en-de and en-es: corpora/).
#
#   bash examples/translate_your_data/recipe_table.sh [MINUTES ...]     (default: 5 15 60)
#   LANGS=de bash examples/translate_your_data/recipe_table.sh 15         (one corpus: de or es)
#
# For each corpus and budget the two runs go side by side, one CPU core each (taskset), so that
# both see the same machine at the same time: about 3 hours for the default budgets. Everything
# goes to runs/recipe-table-<date-time>/; the last lines are the table (also in table.md), with
# each run's updates, so that UPDATES= reruns it anywhere.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${VENV:-$repo/.venv}
budgets=("$@")
[ $# -gt 0 ] || budgets=(5 15 60)
runs=$here/runs/recipe-table-$(date +%Y%m%d-%H%M%S)
fail() { echo "recipe_table: error: $*" >&2; exit 1; }
command -v taskset > /dev/null || fail "taskset (util-linux) is needed to give each run its own core"
[ "$(nproc)" -ge 2 ] || fail "two CPU cores are needed, one for each run of a pair"
for minutes in "${budgets[@]}"; do
    [[ "$minutes" =~ ^[0-9]+(\.[0-9]+)?$ ]] || fail "each budget must be a number of minutes, got '$minutes'"
done
DEFAULTS=(ARCH=fconv_iwslt_de_en BPE_MERGES=8000 MAX_TOKENS=3000 DROPOUT=0.1 LR=0.003)
mkdir -p "$runs"
declare -A sizes=([de]="--valid 1000 --test 2000" [es]="--valid 500 --test 1000")
read -r -a langs <<< "${LANGS:-de es}"
for lang in "${langs[@]}"; do
    case "$lang" in de|es) ;; *) fail "LANGS holds de and es, got '$lang'";; esac
    # shellcheck disable=SC2086
    "$venv/bin/python" "$here/corpora/split.py" "$here/data/debian_en_$lang.tsv.xz" "$runs/corpus_$lang" ${sizes[$lang]}
done

run() {  # run CORE NAME LANG MINUTES KNOBS...: train.sh pinned to one core
    local core=$1 name=$2 lang=$3 minutes=$4
    shift 4
    env "$@" MINUTES="$minutes" WORK_DIR="$runs/$name" VENV="$venv" taskset -c "$core" \
        bash "$here/train.sh" en "$lang" "$runs/corpus_$lang/train" "$runs/corpus_$lang/valid" "$runs/corpus_$lang/test" \
        > "$runs/$name.log" 2>&1 || echo "translate_your_data: the run failed: see $runs/$name.log" >> "$runs/$name.log"
}

echo "| corpus (training pairs) | minutes | recipe: model, merges, batch, dropout | updates | BLEU / chrF | defaults: updates | BLEU / chrF | recipe − defaults, BLEU |" > "$runs/table.md"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |" >> "$runs/table.md"
for lang in "${langs[@]}"; do
    for minutes in "${budgets[@]}"; do
        echo "=== en-$lang, $minutes minutes: the recipe on core 0, the defaults on core 1 ($(date +%H:%M))"
        run 0 "${lang}_${minutes}_recipe" "$lang" "$minutes" SEED=1 &
        run 1 "${lang}_${minutes}_defaults" "$lang" "$minutes" SEED=1 "${DEFAULTS[@]}" &
        wait
        "$venv/bin/python" - "$runs" "$lang" "$minutes" >> "$runs/table.md" <<'EOF'
import json, re, sys
from pathlib import Path
runs, lang, minutes = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
cells = {}
for side in ("recipe", "defaults"):
    last = (runs / f"{lang}_{minutes}_{side}.log").read_text(encoding="utf-8").strip().splitlines()[-1]
    found = re.search(r": (\S+), (\d+) updates in .*BLEU ([\d.]+) chrF ([\d.]+)$", last)
    if not found:
        sys.exit(f"recipe_table: the {side} run of en-{lang}, {minutes} minutes did not finish: {last}")
    cells[side] = found.groups()
recipe = json.loads((runs / f"{lang}_{minutes}_recipe" / "recipe.json").read_text(encoding="utf-8"))
pairs = recipe["training pairs"]["value"]
choices = ", ".join(str(recipe[name]["value"]) for name in ("model", "BPE merges", "max tokens", "dropout"))
(_, r_updates, r_bleu, r_chrf), (_, d_updates, d_bleu, d_chrf) = cells["recipe"], cells["defaults"]
print(f"| en-{lang} ({pairs:,}) | {minutes} | {choices} | {int(r_updates):,} | **{r_bleu} / {r_chrf}** | "
      f"{int(d_updates):,} | {d_bleu} / {d_chrf} | {float(r_bleu) - float(d_bleu):+.2f} |")
EOF
        tail -n 1 "$runs/table.md"
    done
done
echo
echo "$("$venv/bin/python" -c "import sys; sys.path.insert(0, '$repo/benchmarks'); from harness import machine; print(machine())"), one core a run"
cat "$runs/table.md"
