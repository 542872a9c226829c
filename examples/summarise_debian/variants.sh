# run_variants LABEL OUT_DIR "name|KNOB=value|..." ...: one summarise.sh run per variant, then their table.
# A variant whose results.json exists (an earlier, interrupted run) is not run again; ONLY="a b" runs just those.
# Sourced by recipe_search.sh and recipe_choices.sh (needs $here: this directory).
run_variants() {
    local label=$1 out=$2 variant name
    shift 2
    mkdir -p "$out"
    for variant in "$@"; do
        IFS='|' read -r -a fields <<< "$variant"
        name=${fields[0]} knobs=("${fields[@]:1}")
        if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then continue; fi
        [ -e "$out/$name/results.json" ] && continue
        rm -rf "${out:?}/$name.partial"
        echo "[$(date +%H:%M:%S)] $name: ${knobs[*]}"
        # each knob is one NAME=VALUE word, given to env as it is: never split further or evaluated
        env "${knobs[@]}" WORK_DIR="$out/$name.partial" bash "$here/summarise.sh" > "$out/$name.log" 2>&1 \
            || { echo "$label: $name failed (log: $out/$name.log)" >&2; return 1; }
        mv "$out/$name.partial" "$out/$name"
    done
    python "$here/results_table.py" "$out" "$@"
}
