"""Unknown-word replacement (Gehring et al. 2017, §5.1).

"Unknown words are replaced by looking up the source word with the maximum attention
score (averaged over all attention layers) in a precomputed dictionary; if the
dictionary has no translation, the source word is copied." The two halves of that
rule live here; ``compat.replace_unk`` wires them into fairseq-generate and
fairseq-interactive, and ``fconv-unk-dict`` builds the dictionary with the first.
"""

from typing import Dict, List, Optional, Sequence

from torch import Tensor


def attended_source_positions(attention: Tensor, src_tokens: Tensor, pad: int, eos: int) -> List[int]:
    """For each target position, the real source word with the largest averaged attention.

    ``attention`` is src_len x tgt_len over the padded source. Padding and the end of
    sentence are never chosen; the result indexes the real words in order, i.e. the
    whitespace-separated words of the original source line.
    """
    real = (src_tokens.ne(pad) & src_tokens.ne(eos)).nonzero().view(-1)
    if real.numel() == 0:
        return []
    return attention.index_select(0, real).argmax(dim=0).tolist()


def replace_unknown_words(
    hypo_tokens: Tensor,
    attended_positions: Sequence[int],
    source_words: Optional[Sequence[str]],
    tgt_dict,
    align_dict: Dict[str, str],
    ignore,
) -> List[str]:
    """The hypothesis' words with every ``<unk>`` replaced, symbols in ``ignore`` and padding dropped.

    An ``<unk>`` at target position t becomes ``align_dict[w]``, or ``w`` itself, where
    ``w = source_words[attended_positions[t]]``; without source words it stays ``<unk>``.
    """
    words = []
    for position, index in enumerate(hypo_tokens.tolist()):
        if index in ignore or index == tgt_dict.pad():
            continue
        source_word = None
        if index == tgt_dict.unk() and source_words and position < len(attended_positions):
            source_word = source_words[attended_positions[position]]
        words.append(tgt_dict[index] if source_word is None else align_dict.get(source_word, source_word))
    return words
