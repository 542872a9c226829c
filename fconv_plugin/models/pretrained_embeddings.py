"""Pretrained word embeddings (``--encoder-embed-path`` / ``--decoder-embed-path``).

The file is fairseq's text format: a header line, then ``word v1 v2 ... vd`` per line.
Words of the dictionary found in the file take its vector; the others keep theirs.
"""

import os

import torch
from fairseq import utils

from ..errors import FConvError


def load_pretrained_embeddings(embedding: torch.nn.Embedding, path: str, dictionary, option: str) -> int:
    """Copy the vectors of ``path`` into ``embedding``; returns how many words were found."""
    if not os.path.isfile(path):
        raise FConvError(f"{option} {path!r} does not exist; give a text file with one 'word v1 ... vd' per line")
    try:
        vectors = utils.parse_embedding(path)
    except (ValueError, IndexError, UnicodeDecodeError) as e:
        raise FConvError(f"{option} {path!r} is not a text embedding file ({e}); expected a header line, then 'word v1 ... vd'") from None
    dim = embedding.embedding_dim
    wrong = next((word for word, vector in vectors.items() if vector.numel() != dim), None)
    if wrong is not None:
        raise FConvError(f"{option} {path!r}: the vector of {wrong!r} has {vectors[wrong].numel()} values but the embedding dimension is {dim}")
    found = 0
    with torch.no_grad():
        for index, word in enumerate(dictionary.symbols):
            if word in vectors:
                embedding.weight[index] = vectors[word]
                found += 1
    return found
