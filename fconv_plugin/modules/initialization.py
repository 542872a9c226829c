"""Initialisation of ConvS2S (Gehring et al. 2017, §3.5).

The aim is to keep the variance of activations constant through the forward and
backward passes. ``dropout`` is the drop probability p of the dropout applied to the
layer's *input*, so ``1 - p`` is the retain probability that the paper writes as p.
"""

import math

EMBEDDING_STD = 0.1
"""Embeddings are drawn from N(0, 0.1) (§3.5); the padding row is zero."""


def std_for_linear(fan_in: int, dropout: float = 0.0) -> float:
    """N(0, sqrt((1 - p) / n_l)) for layers whose output is not fed to a GLU."""
    return math.sqrt((1.0 - dropout) / fan_in)


def std_for_glu_input(fan_in: int, dropout: float = 0.0) -> float:
    """N(0, sqrt(4 (1 - p) / n_l)) for layers feeding a gated linear unit.

    A GLU roughly quarters the variance of its input, so its input gets four times
    the variance of the layer input.
    """
    return math.sqrt(4.0 * (1.0 - dropout) / fan_in)
