"""A trained model behind one call: sentences in, translations out, the way fairseq-interactive does it.

``Translator`` is the inference core's public face; each job has its own module: loading
the model, task and dictionaries (``loading.py``), text in and out with every unknown-word
replacement (``text_codec.py``), batching, generators, decoding and its processes
(``batch_session.py``, ``workers.py``), documents (``documents.py``). A sentence's text is
fairseq-interactive's D- line for the same options; options live on the call, never on the model.
"""

from typing import List, Optional, Sequence, Tuple, Union

from ..deployment.int8 import has_int8_weights
from ..errors import FConvError
from .batch_session import BatchSession
from .documents import cut_length, translate_document
from .loading import interactive_config, load_models, trained_sentence_cut, trained_source_lengths
from .options import GenerationOptions, TranslationOptions
from .results import DocumentTranslation, Translation
from .text_codec import CheckedSentence, TextCodec, checked_sentence, source_token_count


class Translator:
    """One model with its task, tokenizer and BPE, built from fairseq-interactive's options.

    ``Translator(cfg)`` takes fairseq-interactive's parsed options (what ``fconv-translate``
    and ``fconv-serve`` read from their command lines); ``Translator.from_pretrained``
    builds them from a checkpoint path and keyword options, as fairseq's hub does.
    ``search``: "vectorised" (``BeamSearch`` where it applies) or "fairseq" (fairseq's
    SequenceGenerator always: the reference it is measured against). ``sentence_cut``: the
    longest piece (source tokens) documents cut a sentence into; default from the training
    lengths (``trained_sentence_cut``), never past what the model reads."""

    SEARCHES = ("vectorised", "fairseq")

    def __init__(self, cfg, name: str = "default", search: str = "vectorised", sentence_cut: Optional[int] = None):
        if search not in self.SEARCHES:
            raise FConvError(f"search {search!r}: give one of {', '.join(self.SEARCHES)}")
        cut_length(sentence_cut, None)  # its rule, before the model loads
        self.name, self.search, self.cfg = name, search, cfg
        loaded = load_models(cfg)
        self.task, self.models, self.arch, self.device = loaded.task, loaded.models, loaded.arch, loaded.device
        self.codec = TextCodec(self.task, cfg)
        self.session = BatchSession(loaded, self.codec, cfg, search)
        self.defaults = GenerationOptions.from_cfg(cfg.generation)
        self.sentence_cut = cut_length(sentence_cut, self.source_limit, None if sentence_cut is not None else
                                       trained_sentence_cut(trained_source_lengths(self.task), self.defaults.max_len_b))

    @classmethod
    def from_pretrained(cls, checkpoint: str, data: str, name: str = "default", search: str = "vectorised",
                        **options) -> "Translator":
        """A translator for ``checkpoint`` with the dictionaries in ``data``; ``options`` are
        fairseq-interactive's, by their Python names: ``source_lang="es", tokenizer="moses",
        bpe="subword_nmt", bpe_codes="codes", beam=5, replace_unk=True, max_tokens=2000``."""
        from fairseq import options as fairseq_options

        argv = [str(data), "--path", str(checkpoint)]
        for key, value in options.items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                argv.append(flag)
            elif value not in (None, False):
                argv += [flag, str(value)]
        parser = fairseq_options.get_interactive_generation_parser()
        return cls(interactive_config(fairseq_options.parse_args_and_arch(parser, argv)), name, search)

    @property
    def source_limit(self) -> int:
        """How many source tokens (with </s>) the model reads."""
        return self.session.source_limit

    @property
    def languages(self) -> Tuple[Optional[str], Optional[str]]:
        """(source, target) language codes as the task names them (-s/-t), or None."""
        task_cfg = getattr(self.task, "cfg", None)
        return getattr(task_cfg, "source_lang", None), getattr(task_cfg, "target_lang", None)

    @property
    def int8(self) -> bool:
        return has_int8_weights(self.models[0])

    @property
    def copying(self) -> bool:
        return getattr(self.models[0].decoder, "pointer_generator", None) is not None

    def describe(self) -> dict:
        return {"name": self.name, "arch": self.arch, "source_lang": self.languages[0],
                "target_lang": self.languages[1], "source_dictionary": len(self.task.source_dictionary),
                "target_dictionary": len(self.task.target_dictionary), "int8": self.int8, "copying": self.copying,
                "max_source_tokens": self.source_limit, "sentence_cut_tokens": self.sentence_cut,
                "attention_layers": self.models[0].decoder.num_attention_layers}

    def encode(self, line: str) -> str:
        """Tokenizer, then BPE: what the model's dictionary reads (fairseq-interactive's encode_fn)."""
        return self.codec.encode(line)

    def decode(self, text: str) -> str:
        """BPE, then the tokenizer, undone (fairseq-interactive's decode_fn)."""
        return self.codec.decode(text)

    def token_count(self, encoded: str) -> int:
        """Source tokens an encoded line is, </s> included."""
        return source_token_count(encoded)

    def checked_sentence(self, sentence: str, where: str = "the sentence",
                         encoded: Optional[str] = None) -> CheckedSentence:
        """``sentence`` encoded and checked as the model will read it, once (``checked_sentence``:
        ``EmptySentence``, ``TooLong``, named by ``where``); ``translate`` takes it as it is.
        ``encoded``: the sentence after tokenizer and BPE, from a caller that encodes itself."""
        return checked_sentence(sentence, self.encode if encoded is None else (lambda _: encoded), self.source_limit,
                                where)

    def translate(self, sentences: Sequence[Union[str, CheckedSentence]], options: Optional[TranslationOptions] = None,
                  **asked) -> List[Translation]:
        """Translate each sentence; results in the order given.

        Each sentence is a text, checked here (``checked_sentence``: an empty one, or one longer than
        the model reads, raises ``EmptySentence`` or ``TooLong`` naming it, "sentence 2"),
        or a ``CheckedSentence`` a caller checked already (``checked_sentence``, ``checked_document``).

        ``options`` (``TranslationOptions``) or, by their names, ``asked``: ``beam``,
        ``nbest``, ``lenpen``, ``unkpen``, ``min_len``, ``max_len_a``, ``max_len_b``,
        ``no_repeat_ngram_size`` (default: the translator's options). ``alignment``: each
        hypothesis' (source, target) word pairs, as ``--print-alignment``; ``attention``:
        every layer's weights and, for copying models, p_gen; ``replace_unk``: None as the
        translator was built, False off, True to copy source words, or a dictionary (file
        path or dict). ``decode=False``: each hypothesis' text before ``decode`` (the model's
        tokens, fairseq-interactive's H line), for a caller that decodes itself.
        ``max_tokens``, ``max_sentences``: the bound of one batch. ``progress(n)`` is called
        after each batch with the number of sentences it translated. ``workers``: batches
        decoded side by side in that many processes of one CPU thread each (``workers.py``;
        Marian's ``--cpu-threads``), with the same translations as in one process.
        ``still_wanted(i)``: asked for each sentence (its index here) just before its batch
        is translated; one it answers False for leaves the batch and gets None (a server's
        request whose client gave up; ``wanted_rows``).
        """
        options = TranslationOptions.asked(self.defaults, **asked) if options is None else options.with_(**asked)
        where = "sentence {}" if len(sentences) > 1 else "the sentence"
        checked = [sentence if isinstance(sentence, CheckedSentence) else self.checked_sentence(sentence, where.format(number))
                   for number, sentence in enumerate(sentences, start=1)]
        return self.session.translate(checked, options) if checked else []

    def close(self) -> None:
        """Stops the decoding processes, if any were started (``translate(workers=...)``)."""
        self.session.close()

    def translate_document(self, text: str, **options) -> DocumentTranslation:
        """``text`` translated with its paragraphs and line breaks (``documents.translate_document``)."""
        return translate_document(self, text, **options)
