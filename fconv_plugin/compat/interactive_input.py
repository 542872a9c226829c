"""fairseq-interactive on messy input: one clear line per bad input, no traceback.

fairseq 0.12 stops with a UnicodeDecodeError at the first line that is not UTF-8,
translates an empty line as if it were a sentence, and stops with an exception from
deep inside its batching at the first line longer than the model's position table.
Here each such line is reported on stderr with its line number and skipped, and the
others are translated and numbered as in the input. A too-long line stops the run
with a one-line error unless ``--skip-invalid-size-inputs-valid-test`` is given, as
fairseq-generate does; the same holds for fairseq-generate's own size check.

With ``--replace-unk`` each batch's source tensor also carries its lines' words
(``replace_unk.SourceTokens``), which the replacement looks up. Each line is tokenised
and BPE-encoded once for all of it.
"""

import functools
import sys
from typing import List, Optional

import torch
from fairseq.tasks import FairseqTask

from ..errors import EmptySentence, FConvError, TooLong
from ..inference.text_codec import checked_sentence
from ._patching import patch, running_cli_module
from .replace_unk import with_source_words


class InputLine(str):
    """One decoded input line that knows its line number; ``problem`` says why it could
    not be decoded (None when it could)."""

    def __new__(cls, text: str, number: int, problem: Optional[str] = None):
        line = super().__new__(cls, text)
        line.number = number
        line.problem = problem
        return line


def _decode(raw: bytes, number: int) -> InputLine:
    try:
        return InputLine(raw.decode("utf-8").strip(), number)
    except UnicodeDecodeError as e:
        return InputLine("", number, f"is not valid UTF-8 (byte {raw[e.start]:#04x} at byte {e.start + 1})")


def _numbered_lines(input):
    """Each input line numbered, decoded on its own where the input gives bytes: a file, or
    a standard input that has them (a terminal, a pipe). A text stream set as ``sys.stdin``
    in-process (``io.StringIO``, anything without ``.buffer``) is read as the text it is,
    as fairseq's own reader reads it."""
    if input != "-":
        with open(input, "rb") as stream:
            yield from (_decode(raw, number) for number, raw in enumerate(stream, start=1))
        return
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        yield from (InputLine(text.strip(), number) for number, text in enumerate(sys.stdin, start=1))
        return
    yield from (_decode(raw, number) for number, raw in enumerate(stream, start=1))


def buffered_read(input, buffer_size):
    """fairseq's reader, decoding each line on its own and numbering it."""
    buffer: List[InputLine] = []
    for line in _numbered_lines(input):
        buffer.append(line)
        if len(buffer) >= buffer_size:
            yield buffer
            buffer = []
    if buffer:
        yield buffer


def _problem(line: str, encode_fn, limit, skip_too_long: bool, number: int):
    """Why ``line`` is skipped (None: it is translated), from the inference core's one check
    (``checked_sentence``), worded as fairseq-interactive's notes. fairseq's generator decodes
    every line, one without a word too, so each is held to the model's length."""
    if getattr(line, "problem", None) is not None:
        return line.problem
    try:
        checked_sentence(line, encode_fn, limit, f"input line {number}", passes_through=False)
    except EmptySentence:
        return "is empty"
    except TooLong as error:
        if not skip_too_long:
            raise FConvError(
                f"input line {number} has {error.count} tokens but the model reads at most {limit} "
                "(--max-source-positions); split the line, or pass --skip-invalid-size-inputs-valid-test to skip such lines"
            ) from None
        return f"has {error.count} tokens, more than the model reads ({limit}, --max-source-positions)"
    return None


def _make_batches(original):
    def make_batches(lines, cfg, task, max_positions, encode_fn):
        encode = functools.lru_cache(maxsize=None)(encode_fn)  # once per line: the checks, fairseq, the words

        limit = max_positions[0] if isinstance(max_positions, (tuple, list)) else max_positions
        skip = cfg.dataset.skip_invalid_size_inputs_valid_test
        keep = []
        for index, line in enumerate(lines):
            number = getattr(line, "number", index + 1)  # lines from buffered_read know their number
            problem = _problem(line, encode, limit, skip, number)
            if problem is None:
                keep.append(index)
            else:
                print(f"fconv_plugin: input line {number} {problem}; skipped", file=sys.stderr)
        if not keep:
            return
        original_index = torch.tensor(keep)
        kept = [lines[i] for i in keep]
        for batch in original(kept, cfg, task, max_positions, encode):
            src_tokens = batch.src_tokens
            if cfg.generation.replace_unk is not None:
                src_tokens = with_source_words(src_tokens, [encode(kept[i]).split() for i in batch.ids.tolist()])
            yield batch._replace(ids=original_index[batch.ids], src_tokens=src_tokens)

    return make_batches


def _filter_indices_by_size(original):
    def filter_indices_by_size(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        try:
            return original(self, indices, dataset, max_positions, ignore_invalid_inputs)
        except Exception as e:
            if not str(e).startswith("Size of sample"):
                raise
            raise FConvError(
                f"{e} (the model's position tables hold {max_positions} tokens; train with larger "
                "--max-source-positions/--max-target-positions to accept longer sentences)"
            ) from None

    return filter_indices_by_size


def install() -> None:
    fairseq_interactive = running_cli_module("fairseq_cli.interactive")
    if fairseq_interactive is not None:
        patch(fairseq_interactive, "make_batches", "interactive_input", _make_batches)
        patch(fairseq_interactive, "buffered_read", "interactive_input", lambda _: buffered_read)
    patch(FairseqTask, "filter_indices_by_size", "interactive_input", _filter_indices_by_size)
