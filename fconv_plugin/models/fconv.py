"""ConvS2S encoder, decoder and model (Gehring et al. 2017, §3), as a fairseq model.

The math lives in ``fconv_plugin.modules``; this file wires it into fairseq's model
interface (options, building from a task, incremental decoding, checkpoints). Module
and parameter names follow fairseq's built-in fconv so checkpoints load both ways.
"""

import copy
import os
from typing import Dict, List, Optional

import torch
from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, FairseqIncrementalDecoder
from fairseq.modules import FairseqDropout
from torch import Tensor, nn

from .. import backend
from ..checkpoint_io import loading_fairseq_checkpoints
from ..errors import FConvError
from ..layer_spec import parse_attention, parse_conv_layers
from ..modules import (
    AttentionLayer,
    AttentionSource,
    CausalConvolution,
    ConvLayerSpec,
    PointerGenerator,
    TokenEmbedding,
    WeightNormConvTBC,
    WeightNormLinear,
    encoder_gradient_scale,
    forward_conv_blocks,
    scale_gradient,
)
from ..deployment.int8 import has_int8_weights, swap_in_int8_modules_
from ..modules.dropout import dropout_from_16_bit_draws
from ..modules.conv_block import SQRT_HALF, GatedLinearUnit, plan_conv_stack, residual_projection, same_length_padding
from ..modules.attention import AttentionSums
from ..modules.embeddings import SharedOutputEmbedding, positional_embedding_or_none
from . import attention_rows
from .architectures import base_architecture
from .checkpoint_compat import check_dictionary_sizes, upgrade_decoder_weight_norm
from .pretrained_embeddings import load_pretrained_embeddings


# fairseq's published ConvS2S models, by the names its own fconv registers with the hub
PUBLISHED_MODELS = {
    "conv.wmt14.en-fr": "wmt14.v2.en-fr.fconv-py.tar.bz2",
    "conv.wmt14.en-de": "wmt14.en-de.fconv-py.tar.bz2",
    "conv.wmt17.en-de": "wmt17.v2.en-de.fconv-py.tar.bz2",
}
PUBLISHED_MODELS_URL = "https://dl.fbaipublicfiles.com/fairseq/models/"


class FConvModel(FairseqEncoderDecoderModel):
    """Convolutional sequence to sequence model (Gehring et al. 2017)."""

    @classmethod
    def hub_models(cls):
        """Names ``from_pretrained`` resolves, as with fairseq's fconv (Moses + subword-nmt BPE)."""
        return {
            name: {"path": PUBLISHED_MODELS_URL + archive, "tokenizer": "moses", "bpe": "subword_nmt"}
            for name, archive in PUBLISHED_MODELS.items()
        }

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
        """fairseq's hub loader, reading the checkpoint with the plugin's safe loader (torch >= 2.6)."""
        with loading_fairseq_checkpoints(os.path.join(str(model_name_or_path), checkpoint_file)):
            return super().from_pretrained(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)

    def __init__(self, encoder: "FConvEncoder", decoder: "FConvDecoder"):
        super().__init__(encoder, decoder)
        if encoder.num_attention_layers != decoder.num_attention_layers:
            raise FConvError(
                f"the encoder scales its gradient for {encoder.num_attention_layers} attention layers but the decoder "
                f"has {decoder.num_attention_layers}; build the encoder with num_attention_layers="
                f"{decoder.num_attention_layers}"
            )

    @staticmethod
    def add_args(parser):
        """The options of fairseq's fconv, plus the position-embedding ablation switches."""
        parser.add_argument("--dropout", type=float, metavar="D", help="dropout probability")
        parser.add_argument("--encoder-embed-dim", type=int, metavar="N", help="encoder embedding dimension")
        parser.add_argument("--encoder-embed-path", type=str, metavar="STR", help="path to pre-trained encoder embedding")
        parser.add_argument("--encoder-layers", type=str, metavar="EXPR", help="encoder layers [(dim, kernel_size[, residual]), ...]")
        parser.add_argument("--decoder-embed-dim", type=int, metavar="N", help="decoder embedding dimension")
        parser.add_argument("--decoder-embed-path", type=str, metavar="STR", help="path to pre-trained decoder embedding")
        parser.add_argument("--decoder-layers", type=str, metavar="EXPR", help="decoder layers [(dim, kernel_size[, residual]), ...]")
        parser.add_argument("--decoder-out-embed-dim", type=int, metavar="N", help="decoder output embedding dimension")
        parser.add_argument("--decoder-attention", type=str, metavar="EXPR", help="decoder attention: True, False or [True, False, ...] per layer")
        parser.add_argument("--share-input-output-embed", action="store_true",
                            help="share input and output embeddings (requires --decoder-out-embed-dim equal to --decoder-embed-dim)")
        parser.add_argument("--no-encoder-positional-embeddings", action="store_true", help="no position embeddings in the encoder (ablation)")
        parser.add_argument("--no-decoder-positional-embeddings", action="store_true", help="no position embeddings in the decoder (ablation)")
        parser.add_argument("--pointer-generator", action="store_true",
                            help="copy source words through the attention, gated by a learned p_gen "
                                 "(See et al. 2017); needs fairseq-preprocess --joined-dictionary")
        parser.add_argument("--int8-weights", action="store_true",
                            help="the checkpoint holds int8 weights, as fconv-quantize writes them (inference only); "
                                 "set by fconv-quantize, not for training")

    @classmethod
    def build_model(cls, args, task):
        base_architecture(args)
        encoder_layers = parse_conv_layers(args.encoder_layers, "--encoder-layers")
        decoder_layers = parse_conv_layers(args.decoder_layers, "--decoder-layers")
        attention = parse_attention(args.decoder_attention, len(decoder_layers))
        _check_dimensions(args)
        if args.pointer_generator:
            _check_joined_dictionary(task.source_dictionary, task.target_dictionary)
        encoder = FConvEncoder(
            task.source_dictionary,
            embed_dim=args.encoder_embed_dim,
            convolutions=encoder_layers,
            dropout=args.dropout,
            max_positions=args.max_source_positions,
            positional_embeddings=not args.no_encoder_positional_embeddings,
            return_source_tokens=args.pointer_generator,
            num_attention_layers=sum(attention),
        )
        decoder = FConvDecoder(
            task.target_dictionary,
            embed_dim=args.decoder_embed_dim,
            convolutions=decoder_layers,
            out_embed_dim=args.decoder_out_embed_dim,
            attention=attention,
            dropout=args.dropout,
            max_positions=args.max_target_positions,
            share_embed=args.share_input_output_embed,
            positional_embeddings=not args.no_decoder_positional_embeddings,
            pointer_generator=args.pointer_generator,
        )
        if args.encoder_embed_path:
            load_pretrained_embeddings(encoder.embed_tokens, args.encoder_embed_path, task.source_dictionary, "--encoder-embed-path")
        if args.decoder_embed_path:
            load_pretrained_embeddings(decoder.embed_tokens, args.decoder_embed_path, task.target_dictionary, "--decoder-embed-path")
        model = cls(encoder, decoder)
        if args.int8_weights:  # a checkpoint written by fconv-quantize
            model.quantize_int8_()
        return model

    def quantize_int8_(self) -> None:
        """Matrix products and embedding tables in int8 (deployment/int8.py); inference only.

        A decoder embedding shared with the output layer (--share-input-output-embed)
        stays float32, as that output layer does. The attention's sums become their
        batch-invariant (float64) form, so a sentence's answer never depends on its batch."""
        shared_embedding = [self.decoder.embed_tokens] if self.decoder.share_input_output_embed else []
        swap_in_int8_modules_(self, keep=shared_embedding)

    def compute_in_(self, dtype: torch.dtype, dropout_draws: Optional[str] = None) -> "FConvModel":
        """Mixed precision: the matrix products and convolutions in ``dtype`` (torch.bfloat16,
        on CPUs with bfloat16 units), everything that keeps the model's precision in float32:
        the parameters, and so the optimizer's state and the checkpoints; weight norm's norms
        (``modules/weight_norm.py``); the attention's softmax and the copy mixture
        (``AttentionSums.softmax_dtype``); the loss's log-softmax, which fairseq computes in
        float32 from the logits. ``torch.float32`` makes it all float32 again. Training's
        dropout draws its masks as ``backend.training_dropout`` chooses for ``dtype``, or as
        ``dropout_draws`` (one of ``backend.DROPOUT_DRAWS``) says."""
        if dtype not in (torch.float32, torch.bfloat16):
            raise FConvError(f"the model computes in float32 or in mixed precision with bfloat16, not {dtype}")
        if dropout_draws is not None and dropout_draws not in backend.DROPOUT_DRAWS:
            raise FConvError(f"dropout draws are one of {', '.join(map(repr, backend.DROPOUT_DRAWS))}, not {dropout_draws!r}")
        if dtype != torch.float32 and self.has_int8_weights():
            raise FConvError("an int8 model (fconv-quantize) computes in int8 and float32; load the float32 checkpoint")
        mixed = None if dtype == torch.float32 else dtype
        self.encoder.compute_dtype = self.decoder.compute_dtype = mixed
        draws = backend.training_dropout(dtype) if dropout_draws is None else dropout_draws
        for module in self.modules():
            if isinstance(module, FConvDropout):
                module.draws = draws
        for module in self.modules():
            if isinstance(module, AttentionSums):
                module.softmax_dtype = None if mixed is None else torch.float32
        return self

    def has_int8_weights(self) -> bool:
        """Whether fconv-quantize's int8 layers are swapped in (``quantize_int8_``)."""
        return has_int8_weights(self)

    def returning_attention(self) -> "FConvModel":
        """This model, sharing every weight and module, with a decoder that returns its
        averaged attention in generation (alignments, ``--replace-unk``).

        A view for one caller: the model itself keeps the setting it was built or
        prepared with, so other callers of the same model are unaffected."""
        view = copy.copy(self)
        view._modules = dict(self._modules)
        decoder = copy.copy(self.decoder)
        decoder.need_attn = True
        view._modules["decoder"] = decoder
        return view

    def set_beam_size(self, beam_size: int) -> None:
        """fairseq's SequenceGenerator tells the model its beam size (see the decoder's)."""
        self.decoder.set_beam_size(beam_size)

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        check_dictionary_sizes(self, state_dict)
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)

    def prepare_for_inference_(self, cfg):
        """As fairseq's, but keep the attention when ``--replace-unk`` needs it (§4.4)."""
        super().prepare_for_inference_(cfg)
        generation = getattr(cfg, "generation", None)
        if getattr(generation, "replace_unk", None) is not None:
            self.decoder.need_attn = True


def _check_joined_dictionary(source_dictionary, target_dictionary) -> None:
    """Copying puts source token ids into the target vocabulary: both must be one dictionary."""
    if source_dictionary.symbols != target_dictionary.symbols:
        raise FConvError(
            "--pointer-generator copies source tokens into the output, so source and target must share one "
            "dictionary; binarise with fairseq-preprocess --joined-dictionary"
        )


def _check_dimensions(args) -> None:
    for name in ("encoder_embed_dim", "decoder_embed_dim", "decoder_out_embed_dim"):
        value = getattr(args, name)
        if not isinstance(value, int) or value <= 0:
            raise FConvError(f"--{name.replace('_', '-')} must be a positive whole number, got {value!r}")
    if not 0.0 <= args.dropout < 1.0:
        raise FConvError(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.share_input_output_embed and args.decoder_out_embed_dim != args.decoder_embed_dim:
        raise FConvError(
            "--share-input-output-embed needs --decoder-out-embed-dim equal to --decoder-embed-dim, "
            f"got {args.decoder_out_embed_dim} and {args.decoder_embed_dim}; set both to the same value"
        )


class FConvDropout(FairseqDropout):
    """fairseq's dropout module (``--retain-dropout`` reaches it as it does fairseq's fconv), drawing
    training's masks as ``draws`` says: torch's (fairseq's masks; float32 always) or
    ``modules/dropout.py``'s 16-bit draws (FConvModel.compute_in_ sets it from backend's choice)."""

    def __init__(self, p: float, module_name: Optional[str] = None):
        super().__init__(p, module_name=module_name)
        self.draws = backend.TORCH_DRAWS

    def forward(self, x: Tensor, inplace: bool = False) -> Tensor:
        if self.draws == backend.SIXTEEN_BIT_DRAWS and self.p > 0 and (self.training or self.apply_during_inference) \
                and x.device.type == "cpu":  # the choice is the CPU's (backend.training_dropout)
            return dropout_from_16_bit_draws(x, self.p)
        return super().forward(x, inplace)


class FConvEncoder(FairseqEncoder):
    """Embeddings, a stack of GLU convolution blocks, and the attention inputs (§3.1-3.2)."""

    def __init__(
        self,
        dictionary,
        embed_dim: int = 512,
        convolutions: List[ConvLayerSpec] = (ConvLayerSpec(512, 3),) * 20,
        dropout: float = 0.1,
        max_positions: int = 1024,
        positional_embeddings: bool = True,
        return_source_tokens: bool = False,
        num_attention_layers: int = 1,
    ):
        """``num_attention_layers``: how many decoder layers attend to this encoder; its
        gradient is scaled by 1 / (2 · that number) (§3.4)."""
        super().__init__(dictionary)
        self.dropout_module = FConvDropout(dropout, module_name=self.__class__.__name__)
        self.compute_dtype: Optional[torch.dtype] = None  # mixed precision's (FConvModel.compute_in_)
        self.num_attention_layers = num_attention_layers
        self.return_source_tokens = return_source_tokens  # a pointer-generator decoder copies them
        self.padding_idx = dictionary.pad()
        self.embed_tokens = TokenEmbedding(len(dictionary), embed_dim, self.padding_idx)
        self.embed_positions = positional_embedding_or_none(positional_embeddings, max_positions, embed_dim, self.padding_idx)

        self.plans = plan_conv_stack(convolutions, convolutions[0].out_channels)
        self.fc1 = WeightNormLinear(embed_dim, self.plans[0].in_channels, dropout=dropout)
        self.projections = nn.ModuleList([residual_projection(plan) for plan in self.plans])
        self.gate = GatedLinearUnit()
        self.convolutions = nn.ModuleList(
            [WeightNormConvTBC(p.in_channels, 2 * p.out_channels, p.kernel_size, dropout=dropout) for p in self.plans]
        )
        self.fc2 = WeightNormLinear(self.plans[-1].out_channels, embed_dim)

    def forward(self, src_tokens: Tensor, src_lengths: Optional[Tensor] = None, **unused) -> Dict[str, object]:
        """Returns z and (z + e)·√0.5, both batch x src_len x embed_dim, and the padding mask
        (None for a batch without padding)."""
        padding_mask = src_tokens.eq(self.padding_idx)
        return self.encode(src_tokens, padding_mask if padding_mask.any() else None)

    def encode(self, src_tokens: Tensor, padding_mask: Optional[Tensor]) -> Dict[str, object]:
        """``forward`` with the padding mask given (True at padding; None: no padding).

        A graph that serves padded and unpadded batches alike (the ONNX export) passes
        the mask always; all False gives the same outputs."""
        _check_length(src_tokens, self.padding_idx, self.max_positions(), "source", "--max-source-positions")
        x = self.embed_tokens(src_tokens)
        if self.embed_positions is not None:
            x = x + self.embed_positions(src_tokens)
        x = self.dropout_module(_in_compute_dtype(x, self.compute_dtype))
        input_embedding = x

        x = self.fc1(x)
        x = x.transpose(0, 1)  # time x batch x channel for the convolutions
        time_padding = None if padding_mask is None else padding_mask.t().unsqueeze(-1)

        def convolve(index: int, x: Tensor) -> Tensor:
            """The same-length convolution of block ``index``."""
            left, right = same_length_padding(self.plans[index].kernel_size)
            if left == right:
                return self.convolutions[index].convolve(x, padding=left)
            return self.convolutions[index].convolve(nn.functional.pad(x, (0, 0, 0, 0, left, right)))

        x = forward_conv_blocks(x, self.plans, self.projections, convolve, self.dropout_module, self.gate,
                                padding=time_padding)

        x = self.fc2(x.transpose(0, 1))
        if padding_mask is not None:
            x = x.masked_fill(padding_mask.unsqueeze(-1), 0)
        x = scale_gradient(x, encoder_gradient_scale(self.num_attention_layers))
        attention_values = (x + input_embedding) * SQRT_HALF
        out = {"encoder_out": (x, attention_values), "encoder_padding_mask": padding_mask}
        if self.return_source_tokens:
            out["src_tokens"] = src_tokens
        return out

    def reorder_encoder_out(self, encoder_out, new_order):
        """Beam search's reordering, recorded instead of applied: ``"rows"`` says which row
        of the encoder's tensors each reordered row is. fairseq reorders at every step, while
        the decoder reads the encoder output once per sentence (``AttentionSource``), so a
        step composes an index instead of copying every source state; ``encoder_rows``
        gives the rows for any other reader."""
        rows = encoder_out.get("rows")
        return {**encoder_out, "rows": new_order if rows is None else rows.index_select(0, new_order)}

    def max_positions(self):
        return _longest_sentence(self.embed_positions)


class FConvDecoder(FairseqIncrementalDecoder):
    """Causal GLU convolution blocks with multi-step attention (§3.2-3.3)."""

    def __init__(
        self,
        dictionary,
        embed_dim: int = 512,
        out_embed_dim: int = 256,
        max_positions: int = 1024,
        convolutions: List[ConvLayerSpec] = (ConvLayerSpec(512, 3),) * 20,
        attention: List[bool] = None,
        dropout: float = 0.1,
        share_embed: bool = False,
        positional_embeddings: bool = True,
        pointer_generator: bool = False,
    ):
        super().__init__(dictionary)
        self.register_buffer("version", torch.Tensor([2]))
        self.dropout_module = FConvDropout(dropout, module_name=self.__class__.__name__)
        self.compute_dtype: Optional[torch.dtype] = None  # mixed precision's (FConvModel.compute_in_)
        self.need_attn = True
        self.beam_size = 1  # hypotheses per sentence in beam search, as the generator says
        self.share_attention_across_beam = True
        padding_idx = dictionary.pad()
        self.padding_idx = padding_idx
        self.embed_tokens = TokenEmbedding(len(dictionary), embed_dim, padding_idx)
        self.embed_positions = positional_embedding_or_none(positional_embeddings, max_positions, embed_dim, padding_idx)

        self.plans = plan_conv_stack(convolutions, convolutions[0].out_channels)
        if attention is None:
            attention = [True] * len(self.plans)
        self.fc1 = WeightNormLinear(embed_dim, self.plans[0].in_channels, dropout=dropout)
        self.projections = nn.ModuleList([residual_projection(plan) for plan in self.plans])
        self.gate = GatedLinearUnit()
        self.convolutions = nn.ModuleList(
            [CausalConvolution(p.in_channels, 2 * p.out_channels, p.kernel_size, dropout=dropout) for p in self.plans]
        )
        self.attention = nn.ModuleList(
            [AttentionLayer(p.out_channels, embed_dim) if use else None for p, use in zip(self.plans, attention)]
        )
        self.num_attention_layers = sum(attention)

        self.fc2 = WeightNormLinear(self.plans[-1].out_channels, out_embed_dim)
        self.share_input_output_embed = share_embed
        if share_embed:
            self.fc3 = SharedOutputEmbedding(out_embed_dim, len(dictionary))
            self.fc3.weight = self.embed_tokens.weight
            nn.init.zeros_(self.fc3.bias)
        else:
            self.fc3 = WeightNormLinear(out_embed_dim, len(dictionary), dropout=dropout)
        self.pointer_generator = None
        if pointer_generator:
            if self.num_attention_layers == 0:
                raise FConvError("--pointer-generator copies through the attention; give at least one layer attention")
            self.pointer_generator = PointerGenerator(out_embed_dim, embed_dim, embed_dim)

    def forward(self, prev_output_tokens: Tensor, encoder_out=None, incremental_state=None,
                details: Optional[Dict[str, object]] = None, **unused):
        """Returns logits (batch x tgt_len x vocab) and the attention averaged over layers.

        With the pointer-generator the first output is log-probabilities of the mixture
        of generating and copying instead. With ``incremental_state`` only the last
        target position is computed. A ``details`` dict is filled with what the paper's
        figures show: ``attention``, every attention layer's weights (batch x tgt x src
        each, §3.3), and for a copying model ``p_gen`` (batch x tgt), the probability of
        generating rather than copying.
        """
        incremental = incremental_state is not None
        source = self._attention_source(encoder_out, incremental_state)
        tokens = prev_output_tokens[:, -1:] if incremental else prev_output_tokens
        if not incremental:
            _check_length(tokens, self.padding_idx, self.max_positions(), "target", "--max-target-positions")
        x = self.embed_tokens(tokens)
        if self.embed_positions is not None:
            x = x + self.embed_positions(prev_output_tokens, last_step_only=incremental)
        x = self.dropout_module(_in_compute_dtype(x, self.compute_dtype))
        target_embedding = x

        x = self.fc1(x)
        # Full sequences run the convolutions time-major; single steps stay batch-major.
        x = _swap_time_and_batch(x, incremental)
        copying = self.pointer_generator is not None
        want_attention = copying or details is not None or (not self.training and self.need_attn)
        attention_weights: List[Tensor] = []

        def convolve(index: int, x: Tensor) -> Tensor:
            return self.convolutions[index](x, incremental_state)

        def attend(index: int, x: Tensor) -> Tensor:
            """Block ``index``'s attention step (§3.3), where it has one."""
            attention = self.attention[index]
            if attention is None:
                return x
            x, weights = attention(_swap_time_and_batch(x, incremental), target_embedding, source)
            if want_attention:
                attention_weights.append(weights)
            return _swap_time_and_batch(x, incremental)

        x = forward_conv_blocks(x, self.plans, self.projections, convolve, self.dropout_module, self.gate, attend)

        x = self.fc2(_swap_time_and_batch(x, incremental))
        x = self.dropout_module(x)
        state = x
        x = self.fc3(x)
        average_attention = sum(attention_weights) / self.num_attention_layers if attention_weights else None
        if copying:
            context = self.pointer_generator.context(source, average_attention)
            x = self.pointer_generator(x, state, context, target_embedding, average_attention, source.tokens_per_row())
            if details is not None:
                gate_logit = self.pointer_generator.generation_probability(state, context, target_embedding)
                details["p_gen"] = torch.sigmoid(gate_logit).squeeze(-1)
            if not (self.need_attn and not self.training):
                average_attention = None
        if details is not None:
            details["attention"] = attention_weights
        return x, average_attention

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        """Softmax of the logits; the pointer-generator's output is log-probabilities already."""
        if self.pointer_generator is None:
            return super().get_normalized_probs(net_output, log_probs, sample)
        return net_output[0] if log_probs else net_output[0].exp()

    def _attention_source(self, encoder_out, incremental_state) -> Optional[AttentionSource]:
        """Encoder outputs prepared for attention; once per sentence when decoding step by step."""
        if incremental_state is not None:
            cached = self.cached_attention_source(incremental_state)
            if cached is not None:
                return cached
        if encoder_out is None:
            return None
        source = self.attention_source(encoder_out, incremental=incremental_state is not None)
        if incremental_state is not None:
            self.cache_attention_source(incremental_state, source)
        return source

    def attention_source(self, encoder_out, incremental: bool) -> AttentionSource:
        """The encoder outputs laid out for attention. Decoding step by step in eval mode,
        a sentence's hypotheses share one copy (``set_beam_size``, §3.3's BeamableMM idea)."""
        source = AttentionSource.from_encoder(
            encoder_out["encoder_out"], encoder_out["encoder_padding_mask"], encoder_out.get("src_tokens")
        )
        attention_layers = [layer for layer in self.attention if layer is not None]
        if attention_layers:  # every layer's sums have one form (float32, or int8's float64)
            source = source.summed_by(attention_layers[0].sums)
        sharing = self.share_attention_across_beam and not self.training and incremental
        copies = self.beam_size if sharing else 1
        if encoder_out.get("rows") is not None:  # reordered by the encoder (beam search's copies)
            return attention_rows.for_rows(source, encoder_out["rows"], copies)
        return attention_rows.shared_across(source, copies) if sharing else source

    def cached_attention_source(self, incremental_state) -> Optional[AttentionSource]:
        """The encoder outputs prepared for attention, kept in the decoding state."""
        cached = self.get_incremental_state(incremental_state, "attention_source")
        return None if cached is None else cached["source"]

    def cache_attention_source(self, incremental_state, source: AttentionSource) -> None:
        self.set_incremental_state(incremental_state, "attention_source", {"source": source})

    def reorder_incremental_state(self, incremental_state, new_order):
        super().reorder_incremental_state(incremental_state, new_order)
        cached = self.cached_attention_source(incremental_state)
        if cached is not None:
            self.cache_attention_source(incremental_state, attention_rows.reordered(cached, new_order))

    def max_positions(self):
        return _longest_sentence(self.embed_positions)

    def upgrade_state_dict_named(self, state_dict, name):
        upgrade_decoder_weight_norm(state_dict, f"{name}." if name else "")
        return state_dict

    def set_beam_size(self, beam_size: int) -> None:
        """Called by fairseq's SequenceGenerator: attention inputs are then kept once per sentence."""
        self.beam_size = beam_size

    def make_generation_fast_(self, need_attn: bool = False, **kwargs):
        """As fairseq's; ``--no-beamable-mm`` (beamable_mm_beam_size None) keeps one copy per hypothesis."""
        self.need_attn = need_attn
        if "beamable_mm_beam_size" in kwargs:
            beam_size = kwargs["beamable_mm_beam_size"]
            self.share_attention_across_beam = beam_size is not None
            if beam_size is not None:
                self.beam_size = beam_size


def encoder_rows(encoder_out: Dict[str, object]) -> Dict[str, object]:
    """The encoder output with a recorded reordering (``FConvEncoder.reorder_encoder_out``) applied."""
    rows = encoder_out.get("rows")
    if rows is None:
        return encoder_out
    keys, values = encoder_out["encoder_out"]
    applied = {key: value.index_select(0, rows) if isinstance(value, Tensor) else value
               for key, value in encoder_out.items() if key not in ("rows", "encoder_out")}
    applied["encoder_out"] = (keys.index_select(0, rows), values.index_select(0, rows))
    return applied


def _in_compute_dtype(embedded: Tensor, compute_dtype: Optional[torch.dtype]) -> Tensor:
    """The embeddings in the dtype the layers compute in: the parameters' own (None), or
    mixed precision's (``FConvModel.compute_in_``), which every later layer follows."""
    return embedded if compute_dtype is None else embedded.to(compute_dtype)


def _swap_time_and_batch(x: Tensor, incremental: bool) -> Tensor:
    """batch x time x channel <-> time x batch x channel: the convolutions run time-major,
    attention and the output layers batch-major. A single incremental step has no time
    axis to move and stays as it is."""
    return x if incremental else x.transpose(0, 1)


def _longest_sentence(embed_positions) -> float:
    """Tokens a sentence may have: the position table's limit, or none without one."""
    return embed_positions.max_positions if embed_positions is not None else float("inf")


def _check_length(tokens: Tensor, padding_idx: int, max_positions, side: str, option: str) -> None:
    if tokens.size(1) <= max_positions:
        return
    longest = int(tokens.ne(padding_idx).sum(dim=1).max())
    if longest > max_positions:
        raise FConvError(
            f"a {side} sentence has {longest} tokens but the model's position table holds {max_positions} "
            f"({option}); shorten or split it, or skip such sentences with --skip-invalid-size-inputs-valid-test"
        )
