"""fconv-serve: fairseq-interactive's options, served over HTTP with batching across requests.

    fconv-serve data-bin --path checkpoints/checkpoint_best.pt \\
        --tokenizer moses --bpe subword_nmt --bpe-codes codes --beam 5 --port 8000
    curl -s localhost:8000/translate -H 'content-type: application/json' -d '{"text": "Hola."}'
"""

import copy
import logging
from pathlib import Path

from .. import compat, with_plugin_user_dir
from ..errors import FConvError

GENERATION_BATCH = 32  # sentences in one batch of a round, unless --batch-size or --max-tokens says
# what the server imports, by the package of the serve extra (setup.py) that installs it
PARTS = {"fastapi": "fastapi", "uvicorn": "uvicorn", "prometheus_client": "prometheus-client",
         "python_multipart": "python-multipart", "py3langid": "py3langid", "docx": "python-docx"}


def build_parser():
    from fairseq import options

    parser = options.get_interactive_generation_parser()
    group = parser.add_argument_group("fconv-serve")
    group.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    group.add_argument("--port", type=int, default=8000)
    group.add_argument("--name", default="default", help="the name of the --path model in requests and /models")
    group.add_argument("--model", action="append", default=[], metavar="NAME=CHECKPOINT",
                       help="another model, with the same data, tokenizer and BPE options; may be repeated")
    group.add_argument("--batch-window-ms", type=float, default=10.0,
                       help="how long the first waiting request waits for others to share its generation call")
    group.add_argument("--max-batch-tokens", type=int, default=6000, help="source tokens in one generation call")
    group.add_argument("--max-batch-sentences", type=int, default=128, help="sentences in one generation call")
    group.add_argument("--max-body-bytes", type=int, default=65536, help="largest request body accepted")
    group.add_argument("--max-request-sentences", type=int, default=64,
                       help="most texts in one request; a document's sentences are queued in parts of this many")
    group.add_argument("--max-request-characters", type=int, default=50000,
                       help="most characters in one request's texts (a 20,000-character document fits)")
    group.add_argument("--max-beam", type=int, default=20, help="largest beam a request may ask for")
    group.add_argument("--timeout", type=float, default=30.0, help="seconds a request may wait; then 503")
    group.add_argument("--api-keys", default=None, metavar="FILE",
                       help="require an API key from FILE (one a line, optionally its requests per minute)")
    group.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                       help="a site whose pages may call the API from a browser (https://example.org); may be repeated")
    group.add_argument("--max-sentence-tokens", type=int, default=None,
                       help="split longer sentences at safe points (default: as long as 90%% of the training sentences, "
                            "read from DATA's train split; without one, --max-len-b; at most what the model reads)")
    group.add_argument("--max-queue-sentences", type=int, default=256,
                       help="sentences waiting or being translated at most; a request beyond gets 429 at once")
    return compat.console.short_help(
        parser, "fconv-serve",
        usage="fconv-serve DATA --path CHECKPOINT [-s SRC -t TGT] [--tokenizer moses --bpe subword_nmt --bpe-codes CODES] "
              "[--beam N] [--port N] [options]",
        description="Serve a trained fconv model over HTTP, batching requests (docs/serving.md).")


def _named_checkpoints(args):
    named = {args.name: args.path}
    for entry in args.model:
        name, sep, path = entry.partition("=")
        if not sep or not name or not path:
            raise FConvError(f"--model {entry}: write it as NAME=CHECKPOINT")
        if name in named:
            raise FConvError(f"--model {entry}: the name {name!r} is taken; give each model its own name")
        named[name] = path
    for name, path in named.items():
        if not Path(path).is_file():
            raise FConvError(f"model {name!r}: no such checkpoint file {path}")
    return named


def read_options(argv):
    """fairseq-interactive's options and the server's, parsed and checked: one line for the first problem."""
    argv = with_plugin_user_dir(argv)
    from fairseq import options

    compat.install()  # one-line errors, safe loading, --replace-unk, input checks
    args = options.parse_args_and_arch(build_parser(), argv)
    compat.console.command_logging()  # fairseq's log format, without hydra's DEBUG lines
    for option, value in (("--port", args.port), ("--max-batch-tokens", args.max_batch_tokens),
                          ("--max-batch-sentences", args.max_batch_sentences), ("--max-body-bytes", args.max_body_bytes),
                          ("--max-request-sentences", args.max_request_sentences), ("--max-beam", args.max_beam),
                          ("--max-queue-sentences", args.max_queue_sentences),
                          ("--max-request-characters", args.max_request_characters)):
        if value < 1:
            raise FConvError(f"{option} must be at least 1, got {value}")
    if args.max_queue_sentences < args.max_request_sentences:
        raise FConvError(f"--max-queue-sentences {args.max_queue_sentences} is below --max-request-sentences "
                         f"{args.max_request_sentences}: the largest request could never be queued; raise it")
    if args.timeout <= 0 or args.batch_window_ms < 0:
        raise FConvError("--timeout must be positive and --batch-window-ms not negative")
    if args.path is None:
        raise FConvError("--path is required: the checkpoint to serve")
    return args


def configuration(args):
    """The models' config (fairseq-interactive's, with the server's batches), the request
    limits, the named checkpoints and the API keys."""
    from ..inference.loading import interactive_config
    from .access import ApiKeys
    from .requests import Limits

    checkpoints = _named_checkpoints(args)
    api_keys = ApiKeys.read(args.api_keys) if args.api_keys else None
    cfg = interactive_config(args)
    if cfg.dataset.max_tokens is None and cfg.dataset.batch_size is None:
        # a round's sentences in batches of 32, sorted by length as fairseq batches them: a
        # request that expires leaves the round at the next batch (batching.py); on CPUs
        # smaller batches lose little, as they pad less
        cfg.dataset.batch_size = min(GENERATION_BATCH, args.max_batch_sentences)
    limits = Limits(args.max_body_bytes, args.max_request_sentences, args.max_beam, args.timeout,
                    args.max_request_characters)
    return cfg, limits, checkpoints, api_keys


def started_batcher(args, cfg, checkpoints):
    """The batcher, started once: its generation thread loads every model (torch's threads
    belong to the thread that first runs it: batching.DynamicBatcher), and the models."""
    from ..inference import Translator
    from .batching import DynamicBatcher

    def load():
        translators = {}
        for name, path in checkpoints.items():
            model_cfg = copy.deepcopy(cfg)
            model_cfg.common_eval.path = path
            translators[name] = Translator(model_cfg, name, sentence_cut=args.max_sentence_tokens)
            logging.getLogger("fconv_plugin.serve").info("fconv-serve: model %r: %s", name, translators[name].describe())
        return translators

    batcher = DynamicBatcher(load, args.batch_window_ms / 1000.0, args.max_batch_tokens, args.max_batch_sentences,
                             args.max_queue_sentences)
    return batcher, batcher.start()


def run(app, args, keys_required: bool) -> None:
    """uvicorn serving ``app``: on SIGTERM/SIGINT it stops accepting, answers the requests in
    flight, then the app's shutdown ends the generation worker."""
    if not keys_required and args.host not in ("127.0.0.1", "localhost", "::1"):
        logging.getLogger("fconv_plugin.serve").warning(
            "fconv-serve: listening on %s without --api-keys: anyone who reaches this port can translate; "
            "put a reverse proxy with TLS in front (docs/serving.md#in-front-of-people)", args.host)
    import uvicorn

    uvicorn.run(app, host=args.host, port=args.port, log_level="info", timeout_graceful_shutdown=args.timeout + 5,
                log_config=_log_config_without_keys(uvicorn.config.LOGGING_CONFIG))


def main(argv=None) -> None:
    import sys

    compat.console.require_extra("fconv-serve", "serve", PARTS)  # before a model loads or a port opens
    args = read_options(sys.argv[1:] if argv is None else argv)
    cfg, limits, checkpoints, api_keys = configuration(args)
    batcher, translators = started_batcher(args, cfg, checkpoints)
    from .app import create_app

    app = create_app(translators, args.name, batcher, limits, api_keys, args.cors_origin)
    run(app, args, api_keys is not None)


def _log_config_without_keys(config: dict) -> dict:
    """uvicorn's logging configuration with every handler passing through ``RedactKeys``:
    no API key sent in a query string reaches a log."""
    config = copy.deepcopy(config)
    config.setdefault("filters", {})["redact_keys"] = {"()": "fconv_plugin.serve.access.RedactKeys"}
    for handler in config.get("handlers", {}).values():
        handler["filters"] = [*handler.get("filters", []), "redact_keys"]
    return config


if __name__ == "__main__":
    main()
