"""Load test of fconv-serve on 127.0.0.1: 16 concurrent clients, batching on against off, float32 and int8.

    python benchmarks/load_test.py examples/bible_es_en/runs/latest [--clients 16] [--seconds 30]

For each model (the run's checkpoint_best.pt, and its fconv-quantize int8 copy) two
servers run one after the other: with dynamic batching (the defaults) and one request
at a time (--batch-window-ms 0 --max-batch-sentences 1). Each first answers every test
sentence alone, one request after another (the reference answers); then the clients
send test sentences for the given time, each waiting for its answer before the next.
Reported: errors, answers whose text differs from the reference, sentences per second,
p50/p95 latency, and the gain of batching over one at a time. Bounded: loopback only,
a fixed number of clients and seconds.
"""

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.serve.conftest import Server  # noqa: E402  the same launcher the tests use

BIN = Path(sys.executable).parent


def reference_answers(server, sentences):
    answers = []
    for sentence in sentences:
        status, answer = server.translate(text=sentence)
        if status != 200:
            raise SystemExit(f"reference request failed: {status} {answer}")
        answers.append(answer["translations"][0]["text"])
    return answers


def load(server, sentences, reference, clients, seconds):
    latencies, errors, mismatches, lock = [], [], [], threading.Lock()
    stop_at = time.monotonic() + seconds

    def client(k):
        i = k
        while time.monotonic() < stop_at:
            index = i % len(sentences)
            start = time.monotonic()
            try:
                status, answer = server.translate(text=sentences[index])
            except (OSError, urllib.error.URLError) as e:
                status, answer = None, str(e)
            elapsed = time.monotonic() - start
            with lock:
                if status != 200:
                    errors.append(f"{status} {answer}")
                else:
                    latencies.append(elapsed)
                    if answer["translations"][0]["text"] != reference[index]:
                        mismatches.append(index)
            i += clients

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    latencies.sort()
    return {
        "answers": len(latencies), "errors": len(errors), "first_error": errors[0] if errors else None,
        "differ_from_one_at_a_time": len(mismatches),
        "sentences_per_second": len(latencies) / wall,
        "p50_ms": 1000 * statistics.median(latencies), "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a quickstart run directory (data-bin, codes, checkpoints/, test.raw.es)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--sentences", type=int, default=200, help="test sentences the clients cycle through")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    run = Path(args.run).resolve()
    sentences = (run / "test.raw.es").read_text(encoding="utf-8").splitlines()[: args.sentences]
    int8 = run / "checkpoints" / "int8-loadtest.pt"
    if not int8.exists():
        subprocess.run([str(BIN / "fconv-quantize"), str(run / "checkpoints" / "checkpoint_best.pt"), str(int8)], check=True, cwd=run)
    common = ["--source-lang", "es", "--target-lang", "en", "--tokenizer", "moses", "--bpe", "subword_nmt",
              "--bpe-codes", str(run / "codes"), "--beam", "5"]
    results = {}
    for weights, checkpoint in (("float32", run / "checkpoints" / "checkpoint_best.pt"), ("int8", int8)):
        for mode, options in (("batched", []), ("one at a time", ["--batch-window-ms", "0", "--max-batch-sentences", "1"])):
            server = Server(run / "data-bin", checkpoint, *common, *options, log_path=run / f"loadtest-{weights}-{mode.replace(' ', '-')}.log")
            try:
                reference = reference_answers(server, sentences)
                result = load(server, sentences, reference, args.clients, args.seconds)
                result["batching"] = server.get("/health")[1]["batching"]
            finally:
                server.stop()
            results[f"{weights}, {mode}"] = result
            print(f"{weights:8s} {mode:14s} {result['sentences_per_second']:6.2f} sentences/s  p50 {result['p50_ms']:6.0f} ms  "
                  f"p95 {result['p95_ms']:6.0f} ms  errors {result['errors']}  differ {result['differ_from_one_at_a_time']}/{result['answers']}",
                  flush=True)
    for weights in ("float32", "int8"):
        gain = results[f"{weights}, batched"]["sentences_per_second"] / results[f"{weights}, one at a time"]["sentences_per_second"]
        results[f"{weights} batching gain"] = gain
        print(f"{weights}: batching serves {gain:.2f}x the sentences per second of one request at a time ({args.clients} clients)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
