"""The summarisation recipe's corpus-dependent choices, from the training split's statistics.

summarise.sh asks this script twice and prints its choices in one block before training:

    python recipe.py words WORK_DIR [--source-words N] [--merges N]    # after prepare.py: source cut, BPE merges
    python recipe.py bpe WORK_DIR [--max-len-b N] [--updates N]        # after BPE: generation limit, updates

Each stage reads the tokenised training files in WORK_DIR, writes its choices (and the
statistics behind them) into WORK_DIR/recipe.json, and prints ``name=value`` lines for
the shell; the first also cuts every split's documents ({split}.full.desc -> {split}.desc).
A value given on the command line (a knob the user set) is kept and marked as given. The
rules were calibrated on the Debian corpus (where they give about the values the recipe
search chose by hand: 42 source words for 40, 10,500 merges for 10,000) and checked side
by side on two other corpora (docs/summarisation.md):

- source cut: a summary draws on the opening of its document. Keep about six times the
  median summary length (Gigaword's lead sentence is about four headlines long; Debian
  measured 40 words better than 80), at least 20 and never beyond the 90th percentile of
  document lengths (nothing is gained by padding);
- BPE merges: one per word type that occurs at least 10 times in the training text, so a
  subword unit is learnt only where there is data to learn it (Sennrich and Zhang 2019:
  smaller vocabularies for smaller corpora), 1,000 to 20,000;
- --max-len-b: twice the 99th percentile of training summaries in BPE tokens, at least
  16, so that almost no summary meets the limit (the script counts those that do);
- updates: about 10 epochs (batches of --max-tokens), 600 to 2,300: the training budget of
  15 minutes on a 2-core CPU for the default model, at the slowest rate measured on these
  corpora (2.6 updates/s on the docstrings' longer pairs; 3.3 on Debian's, 3.7 on the Perl
  manuals').
"""

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
import recipe_rules  # noqa: E402
from recipe_rules import given  # noqa: E402

SOURCE_CUT_PER_SUMMARY_WORD = 6
MIN_SOURCE_WORDS, MAX_SOURCE_WORDS = 20, 400
MIN_MERGES, MAX_MERGES = 1000, 20000
MIN_MAX_LEN_B = 16
TARGET_EPOCHS = 10
MIN_UPDATES, MAX_UPDATES = 600, 2300  # MAX_UPDATES: the 15-minute training budget (2.6 updates/s)


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (share in [0, 1]) of a non-empty sequence."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def source_cut(document_lengths: Sequence[int], summary_lengths: Sequence[int]) -> Dict:
    """Tokens of each document kept: 6 × the median summary, 20 to 400, at most the 90th percentile of documents."""
    median_summary = percentile(summary_lengths, 0.5)
    p90_document = percentile(document_lengths, 0.9)
    value = max(MIN_SOURCE_WORDS, min(MAX_SOURCE_WORDS, SOURCE_CUT_PER_SUMMARY_WORD * median_summary))
    value = min(value, max(MIN_SOURCE_WORDS, p90_document))
    return {"value": int(value), "why": f"{SOURCE_CUT_PER_SUMMARY_WORD} x the median summary ({median_summary} tokens), "
                                       f"{MIN_SOURCE_WORDS}-{MAX_SOURCE_WORDS}, at most the 90th percentile of "
                                       f"documents ({p90_document} tokens)"}


def bpe_merges(lines: Iterable[str]) -> Dict:
    """One merge per word type seen at least 10 times, rounded to 500, 1,000 to 20,000."""
    return recipe_rules.bpe_merges(lines, MIN_MERGES, MAX_MERGES)


def max_len_b(summary_bpe_lengths: Sequence[int]) -> Dict:
    """Twice the 99th percentile of training summaries in BPE tokens, at least 16."""
    p99 = percentile(summary_bpe_lengths, 0.99)
    return {"value": max(MIN_MAX_LEN_B, 2 * p99),
            "why": f"2 x the 99th percentile of training summaries ({p99} BPE tokens), at least {MIN_MAX_LEN_B}"}


def updates(train_tokens: int, max_tokens: int) -> Dict:
    """About 10 epochs of batches of ``max_tokens``, rounded to 100, 600 to 2,300 (the 15-minute budget).

    ``train_tokens`` counts what fairseq's --max-tokens counts: each pair's longer side."""
    per_epoch = max(1, math.ceil(train_tokens / max_tokens))
    value = max(MIN_UPDATES, min(MAX_UPDATES, 100 * round(TARGET_EPOCHS * per_epoch / 100)))
    return {"value": value, "why": f"~{value / per_epoch:.1f} epochs of {per_epoch} batches of {max_tokens} tokens "
                                   f"({train_tokens} tokens, each pair's longer side); {TARGET_EPOCHS} epochs wanted, "
                                   f"{MIN_UPDATES}-{MAX_UPDATES} updates (at most ~15 min on 2 cores)"}


def _lines(path: Path) -> List[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _lengths(path: Path) -> List[int]:
    return [len(line.split()) for line in _lines(path)]


def choose_words(work: Path, source_words=None, merges=None) -> Dict:
    """Stage 1, on prepare.py's full-length training text: the source cut, then BPE merges on the cut text."""
    documents, summaries = _lines(work / "train.full.desc"), _lines(work / "train.syn")
    cut = given(source_words) if source_words else source_cut([len(d.split()) for d in documents],
                                                               [len(s.split()) for s in summaries])
    kept = [" ".join(d.split()[:cut["value"]]) for d in documents]
    return {"training pairs": {"value": len(documents), "why": "after the split by group"},
            "source words": cut,
            "BPE merges": given(merges) if merges else bpe_merges(kept + summaries)}


def write_cut_documents(work: Path, source_words: int) -> None:
    """{split}.desc: the first ``source_words`` tokens of each document in {split}.full.desc."""
    for split in ("train", "valid", "test"):
        kept = (" ".join(line.split()[:source_words]) + "\n" for line in _lines(work / f"{split}.full.desc"))
        (work / f"{split}.desc").write_text("".join(kept), encoding="utf-8")


def choose_bpe(work: Path, max_tokens: int, max_len=None, updates_given=None) -> Dict:
    """Stage 2, on the BPE-encoded training text: the generation limit and the number of updates."""
    summary_lengths = _lengths(work / "train.bpe.syn")
    # fairseq's --max-tokens counts each pair as its longer side, with </s>
    tokens = sum(max(s, d) + 1 for s, d in zip(summary_lengths, _lengths(work / "train.bpe.desc")))
    return {"max-len-b": given(max_len) if max_len else max_len_b(summary_lengths),
            "updates": given(updates_given) if updates_given else updates(tokens, max_tokens)}


SHELL_NAMES = {"source words": "source_words", "BPE merges": "merges", "max-len-b": "max_summary_tokens",
               "updates": "updates"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=["words", "bpe"])
    parser.add_argument("work", type=Path)
    parser.add_argument("--source-words", type=int)
    parser.add_argument("--merges", type=int)
    parser.add_argument("--max-len-b", type=int)
    parser.add_argument("--updates", type=int)
    parser.add_argument("--max-tokens", type=int, default=4000)
    args = parser.parse_args()
    record = args.work / "recipe.json"
    if args.stage == "words":
        choices = choose_words(args.work, args.source_words, args.merges)
        write_cut_documents(args.work, choices["source words"]["value"])
    else:
        choices = json.loads(record.read_text(encoding="utf-8"))
        choices.update(choose_bpe(args.work, args.max_tokens, args.max_len_b, args.updates))
    record.write_text(json.dumps(choices, indent=1) + "\n", encoding="utf-8")
    for name, choice in choices.items():
        if name in SHELL_NAMES:
            print(f"{SHELL_NAMES[name]}={choice['value']}")


if __name__ == "__main__":
    main()
