"""Split the shipped description -> synopsis pairs by source package, tokenise, truncate.

    python prepare.py data/descriptions.tsv.xz OUT_DIR [--valid 1000 --test 1500]

Every pair of one Debian source package goes to the same split (chosen by a hash of
the source package's name), so no test description has a sibling package's text in
training. Text is tokenised with fairseq's ``--tokenizer moses`` and lower-cased (like
Gigaword). Documents are written whole (recipe.py chooses where to cut them).
Writes {train,valid,test}.{full.desc,syn} (tokenised), {train,valid,test}.package (each
pair's source package) and {valid,test}.raw.{desc,syn} (the untokenised text, for
scoring and the lead baseline).

Rows are ``source <TAB> summary <TAB> document``. Malformed rows (another number of
fields, which is how a tab inside a document shows, or an empty field) are skipped and
counted in one line; a corpus too small for --valid + --test and some training pairs
stops with one line naming the sizes.
"""

import argparse
import hashlib
import logging
import lzma
import multiprocessing
import sys
from collections import Counter
from pathlib import Path
from typing import Iterable, List, Tuple

logging.getLogger("fairseq").setLevel(logging.WARNING)  # importing fairseq logs INFO lines a tokenizer has no use for
from fairseq.data.encoders.moses_tokenizer import MosesTokenizer, MosesTokenizerConfig  # noqa: E402

from fconv_plugin.inference.text_codec import moses_encode  # noqa: E402  (C++ and C# kept whole, as fconv-translate does)


def bucket(source_package: str) -> float:
    """A number in [0, 1) fixed by the source package's name."""
    digest = hashlib.sha256(source_package.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


_moses = MosesTokenizer(MosesTokenizerConfig(source_lang="en", target_lang="en"))


def tokenise(text: str) -> str:
    return moses_encode(_moses, text)


def read_pairs(lines: Iterable[str]) -> Tuple[List[Tuple[str, str, str]], Counter]:
    """The well-formed (source, summary, document) rows, and how many rows were skipped, by reason."""
    pairs, skipped = [], Counter()
    for line in lines:
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) > 3:
            skipped["more than 3 tab-separated fields (a tab inside a text)"] += 1
        elif len(fields) < 3:
            skipped["fewer than 3 tab-separated fields"] += 1
        elif not all(field.strip() for field in fields):
            skipped["an empty field"] += 1
        else:
            pairs.append((fields[0], fields[1], fields[2]))
    return pairs, skipped


def skipped_line(skipped: Counter, total: int) -> str:
    """One line: how many of ``total`` rows were skipped, and why."""
    reasons = ", ".join(f"{count} with {reason}" for reason, count in skipped.most_common())
    return f"skipped {sum(skipped.values())} of {total} rows: {reasons}"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--valid", type=int, default=1000)
    parser.add_argument("--test", type=int, default=1500)
    args = parser.parse_args()

    with lzma.open(args.corpus, "rt", encoding="utf-8") as f:
        rows, skipped = read_pairs(f)
    total = len(rows) + sum(skipped.values())
    if skipped:
        print(skipped_line(skipped, total))
    if len(rows) <= args.valid + args.test:
        sys.exit(f"prepare.py: error: {args.corpus} has {len(rows)} usable pairs (of {total} rows), not more than "
                 f"--valid {args.valid} + --test {args.test}; give more pairs or set VALID and TEST lower")
    # sorted by bucket, a source package's pairs are contiguous: whole packages fill
    # test, then valid, and the rest is training data
    rows.sort(key=lambda row: (bucket(row[0]), row[0]))
    splits = {"test": [], "valid": [], "train": []}
    wanted = {"test": args.test, "valid": args.valid}
    current, previous_source = "test", None
    for source, synopsis, description in rows:
        if source != previous_source and current != "train" and len(splits[current]) >= wanted[current]:
            current = "valid" if current == "test" else "train"
        splits[current].append((synopsis, description, source))
        previous_source = source
    if not splits["train"]:
        sys.exit(f"prepare.py: error: whole source packages filled --valid {args.valid} + --test {args.test} "
                 f"with all {len(rows)} pairs and left none for training; set VALID and TEST lower")

    args.out_dir.mkdir(parents=True, exist_ok=True)
    with multiprocessing.Pool(2) as pool:
        for name, pairs in splits.items():
            texts = [text for synopsis, description, _ in pairs for text in (synopsis, description)]
            tokenised = [text.lower() for text in pool.map(tokenise, texts, chunksize=500)]
            with open(args.out_dir / f"{name}.syn", "w", encoding="utf-8") as syn, \
                    open(args.out_dir / f"{name}.full.desc", "w", encoding="utf-8") as desc:
                for synopsis, description in zip(tokenised[0::2], tokenised[1::2]):
                    syn.write(synopsis + "\n")
                    desc.write(description + "\n")
            with open(args.out_dir / f"{name}.package", "w", encoding="utf-8") as f:
                f.writelines(pair[2] + "\n" for pair in pairs)
            if name != "train":
                for suffix, column in (("syn", 0), ("desc", 1)):
                    with open(args.out_dir / f"{name}.raw.{suffix}", "w", encoding="utf-8") as f:
                        f.writelines(pair[column] + "\n" for pair in pairs)
            print(f"{name}: {len(pairs)} pairs")


if __name__ == "__main__":
    main()
