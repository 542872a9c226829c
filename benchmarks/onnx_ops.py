"""The decoder step's operations one by one: onnxruntime against torch, at beam 5 x 16.

Where does onnxruntime's float32 step lose to the inference core's (torch's)? This times
each kind of operation the quickstart model's step runs, at its shapes for 16 sentences x
5 hypotheses (80 rows) and a 40-token source, in onnxruntime (a one-node graph, or the
attention's four nodes as the exported step has them) and in torch (the ATen call the
compiled step makes), taking turns in one process, with 1 and 2 threads:

- the layers' products with their bias: fc1, fc2 and the attention projections (256 -> 256),
  the convolutions (768 -> 512), fc3 (256 -> 4,576): ONNX ``Gemm``, torch ``addmm``;
- the attention's two products per sentence, its 5 hypotheses against its one copy of the
  keys (5 x 256 by 256 x 40) and of the values (5 x 40 by 40 x 256): ONNX batched
  ``MatMul``, torch ``bmm``;
- one attention layer's whole read (scores, mask, softmax, context): four ONNX nodes
  against torch's ``bmm``, ``masked_fill``, ``softmax``, ``bmm``; and onnxruntime's other
  forms of them (the contrib ``FusedMatMul`` with the keys transposed, ``Einsum``, the
  contrib ``MultiHeadAttention``);
- the log-softmax over 80 x 4,576 and the candidates' top-k over 16 x (5 · 4,576).

Each timing is followed by a pause, so that no thread pool still spins for work while the
next runs; within a timing the pool spins between calls as within one step: a step's
waking of onnxruntime's pool (``session.force_spinning_stop``, once per step in
``fconv_onnx``) is not counted. An onnxruntime run includes its call from Python (an
``Identity`` run is printed as the floor). Reported: microseconds per call (median of the
repetitions) and torch's time over onnxruntime's (below 1: torch is faster).

With a quickstart run (``--run``), the whole step too: the run's model exported by
fconv-export (float32) against the core's compiled step (``DecoderSteps``, as its search
calls it), for 1, 4 and 16 sentences of 5 hypotheses at the 12th target position. The
onnxruntime step also chooses the candidates (its ``TopK``), and its pool is woken once per
step as ``fconv_onnx`` runs it (``session.force_spinning_stop``).

    .venv/bin/python benchmarks/onnx_ops.py [--repeats 5] [--run examples/bible_es_en/runs/latest]
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime
import torch
from int8_products import per_call_us  # the timing loop int8_products.py uses (benchmarks/ is on the path)
from onnx import TensorProto, helper, numpy_helper

SENTENCES, BEAM, SOURCE, EMBED, VOCABULARY = 16, 5, 40, 256, 4576
ROWS = SENTENCES * BEAM
FLOAT = TensorProto.FLOAT


def session(nodes, inputs, output, threads, initializers=()):
    graph = helper.make_graph(nodes, "op", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(output, FLOAT, None)], list(initializers))
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]  # and onnxruntime's contrib
    model = helper.make_model(graph, opset_imports=opsets)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def cases(threads: int, rng: np.random.Generator):
    """(name, onnxruntime call, torch call) for every operation."""
    found = []
    for width, out, name in ((EMBED, EMBED, "product 256 -> 256"), (3 * EMBED, 2 * EMBED, "product 768 -> 512"),
                             (EMBED, VOCABULARY, "product 256 -> 4576")):
        weight = (rng.standard_normal((out, width)) / np.sqrt(width)).astype(np.float32)
        bias = rng.standard_normal(out).astype(np.float32)
        rows = rng.standard_normal((ROWS, width)).astype(np.float32)
        gemm = session([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], [("x", FLOAT, [ROWS, width])], "y",
                       threads, [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")])
        weight_t, bias_t, rows_t = torch.from_numpy(weight.T.copy()), torch.from_numpy(bias), torch.from_numpy(rows)
        found.append((name, lambda s=gemm, x=rows: s.run(None, {"x": x}),
                      lambda b=bias_t, x=rows_t, w=weight_t: torch.addmm(b, x, w)))
    query = (rng.standard_normal((SENTENCES, BEAM, EMBED)) * 0.1).astype(np.float32)
    keys = rng.standard_normal((SENTENCES, EMBED, SOURCE)).astype(np.float32)
    values = rng.standard_normal((SENTENCES, SOURCE, EMBED)).astype(np.float32)
    weights = rng.random((SENTENCES, BEAM, SOURCE)).astype(np.float32)
    mask = np.zeros((SENTENCES, 1, SOURCE), bool)
    mask[: SENTENCES // 4, :, : SOURCE // 5] = True  # a quarter of the sentences padded
    q, k, v, a, m = map(torch.from_numpy, (query, keys, values, weights, mask))
    scores = session([helper.make_node("MatMul", ["q", "k"], ["y"])],
                     [("q", FLOAT, list(query.shape)), ("k", FLOAT, list(keys.shape))], "y", threads)
    found.append(("attention scores (bmm)", lambda: scores.run(None, {"q": query, "k": keys}), lambda: torch.bmm(q, k)))
    context = session([helper.make_node("MatMul", ["a", "v"], ["y"])],
                      [("a", FLOAT, list(weights.shape)), ("v", FLOAT, list(values.shape))], "y", threads)
    found.append(("attention context (bmm)", lambda: context.run(None, {"a": weights, "v": values}),
                  lambda: torch.bmm(a, v)))
    read = session([helper.make_node("MatMul", ["q", "k"], ["s"]), helper.make_node("Where", ["m", "ninf", "s"], ["z"]),
                    helper.make_node("Softmax", ["z"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])],
                   [("q", FLOAT, list(query.shape)), ("k", FLOAT, list(keys.shape)),
                    ("m", TensorProto.BOOL, list(mask.shape)), ("v", FLOAT, list(values.shape))], "y", threads,
                   [numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf")])
    found.append(("one attention read", lambda: read.run(None, {"q": query, "k": keys, "m": mask, "v": values}),
                  lambda: torch.bmm(torch.bmm(q, k).masked_fill(m, float("-inf")).softmax(-1), v)))
    # other ways onnxruntime has of the same products: the keys transposed for the contrib
    # FusedMatMul, an Einsum, and the contrib MultiHeadAttention for the whole read (one head,
    # no scaling, the mask as a key padding mask)
    keys_t = np.ascontiguousarray(keys.transpose(0, 2, 1))
    fused = session([helper.make_node("FusedMatMul", ["q", "kt"], ["y"], domain="com.microsoft", transB=1)],
                    [("q", FLOAT, list(query.shape)), ("kt", FLOAT, list(keys_t.shape))], "y", threads)
    found.append(("  ... as FusedMatMul, keys^T", lambda: fused.run(None, {"q": query, "kt": keys_t}),
                  lambda: torch.bmm(q, k)))
    einsum = session([helper.make_node("Einsum", ["q", "k"], ["y"], equation="sce,sel->scl")],
                     [("q", FLOAT, list(query.shape)), ("k", FLOAT, list(keys.shape))], "y", threads)
    found.append(("  ... as Einsum", lambda: einsum.run(None, {"q": query, "k": keys}), lambda: torch.bmm(q, k)))
    unmasked = (~mask[:, 0, :]).astype(np.int32)
    attention = session([helper.make_node("MultiHeadAttention", ["q", "kt", "v", "", "m"], ["y"],
                                          domain="com.microsoft", num_heads=1, scale=1.0)],
                        [("q", FLOAT, list(query.shape)), ("kt", FLOAT, list(keys_t.shape)),
                         ("v", FLOAT, list(values.shape)), ("m", TensorProto.INT32, list(unmasked.shape))],
                        "y", threads)
    found.append(("  ... as MultiHeadAttention", lambda: attention.run(None, {"q": query, "kt": keys_t, "v": values,
                                                                             "m": unmasked}),
                  lambda: torch.bmm(torch.bmm(q, k).masked_fill(m, float("-inf")).softmax(-1), v)))
    logits = (rng.standard_normal((ROWS, VOCABULARY)) * 3).astype(np.float32)
    logits_t = torch.from_numpy(logits)
    log_softmax = session([helper.make_node("LogSoftmax", ["x"], ["y"], axis=1)], [("x", FLOAT, list(logits.shape))],
                          "y", threads)
    found.append(("log-softmax", lambda: log_softmax.run(None, {"x": logits}), lambda: torch.log_softmax(logits_t, 1)))
    by_sentence = logits.reshape(SENTENCES, -1)
    top_k = session([helper.make_node("TopK", ["x", "k"], ["y", "i"])], [("x", FLOAT, list(by_sentence.shape))], "y",
                    threads, [numpy_helper.from_array(np.array([2 * BEAM]), "k")])
    found.append(("top-k of each sentence", lambda: top_k.run(None, {"x": by_sentence}),
                  lambda: logits_t.view(SENTENCES, -1).topk(2 * BEAM, 1)))
    identity = session([helper.make_node("Identity", ["x"], ["y"])], [("x", FLOAT, [ROWS, EMBED])], "y", threads)
    small = rng.standard_normal((ROWS, EMBED)).astype(np.float32)
    found.append(("(a run's floor: Identity)", lambda: identity.run(None, {"x": small}), lambda: None))
    return found


def whole_steps(run: Path, directory: Path, threads: int):
    """(sentences, onnxruntime step, torch step) for the run's model at 1, 4 and 16 sentences."""
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    sys.path.insert(0, str(root / "benchmarks"))
    from step_overhead import state_at_step  # the core's state after 11 steps of random tokens
    from vs_ctranslate2 import fconv_export

    from fconv_onnx.model import ExportedModel
    from fconv_plugin.inference import Translator
    from fconv_plugin.models.decoder_steps import DecoderSteps

    fconv_export(run, directory, int8=False)
    exported = ExportedModel(str(directory), threads=threads)
    translator = Translator.from_pretrained(run / "checkpoints" / "checkpoint_best.pt", run / "data-bin", cpu=True)
    model = translator.models[0]
    found, started = [], [None]
    for sentences in (1, 4, 16):
        with torch.no_grad():
            encoder_out, prefix, _ = state_at_step(model, translator.task, sentences)
            steps = DecoderSteps(model)
            state = steps.start(encoder_out)
        # source words past the four special symbols, ending in </s>
        source = np.random.default_rng(sentences).integers(4, len(exported.source_vocabulary), (sentences, SOURCE))
        source[:, -1] = exported.manifest.symbols.source_eos
        penalty = np.zeros(exported.vocabulary_size, np.float32)
        scores = np.zeros((sentences, BEAM), np.float32)
        tokens = prefix.numpy()

        def ort_step(source=source, scores=scores, tokens=tokens):
            if started[0] is not source:  # this batch's encoding and zero states, once
                exported.start(source, BEAM)
                started[0] = source
            exported.step(tokens, penalty, scores)

        def torch_step(state=state, prefix=prefix):
            with torch.no_grad():
                steps.log_probs(state, prefix, False)

        found.append((f"whole step, {sentences} sentences", ort_step, torch_step))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=500, help="calls timed in each repetition")
    parser.add_argument("--run", type=Path, help="a quickstart run directory: its whole step as well")
    args = parser.parse_args()
    work = tempfile.TemporaryDirectory()
    print(f"onnxruntime {onnxruntime.__version__}, torch {torch.__version__}; {SENTENCES} sentences x {BEAM} "
          f"hypotheses, source {SOURCE}; microseconds per call, median of {args.repeats}")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        rng = np.random.default_rng(0)
        found = cases(threads, rng)
        if args.run:
            found += whole_steps(args.run, Path(work.name) / f"exported-{threads}", threads)
        times = {name: ([], []) for name, _, _ in found}
        for repeat in range(args.repeats):
            for name, *calls in (found if repeat % 2 == 0 else reversed(found)):
                for engine in (0, 1) if repeat % 2 == 0 else (1, 0):
                    times[name][engine].append(per_call_us(calls[engine], args.calls))
                    # a pause: no pool (each one-node session's own, or torch's) still spins for work
                    # while the next is timed; each spins between its own calls, as onnxruntime's
                    # spins between the nodes of one step
                    time.sleep(0.2)
        print(f"\n{threads} thread(s)      {'operation':30s} {'onnxruntime':>11} {'torch':>8} {'torch/ort':>9}")
        for name, (ort_times, torch_times) in times.items():
            ort_us, torch_us = statistics.median(ort_times), statistics.median(torch_times)
            ratio = f"{torch_us / ort_us:9.2f}" if not name.startswith("(") else ""
            print(f"{'':17s}{name:30s} {ort_us:11.1f} {torch_us:8.1f} {ratio}")


if __name__ == "__main__":
    main()
