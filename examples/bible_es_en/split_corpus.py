"""Split the shipped verse pairs into train / valid / test raw text files.

Held-out verses are spread evenly over the whole Bible (every n-th pair), so they
share its vocabulary; exactly --valid and --test of them are written. A training pair
whose Spanish verse equals a held-out one (case aside: "Y habló Jehová á Moisés,
diciendo:" stands 19 times) is left out, so no test verse has a twin in training.
Training pairs longer than --max-words on either side are left out to keep CPU
training quick. --train N keeps N of the training pairs, spread evenly over the Bible (a
quick run's; only what is kept is normalised). The KJV's paragraph marks (¶), which the
Spanish text does not have, are removed, and both sides go through sacremoses' punctuation
normaliser: the KJV's curly apostrophe ("man’s", 1,779 verses) becomes "'", which the Moses
tokenizer splits as "man 's" and the detokenizer joins again; a curly one came out as "man ’ s".
"""

import argparse
import lzma
from pathlib import Path

from sacremoses import MosesPunctNormalizer


def held_out_indices(n_pairs: int, n_valid: int, n_test: int):
    """Evenly spaced pair indices, dealt to test and valid in proportion, in order."""
    n_held = n_valid + n_test
    if n_held <= 0 or n_held > n_pairs // 2:
        raise SystemExit(f"split_corpus: --valid + --test must be between 1 and {n_pairs // 2}, got {n_held}")
    stride = n_pairs / n_held
    indices = [int(k * stride) for k in range(n_held)]
    # test takes position k when floor((k+1)·t/n) steps up: exactly t of n, spread evenly
    is_test = [(k + 1) * n_test // n_held > k * n_test // n_held for k in range(n_held)]
    test = [i for i, t in zip(indices, is_test) if t]
    valid = [i for i, t in zip(indices, is_test) if not t]
    return test, valid


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--valid", type=int, default=300)
    parser.add_argument("--test", type=int, default=500)
    parser.add_argument("--max-words", type=int, default=60)
    parser.add_argument("--train", type=int, help="keep this many training pairs, spread evenly (default: all)")
    args = parser.parse_args()
    if args.train is not None and args.train <= 0:
        raise SystemExit(f"split_corpus: --train must be a number of verse pairs above 0, got {args.train}")

    raw, normalizers = {}, {}
    for lang in ("es", "en"):
        normalizers[lang] = MosesPunctNormalizer(lang=lang)
        with lzma.open(args.data_dir / f"bible.{lang}.xz", "rt", encoding="utf-8") as f:
            raw[lang] = f.read().splitlines()

    def pair(i):
        return tuple(normalizers[lang].normalize(" ".join(raw[lang][i].replace("¶", " ").split())) for lang in ("es", "en"))

    n_pairs = len(raw["es"])
    test, valid = held_out_indices(n_pairs, args.valid, args.test)
    held_out = set(test) | set(valid)
    held = {i: pair(i) for i in sorted(held_out)}
    held_out_sources = {source.lower() for source, _ in held.values()}
    candidates = [i for i in range(n_pairs) if i not in held_out]
    wanted = len(candidates) if args.train is None else args.train
    stride = max(1, len(candidates) // wanted)
    train = {}
    # every stride-th candidate first, then the ones between: evenly spread, whichever are left out
    for i in (candidates[j] for offset in range(stride) for j in range(offset, len(candidates), stride)):
        if len(train) == wanted:
            break
        source, target = pair(i)
        if source.lower() not in held_out_sources and max(len(source.split()), len(target.split())) <= args.max_words:
            train[i] = (source, target)
    if args.train is not None and len(train) < args.train:
        raise SystemExit(f"split_corpus: --train {args.train} asks for more than the {len(train)} training pairs there are")
    splits = {
        "test": [held[i] for i in test],
        "valid": [held[i] for i in valid],
        "train": [train[i] for i in sorted(train)],
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for split, split_pairs in splits.items():
        for index, lang in enumerate(("es", "en")):
            with open(args.out_dir / f"{split}.raw.{lang}", "w", encoding="utf-8") as f:
                f.writelines(pair[index] + "\n" for pair in split_pairs)
        print(f"{split}: {len(split_pairs)} verse pairs")


if __name__ == "__main__":
    main()
