"""Where onnxruntime's decoder step spends its time, float32 against --int8, by node type.

Exports the run's model with fconv-export (float32 and ``--int8``, into a temporary
directory). First, with no profiler on, translates ``--split-verses`` test verses (500)
and splits the wall time into the encoder's runs, the decoder step's runs, the state's
reordering and the numpy search. Then translates the first ``--verses`` test verses
with onnxruntime's own profiler on, and prints the decoder's node time by operator
type: milliseconds, share, and runs per decoding step. Both at beam 5 in calls of 16
(sorted by length) with fconv_onnx's beam search, 2 threads. It shows where the int8
export loses to torch's int8 model (docs/onnx.md).

    .venv/bin/python benchmarks/onnx_profile.py examples/bible_es_en/runs/latest [--verses 96]
"""

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from vs_ctranslate2 import fconv_export, text_tools  # noqa: E402  the run's export; Moses and BPE as the quickstart applies them

from fconv_onnx.beam_search import generate  # noqa: E402
from fconv_onnx.model import ExportedModel  # noqa: E402
from fconv_onnx.translate import pad_left  # noqa: E402

CALL, BEAM, THREADS = 16, 5, 2


def node_times(directory: Path, sources, prefix: str):
    """(milliseconds by operator type, decoding steps) for translating ``sources``."""
    model = ExportedModel(str(directory), threads=THREADS, profile_prefix=prefix)
    ids = [model.source_vocabulary.encode(s) for s in sources]
    d = model.target_vocabulary
    for start in range(0, len(ids), CALL):
        generate(model, pad_left(ids[start: start + CALL], model.manifest.symbols.source_pad), BEAM, eos=d.eos,
                 pad=d.pad, unk=d.unk, max_len_a=0.0, max_len_b=200, max_positions=model.max_target_positions)
    with open(model.decoder.end_profiling(), encoding="utf-8") as f:
        events = json.load(f)
    model.encoder.end_profiling()
    milliseconds, runs, by_node, shapes = (collections.Counter(), collections.Counter(), collections.Counter(), {})
    steps = sum(1 for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            op = event["args"]["op_name"]
            milliseconds[op] += event["dur"] / 1000
            runs[op] += 1
            node = (op, event["name"][: -len("_kernel_time")])
            by_node[node] += event["dur"] / 1000
            shapes[node] = (event["args"].get("input_type_shape"), event["args"].get("output_type_shape"))
    return milliseconds, runs, steps, by_node, shapes


def wall_split(directory: Path, sources) -> dict:
    """Wall seconds of translating ``sources`` (after a warm-up call), split into the encoder
    runs, the decoder step runs, the state's reordering and the rest (the numpy search),
    with no profiler on; and the decoder's steps."""
    import time

    model = ExportedModel(str(directory), threads=THREADS)
    seconds = collections.Counter()
    steps = [0]
    for method, part in (("start", "encoder"), ("step", "decoder step"), ("reorder", "reorder")):
        def timed(*args, _call=getattr(model, method), _part=part, **kwargs):
            start = time.perf_counter()
            result = _call(*args, **kwargs)
            seconds[_part] += time.perf_counter() - start
            steps[0] += _part == "decoder step"
            return result
        setattr(model, method, timed)
    ids = [model.source_vocabulary.encode(s) for s in sources]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # calls of similar lengths, as fairseq batches
    d = model.target_vocabulary

    def translate():
        for start in range(0, len(order), CALL):
            generate(model, pad_left([ids[i] for i in order[start: start + CALL]], model.manifest.symbols.source_pad),
                     BEAM, eos=d.eos, pad=d.pad, unk=d.unk, max_len_a=0.0, max_len_b=200,
                     max_positions=model.max_target_positions)

    translate()
    seconds.clear()
    steps[0] = 0
    start = time.perf_counter()
    translate()
    total = time.perf_counter() - start
    seconds["search (numpy)"] = total - sum(seconds.values())
    return {"total": total, "parts": dict(seconds), "steps": steps[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a quickstart run directory (examples/bible_es_en/runs/latest)")
    parser.add_argument("--verses", type=int, default=96)
    parser.add_argument("--top", type=int, default=12, help="operator types listed per export")
    parser.add_argument("--nodes", default="Cast", help="an operator type whose costliest nodes are listed, with shapes")
    parser.add_argument("--split-verses", type=int, default=500,
                        help="verses translated with no profiler on for the wall-time split (0: none)")
    args = parser.parse_args()
    encode, _ = text_tools(args.run)
    every_line = (args.run / "test.raw.es").read_text(encoding="utf-8").splitlines()
    sources = [encode(line) for line in every_line[: args.verses]]
    split_sources = [encode(line) for line in every_line[: args.split_verses]]
    with tempfile.TemporaryDirectory() as work:
        for name, int8 in (("float32", False), ("int8", True)):
            directory = Path(work) / name
            fconv_export(args.run, directory, int8)
            if args.split_verses:
                split = wall_split(directory, split_sources)
                print(f"\n{name}: {args.split_verses} verses in {split['total']:.2f} s "
                      f"({args.split_verses / split['total']:.1f} sentences/s), {split['steps']} decoder steps, no profiler:")
                for part, seconds in split["parts"].items():
                    print(f"  {part:22s} {seconds:6.2f} s  {100 * seconds / split['total']:5.1f}%  "
                          f"{1000 * seconds / max(split['steps'], 1):6.3f} ms a step")
            milliseconds, runs, steps, by_node, shapes = node_times(directory, sources, str(Path(work) / f"profile-{name}"))
            total = sum(milliseconds.values())
            print(f"\n{name}: decoder nodes {total:.0f} ms over {steps} steps ({len(sources)} verses, beam {BEAM} x {CALL})")
            for op, ms in milliseconds.most_common(args.top):
                print(f"  {op:22s} {ms:8.1f} ms  {100 * ms / total:5.1f}%  {runs[op] / max(steps, 1):6.1f} per step")
            chosen = [(node, ms) for node, ms in by_node.most_common() if node[0] == args.nodes][:6]
            if chosen:
                print(f"  its costliest {args.nodes} nodes (share of all {args.nodes} time; shapes of the last run):")
                for node, ms in chosen:
                    share = 100 * ms / milliseconds[args.nodes]
                    print(f"    {share:5.1f}%  {node[1][:40]:40s} {shapes[node][0]} -> {shapes[node][1]}")


if __name__ == "__main__":
    main()
