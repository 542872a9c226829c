"""Draw validation loss and validation ROUGE-L against updates for summarise.sh.

    python plot_training.py train.log curve.tsv training.png [TITLE]

train.log is fairseq-train's output with ``--log-format simple`` (its ``valid`` lines
give the loss at an update); curve.tsv has one line per kept checkpoint,
``updates <TAB> ROUGE-L F1`` of its greedy summaries of the validation pairs.
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bible_es_en"))
from plot_training import read_validations  # noqa: E402  (the quickstart's log reader)


def read_curve(path):
    with open(path, encoding="utf-8") as f:
        return sorted((int(updates), float(rouge_l)) for updates, rouge_l in (line.split("\t") for line in f if line.strip()))


def plot(validations, curve, out_path, title):
    fig, loss_axis = plt.subplots(figsize=(7, 4), dpi=110)
    loss_axis.plot([v[1] for v in validations], [v[2] for v in validations], "o-", color="tab:blue")
    loss_axis.set_xlabel("updates")
    loss_axis.set_ylabel("validation loss (base 2)", color="tab:blue")
    loss_axis.grid(alpha=0.3)
    rouge_axis = loss_axis.twinx()
    rouge_axis.plot([c[0] for c in curve], [c[1] for c in curve], "s-", color="tab:red")
    rouge_axis.set_ylabel("validation ROUGE-L F1 (greedy)", color="tab:red")
    rouge_axis.margins(y=0.12)
    for updates, rouge_l in curve:
        rouge_axis.annotate(f"{rouge_l:.1f}", (updates, rouge_l), textcoords="offset points", xytext=(0, 6),
                            ha="center", fontsize=7, color="tab:red")
    loss_axis.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out_path)


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: python plot_training.py TRAIN_LOG CURVE_TSV OUT.png [TITLE]")
    validations, curve = read_validations(sys.argv[1]), read_curve(sys.argv[2])
    if not validations or not curve:
        sys.exit(f"plot_training: nothing to draw: {len(validations)} validations in {sys.argv[1]}, "
                 f"{len(curve)} points in {sys.argv[2]}")
    plot(validations, curve, sys.argv[3], sys.argv[4] if len(sys.argv) == 5 else "summarisation training")
    print(f"wrote {sys.argv[3]} ({len(validations)} validations)")


if __name__ == "__main__":
    main()
