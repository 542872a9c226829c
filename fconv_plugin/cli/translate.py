"""fconv-translate: a text file (or stdin) in, its translation out, paragraphs and line breaks kept.

    fconv-translate data-bin --path checkpoints/checkpoint_best.pt \\
        --tokenizer moses --bpe subword_nmt --bpe-codes codes --beam 5 \\
        --input chapter.es.txt --output chapter.en.txt

It takes fairseq-interactive's options (the data directory, ``--path``, ``-s``/``-t``,
``--tokenizer``, ``--bpe``, ``--bpe-codes``, ``--beam``, ``--lenpen``, ``--replace-unk``,
``--max-tokens``/``--batch-size``, ...), so whatever works with fairseq-interactive
works here, int8 checkpoints from ``fconv-quantize`` too. Unlike fairseq-interactive it
reads a document: each line is split into sentences, a sentence longer than the model
reads is split at safe points, all sentences are translated in token-bounded batches,
and the lines are put back together (``fconv_plugin.inference.documents``).
"""

import sys
from pathlib import Path

from .. import compat, with_plugin_user_dir
from ..checkpoint_io import write_atomically
from ..errors import EmptySentence, FConvError

def build_parser():
    from fairseq import options

    parser = options.get_interactive_generation_parser()
    group = parser.add_argument_group("fconv-translate")
    group.add_argument("--output", default="-", help="where the translation goes (default: stdout; a file is written whole)")
    group.add_argument("--source-language-rules", default=None, metavar="LANG",
                       help="the language whose sentence-splitting rules apply (default: the source language, -s)")
    group.add_argument("--max-sentence-tokens", type=int, default=None,
                       help="split longer sentences at safe points (default: as long as 90%% of the training sentences, "
                            "read from DATA's train split; without one, --max-len-b; at most what the model reads)")
    group.add_argument("--workers", type=int, default=1, metavar="N",
                       help="decode N batches side by side, in N processes of one CPU thread each (Marian's "
                            "--cpu-threads, CTranslate2's inter_threads; default 1: one process with torch's threads)")
    return compat.console.short_help(
        parser, "fconv-translate",
        usage="fconv-translate DATA --path CHECKPOINT [-s SRC -t TGT] [--tokenizer moses --bpe subword_nmt --bpe-codes CODES] "
              "[--input FILE] [--output FILE] [options]",
        description=__doc__.split("\n\n")[0])


def read_input(path: str) -> str:
    """The whole input as text; one line naming the problem if it is no UTF-8 text file."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as error:
        raise FConvError(f"--input {path}: {error.strerror or error}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise FConvError(f"{'stdin' if path == '-' else path} is not UTF-8 text (byte {data[error.start]:#04x} on line {line}); "
                         "convert it, e.g. with iconv -t utf-8") from None


class _ProgressBar:
    """tqdm's bar over a document's sentences, shown once a run takes longer than 2 s (long inputs)."""

    def __init__(self, enabled: bool):
        self.enabled, self.bar = enabled, None

    def start(self, document) -> None:
        if self.enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=len(document.pieces), desc="fconv-translate", unit=" sentences", file=sys.stderr,
                            delay=2.0)

    def update(self, count: int) -> None:
        if self.bar is not None:
            self.bar.update(count)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def main(argv=None) -> None:
    argv = with_plugin_user_dir(sys.argv[1:] if argv is None else argv)
    from fairseq import options

    compat.install()  # one-line errors
    args = options.parse_args_and_arch(build_parser(), argv)
    compat.console.command_logging()  # fairseq's log format, without hydra's DEBUG lines
    if args.path is None:
        raise FConvError("--path is required: the checkpoint to translate with")
    if args.output != "-" and args.input != "-" and Path(args.output).resolve() == Path(args.input).resolve():
        raise FConvError(f"--output {args.output} is the input file; give another file (nothing was written)")
    from ..inference import TranslationOptions, Translator
    from ..inference.documents import cut_length
    from ..inference.loading import interactive_config

    cut_length(args.max_sentence_tokens, None)  # the cut's rule, before the input is read
    text = read_input(args.input)

    translator = Translator(interactive_config(args), sentence_cut=args.max_sentence_tokens)
    progress = _ProgressBar(enabled=not args.no_progress_bar)
    try:
        options = TranslationOptions.asked(translator.defaults, workers=args.workers, progress=progress.update)
        document = translator.translate_document(text, language=args.source_language_rules, on_split=progress.start,
                                                 options=options)
    except EmptySentence:  # the core's refusal of a blank text, worded for a file
        source = "the standard input" if args.input == "-" else args.input
        raise FConvError(f"{source} holds no text to translate (nothing was written)") from None
    finally:
        translator.close()
        progress.close()
    if args.output == "-":
        sys.stdout.write(document.text)
        sys.stdout.flush()
    else:
        write_atomically(args.output, lambda f: f.write(document.text), binary=False)
    print(f"fconv_plugin: translated {len(document.sentences)} sentences", file=sys.stderr)


if __name__ == "__main__":
    main()
