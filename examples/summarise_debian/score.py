"""ROUGE for summaries with Google's rouge-score (a reimplementation of ROUGE-1.5.5).

    python score.py REFERENCES HYPOTHESES          # ROUGE-1/2/L F1 and 75-byte recall
    python score.py REFERENCES --lead N DESCRIPTIONS   # score the lead-N baseline
    python score.py REFERENCES --first N DESCRIPTIONS  # score the first-N-words baseline

F1 is the measure the paper reports for Gigaword, recall of hypotheses cut to 75
bytes the one for DUC-2004 (Gehring et al. 2017, Table 6); stemming is on. Prints
one line, or with --json a dictionary.
"""

import argparse
import json
import re
import sys

from rouge_score import rouge_scorer

SENTENCE_END = re.compile(r"(?<=[.!?;:])\s")
MEASURES = ("rouge1", "rouge2", "rougeL")


def first_sentence(text: str) -> str:
    return SENTENCE_END.split(text.strip(), maxsplit=1)[0]


def lead(text: str, words: int) -> str:
    """The first sentence, cut to ``words`` words."""
    return " ".join(first_sentence(text).split()[:words])


def first_words(text: str, words: int) -> str:
    return " ".join(text.split()[:words])


def cut_to_bytes(text: str, limit: int = 75) -> str:
    """DUC-2004's rule: the summary's first ``limit`` bytes (whole characters)."""
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def rouge(references, hypotheses):
    """Mean ROUGE-1/2/L F1 and 75-byte recall, in percent."""
    if len(references) != len(hypotheses):
        raise SystemExit(f"score: {len(references)} references but {len(hypotheses)} hypotheses")
    scorer = rouge_scorer.RougeScorer(list(MEASURES), use_stemmer=True)
    totals = {f"{m}_f1": 0.0 for m in MEASURES} | {f"{m}_r75": 0.0 for m in MEASURES}
    for reference, hypothesis in zip(references, hypotheses):
        full = scorer.score(reference, hypothesis)
        cut = scorer.score(reference, cut_to_bytes(hypothesis))
        for m in MEASURES:
            totals[f"{m}_f1"] += full[m].fmeasure
            totals[f"{m}_r75"] += cut[m].recall
    return {name: 100 * value / len(references) for name, value in totals.items()}


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("references")
    parser.add_argument("hypotheses", help="one summary per line, or the descriptions with --lead/--first")
    baseline = parser.add_mutually_exclusive_group()
    baseline.add_argument("--lead", type=int, metavar="N", help="score the first sentence cut to N words")
    baseline.add_argument("--first", type=int, metavar="N", help="score the first N words")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    hypotheses = read_lines(args.hypotheses)
    if args.lead:
        hypotheses = [lead(text, args.lead) for text in hypotheses]
    elif args.first:
        hypotheses = [first_words(text, args.first) for text in hypotheses]
    scores = rouge(read_lines(args.references), hypotheses)
    if args.json:
        json.dump(scores, sys.stdout)
        print()
    else:
        print("F1 {rouge1_f1:.2f}/{rouge2_f1:.2f}/{rougeL_f1:.2f}  75-byte recall "
              "{rouge1_r75:.2f}/{rouge2_r75:.2f}/{rougeL_r75:.2f}".format(**scores))


if __name__ == "__main__":
    main()
