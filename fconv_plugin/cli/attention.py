"""Draw the multi-step attention of a trained model: one heat map per decoder layer.

Each decoder layer of ConvS2S has its own attention (Gehring et al. 2017, §3.3);
this translates raw sentences with beam search, reads the chosen translation back
with teacher forcing, and writes one PNG per sentence with a panel for every
attention layer and one for their average (the attention ``--replace-unk`` and
``--print-alignment`` use). Source tokens run along the x axis, output tokens down
the y axis; BPE pieces that continue into the next piece end in "·".

    fconv-attention data-bin --path checkpoints/checkpoint_best.pt \\
        --tokenizer moses --bpe subword_nmt --bpe-codes codes --output-dir attention \\
        "Y dijo Dios: Sea la luz: y fué la luz."
"""

import argparse
import html
import logging
import math
import os
import sys
from typing import List, Tuple

import torch

from .. import compat
from ..errors import FConvError
from ..models import FConvModel
from ..modules import AttentionLayer


def attention_per_layer(model, src_tokens: torch.Tensor, target_tokens: torch.Tensor) -> List[torch.Tensor]:
    """Teacher-forced attention of every attention layer: a list of (tgt_len x src_len).

    ``src_tokens`` and ``target_tokens`` are one sentence each, both ending in </s>.
    """
    eos = model.decoder.dictionary.eos()
    prev_output_tokens = torch.cat([target_tokens.new_tensor([eos]), target_tokens[:-1]]).unsqueeze(0)
    captured = []
    hooks = [
        layer.register_forward_hook(lambda _module, _inputs, output: captured.append(output[1][0]))
        for layer in model.decoder.attention if isinstance(layer, AttentionLayer)
    ]
    try:
        model.eval()
        with torch.no_grad():
            model(src_tokens.unsqueeze(0), torch.tensor([src_tokens.numel()]), prev_output_tokens)
    finally:
        for hook in hooks:
            hook.remove()
    return captured


def readable(pieces: List[str]) -> List[str]:
    """Token labels: Moses escapes undone, BPE continuation '@@' shown as '·'."""
    labels = []
    for piece in pieces:
        piece = html.unescape(piece).replace("@-@", "-")
        labels.append(piece[:-2] + "·" if piece.endswith("@@") else piece)
    return labels


def draw(layers: List[torch.Tensor], source: List[str], target: List[str], title: str):
    """A figure with one heat map per layer and one of their average, in a grid."""
    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # fairseq leaves the root logger chatty
    from matplotlib.figure import Figure  # no pyplot: no global figure state, no display needed

    panels: List[Tuple[str, torch.Tensor]] = [(f"layer {i + 1}", a) for i, a in enumerate(layers)]
    panels.append(("average (used by --replace-unk)", torch.stack(layers).mean(dim=0)))
    columns = min(4, len(panels))
    rows = math.ceil(len(panels) / columns)
    cell = 0.22
    width = max(3.0, cell * len(source) + 1.6)
    height = max(2.5, cell * len(target) + 1.4)
    fig = Figure(figsize=(width * columns, height * rows))
    axes = fig.subplots(rows, columns, squeeze=False)
    for axis in axes.flat[len(panels):]:
        axis.axis("off")
    for axis, (name, weights) in zip(axes.flat, panels):
        axis.imshow(weights.numpy(), cmap="Greys", vmin=0.0, vmax=1.0, aspect="equal")
        axis.set_title(name, fontsize=9)
        axis.set_xticks(range(len(source)), source, rotation=90, fontsize=7)
        axis.set_yticks(range(len(target)), target, fontsize=7)
        axis.tick_params(length=0)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="the data-bin directory with the model's dictionaries")
    parser.add_argument("sentences", nargs="*", help="raw source sentences (default: one per line on stdin)")
    parser.add_argument("--path", required=True, help="checkpoint of the trained model")
    parser.add_argument("--source-lang", default=None)
    parser.add_argument("--target-lang", default=None)
    parser.add_argument("--tokenizer", default=None, help="as in fairseq-interactive, e.g. moses")
    parser.add_argument("--bpe", default=None, help="as in fairseq-interactive, e.g. subword_nmt")
    parser.add_argument("--bpe-codes", default=None, help="the codes file of --bpe subword_nmt")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--output-dir", default="attention", help="where the PNGs go (default: attention/)")
    args = parser.parse_intermixed_args(argv)
    compat.install()  # a fairseq command of the plugin's own: errors print as one line

    sentences = args.sentences or [line.strip() for line in sys.stdin if line.strip()]
    if not sentences:
        raise FConvError("no sentences given; pass them as arguments or one per line on stdin")
    if not os.path.isfile(args.path):
        raise FConvError(f"--path {args.path}: no such checkpoint file")
    options = {k: v for k, v in (("source_lang", args.source_lang), ("target_lang", args.target_lang),
                                 ("tokenizer", args.tokenizer), ("bpe", args.bpe), ("bpe_codes", args.bpe_codes)) if v}
    hub = FConvModel.from_pretrained(os.path.dirname(os.path.abspath(args.path)),
                                     checkpoint_file=os.path.basename(args.path), data_name_or_path=args.data, **options)
    model = hub.models[0]
    if model.decoder.num_attention_layers == 0:
        raise FConvError("this model has no attention layers (--decoder-attention False); there is nothing to draw")
    os.makedirs(args.output_dir, exist_ok=True)
    src_dict, tgt_dict = hub.src_dict, hub.tgt_dict
    for number, sentence in enumerate(sentences, start=1):
        src_tokens = hub.encode(sentence)
        best = hub.generate([src_tokens], beam=args.beam)[0][0]
        layers = attention_per_layer(model, src_tokens, best["tokens"])
        source = readable([src_dict[i] for i in src_tokens.tolist()])
        target = readable([tgt_dict[i] for i in best["tokens"].tolist()])
        translation = hub.decode(best["tokens"])
        path = os.path.join(args.output_dir, f"attention-{number}.png")
        figure = draw(layers, source, target, f"{sentence}\n→ {translation}")
        figure.savefig(path, dpi=100)
        print(f"{path}\t{len(layers)} attention layers\t{translation}")


if __name__ == "__main__":
    main()
