"""What an operator watches: ``GET /metrics`` in Prometheus' text format (prometheus-client).

    fconv_serve_requests_total{path, status}       requests answered, by path and HTTP status
    fconv_serve_request_seconds{path}              time from the request to its answer (histogram)
    fconv_serve_queue_sentences                    sentences waiting or being translated now
    fconv_serve_generation_sentences               sentences per generation call (histogram)
    fconv_serve_generation_seconds                 seconds per generation call (histogram)
    fconv_serve_source_tokens_total                source tokens translated; rate() of it is tokens/s
    fconv_serve_sentences_total                    sentences translated; rate() of it is sentences/s
    fconv_serve_refused_total, _expired_total      requests refused (queue full) or dropped late

Each server has its own registry, so two apps in one process do not share counts.
"""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily

from .batching import DynamicBatcher

PATHS = ("/translate", "/languages", "/health", "/health/live", "/models", "/metrics", "/openapi.json", "/", "/page.js")
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
SENTENCE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class _BatcherCounts:
    """The batcher's own counts, read when Prometheus scrapes (no second bookkeeping)."""

    def __init__(self, batcher: DynamicBatcher):
        self.batcher = batcher

    def collect(self):
        stats = self.batcher.stats
        yield CounterMetricFamily("fconv_serve_refused", "requests refused at once because the queue was full",
                                  value=stats.refused)
        yield CounterMetricFamily("fconv_serve_expired", "requests dropped or discarded after their deadline",
                                  value=stats.expired)


class ServerMetrics:
    def __init__(self, batcher: DynamicBatcher):
        self.registry = CollectorRegistry()
        self.requests = Counter("fconv_serve_requests", "requests answered", ["path", "status"], registry=self.registry)
        self.latency = Histogram("fconv_serve_request_seconds", "time from a request to its answer", ["path"],
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        queue = Gauge("fconv_serve_queue_sentences", "sentences waiting or being translated", registry=self.registry)
        queue.set_function(lambda: batcher.stats.queued_sentences)
        self.call_sentences = Histogram("fconv_serve_generation_sentences", "sentences per generation call",
                                        buckets=SENTENCE_BUCKETS, registry=self.registry)
        self.call_seconds = Histogram("fconv_serve_generation_seconds", "seconds per generation call",
                                      buckets=LATENCY_BUCKETS, registry=self.registry)
        self.tokens = Counter("fconv_serve_source_tokens", "source tokens translated", registry=self.registry)
        self.sentences = Counter("fconv_serve_sentences", "sentences translated", registry=self.registry)
        self.registry.register(_BatcherCounts(batcher))
        batcher.observers.append(self.generation_call)

    def generation_call(self, sentences: int, tokens: int, seconds: float) -> None:
        self.call_sentences.observe(sentences)
        self.call_seconds.observe(seconds)
        self.tokens.inc(tokens)
        self.sentences.inc(sentences)

    def answered(self, path: str, status: int, seconds: float) -> None:
        path = path if path in PATHS else "other"  # unknown paths share one label: bounded cardinality
        self.requests.labels(path, str(status)).inc()
        self.latency.labels(path).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
