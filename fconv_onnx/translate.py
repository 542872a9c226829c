"""fconv-onnx-translate: raw sentences on stdin, detokenised translations on stdout, one per line.

    fconv-onnx-translate exported/ --beam 5 < source.txt > translations.txt

Runs a directory written by ``fconv-export`` with onnxruntime; the options mean what
fairseq-interactive's do. Lines are translated in batches of up to ``--batch-size``
sentences of similar length (left-padded, as fairseq batches sources). A line that
cannot be translated (not UTF-8, empty, longer than the model's positions) is reported
on stderr with its number and gives an empty output line, so the output stays aligned
with the input; the exit status is then 1.
"""

import argparse
import math
import sys
from typing import List, Optional, Tuple

import numpy as np

from .beam_search import generate
from .manifest import ManifestError
from .model import ExportedModel


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="fconv-onnx-translate", description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", help="a directory written by fconv-export")
    parser.add_argument("--beam", type=int, default=5, help="beam size (default 5)")
    parser.add_argument("--max-len-a", type=float, default=0.0, help="maximum length a·source_len + b (default a=0)")
    parser.add_argument("--max-len-b", type=int, default=200, help="(default b=200)")
    parser.add_argument("--min-len", type=int, default=1, help="minimum length, </s> excluded (default 1)")
    parser.add_argument("--lenpen", type=float, default=1.0, help="length penalty: scores / len^lenpen (default 1)")
    parser.add_argument("--unkpen", type=float, default=0.0, help="subtracted from <unk>'s log-probability (default 0)")
    parser.add_argument("--batch-size", type=int, default=16, help="sentences per generation call (default 16)")
    parser.add_argument("--buffer-size", type=int, default=256, help="lines read before translating (default 256)")
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime threads (default 0: its choice)")
    parser.add_argument("--print-scores", action="store_true",
                        help="write 'score<TAB>translation', the score in base 2 as fairseq-interactive's D- lines")
    args = parser.parse_args(argv)
    for name in ("beam", "batch_size", "buffer_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    return args


class LineError(Exception):
    pass


def encode_line(model: ExportedModel, raw: bytes) -> List[int]:
    try:
        line = raw.decode("utf-8").strip()
    except UnicodeDecodeError as e:
        raise LineError(f"is not valid UTF-8 (byte {raw[e.start]:#04x} at byte {e.start + 1})")
    if not line:
        raise LineError("is empty")
    ids = model.source_vocabulary.encode(model.text.encode(line))
    if len(ids) > model.max_source_positions:
        raise LineError(f"has {len(ids)} tokens but the model's position table holds {model.max_source_positions}; "
                        "shorten or split it")
    return ids


def pad_left(sentences: List[List[int]], pad: int) -> np.ndarray:
    longest = max(len(s) for s in sentences)
    batch = np.full((len(sentences), longest), pad, np.int64)
    for row, ids in enumerate(sentences):
        batch[row, longest - len(ids):] = ids
    return batch


def translate_encoded(model: ExportedModel, sentences: List[List[int]], args) -> List[Tuple[str, float]]:
    """(detokenised best translation, its score) for each encoded sentence, in order."""
    symbols = model.manifest.symbols
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    results: List[Optional[Tuple[str, float]]] = [None] * len(sentences)
    for start in range(0, len(order), args.batch_size):
        chosen = order[start: start + args.batch_size]
        src_tokens = pad_left([sentences[i] for i in chosen], symbols.source_pad)
        hypotheses = generate(model, src_tokens, args.beam, eos=symbols.eos, pad=symbols.pad, unk=symbols.unk,
                              max_len_a=args.max_len_a, max_len_b=args.max_len_b, min_len=args.min_len,
                              len_penalty=args.lenpen, unk_penalty=args.unkpen,
                              max_positions=model.max_target_positions)
        for i, best in zip(chosen, hypotheses):
            text = model.text.decode(model.target_vocabulary.string(best[0].tokens))
            results[i] = (text, best[0].score)
    return results


def read_buffers(stream, size: int):
    buffer = []
    for raw in stream:
        buffer.append(raw)
        if len(buffer) >= size:
            yield buffer
            buffer = []
    if buffer:
        yield buffer


def main(argv=None) -> None:
    args = parse_args(argv)
    try:
        model = ExportedModel(args.model_dir, threads=args.threads or None)
    except (ManifestError, OSError) as e:
        sys.exit(f"fconv-onnx-translate: error: {e}")
    failed = 0
    number = 0
    for buffer in read_buffers(sys.stdin.buffer, args.buffer_size):
        encoded, positions = [], []
        outputs: List[str] = [""] * len(buffer)
        for offset, raw in enumerate(buffer):
            try:
                encoded.append(encode_line(model, raw))
                positions.append(offset)
            except LineError as e:
                failed += 1
                print(f"fconv-onnx-translate: line {number + offset + 1} {e}; its output line is left empty",
                      file=sys.stderr)
        for offset, (text, score) in zip(positions, translate_encoded(model, encoded, args) if encoded else []):
            outputs[offset] = f"{score / math.log(2):.4f}\t{text}" if args.print_scores else text
        number += len(buffer)
        sys.stdout.write("".join(line + "\n" for line in outputs))
        sys.stdout.flush()
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
