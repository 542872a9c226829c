"""Named architectures, with exactly the layer specs and widths of fairseq's fconv.

Each function fills in the options a user did not give, like fairseq's
``register_model_architecture`` functions; checkpoints trained with fairseq's
``--arch`` of the same name load into these.
"""

from argparse import Namespace
from typing import Callable, Dict


def _default(args: Namespace, name: str, value) -> None:
    if getattr(args, name, None) is None:
        setattr(args, name, value)


def base_architecture(args: Namespace) -> None:
    """``fconv``: 20 + 20 layers of 512 channels, kernel width 3."""
    _default(args, "dropout", 0.1)
    _default(args, "encoder_embed_dim", 512)
    _default(args, "encoder_embed_path", None)
    _default(args, "encoder_layers", "[(512, 3)] * 20")
    _default(args, "decoder_embed_dim", 512)
    _default(args, "decoder_embed_path", None)
    _default(args, "decoder_layers", "[(512, 3)] * 20")
    _default(args, "decoder_out_embed_dim", 256)
    _default(args, "decoder_attention", "True")
    _default(args, "share_input_output_embed", False)
    _default(args, "no_encoder_positional_embeddings", False)
    _default(args, "no_decoder_positional_embeddings", False)
    _default(args, "pointer_generator", False)
    _default(args, "int8_weights", False)


def fconv_iwslt_de_en(args: Namespace) -> None:
    _default(args, "encoder_embed_dim", 256)
    _default(args, "encoder_layers", "[(256, 3)] * 4")
    _default(args, "decoder_embed_dim", 256)
    _default(args, "decoder_layers", "[(256, 3)] * 3")
    _default(args, "decoder_out_embed_dim", 256)
    base_architecture(args)


def fconv_wmt_en_ro(args: Namespace) -> None:
    _default(args, "decoder_out_embed_dim", 512)
    base_architecture(args)


WMT_EN_DE_LAYERS = "[(512, 3)] * 9 + [(1024, 3)] * 4 + [(2048, 1)] * 2"
WMT_EN_FR_LAYERS = "[(512, 3)] * 6 + [(768, 3)] * 4 + [(1024, 3)] * 3 + [(2048, 1)] * 1 + [(4096, 1)] * 1"


def _wmt_architecture(args: Namespace, layers: str) -> None:
    """The paper's large WMT'14 models: 768-dim embeddings, the same stack on both sides."""
    _default(args, "encoder_embed_dim", 768)
    _default(args, "encoder_layers", layers)
    _default(args, "decoder_embed_dim", 768)
    _default(args, "decoder_layers", layers)
    _default(args, "decoder_out_embed_dim", 512)
    base_architecture(args)


def fconv_wmt_en_de(args: Namespace) -> None:
    """WMT'14 English-German (15 + 15 layers)."""
    _wmt_architecture(args, WMT_EN_DE_LAYERS)


def fconv_wmt_en_fr(args: Namespace) -> None:
    """WMT'14 English-French (15 + 15 layers)."""
    _wmt_architecture(args, WMT_EN_FR_LAYERS)


def fconv_gigaword(args: Namespace) -> None:
    """Abstractive summarisation (§5.4, Gigaword/DUC-2004): 6 + 6 layers of 256 units."""
    _default(args, "encoder_embed_dim", 256)
    _default(args, "encoder_layers", "[(256, 3)] * 6")
    _default(args, "decoder_embed_dim", 256)
    _default(args, "decoder_layers", "[(256, 3)] * 6")
    _default(args, "decoder_out_embed_dim", 256)
    base_architecture(args)


def fconv_gigaword_copy(args: Namespace) -> None:
    """``fconv_gigaword`` that can also copy source words (pointer-generator, See et al. 2017)."""
    _default(args, "pointer_generator", True)
    fconv_gigaword(args)


ARCHITECTURES: Dict[str, Callable[[Namespace], None]] = {
    "fconv": base_architecture,
    "fconv_iwslt_de_en": fconv_iwslt_de_en,
    "fconv_wmt_en_ro": fconv_wmt_en_ro,
    "fconv_wmt_en_de": fconv_wmt_en_de,
    "fconv_wmt_en_fr": fconv_wmt_en_fr,
    "fconv_gigaword": fconv_gigaword,
    "fconv_gigaword_copy": fconv_gigaword_copy,
}
