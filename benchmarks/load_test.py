"""Load test of fconv-serve on 127.0.0.1: batching on against off, and a saturation curve, float32 and int8.

    python benchmarks/load_test.py examples/bible_es_en/runs/latest [--clients 16] [--seconds 30]
    python benchmarks/load_test.py examples/bible_es_en/runs/latest --curve 1,4,16,64 [--seconds 20]
    python benchmarks/load_test.py --quick     # 2 clients for 2 s on a tiny run, outputs cut at 6 tokens: checks that it runs

For each model (the run's checkpoint_best.pt, and its fconv-quantize int8 copy) two
servers run one after the other: with dynamic batching (the defaults) and one request
at a time (--batch-window-ms 0 --max-batch-sentences 1). Each first answers every test
sentence alone, one request after another (the reference answers); then the clients
send test sentences for the given time, each waiting for its answer before the next.
Reported: errors, answers whose text differs from the reference, sentences per second,
p50/p95 latency, and the gain of batching over one at a time.

--curve: one batching server per model, loaded by each number of clients in turn, each
client sending --request-sentences test sentences a request. A 429 (the queue is
full) is counted with how fast it came and the client waits its Retry-After (at most
1 s) before the next; reported: sentences/s, p50 and p99 of answered requests, 429s,
other errors. Bounded: loopback only, a fixed number of clients and seconds.
"""

import json
import shlex
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import harness  # noqa: E402
from tests.serve.conftest import Server  # noqa: E402  the same launcher the tests use



def run_clients(client, clients: int) -> float:
    """Run ``client(k)`` in ``clients`` threads at once; the seconds until the last ends."""
    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - started


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

    wall = run_clients(client, clients)
    latencies.sort()
    return {
        "answers": len(latencies), "errors": len(errors), "first_error": errors[0] if errors else None,
        "differ_from_one_at_a_time": len(mismatches),
        "sentences_per_second": len(latencies) / wall,
        "p50_ms": 1000 * statistics.median(latencies), "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
    }


def saturate(server, sentences, clients, seconds, request_sentences):
    """Clients sending ``request_sentences`` sentences a request for ``seconds``."""
    latencies, refusals, errors, translated, lock = [], [], [], [0], threading.Lock()
    stop_at = time.monotonic() + seconds

    def client(k):
        i = k * request_sentences
        while time.monotonic() < stop_at:
            batch = [sentences[(i + j) % len(sentences)] for j in range(request_sentences)]
            i += clients * request_sentences
            request = urllib.request.Request(server.url + "/translate", data=json.dumps({"text": batch}).encode(),
                                             headers={"Content-Type": "application/json"})
            start = time.monotonic()
            try:
                with urllib.request.urlopen(request, timeout=120) as answer:
                    answer.read()
                with lock:
                    latencies.append(time.monotonic() - start)
                    translated[0] += len(batch)
            except urllib.error.HTTPError as error:
                elapsed = time.monotonic() - start
                if error.code == 429:
                    with lock:
                        refusals.append(elapsed)
                    time.sleep(min(1.0, float(error.headers.get("Retry-After", 1))))
                else:
                    with lock:
                        errors.append(error.code)
            except OSError as error:
                with lock:
                    errors.append(str(error))

    wall = run_clients(client, clients)
    latencies.sort()
    refusals.sort()

    def quantile(values, q):
        return 1000 * values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")

    return {"clients": clients, "requests": len(latencies), "sentences_per_second": translated[0] / wall,
            "p50_ms": quantile(latencies, 0.5), "p99_ms": quantile(latencies, 0.99), "refused_429": len(refusals),
            "p99_429_ms": quantile(refusals, 0.99), "errors": len(errors), "first_error": errors[0] if errors else None}


def curve(run, common, int8, counts, seconds, request_sentences, sentences):
    results = {}
    for weights, checkpoint in (("float32", run / "checkpoints" / "checkpoint_best.pt"), ("int8", int8)):
        server = Server(run / "data-bin", checkpoint, *common, log_path=run / f"loadtest-curve-{weights}.log")
        try:
            saturate(server, sentences, 2, 5, request_sentences)  # warm-up, not reported
            for clients in counts:
                result = saturate(server, sentences, clients, seconds, request_sentences)
                results[f"{weights}, {clients} clients"] = result
                print(f"{weights:8s} {clients:3d} clients  {result['sentences_per_second']:6.1f} sentences/s  "
                      f"p50 {result['p50_ms']:6.0f} ms  p99 {result['p99_ms']:6.0f} ms  429s {result['refused_429']:4d} "
                      f"(p99 {result['p99_429_ms']:.0f} ms)  other errors {result['errors']}", flush=True)
        finally:
            server.stop()
    for clients in counts:
        ratio = results[f"int8, {clients} clients"]["sentences_per_second"] / results[f"float32, {clients} clients"]["sentences_per_second"]
        results[f"int8 over float32, {clients} clients"] = ratio
        print(f"int8 / float32 at {clients} clients: {ratio:.2f}x")
    return results


def main(argv=None):
    parser = harness.arguments(__doc__)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--sentences", type=int, default=200, help="test sentences the clients cycle through")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--curve", default=None, metavar="N,N,...",
                        help="a saturation curve at these numbers of clients instead of batching on against off")
    parser.add_argument("--request-sentences", type=int, default=8, help="sentences a request in --curve")
    parser.add_argument("--server-options", default="", metavar="'--OPTION VALUE ...'",
                        help="more fconv-serve options for every server, e.g. '--max-batch-sentences 64'")
    args = harness.parse(parser, argv)
    if args.quick:
        args.clients, args.seconds, args.sentences = 2, 2.0, 8
        args.curve = args.curve and "1,2"
    run = args.run
    print(harness.machine(), flush=True)
    sentences = harness.test_lines(run, args.sentences)
    int8 = harness.int8_copy(run)
    common = ["--source-lang", "es", "--target-lang", "en", "--tokenizer", "moses", "--bpe", "subword_nmt",
              "--bpe-codes", str(run / "codes"), "--beam", "5", *shlex.split(args.server_options),
              *(["--max-len-b", str(harness.QUICK_MAX_LEN)] if args.quick else [])]
    if args.curve:
        counts = [int(n) for n in args.curve.split(",")]
        results = curve(run, common, int8, counts, args.seconds, args.request_sentences, sentences)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
        return
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
