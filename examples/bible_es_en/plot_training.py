"""Draw validation loss and BLEU against training time from a fairseq-train log.

    python plot_training.py train.log training.png

Reads what fairseq-train prints with ``--log-format simple`` (saved with tee): each
``valid`` line gives the loss and, with ``--eval-bleu``, the BLEU of the validation
set at an update; the line's timestamp gives the wall time since training started.
"""

import re
import sys
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


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: python plot_training.py TRAIN_LOG OUT.png [TITLE]")
    points = read_validations(sys.argv[1])
    if not points:
        sys.exit(f"plot_training: no validation lines in {sys.argv[1]}; is it fairseq-train's output with --log-format simple?")
    plot(points, sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else "fconv_plugin training")
    print(f"wrote {sys.argv[2]} ({len(points)} validations)")


if __name__ == "__main__":
    main()
