"""How long sentences read at each sentence cut: a quickstart run's test verses joined into
sentences of 160+ words (", y " between verses, their English references joined with
", and "), translated as documents with each cut, scored with sacrebleu against the
joined references, with the most times any 4-gram repeats in one translation (a loop).

    .venv/bin/python examples/bible_es_en/long_sentences.py examples/bible_es_en/runs/latest

The first row is the model's own cut (``Translator.sentence_cut``: as long as 90% of its
training sentences); 200 was the cut before it (``--max-len-b``'s default).
"""

import argparse
import collections
import logging
import sys
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parents[2]
CUTS = (24, 40, 64, 100, 200)


def long_sentences(run: Path, count: int, words: int = 160) -> List[Tuple[str, str]]:
    """``count`` (Spanish, English) pairs of at least ``words`` words, each made of whole test verses."""
    sources = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()
    references = (run / "test.raw.en").read_text(encoding="utf-8").splitlines()
    verses = [(s.rstrip(".;: "), r.rstrip(".;: ")) for s, r in zip(sources, references) if len(s.split()) > 12]
    pairs, start = [], 0
    while len(pairs) < count and start < len(verses):
        end, length = start, 0
        while length < words and end < len(verses):
            length += len(verses[end][0].split())
            end += 1
        if length >= words:
            chosen = verses[start:end]
            pairs.append((", y ".join(s for s, _ in chosen) + ".", ", and ".join(r for _, r in chosen) + "."))
        start = end
    return pairs


def most_repeated_4gram(text: str) -> int:
    words = text.split()
    counts = collections.Counter(tuple(words[i:i + 4]) for i in range(len(words) - 3))
    return max(counts.values(), default=0)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a quickstart run directory")
    parser.add_argument("--sentences", type=int, default=12)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    import sacrebleu

    sys.path.insert(0, str(ROOT))
    from fconv_plugin.inference import Translator

    translator = Translator.from_pretrained(
        str(args.run / "checkpoints" / "checkpoint_best.pt"), str(args.run / "data-bin"), source_lang="es",
        target_lang="en", tokenizer="moses", bpe="subword_nmt", bpe_codes=str(args.run / "codes"), beam=5)
    pairs = long_sentences(args.run, args.sentences)
    if not pairs:
        raise SystemExit(f"{args.run}: no test verses long enough to join")
    print(f"{len(pairs)} sentences of {min(len(s.split()) for s, _ in pairs)}-{max(len(s.split()) for s, _ in pairs)} "
          f"words; the model's cut: {translator.sentence_cut} tokens")
    print("| cut (tokens) | BLEU | most repeats of a 4-gram (per sentence) |\n| --- | --- | --- |")
    for cut in (translator.sentence_cut, *[c for c in CUTS if c != translator.sentence_cut]):
        texts = [translator.translate_document(source, max_sentence_tokens=cut).text for source, _ in pairs]
        bleu = sacrebleu.corpus_bleu(texts, [[reference for _, reference in pairs]]).score
        print(f"| {cut} | {bleu:.1f} | {' '.join(str(most_repeated_4gram(t)) for t in texts)} |", flush=True)


if __name__ == "__main__":
    main()
