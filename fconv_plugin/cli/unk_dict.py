"""Build the ``--replace-unk`` dictionary from a training bitext with the model's attention.

The paper maps each source word to "the target word it is most frequently aligned
to" in the word-aligned training data (§5.1). Here the aligner is the trained model
itself: the bitext is read with teacher forcing, every target word is aligned to the
source word with the largest attention averaged over the attention layers (the same
rule ``--replace-unk`` applies at test time), and each source word is written with
its most frequent target word, one ``source target`` pair per line — the format
``--replace-unk DICT`` reads. Words are the tokens of the text files as given (the
text that was binarised), so words the model only sees as ``<unk>`` get entries too.

    python -m fconv_plugin.cli.unk_dict data-bin --path checkpoints/checkpoint_best.pt \
        --source-text train.de --target-text train.en > unk-dict.txt
"""

import argparse
import collections
import sys
from typing import Counter, Dict, Iterator, List, Tuple

from fairseq.data import data_utils

from .. import compat
from ..checkpoint_io import write_atomically
from ..errors import FConvError
from ..inference import Translator
from ..inference.attention import averaged_attention
from ..modules.unk_replacement import attended_source_positions


def _read_bitext(source_path: str, target_path: str) -> List[Tuple[List[str], List[str]]]:
    with open(source_path, encoding="utf-8") as src, open(target_path, encoding="utf-8") as tgt:
        source_lines, target_lines = src.read().splitlines(), tgt.read().splitlines()
    if len(source_lines) != len(target_lines):
        raise FConvError(f"{source_path} has {len(source_lines)} lines but {target_path} has {len(target_lines)}; give a line-aligned bitext")
    return [(s.split(), t.split()) for s, t in zip(source_lines, target_lines) if s.split() and t.split()]


def _batches(pairs, batch_size: int) -> Iterator[list]:
    for start in range(0, len(pairs), batch_size):
        yield pairs[start : start + batch_size]


def count_alignments(model, src_dict, tgt_dict, pairs, batch_size: int = 64, max_positions: int = 1024) -> Dict[str, Counter]:
    """For every source word, how often each target word attends to it most."""
    counts: Dict[str, Counter] = collections.defaultdict(collections.Counter)
    pairs = [(s, t) for s, t in pairs if len(s) < max_positions and len(t) < max_positions]
    for batch in _batches(pairs, batch_size):
        sources = [src_dict.encode_line(" ".join(s), add_if_not_exist=False).long() for s, _ in batch]
        targets = [tgt_dict.encode_line(" ".join(t), add_if_not_exist=False).long() for _, t in batch]
        src_tokens = data_utils.collate_tokens(sources, src_dict.pad(), left_pad=True)
        prev_output_tokens = data_utils.collate_tokens(targets, tgt_dict.pad(), tgt_dict.eos(), move_eos_to_beginning=True)
        attention = averaged_attention(model, src_tokens, src_tokens.ne(src_dict.pad()).sum(1), prev_output_tokens)
        for row, (source_words, target_words) in enumerate(batch):
            positions = attended_source_positions(attention[row].t(), src_tokens[row], src_dict.pad(), src_dict.eos())
            for target_position, target_word in enumerate(target_words):
                counts[source_words[positions[target_position]]][target_word] += 1
    return counts


def most_frequent_translation(counts: Dict[str, Counter]) -> Dict[str, str]:
    """Each source word's most frequent aligned target word (ties: the first seen)."""
    return {word: targets.most_common(1)[0][0] for word, targets in counts.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="the data-bin directory with the model's dictionaries")
    parser.add_argument("--path", required=True, help="checkpoint of the trained model")
    parser.add_argument("--source-text", required=True, help="tokenised source side of the training bitext")
    parser.add_argument("--target-text", required=True, help="tokenised target side, line-aligned")
    parser.add_argument("--source-lang", default=None)
    parser.add_argument("--target-lang", default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--output", default="-", help="where to write the dictionary (default: stdout; a file is written whole)")
    args = parser.parse_args(argv)
    compat.install()  # a fairseq command of the plugin's own: checkpoints load safely, errors print as one line
    compat.console.command_logging()  # fairseq's log format, without hydra's DEBUG lines

    translator = Translator.from_pretrained(args.path, args.data, source_lang=args.source_lang, target_lang=args.target_lang,
                                            cpu=True)  # count_alignments reads CPU tensors
    pairs = _read_bitext(args.source_text, args.target_text)
    model, task = translator.models[0], translator.task
    counts = count_alignments(model, task.source_dictionary, task.target_dictionary, pairs, args.batch_size, translator.source_limit)
    dictionary = most_frequent_translation(counts)
    lines = "".join(f"{source_word} {dictionary[source_word]}\n" for source_word in sorted(dictionary))
    if args.output == "-":
        sys.stdout.write(lines)
    else:
        write_atomically(args.output, lambda f: f.write(lines), binary=False)
    print(f"fconv_plugin: {len(dictionary)} source words from {len(pairs)} sentence pairs", file=sys.stderr)


if __name__ == "__main__":
    main()
