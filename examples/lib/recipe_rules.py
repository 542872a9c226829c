"""What the examples' recipes share (summarise_debian/recipe.py, translate_your_data/recipe.py).

A recipe's choice is ``{"value": ..., "why": "..."}``, printed in one block before training;
a knob the user set is kept as ``given``.
"""

from collections import Counter
from typing import Dict, Iterable

MERGE_MIN_COUNT = 10


def given(value) -> Dict:
    return {"value": value, "why": "given (knob set)"}


def bpe_merges(lines: Iterable[str], minimum: int, maximum: int) -> Dict:
    """One merge per word type seen at least 10 times in the training text, rounded to 500,
    ``minimum`` to ``maximum``: a subword unit is learnt only where there is data to learn it
    (Sennrich and Zhang 2019: smaller vocabularies for smaller corpora)."""
    counts = Counter(word for line in lines for word in line.split())
    frequent = sum(1 for count in counts.values() if count >= MERGE_MIN_COUNT)
    value = max(minimum, min(maximum, 500 * round(frequent / 500)))
    return {"value": value, "why": f"{frequent} word types occur at least {MERGE_MIN_COUNT} times in the training "
                                   f"text ({len(counts)} types), rounded to 500, {minimum}-{maximum}"}
