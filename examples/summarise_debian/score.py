"""ROUGE for summaries with Google's rouge-score (a reimplementation of ROUGE-1.5.5).

    python score.py REFERENCES HYPOTHESES          # ROUGE-1/2/L F1 and 75-byte recall
    python score.py REFERENCES --lead N DESCRIPTIONS   # score the lead-N baseline
    python score.py REFERENCES --first N DESCRIPTIONS  # score the first-N-words baseline
    ... --copy-from DESCRIPTIONS --frequent-words TRAIN_TEXT...   # and the copy rate

F1 is the measure the paper reports for Gigaword, recall of hypotheses cut to 75
bytes the one for DUC-2004 (Gehring et al. 2017, Table 6); stemming is on. Prints
one line, or with --json a dictionary.

The copy rate asks whether the summaries carry the source's content words: of the
reference words that also occur in the description and are not among the 1,000 most
frequent words of the training text, the share that the summary contains (over all
pairs; words as ROUGE sees them: lower case, letters and digits, no stemming).
"""

import argparse
import collections
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


WORD = re.compile(r"[a-z0-9]+")
FREQUENT_WORDS = 1000


def words(text: str):
    return WORD.findall(text.lower())


def most_frequent_words(paths, count: int = FREQUENT_WORDS):
    counts = collections.Counter()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                counts.update(words(line))
    return {word for word, _ in counts.most_common(count)}


def copy_rate(references, hypotheses, descriptions, frequent):
    """Percent of the rare reference words found in the description that the hypothesis has."""
    wanted = found = 0
    for reference, hypothesis, description in zip(references, hypotheses, descriptions):
        rare = (set(words(reference)) & set(words(description))) - frequent
        wanted += len(rare)
        found += len(rare & set(words(hypothesis)))
    return 100.0 * found / max(wanted, 1)


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
    parser.add_argument("--copy-from", metavar="DESCRIPTIONS", help="also give the copy rate against these sources")
    parser.add_argument("--frequent-words", metavar="TEXT", nargs="+", default=[],
                        help="training text whose 1,000 most frequent words the copy rate leaves out")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if (args.lead or args.first) and args.copy_from is None:
        args.copy_from = args.hypotheses

    hypotheses = read_lines(args.hypotheses)
    if args.lead:
        hypotheses = [lead(text, args.lead) for text in hypotheses]
    elif args.first:
        hypotheses = [first_words(text, args.first) for text in hypotheses]
    references = read_lines(args.references)
    scores = rouge(references, hypotheses)
    if args.copy_from:
        descriptions = read_lines(args.copy_from)
        if len(descriptions) != len(references):
            raise SystemExit(f"score: {len(references)} references but {len(descriptions)} descriptions")
        scores["copy_rate"] = copy_rate(references, hypotheses, descriptions, most_frequent_words(args.frequent_words))
    if args.json:
        json.dump(scores, sys.stdout)
        print()
    else:
        line = "F1 {rouge1_f1:.2f}/{rouge2_f1:.2f}/{rougeL_f1:.2f}  75-byte recall {rouge1_r75:.2f}/{rouge2_r75:.2f}/{rougeL_r75:.2f}"
        if "copy_rate" in scores:
            line += "  copy rate {copy_rate:.1f}%"
        print(line.format(**scores))


if __name__ == "__main__":
    main()
