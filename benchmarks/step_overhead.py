"""How much of one decoder step is the model's structure rather than its arithmetic.

On a trained run's model (the quickstart's ``fconv_iwslt_de_en``), one incremental step for
beam 5 x 16 sentences (80 hypotheses, a 40-token source, the 12th target position), seven
ways, taking turns in every repetition, in one process:

1. ``module step``: the decoder as fairseq's generator calls it (fairseq's incremental state);
2. ``explicit state``: the same modules, called in order, with the convolutions' input
   histories passed in and out instead of fairseq's incremental-state dictionary;
3. ``plain function``: the same torch operations on the same weights, written as one
   function without modules;
4. ``TorchScript``: that function traced, as torch runs it by default (the operations
   without Python, and torch's fuser joining elementwise ones into its own loops);
5. ``TorchScript unfused``: the same trace run with the fuser off (only leaving Python);
6. ``decoder steps``: ``models/decoder_steps.py``'s Python step (``compiled=False``: the
   newest tokens in, the state in plain tensors, each layer a function looked up once
   per call);
7. ``compiled step``: what the inference core's beam search runs since stop 46, the same
   step after the embeddings compiled (``native/decoder_step.cpp``: the same ATen calls
   in the same order): what leaving Python alone saves the core's step.

It prints milliseconds per step, the ratio to the module step, and whether each gives
the module step's log-probabilities bit for bit. The difference between 1 and 3 is what
restructuring the step in Python could save; between 3 and 5, and between 6 and 7, what
leaving Python saves; between 5 and 4, what fusing elementwise operations saves; the rest
is the operations themselves. Only the float32 form of a model without a
pointer-generator and with attention in every layer (as the quickstart's) is written out.

    python benchmarks/step_overhead.py examples/bible_es_en/runs/latest [--repeats 5]
"""

import argparse
import logging
import math
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
from fconv_plugin.inference import Translator  # noqa: E402
from fconv_plugin import native  # noqa: E402
from fconv_plugin.models.decoder_steps import DecoderSteps, DecodingState  # noqa: E402
from fconv_plugin.modules.conv_block import add_residual  # noqa: E402

SQRT_HALF = math.sqrt(0.5)
SENTENCES, BEAM, SOURCE_LENGTH, STEP = 16, 5, 40, 12


def state_at_step(model, task, sentences: int = SENTENCES):
    """(encoder output, target prefix, incremental state) with the first STEP - 1 steps decoded."""
    torch.manual_seed(0)
    rows = sentences * BEAM
    src = torch.randint(task.source_dictionary.nspecial, len(task.source_dictionary), (sentences, SOURCE_LENGTH))
    src[:, -1] = task.source_dictionary.eos()
    encoder_out = model.encoder(src, torch.full((sentences,), SOURCE_LENGTH))
    encoder_out = model.encoder.reorder_encoder_out(encoder_out, torch.arange(sentences).repeat_interleave(BEAM))
    prefix = torch.randint(task.target_dictionary.nspecial, len(task.target_dictionary), (rows, STEP))
    prefix[:, 0] = task.target_dictionary.eos()
    model.set_beam_size(BEAM)
    state = {}
    for length in range(1, STEP):
        model.decoder(prefix[:, :length], encoder_out=encoder_out, incremental_state=state)
    return encoder_out, prefix, state


def the_steps(model, encoder_out, prefix, state):
    decoder = model.decoder
    rows = prefix.size(0)
    source = decoder.cached_attention_source(state)
    histories = [conv.input_history(state) for conv in decoder.convolutions]

    def module_step():
        logits, _ = decoder(prefix, encoder_out=encoder_out, incremental_state=dict(state))
        return model.get_normalized_probs((logits[:, -1:, :], None), log_probs=True)[:, -1, :]

    def explicit_state():
        x = decoder.embed_tokens(prefix[:, -1:]) + decoder.embed_positions(prefix, last_step_only=True)
        target_embedding = x
        x = decoder.fc1(x)
        for conv, attention, history in zip(decoder.convolutions, decoder.attention, histories):
            residual = x
            window = torch.cat([history, x], 1)
            y = decoder.gate(conv.window_product(window.reshape(rows, -1)).view(rows, 1, -1))
            y, _ = attention(y, target_embedding, source)
            x = add_residual(y, residual)
        return torch.log_softmax(decoder.fc3(decoder.fc2(x)), -1)[:, -1, :]

    def transposed(linear):
        return linear.normalized_weight().t()

    fc1, fc2, fc3 = ((layer.bias, transposed(layer)) for layer in (decoder.fc1, decoder.fc2, decoder.fc3))
    convolutions = [(conv.bias, conv.flat_weight()) for conv in decoder.convolutions]
    attentions = [(a.in_projection.bias, transposed(a.in_projection), a.out_projection.bias, transposed(a.out_projection))
                  for a in decoder.attention]
    copies = source.copies
    length_scale = source.length_scale if torch.is_tensor(source.length_scale) else torch.tensor(source.length_scale)

    def plain(last, position, keys, values, scale, *histories):
        x = F.embedding(last, decoder.embed_tokens.weight) + F.embedding(position, decoder.embed_positions.weight)
        target_embedding = x
        x = torch.addmm(fc1[0], x.reshape(rows, -1), fc1[1]).view(rows, 1, -1)
        for (conv_bias, conv_weight), (in_bias, in_weight, out_bias, out_weight), history in zip(
                convolutions, attentions, histories):
            residual = x
            window = torch.cat([history, x], 1)
            y = F.glu(torch.addmm(conv_bias, window.reshape(rows, -1), conv_weight).view(rows, 1, -1), -1)
            query = (torch.addmm(in_bias, y.reshape(rows, -1), in_weight).view(rows, 1, -1) + target_embedding) * SQRT_HALF
            weights = torch.softmax(torch.bmm(query.reshape(rows // copies, copies, -1), keys), -1)
            context = (torch.bmm(weights, values) * scale).view(rows, 1, -1)
            y = (torch.addmm(out_bias, context.reshape(rows, -1), out_weight).view(rows, 1, -1) + y) * SQRT_HALF
            x = (y + residual) * SQRT_HALF
        x = torch.addmm(fc3[0], torch.addmm(fc2[0], x.reshape(rows, -1), fc2[1]), fc3[1])
        return torch.log_softmax(x, -1)

    position = torch.full((rows, 1), decoder.padding_idx + prefix.size(1))
    arguments = (prefix[:, -1:], position, source.keys, source.values, length_scale, *histories)
    traced = torch.jit.trace(plain, arguments, check_trace=False)
    unfused = torch.jit.trace(plain, arguments, check_trace=False)
    fusing = torch._C._jit_texpr_fuser_enabled()
    torch._C._jit_set_texpr_fuser_enabled(False)
    try:  # the executor settles its plan over the first calls and keeps it
        for _ in range(5):
            unfused(*arguments)
    finally:
        torch._C._jit_set_texpr_fuser_enabled(fusing)

    def decoder_steps(compiled: bool):
        steps = DecoderSteps(model, compiled)
        state = steps.start(encoder_out)
        if compiled and state.compiled is None:
            sys.exit(f"step_overhead.py: the compiled decoder step does not run: {native.reason('decoder_step')}")
        for length in range(1, prefix.size(1)):  # the same first STEP - 1 steps
            steps.log_probs(state, prefix[:, :length], attention=False)

        def step():  # fresh histories each time: a step replaces them
            fresh = DecodingState(state.layers, state.source, None if compiled else list(state.histories),
                                  state.compiled.copy() if compiled else None)
            return steps.log_probs(fresh, prefix, attention=False)[0]
        return step

    return {"module step": module_step, "explicit state": explicit_state,
            "plain function": lambda: plain(*arguments), "TorchScript": lambda: traced(*arguments),
            "TorchScript unfused": lambda: unfused(*arguments), "decoder steps": decoder_steps(compiled=False),
            "compiled step": decoder_steps(compiled=True)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a quickstart run directory (examples/bible_es_en/runs/latest)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300, help="steps timed in each repetition")
    args = parser.parse_args()
    torch.set_num_threads(2)
    translator = Translator.from_pretrained(args.run / "checkpoints" / "checkpoint_best.pt", args.run / "data-bin", cpu=True)
    model = translator.models[0]
    decoder = model.decoder
    if decoder.pointer_generator is not None or None in list(decoder.attention) or any(
            p is not None for p in decoder.projections) or translator.int8:
        sys.exit("step_overhead.py: written out for float32 models with attention in every layer, no residual "
                 "projections and no pointer-generator (the quickstart's)")
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    with torch.no_grad():
        steps = the_steps(model, *state_at_step(model, translator.task))
        reference = steps["module step"]()
        same = {name: torch.equal(step(), reference) for name, step in steps.items()}
        times = {name: [] for name in steps}
        for repeat in range(args.repeats):
            order = list(steps) if repeat % 2 == 0 else list(reversed(steps))
            for name in order:
                for _ in range(20):
                    steps[name]()
                start = time.perf_counter()
                for _ in range(args.steps):
                    steps[name]()
                times[name].append((time.perf_counter() - start) / args.steps)
    base = statistics.median(times["module step"])
    print(f"one decoder step, {SENTENCES * BEAM} hypotheses, source {SOURCE_LENGTH}, position {STEP}, "
          f"2 threads, median of {args.repeats}:")
    for name in steps:
        median = statistics.median(times[name])
        print(f"  {name:19s} {median * 1e3:6.3f} ms  {median / base:5.2f}x  "
              f"{'the same bits' if same[name] else 'other bits'}")


if __name__ == "__main__":
    main()
