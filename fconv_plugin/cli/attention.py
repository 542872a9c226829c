"""Draw the multi-step attention of a trained model: one heat map per decoder layer.

Each decoder layer of ConvS2S has its own attention (Gehring et al. 2017, §3.3);
this translates raw sentences with beam search (the inference core), reads the chosen
translation back with teacher forcing, and writes one PNG per sentence with a panel for
every attention layer and one for their average (the attention ``--replace-unk`` and
``--print-alignment`` use); a copying model gets a panel with p_gen too. Source tokens run along the x axis, output tokens down
the y axis; BPE pieces that continue into the next piece end in "·".

    fconv-attention data-bin --path checkpoints/checkpoint_best.pt \\
        --tokenizer moses --bpe subword_nmt --bpe-codes codes --output-dir attention \\
        "Y dijo Dios: Sea la luz: y fué la luz."
"""

import argparse
import logging
import math
import os
import sys
from typing import List, Optional, Tuple

import torch

from .. import compat
from ..errors import FConvError
from ..inference import Translator


def draw(layers: List[torch.Tensor], source: List[str], target: List[str], title: str,
         p_gen: Optional[List[float]] = None):
    """A figure with one heat map per layer and one of their average, in a grid; for a
    copying model a last panel with p_gen, the probability of generating (not copying)
    each target token."""
    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # its font cache lines say nothing to act on
    from matplotlib.figure import Figure  # no pyplot: no global figure state, no display needed

    layers = [torch.as_tensor(layer) for layer in layers]
    panels: List[Tuple[str, torch.Tensor]] = [(f"layer {i + 1}", a) for i, a in enumerate(layers)]
    panels.append(("average (used by --replace-unk)", torch.stack(layers).mean(dim=0)))
    if p_gen is not None:
        panels.append(("p_gen: generate (1) or copy (0)", torch.tensor(p_gen).unsqueeze(1)))
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
        labels = source if weights.size(1) == len(source) else ["p_gen"]
        axis.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
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
    parser.add_argument("-s", "--source-lang", default=None, help="as in fairseq (default: from the data-bin's files)")
    parser.add_argument("-t", "--target-lang", default=None, help="as in fairseq (default: from the data-bin's files)")
    parser.add_argument("--tokenizer", default=None, help="as in fairseq-interactive, e.g. moses")
    parser.add_argument("--bpe", default=None, help="as in fairseq-interactive, e.g. subword_nmt")
    parser.add_argument("--bpe-codes", default=None, help="the codes file of --bpe subword_nmt")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--output-dir", default="attention", help="where the PNGs go (default: attention/)")
    args = parser.parse_intermixed_args(argv)
    compat.install()  # a fairseq command of the plugin's own: errors print as one line
    compat.console.command_logging()  # fairseq's log format, without hydra's DEBUG lines

    sentences = args.sentences or [line.strip() for line in sys.stdin if line.strip()]
    if not sentences:
        raise FConvError("no sentences given; pass them as arguments or one per line on stdin")
    translator = Translator.from_pretrained(args.path, args.data, source_lang=args.source_lang,
                                            target_lang=args.target_lang, tokenizer=args.tokenizer, bpe=args.bpe,
                                            bpe_codes=args.bpe_codes, beam=args.beam)
    if translator.models[0].decoder.num_attention_layers == 0:
        raise FConvError("this model has no attention layers (--decoder-attention False); there is nothing to draw")
    os.makedirs(args.output_dir, exist_ok=True)
    for number, (sentence, translation) in enumerate(zip(sentences, translator.translate(sentences, attention=True)), start=1):
        best = translation.best
        path = os.path.join(args.output_dir, f"attention-{number}.png")
        figure = draw(best.attention.layers, best.attention.source, best.attention.target,
                      f"{sentence}\n→ {best.text}", best.p_gen)
        figure.savefig(path, dpi=100)
        print(f"{path}\t{len(best.attention.layers)} attention layers\t{best.text}")


if __name__ == "__main__":
    main()
