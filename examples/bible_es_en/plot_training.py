"""Draw validation loss and BLEU against training time from a fairseq-train log.

    python plot_training.py train.log training.png
    python plot_training.py --compare A/train.log LABEL_A B/train.log LABEL_B out.png TITLE
                                   # validation BLEU of several runs against the same minutes

Reads what fairseq-train prints with ``--log-format simple`` (saved with tee): each
``valid`` line gives the loss and, with ``--eval-bleu``, the BLEU of the validation
set at an update; the line's timestamp gives the wall time since training started.
"""

import re
import sys
import textwrap
from datetime import datetime

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \| INFO \| (\S+) \|(.*)$")
FIELD = re.compile(r"\| (\w+) ([-\d.]+)")


def read_validations(log_path):
    """(minutes since the first log line, updates, loss, bleu or None) per validation."""
    start = None
    points = []
    with open(log_path, encoding="utf-8") as f:
        for line in f:
            match = STAMP.match(line)
            if not match:
                continue
            time = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
            start = start or time
            if match.group(2) != "valid":
                continue
            fields = dict(FIELD.findall(match.group(3)))
            if "loss" not in fields or "num_updates" not in fields:
                continue
            bleu = float(fields["bleu"]) if "bleu" in fields else None
            points.append(((time - start).total_seconds() / 60, int(fields["num_updates"]), float(fields["loss"]), bleu))
    return points


def plot(points, out_path, title):
    minutes = [p[0] for p in points]
    fig, loss_axis = plt.subplots(figsize=(7, 4), dpi=110)
    loss_axis.plot(minutes, [p[2] for p in points], "o-", color="tab:blue", label="validation loss")
    loss_axis.set_xlabel("training time (minutes, 2 CPU cores)")
    loss_axis.set_ylabel("validation loss (base 2)", color="tab:blue")
    loss_axis.grid(alpha=0.3)
    for minute, updates, loss, _ in points:
        loss_axis.annotate(f"{updates}", (minute, loss), textcoords="offset points", xytext=(0, 6),
                           ha="center", fontsize=7, color="tab:blue")
    if any(p[3] is not None for p in points):
        bleu_axis = loss_axis.twinx()
        scored = [p for p in points if p[3] is not None]
        bleu_axis.plot([p[0] for p in scored], [p[3] for p in scored], "s-", color="tab:red", label="validation BLEU")
        bleu_axis.set_ylabel("validation sacreBLEU (greedy)", color="tab:red")
        bleu_axis.set_ylim(bottom=0)
    loss_axis.set_title(title + " (numbers: updates)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out_path)


COLOURS = ["tab:blue", "tab:red", "tab:green", "tab:purple"]


def compare(runs, out_path, title):
    """Validation BLEU against minutes, one curve per (label, points); each point's updates written beside it."""
    fig, axis = plt.subplots(figsize=(7, 4), dpi=110)
    for (label, points), colour in zip(runs, COLOURS):
        scored = [p for p in points if p[3] is not None]
        axis.plot([p[0] for p in scored], [p[3] for p in scored], "o-", color=colour,
                  label=f"{label}: {scored[-1][1]} updates, BLEU {scored[-1][3]:.1f} at the end")
        for minute, updates, _, bleu in scored[-1:]:
            axis.annotate(f"{updates} updates", (minute, bleu), textcoords="offset points", xytext=(-8, 6), ha="right",
                          fontsize=7, color=colour)
    axis.set_xlabel("wall-clock minutes since fairseq-train started")
    axis.set_ylabel("validation sacreBLEU (greedy)")
    axis.set_ylim(bottom=0)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, loc="lower right")
    axis.set_title(textwrap.fill(title, 110), fontsize=8)
    fig.tight_layout()
    fig.savefig(out_path)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--compare":
        *pairs, out_path, title = sys.argv[2:]
        if len(pairs) < 2 or len(pairs) % 2:
            sys.exit("usage: python plot_training.py --compare LOG LABEL [LOG LABEL ...] OUT.png TITLE")
        runs = [(label, read_validations(log)) for log, label in zip(pairs[::2], pairs[1::2])]
        for label, points in runs:
            if not any(p[3] is not None for p in points):
                sys.exit(f"plot_training: no validation BLEU in the {label} run's log")
        compare(runs, out_path, title)
        print(f"wrote {out_path}")
        return
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: python plot_training.py TRAIN_LOG OUT.png [TITLE]")
    points = read_validations(sys.argv[1])
    if not points:
        sys.exit(f"plot_training: no validation lines in {sys.argv[1]}; is it fairseq-train's output with --log-format simple?")
    plot(points, sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else "fconv_plugin training")
    print(f"wrote {sys.argv[2]} ({len(points)} validations)")


if __name__ == "__main__":
    main()
