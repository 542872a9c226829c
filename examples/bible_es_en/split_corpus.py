"""Split the shipped verse pairs into train / valid / test raw text files.

Test and valid verses are spread evenly over the whole Bible (every n-th pair), so
they share its vocabulary without repeating a training verse; training pairs longer
than --max-words on either side are left out to keep CPU training quick.
"""

import argparse
import lzma
from pathlib import Path


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--valid", type=int, default=300)
    parser.add_argument("--test", type=int, default=500)
    parser.add_argument("--max-words", type=int, default=60)
    args = parser.parse_args()

    lines = {}
    for lang in ("es", "en"):
        with lzma.open(args.data_dir / f"bible.{lang}.xz", "rt", encoding="utf-8") as f:
            lines[lang] = f.read().splitlines()
    pairs = list(zip(lines["es"], lines["en"]))
    stride = len(pairs) // (args.valid + args.test)
    held_out = set(range(0, stride * (args.valid + args.test), stride))
    ordered = sorted(held_out)
    splits = {
        "test": [pairs[i] for i in ordered[0::2][: args.test]],
        "valid": [pairs[i] for i in ordered[1::2][: args.valid]],
        "train": [
            pair for i, pair in enumerate(pairs)
            if i not in held_out and max(len(pair[0].split()), len(pair[1].split())) <= args.max_words
        ],
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for split, split_pairs in splits.items():
        for index, lang in enumerate(("es", "en")):
            with open(args.out_dir / f"{split}.raw.{lang}", "w", encoding="utf-8") as f:
                f.writelines(pair[index] + "\n" for pair in split_pairs)
        print(f"{split}: {len(split_pairs)} verse pairs")


if __name__ == "__main__":
    main()
