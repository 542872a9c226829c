"""What a translation call returns: plain data, no tensors that tie it to a model."""

from dataclasses import dataclass, field
from typing import List, Optional, Tuple


@dataclass
class LayerAttention:
    """Every attention layer's weights for one hypothesis (§3.3), read with teacher forcing.

    ``layers[l][t][s]``: how much target token t attends to source token s in layer l.
    ``source`` and ``target`` label the tokens (Moses escapes undone, a BPE piece that
    continues into the next ends in "·"); both end in </s>."""

    source: List[str]
    target: List[str]
    layers: List[List[List[float]]]


@dataclass
class Hypothesis:
    """One translation of a sentence, as fairseq-interactive prints it.

    ``text`` is the D- line's text, ``score`` its score (log2, length-normalised),
    ``positional_scores`` the P- line (log2 per target token, </s> last), ``alignment``
    the A- line's (source word, target word) pairs when asked for. ``attention`` holds
    each layer's weights and ``p_gen`` (copying models) the probability of generating
    rather than copying at each target token, when asked for."""

    text: str
    tokens: List[int]  # target dictionary ids, ending in </s>
    score: float
    positional_scores: List[float]
    alignment: Optional[List[Tuple[int, int]]] = None
    attention: Optional[LayerAttention] = None
    p_gen: Optional[List[float]] = None


@dataclass
class Translation:
    """A source sentence and its hypotheses, best first."""

    source: str
    hypotheses: List[Hypothesis] = field(default_factory=list)

    @property
    def best(self) -> Hypothesis:
        return self.hypotheses[0]

    @property
    def text(self) -> str:
        return self.hypotheses[0].text


@dataclass
class DocumentTranslation:
    """A translated document: ``text`` keeps the source's paragraphs and line breaks;
    ``sentences`` pairs every source sentence (or piece of an over-long one) with its
    translation, in document order."""

    text: str
    sentences: List[Translation]
