"""What one translation asks, in one value: built once at the edge (a request, a command line,
a Python call) and passed down the core unchanged.

A new field is added here and nowhere else: the faces build ``TranslationOptions`` with
``TranslationOptions.asked`` (fairseq's names, as ``Translator.translate`` takes them), and the
batch session reads it.
"""

from dataclasses import dataclass, field, fields, replace
from typing import Callable, Dict, Optional, Union

from ..errors import FConvError


@dataclass(frozen=True)
class GenerationOptions:
    """fairseq's generation options a call may set (its ``--beam``, ``--lenpen``, ...)."""

    beam: int = 5
    nbest: int = 1
    lenpen: float = 1.0
    unkpen: float = 0.0
    min_len: int = 1
    max_len_a: float = 0.0
    max_len_b: int = 200
    no_repeat_ngram_size: int = 0

    @classmethod
    def from_cfg(cls, generation) -> "GenerationOptions":
        return cls(**{f.name: getattr(generation, f.name) for f in fields(cls)})

    def check(self) -> None:
        if self.beam < 1 or self.nbest < 1 or self.nbest > self.beam:
            raise FConvError(f"beam {self.beam} and nbest {self.nbest}: give beam >= 1 and 1 <= nbest <= beam")


GENERATION = tuple(f.name for f in fields(GenerationOptions))


@dataclass(frozen=True)
class TranslationOptions:
    """One translation's options (``Translator.translate`` documents each).

    ``generation``: the search's settings; ``alignment``, ``attention``: what each hypothesis
    carries; ``replace_unk``: None (as the translator was built), False, True or a
    dictionary; ``decode``: the text after BPE and tokenizer are undone (else the model's
    tokens); ``max_tokens``, ``max_sentences``: the bound of one of fairseq's batches (its
    ``--max-tokens``, ``--batch-size``); ``workers``: decoding processes; ``progress(n)``
    after each batch; ``still_wanted(i)`` before each batch, per sentence."""

    generation: GenerationOptions = field(default_factory=GenerationOptions)
    alignment: bool = False
    attention: bool = False
    replace_unk: Union[None, bool, str, Dict[str, str]] = None
    decode: bool = True
    max_tokens: Optional[int] = None
    max_sentences: Optional[int] = None
    workers: int = 1
    progress: Optional[Callable[[int], None]] = None
    still_wanted: Optional[Callable[[int], bool]] = None

    @classmethod
    def asked(cls, defaults: GenerationOptions, **asked) -> "TranslationOptions":
        """The options from keyword arguments by their names (``beam=5, alignment=True``), the
        generation settings not given taken from ``defaults``; an unknown name is refused."""
        known = {f.name for f in fields(cls)} - {"generation"}
        unknown = sorted(set(asked) - known - set(GENERATION))
        if unknown:
            raise FConvError(f"unknown translation option {unknown[0]!r}; the options are "
                             f"{', '.join(sorted(known | set(GENERATION)))}")
        generation = replace(defaults, **{name: asked.pop(name) for name in GENERATION if name in asked})
        generation.check()
        return cls(generation, **asked)

    def with_(self, **changed) -> "TranslationOptions":
        """These options with ``changed`` fields (generation settings by their names too)."""
        generation = {name: changed.pop(name) for name in GENERATION if name in changed}
        options = replace(self, **changed)
        return replace(options, generation=replace(options.generation, **generation)) if generation else options
