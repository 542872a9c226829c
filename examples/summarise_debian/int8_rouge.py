"""A finished summarise.sh run's model in int8 (fconv-quantize) against float32, on the same test pairs.

    python int8_rouge.py WORK_DIR

Quantises the checkpoint the run summarised with, summarises the test pairs with it by
the run's own settings (beam 5, the decoding options chosen on validation, the recipe's
--max-len-b), and prints ROUGE-1/2/L F1 of both and how many summaries are identical.
The float32 summaries are the run's test.hyp.
"""

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import score

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BIN = Path(sys.executable).parent


def summaries(work: Path, checkpoint: Path, generation: str, max_len_b: int) -> list:
    """fairseq-generate's detokenised best hypotheses for the test pairs, in order."""
    command = [BIN / "fairseq-generate", work / "data-bin", "--user-dir", REPO / "fconv_plugin", "--path", checkpoint,
               "--gen-subset", "test", "--beam", "5", "--remove-bpe", "--max-tokens", "8000", "--max-len-b", str(max_len_b),
               "--required-batch-size-multiple", "1", *shlex.split(generation)]
    output = subprocess.run(list(map(str, command)), check=True, capture_output=True, text=True).stdout
    best = sorted((int(m.group(1)), m.group(2)) for m in re.finditer(r"^H-(\d+)\t[^\t]*\t(.*)$", output, re.M))
    detokenised = subprocess.run([sys.executable, REPO / "examples" / "bible_es_en" / "moses.py", "detokenize", "en"],
                                 input="".join(text + "\n" for _, text in best), check=True, capture_output=True,
                                 text=True).stdout
    return detokenised.splitlines()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path)
    args = parser.parse_args()
    results = json.loads((args.work / "results.json").read_text())
    checkpoint = args.work / results["checkpoint"]
    int8 = args.work / "int8.pt"
    if not int8.exists():
        quantize = subprocess.run([BIN / "fconv-quantize", checkpoint, int8, "--data", args.work / "data-bin"],
                                  capture_output=True, text=True)
        if quantize.returncode != 0:
            sys.exit(quantize.stderr.strip().splitlines()[-1])
    references = score.read_lines(args.work / "test.raw.syn")
    float32 = score.read_lines(args.work / "test.hyp")
    quantised = summaries(args.work, int8, results["generation"], results["recipe"]["max-len-b"])
    (args.work / "test.int8.hyp").write_text("".join(line + "\n" for line in quantised), encoding="utf-8")
    same = sum(a == b for a, b in zip(float32, quantised))
    for name, hypotheses in (("float32", float32), ("int8", quantised)):
        s = score.rouge(references, hypotheses)
        print(f"{name:8s} ROUGE-1/2/L F1 {s['rouge1_f1']:.2f}/{s['rouge2_f1']:.2f}/{s['rougeL_f1']:.2f}")
    print(f"identical summaries: {same} of {len(references)}")


if __name__ == "__main__":
    main()
