# How long the examples train: UPDATES=N (reproducible anywhere) or MINUTES=N (the best those
# minutes buy on this CPU: fairseq-train --lr-scheduler time_budget, the learning rate
# annealed to its end as the minutes run out). UPDATES wins when both are given.
# Source it after defining fail(), then:
#
#     choose_length 600          # before anything is written: sets length (updates|minutes),
#                                # updates, minutes and length_note; refuses bad values in one line
#     probe_speed data-bin NAME "OPTIONS" [NAME "OPTIONS" ...] [--validation "OPTIONS" [--validation-batches N]] > probe.tsv
#                                # speed_probe.py (with the run's validation options: a pause timed too, over N
#                                # of the validation batches scaled to all);
#                                # sets probe_seconds
#     training_minutes           # MINUTES less the probe's time: sets train_minutes
#     length_options 6           # the fairseq-train options, warming up over 1/6: sets length_args
#     updates_that_fit M S [P V] # prints the updates M minutes buy at S s per update, P pauses of V s inside
#                                # them taken first (the budget's own rule)
#     budget_outcome checkpoints [EXPECTED [PROBED]]
#                                # prints what a MINUTES run reached, from the file fconv_plugin writes
#                                # beside the checkpoints at the stop (time_budget.json), against EXPECTED,
#                                # with the run's seconds per update (pauses apart) beside the probe's PROBED,
#                                # and its pauses (validations, saves, epochs' starts, stalls)
#     updates_reached train.log  # prints the updates the run reached
#     progress_interval          # a progress line every tenth of the updates, 1 to 100: sets log_every

choose_length() {
    local default_updates=$1 error
    length_note=""
    if [ -n "${UPDATES:-}" ]; then
        case "$UPDATES" in *[!0-9]*|0) fail "UPDATES must be a whole number of training updates above 0, got '$UPDATES'";; esac
        length=updates updates=$UPDATES minutes=""
        [ -n "${MINUTES:-}" ] && length_note=" (UPDATES wins over MINUTES=$MINUTES)"
    elif [ -n "${MINUTES:-}" ]; then
        error=$(python -c "import sys
from fconv_plugin.errors import FConvError
from fconv_plugin.optim.budget_plan import parse_minutes
try:
    parse_minutes(sys.argv[1], 'MINUTES')
except FConvError as e:
    sys.exit(str(e))" "$MINUTES" 2>&1) || fail "$error"
        length=minutes minutes=$MINUTES updates=""
    else
        length=updates updates=$default_updates minutes=""
    fi
    return 0
}

probe_speed() {  # probe_speed DATA_BIN NAME OPTIONS [NAME OPTIONS ...] [--validation OPTIONS [--validation-batches N]]:
    # NAME <TAB> s/update <TAB> parameters [<TAB> s per validation and save]
    local data_bin=$1 started candidates=()
    shift
    while [ $# -gt 0 ]; do
        case "$1" in --validation|--validation-batches) candidates+=("$1" "$2");; *) candidates+=(--candidate "$1" "$2");; esac
        shift 2
    done
    started=$(date +%s.%N)
    "${training_env[@]}" python "$repo/examples/lib/speed_probe.py" "$data_bin" "${candidates[@]}" 2> speed_probe.log \
        || { tail -n 5 speed_probe.log >&2; fail "the speed probe failed (log: $(pwd)/speed_probe.log)"; }
    probe_seconds=$(python -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$started" "$(date +%s.%N)")
}

training_minutes() {  # MINUTES less what the probe took of them
    train_minutes=$(python -c "import sys; print(f'{float(sys.argv[1]) - float(sys.argv[2]) / 60:.3f}')" \
        "$minutes" "$probe_seconds")
    python -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$train_minutes" \
        || fail "MINUTES=$minutes is used up by the speed probe (${probe_seconds} s); give more minutes"
}

length_options() {  # length_options N: fairseq-train's options for UPDATES or MINUTES, warming up over 1/N of them
    if [ "$length" = updates ]; then
        length_args=(--lr-scheduler polynomial_decay --warmup-updates "$(( updates / $1 ))" --total-num-update "$updates"
                     --end-learning-rate 0 --max-update "$updates")
    else
        # saved at the validations and the stop, not at each epoch's end (fairseq's --save-interval 1): inside
        # the minutes such a save is a pause the speed probe does not time
        length_args=(--lr-scheduler time_budget --budget-minutes "$train_minutes"
                     --warmup-fraction "$(python -c "import sys; print(f'{1 / int(sys.argv[1]):.4f}')" "$1")" --end-learning-rate 0
                     --save-interval 1000000)
    fi
}

updates_that_fit() {  # updates_that_fit MINUTES SECONDS_PER_UPDATE [PAUSES SECONDS_PER_PAUSE]: at least 1
    python -c "import sys
from fconv_plugin.optim.budget_plan import updates_that_fit
print(max(1, updates_that_fit(float(sys.argv[1]) * 60, float(sys.argv[2]), pauses=int(sys.argv[3]),
                              seconds_per_pause=float(sys.argv[4]))))" "$1" "$2" "${3:-0}" "${4:-0}"
}

budget_outcome() {  # budget_outcome SAVE_DIR [EXPECTED_UPDATES [PROBED_SECONDS_PER_UPDATE]]: one line on what the budget reached
    python - "$1/time_budget.json" "${2:-}" "${3:-}" <<'PY'
import json, os, sys
if not os.path.exists(sys.argv[1]):
    sys.exit(print(f"budget: fconv_plugin wrote no {sys.argv[1]}: the run did not stop by its budget (see train.log)"))
outcome = json.load(open(sys.argv[1]))
why = {"time": "no further update fitted", "max_update": "--max-update came first"}[outcome["stopped_for"]]
line = (f"budget spent: {outcome['updates']} updates in {outcome['trained_seconds'] / 60:.2f} of "
        f"{outcome['budget_seconds'] / 60:.2f} minutes ({why}), the last at learning rate "
        f"{outcome['last_update_lr']:.3g} ({outcome['last_update_lr'] / outcome['peak_lr']:.1%} of the peak), "
        f"annealed to {outcome['lr_after_it']:g}")
if sys.argv[2] and int(sys.argv[2]) > 0:
    expected = int(sys.argv[2])
    line += f"; the speed probe expected {expected}: {100 * (outcome['updates'] - expected) / expected:+.1f}%"
    # where a gap comes from: the run's own pace (its pauses apart) against the probe's few updates, and its pauses
    if outcome.get("mean_update_seconds") is not None:
        line += f" (the run's updates took {outcome['mean_update_seconds']:.4f} s each"
        try:
            line += f", the probe's {float(sys.argv[3]):.4f}" if sys.argv[3] else ""
        except ValueError:
            pass  # not one probe's figure: the run's alone
        line += f"; its {outcome['pauses']} pause(s) {outcome['pause_seconds']:.1f} s)"
if outcome["pauses_left_to_the_end"]:
    line += f"; {outcome['pauses_left_to_the_end']} validation(s) near the end left to the final one"
print(line)
PY
}

updates_reached() {  # the updates fairseq-train's log says the run ended at
    grep -o "num_updates [0-9]*\|num_updates=[0-9]*" "$1" | tail -n 1 | grep -o "[0-9]*$"
}

progress_interval() {  # a short run shows progress too (a busy machine's fewer updates as well): every tenth of $updates, 1 to 100
    log_every=$(( updates / 10 < 1 ? 1 : (updates / 10 > 100 ? 100 : updates / 10) ))
}
