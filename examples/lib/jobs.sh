# Background jobs whose failure stops the example script that started them.
# Source it after defining fail() (one line "<script>: error: ..." on stderr, exit 1),
# then for every job:
#
#     some command < in > out 2> step.log &
#     track "tokenising train.es" step.log
#     ...
#     wait_tracked     # waits for every tracked job; the first that failed stops the script
#
# bash's bare `wait` returns 0 even when a job failed, and the script would go on with
# an empty or partial file. wait_tracked waits for each job by its process id; on the
# first non-zero exit it stops the other tracked jobs and calls
# fail "<step> failed (exit N); see <log>".

_tracked_pids=()
_tracked_steps=()
_tracked_logs=()

track() {  # track STEP LOG: the job just started with & ($!)
    _tracked_pids+=("$!")
    _tracked_steps+=("$1")
    _tracked_logs+=("$2")
}

wait_tracked() {
    local i status failure=""
    for i in "${!_tracked_pids[@]}"; do
        status=0
        wait "${_tracked_pids[$i]}" || status=$?
        if [ "$status" -ne 0 ] && [ -z "$failure" ]; then
            failure="${_tracked_steps[$i]} failed (exit $status); see ${_tracked_logs[$i]}"
            kill "${_tracked_pids[@]}" 2> /dev/null || true
        fi
    done
    _tracked_pids=() _tracked_steps=() _tracked_logs=()
    [ -z "$failure" ] || fail "$failure"
}
