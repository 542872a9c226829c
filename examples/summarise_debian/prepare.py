"""Split the shipped description -> synopsis pairs by source package, tokenise, truncate.

    python prepare.py data/descriptions.tsv.xz OUT_DIR [--valid 1000 --test 1500 --max-source-words 80]

Every pair of one Debian source package goes to the same split (chosen by a hash of
the source package's name), so no test description has a sibling package's text in
training. Text is tokenised with fairseq's ``--tokenizer moses`` and lower-cased (like
Gigaword); descriptions are cut to their first --max-source-words tokens.
Writes {train,valid,test}.{desc,syn} (tokenised), {train,valid,test}.package (each
pair's source package) and {valid,test}.raw.{desc,syn} (the untokenised text, for
scoring and the lead baseline).
"""

import argparse
import hashlib
import logging
import lzma
import multiprocessing
from pathlib import Path

logging.getLogger("fairseq").setLevel(logging.WARNING)  # importing fairseq logs INFO lines a tokenizer has no use for
from fairseq.data.encoders.moses_tokenizer import MosesTokenizer, MosesTokenizerConfig  # noqa: E402


def bucket(source_package: str) -> float:
    """A number in [0, 1) fixed by the source package's name."""
    digest = hashlib.sha256(source_package.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


_moses = MosesTokenizer(MosesTokenizerConfig(source_lang="en", target_lang="en"))


def tokenise(text: str) -> str:
    return _moses.encode(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--valid", type=int, default=1000)
    parser.add_argument("--test", type=int, default=1500)
    parser.add_argument("--max-source-words", type=int, default=80)
    args = parser.parse_args()

    with lzma.open(args.corpus, "rt", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
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

    args.out_dir.mkdir(parents=True, exist_ok=True)
    with multiprocessing.Pool(2) as pool:
        for name, pairs in splits.items():
            texts = [text for synopsis, description, _ in pairs for text in (synopsis, description)]
            tokenised = [text.lower() for text in pool.map(tokenise, texts, chunksize=500)]
            with open(args.out_dir / f"{name}.syn", "w", encoding="utf-8") as syn, \
                    open(args.out_dir / f"{name}.desc", "w", encoding="utf-8") as desc:
                for synopsis, description in zip(tokenised[0::2], tokenised[1::2]):
                    syn.write(synopsis + "\n")
                    desc.write(" ".join(description.split()[: args.max_source_words]) + "\n")
            with open(args.out_dir / f"{name}.package", "w", encoding="utf-8") as f:
                f.writelines(pair[2] + "\n" for pair in pairs)
            if name != "train":
                for suffix, column in (("syn", 0), ("desc", 1)):
                    with open(args.out_dir / f"{name}.raw.{suffix}", "w", encoding="utf-8") as f:
                        f.writelines(pair[column] + "\n" for pair in pairs)
            print(f"{name}: {len(pairs)} pairs")


if __name__ == "__main__":
    main()
