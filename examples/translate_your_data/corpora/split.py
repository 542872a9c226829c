"""Split a shipped parallel corpus into train.sh's raw text files, keeping each group in one split.

    python corpora/split.py data/debian_en_de.tsv.xz OUT_DIR --valid 1000 --test 2000

Rows are ``group <TAB> source <TAB> target`` (debian_ddtp.py). Groups (Debian source
packages) are taken in an order fixed by a hash of their names: test pairs first, until
--test pairs, then valid, the rest train; so no test sentence has its package's other
sentences in training. Writes OUT_DIR/{train,valid,test}.{SRC,TGT} for
``train.sh SRC TGT OUT_DIR/train OUT_DIR/valid OUT_DIR/test``; --train N keeps the first N
training pairs of that order (smaller corpora of one domain).
"""

import argparse
import hashlib
import lzma
import sys
from pathlib import Path


def order(group: str) -> bytes:
    return hashlib.sha256(group.encode("utf-8")).digest()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--source", default="en")
    parser.add_argument("--target", default=None, help="default: the corpus name's last part (debian_en_de -> de)")
    parser.add_argument("--valid", type=int, default=1000)
    parser.add_argument("--test", type=int, default=2000)
    parser.add_argument("--train", type=int, default=None)
    args = parser.parse_args(argv)
    target = args.target or args.corpus.name.split(".")[0].split("_")[-1]
    groups = {}
    with lzma.open(args.corpus, "rt", encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) == 3 and all(fields):
                groups.setdefault(fields[0], []).append((fields[1], fields[2]))
    total = sum(len(pairs) for pairs in groups.values())
    if total < args.valid + args.test + 100:
        sys.exit(f"split: {args.corpus} has {total} pairs; --valid {args.valid} and --test {args.test} leave too few to train on")
    splits = {"test": [], "valid": [], "train": []}
    for group in sorted(groups, key=order):
        name = "test" if len(splits["test"]) < args.test else "valid" if len(splits["valid"]) < args.valid else "train"
        splits[name].extend(groups[group])
    if args.train is not None:
        splits["train"] = splits["train"][: args.train]
    args.out.mkdir(parents=True, exist_ok=True)
    for name, pairs in splits.items():
        for side, language in ((0, args.source), (1, target)):
            with open(args.out / f"{name}.{language}", "w", encoding="utf-8") as f:
                f.writelines(pair[side] + "\n" for pair in pairs)
    print(" ".join(f"{name} {len(pairs)}" for name, pairs in splits.items()) + f" pairs ({args.source}-{target}) in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
