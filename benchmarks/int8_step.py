"""Where int8's decoder step spends its time against float32's, part by part.

On a trained run's model (the quickstart's), one incremental step for beam 5 x 16
sentences (80 hypotheses, a 40-token source; ``step_overhead.state_at_step``; other batch
sizes with --sentences), timed in one process, the forms taking turns in every repetition:

- the whole step: float32 against int8 (fconv-quantize's copy);
- each part of it that int8 computes differently, at the step's shapes, three ways: the
  float32 model's operation, int8's compiled loop (``int8_rows.cpp``, what runs), and
  int8's torch-operations form (what an export traces; the reference the loop is tested
  against bit for bit):
  - ``linear``: every product of the step (fc1, the convolutions, the attention
    projections, fc2, fc3), summed;
  - ``gate``: the convolution blocks' GLU, all layers;
  - ``attention sums``: scores, softmax and read, all layers.

    python benchmarks/int8_step.py examples/bible_es_en/runs/latest [--sentences 16] [--repeats 5]

Reported: milliseconds per step (median of the repetitions) and ratios to float32. What
the parts leave of the step is the same in both forms (embeddings, residuals, the
convolution windows, the log-softmax, Python).
"""

import argparse
import logging
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from load_test import int8_copy  # noqa: E402  the load test's int8 copy of the run's model
from step_overhead import BEAM, SENTENCES, SOURCE_LENGTH, state_at_step  # noqa: E402

from fconv_plugin.inference import Translator  # noqa: E402
from fconv_plugin.deployment import int8 as int8_layers  # noqa: E402


def loaded(checkpoint: Path, run: Path):
    translator = Translator.from_pretrained(checkpoint, run / "data-bin", cpu=True)
    model = translator.models[0]
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return translator, model


def whole_step(translator, model, sentences: int):
    encoder_out, prefix, state = state_at_step(model, translator.task, sentences)

    def step():
        logits, _ = model.decoder(prefix, encoder_out=encoder_out, incremental_state=dict(state))
        return model.get_normalized_probs((logits[:, -1:, :], None), log_probs=True)

    return step


def products(model, sentences: int):
    """Every product of one step, with an input of the step's shape: (layer, x) pairs."""
    decoder = model.decoder
    layers = [decoder.fc1]
    for conv, attention in zip(decoder.convolutions, decoder.attention):
        layers.append(conv)
        if attention is not None:
            layers += [attention.in_projection, attention.out_projection]
    layers += [decoder.fc2, decoder.fc3]
    generator = torch.Generator().manual_seed(0)
    pairs = []
    for layer in layers:
        width = layer.kernel_size * layer.in_channels if hasattr(layer, "kernel_size") else layer.in_features
        pairs.append((layer, torch.randn(sentences * BEAM, width, generator=generator)))
    return pairs


def part_inputs(model, sentences: int, embed: int):
    """Inputs of the step's shapes for each part: the products' (layer, x) pairs, the gates'
    inputs and the attention's queries."""
    gates = [torch.randn(sentences * BEAM, 1, conv.out_channels) for conv in model.decoder.convolutions]
    return products(model, sentences), gates, torch.randn(sentences, BEAM, embed)


def float32_parts(model, keys, values):
    """The float32 model's counterparts of int8's parts."""
    pairs, gates, query = part_inputs(model, keys.size(0), keys.size(1))

    def linear():
        for layer, x in pairs:
            layer.window_product(x) if hasattr(layer, "window_product") else layer(x)

    return {
        "linear": linear,
        "gate": lambda: [F.glu(x, -1) for x in gates],
        "attention sums": lambda: [torch.bmm(torch.softmax(torch.bmm(query, keys), -1), values)
                                   for _ in model.decoder.convolutions],
    }


def int8_parts(model, keys, values, compiled: bool):
    """int8's parts, through the compiled loops or as torch operations."""
    pairs, gates, query = part_inputs(model, keys.size(0), keys.size(1))
    keys_operand, values_operand = (keys, values) if compiled else (keys.double(), values.double())

    def linear():
        for layer, x in pairs:
            if compiled:
                layer.int8.linear(x, layer.bias)
            else:
                layer.int8.linear_in_torch_operations(x, layer.bias)

    def gate():
        for x in gates:
            if compiled:
                int8_layers.fused_rows.gate(x)
            else:
                int8_layers.PreciseGatedLinearUnit.forward_in_torch_operations(x)

    def attention_sums():
        for _ in model.decoder.convolutions:
            if compiled:
                int8_layers.fused_rows.attention_read(
                    int8_layers.fused_rows.attention_weights(query, keys_operand, None), values_operand)
            else:
                weights = torch.softmax(torch.bmm(query.double(), keys_operand), -1).float()
                torch.bmm(weights.double(), values_operand).float()

    return {"linear": linear, "gate": gate, "attention sums": attention_sums}


def timed(function, steps: int) -> float:
    for _ in range(10):
        function()
    start = time.perf_counter()
    for _ in range(steps):
        function()
    return (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a quickstart run directory (examples/bible_es_en/runs/latest)")
    parser.add_argument("--sentences", type=int, default=SENTENCES, help="sentences of beam 5 in the step")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200, help="steps timed in each repetition")
    args = parser.parse_args()
    if int8_layers.fused_rows is None:
        sys.exit("int8_step.py: the compiled loops are not built; pip install --no-build-isolation -e .")
    torch.set_num_threads(2)
    float32 = loaded(args.run / "checkpoints" / "checkpoint_best.pt", args.run)
    int8 = loaded(int8_copy(args.run), args.run)
    generator = torch.Generator().manual_seed(1)
    embed = float32[1].decoder.embed_tokens.embedding_dim
    keys = torch.randn(args.sentences, embed, SOURCE_LENGTH, generator=generator)
    values = torch.randn(args.sentences, SOURCE_LENGTH, embed, generator=generator)
    with torch.no_grad():
        forms = {
            "float32": {"whole step": whole_step(*float32, args.sentences), **float32_parts(float32[1], keys, values)},
            "int8": {"whole step": whole_step(*int8, args.sentences), **int8_parts(int8[1], keys, values, compiled=True)},
            "int8, torch operations": int8_parts(int8[1], keys, values, compiled=False),
        }
        times = {form: {part: [] for part in parts} for form, parts in forms.items()}
        for repeat in range(args.repeats):
            order = list(forms) if repeat % 2 == 0 else list(reversed(forms))
            for form in order:
                for part, function in forms[form].items():
                    times[form][part].append(timed(function, args.steps))
    print(f"one decoder step, {args.sentences * BEAM} hypotheses, source {SOURCE_LENGTH}, 2 threads, median of {args.repeats} "
          f"(torch {torch.__version__}, compiled loops for AVX2+FMA: {int8_layers.fused_rows.avx2_fma}):")
    print(f"  {'part':16s} {'float32':>10s} {'int8':>16s} {'int8, torch operations':>26s}")
    for part in forms["float32"]:
        base = statistics.median(times["float32"][part])
        cells = [f"{base * 1e3:7.3f} ms"]
        for form in ("int8", "int8, torch operations"):
            if part in times[form]:
                median = statistics.median(times[form][part])
                cells.append(f"{median * 1e3:7.3f} ms ({base / median:4.2f}x)")
            else:
                cells.append("")
        print(f"  {part:16s} {cells[0]:>10s} {cells[1]:>16s} {cells[2]:>26s}")
    print("  (x: float32's time over the form's; above 1, the form is faster)")


if __name__ == "__main__":
    main()
