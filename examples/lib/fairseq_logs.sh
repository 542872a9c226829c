# What the examples print of fairseq's logs: the lines a person watching a run wants.
# Source it, then:
#
#     preprocess_summary preprocess.log
#     fairseq-train ... 2>&1 | tee train.log | training_progress || true

# Each side's dictionary and the training split's counts, once each (fairseq logs a
# side's dictionary once per split).
preprocess_summary() {
    grep -E "\] (Dictionary|train\.bpe)" "$1" | sed "s/^.*preprocess://" | awk '!seen[$0]++'
}

# fairseq-train's log on stdin, down to progress (train_inner), validation and the end,
# without the columns few read; line by line, so it shows while training runs.
training_progress() {
    grep --line-buffered -E "train_inner|\| valid \||done training" \
        | sed -u -E 's/^.*\| (train_inner|valid) \| //; s/, (nll_loss|ppl|wpb|bsz|gnorm|clip|train_wall|loss_scale)=[^,]*//g'
}
