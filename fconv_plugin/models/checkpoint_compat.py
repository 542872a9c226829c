"""State-dict checks and upgrades applied when a checkpoint is loaded into the model."""

import torch

from ..errors import FConvError
from ..modules.weight_norm import norm_except_dim


def check_dictionary_sizes(model, state_dict) -> None:
    """Refuse a checkpoint whose vocabularies differ from the task's, naming both sizes."""
    for side, module, kind in (("encoder", model.encoder, "source"), ("decoder", model.decoder, "target")):
        stored = state_dict.get(f"{side}.embed_tokens.weight", state_dict.get(f"{side}.embed_tokens.int8.weight"))
        embedding = module.embed_tokens  # float32 or int8: both have the table's sizes
        if stored is not None and stored.size(0) != embedding.num_embeddings:
            raise FConvError(
                f"the checkpoint was trained with a {kind} dictionary of {stored.size(0)} symbols but the "
                f"current {kind} dictionary has {embedding.num_embeddings}; use the dict files the model was trained with"
            )
        if stored is not None and stored.size(1) != embedding.embedding_dim:
            raise FConvError(
                f"the checkpoint's {side} embeddings have {stored.size(1)} dimensions but the model was built "
                f"with {embedding.embedding_dim}; check --{side}-embed-dim and --arch"
            )


def upgrade_decoder_weight_norm(state_dict, prefix: str) -> None:
    """Move pre-2018 decoder convolutions (``decoder.version`` < 2) to today's layout.

    Old checkpoints normalised the decoder convolution weights over dim 0, so each
    ``weight_g`` is (k, 1, 1). The effective weight w = g · v / ‖v‖ is rebuilt and
    re-expressed per output channel, ``weight_g`` (1, 1, out) and ``weight_v`` = w,
    which gives the same w and hence the same outputs.
    """
    version = state_dict.get(prefix + "version")
    if version is not None and float(version.flatten()[0]) >= 2:
        return
    index = 0
    while prefix + f"convolutions.{index}.weight_v" in state_dict:
        key_g, key_v = prefix + f"convolutions.{index}.weight_g", prefix + f"convolutions.{index}.weight_v"
        g, v = state_dict[key_g], state_dict[key_v]
        if g.dim() == 3 and g.shape == (v.size(0), 1, 1) and v.size(2) != 1:
            weight = v * (g / norm_except_dim(v, 0))
            state_dict[key_v] = weight
            state_dict[key_g] = norm_except_dim(weight, 2)
        index += 1
    state_dict[prefix + "version"] = torch.Tensor([2])
