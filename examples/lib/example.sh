# What every example script starts with and shares: the repository's virtual environment on
# PATH, its step lines and one-line errors, the libraries below, and its work directory.
# Set here and repo, then source it with the script's name:
#
#     here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
#     repo=$(cd "$here/../.." && pwd)
#     source "$repo/examples/lib/example.sh" quickstart
#     step "1/8 corpus"          # "=== [12s] 1/8 corpus"
#     fail "what went wrong"     # "quickstart: error: what went wrong" on stderr, exit 1
#     make_work_dir "$work"      # refuses a WORK_DIR that exists and is not empty (nothing deleted)
#     choose_allocator           # FCONV_ALLOCATOR checked before anything is written: sets allocator and
#                                # training_env, the prefix that starts fairseq-train and the speed probe with it
#     say_budget                 # the run's first line: its length, precision and allocator (budget.sh, precision.sh)
#     choose_validations 4       # VALIDATIONS (default 4) checked before anything is written: sets validations
#     read_recipe "$here/recipe.py" "merges model" STAGE ARGS...
#                                # recipe.py's name=value choices (those named) into the shell's variables
#     generate_test CHECKPOINT LINES LANG DETOKENIZE
#                                # fairseq-generate on data-bin's test split: test.hyp.tok.LANG, one line a
#                                # sentence in order, then DETOKENIZE < it > test.hyp.LANG (generate.{out,log})

example_name=$1
venv=${VENV:-$repo/.venv}
export PATH="$venv/bin:$PATH"
start=$(date +%s)
step() { echo; echo "=== [$(( $(date +%s) - start ))s] $*"; }
fail() { echo "$example_name: error: $*" >&2; exit 1; }
# shellcheck source=jobs.sh
source "$repo/examples/lib/jobs.sh"
# shellcheck source=fairseq_logs.sh
source "$repo/examples/lib/fairseq_logs.sh"
# shellcheck source=precision.sh
source "$repo/examples/lib/precision.sh"
# shellcheck source=budget.sh
source "$repo/examples/lib/budget.sh"

make_work_dir() {  # make_work_dir DIR: a new or empty directory, never one with files in it
    if [ -e "$1" ] && [ -n "$(ls -A "$1" 2>/dev/null)" ]; then
        fail "WORK_DIR $1 exists and is not empty; choose a new directory (nothing was deleted)"
    fi
    mkdir -p "$1"
}

choose_allocator() {  # the allocator fairseq-train and the probe start with (fconv_plugin/host_memory.py): tcmalloc where
    # installed, preloaded, unless FCONV_ALLOCATOR says otherwise; training_env: the command prefix (empty for none)
    local choice library setting errors status=0
    errors=$(mktemp)
    choice=$(python -m fconv_plugin.host_memory 2> "$errors") || status=$?
    if [ "$status" -ne 0 ]; then
        choice=$(tail -n 1 "$errors")
        rm -f "$errors"
        fail "${choice#error: }"
    fi
    rm -f "$errors"
    library=${choice%%$'\t'*} setting=${choice#*$'\t'}
    training_env=()
    if [ -n "${LD_PRELOAD:-}" ]; then  # the user's own preload (another allocator, perhaps) is theirs: nothing added
        allocator="LD_PRELOAD=$LD_PRELOAD as given (tcmalloc not added)"
    elif [ -n "$library" ]; then
        training_env=(env "LD_PRELOAD=$library")
        allocator="tcmalloc ($library, preloaded for fairseq-train)"
    elif [ "$setting" = auto ]; then
        allocator="glibc's, freed memory kept (tcmalloc, faster, is not installed: libtcmalloc-minimal4)"
    else
        allocator="FCONV_ALLOCATOR=$setting"
    fi
}

say_budget() {  # the run's first line, after choose_length, choose_precision and choose_allocator
    if [ "$length" = minutes ]; then
        echo "budget: $minutes minutes of training on this CPU, the speed probe's included; precision: $precision ($precision_reason); memory: $allocator"
    else
        local planned=${updates:-"the recipe's"}
        echo "budget: $planned updates$length_note; precision: $precision ($precision_reason); memory: $allocator"
    fi
}

choose_validations() {  # choose_validations DEFAULT: VALIDATIONS or DEFAULT, a whole number from 1 to 999999
    validations=${VALIDATIONS:-$1}
    case "$validations" in ''|*[!0-9]*) validations=x;; esac  # VALIDATIONS=08 is eight, 00 is refused, 7 digits too
    [ "$validations" != x ] && [ ${#validations} -le 6 ] && [ $(( 10#$validations )) -gt 0 ] \
        || fail "VALIDATIONS must be a whole number from 1 to 999999, got '${VALIDATIONS}'"
    validations=$(( 10#$validations ))
}

read_recipe() {  # read_recipe SCRIPT "NAME ..." ARGS...: SCRIPT ARGS's name=value lines, those named, as variables
    local script=$1 names=" $2 " name value
    shift 2
    python "$script" "$@" > recipe.out 2> recipe.log || fail "$(basename "$script") failed: $(tail -n 1 recipe.log)"
    while IFS='=' read -r name value; do
        case "$names" in *" $name "*) printf -v "$name" '%s' "$value";; esac
    done < recipe.out
}

generate_test() {  # generate_test CHECKPOINT LINES LANG DETOKENIZE...: beam 5 over the test split, every line kept
    local checkpoint=$1 lines=$2 lang=$3
    shift 3
    fairseq-generate data-bin --user-dir "$repo/fconv_plugin" --path "$checkpoint" \
        --gen-subset test --beam 5 --remove-bpe --max-tokens 6000 --required-batch-size-multiple 1 \
        --log-format simple --log-interval 4 > generate.out 2> generate.log \
        || { tail -n 20 generate.log; fail "fairseq-generate failed (log: $(pwd)/generate.log)"; }
    grep '^H-' generate.out | sed 's/^H-//' | sort -n -k1,1 | cut -f3 > "test.hyp.tok.$lang"
    # fairseq drops a last batch smaller than --required-batch-size-multiple (8 by default,
    # fairseq issue #5036); the option above keeps it: every sentence must be translated
    [ "$(wc -l < "test.hyp.tok.$lang")" -eq "$lines" ] \
        || fail "fairseq-generate translated $(wc -l < "test.hyp.tok.$lang") of $lines sentences (log: $(pwd)/generate.log)"
    "$@" < "test.hyp.tok.$lang" > "test.hyp.$lang" 2>/dev/null
}
