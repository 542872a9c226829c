"""The HTTP API: POST /translate, GET /health (readiness), /health/live, GET /models, and the page at /.

Every bad request gets a 4xx answer ``{"error": "<one line>"}`` and the server goes
on serving; a request the full queue cannot take gets 429 with ``Retry-After`` at
once, and one that waits longer than the timeout gets 503.
"""

import asyncio
import json
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from ..inference import SplitDocument, Translation, Translator, split_document
from .batching import DeadlinePassed, DynamicBatcher, Job, QueueFull, ShuttingDown

logger = logging.getLogger("fconv_plugin.serve")
STATIC = Path(__file__).parent / "static"


@dataclass
class Limits:
    max_body_bytes: int = 65536
    max_sentences: int = 64  # per request
    max_beam: int = 20
    timeout: float = 30.0  # seconds a request may wait for its translation


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _error(status: int, message: str, headers: Optional[Dict[str, str]] = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, f"the body has {declared} bytes; the limit is {limit} (--max-body-bytes)")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BadRequest(413, f"the body is over {limit} bytes (--max-body-bytes)")
    return bytes(body)


def parse_translate_request(body: bytes, translators: Dict[str, Translator], default_model: str,
                            default_beam: int, limits: Limits) -> Job:
    """The request's JSON as a Job, or BadRequest naming the first problem."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(400, f"the body is not valid UTF-8 (byte {body[e.start]:#04x} at offset {e.start})") from None
    try:
        request = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadRequest(400, f"the body is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(request, dict):
        raise BadRequest(422, 'the body must be a JSON object such as {"text": "a sentence"}')
    unknown = sorted(set(request) - {"text", "beam", "alignment", "attention", "model", "document"})
    if unknown:
        raise BadRequest(422, f"unknown field {unknown[0]!r}; the fields are text, beam, alignment, attention, model, document")
    if "text" not in request:
        raise BadRequest(422, 'missing "text": give a text (a sentence or a document) or a list of them')
    lines = request["text"]
    if isinstance(lines, str):
        lines = [lines]
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise BadRequest(422, '"text" must be a string or a list of strings')
    if not lines:
        raise BadRequest(422, '"text" is an empty list; give at least one sentence')
    if len(lines) > limits.max_sentences:
        raise BadRequest(413, f"{len(lines)} sentences in one request; the limit is {limits.max_sentences} (--max-request-sentences)")
    model = request.get("model", default_model)
    if model not in translators:
        raise BadRequest(404, f"no model named {model!r}; GET /models lists them")
    beam = request.get("beam", default_beam)
    if type(beam) is not int or not 1 <= beam <= limits.max_beam:
        raise BadRequest(422, f'"beam" must be a whole number from 1 to {limits.max_beam}, got {json.dumps(beam)}')
    flags = {}
    for flag in ("alignment", "attention", "document"):
        flags[flag] = request.get(flag, False)
        if type(flags[flag]) is not bool:
            raise BadRequest(422, f'"{flag}" must be true or false, got {json.dumps(flags[flag])}')
    as_document = flags.pop("document")
    translator = translators[model]
    items: List[Item] = []
    for number, text in enumerate(lines, start=1):
        where = f"sentence {number}" if len(lines) > 1 else "the sentence"
        if not text.strip():
            raise BadRequest(422, f"{where} is empty")
        items.append(_item(translator, text.strip(), where, as_document))
    pieces = [piece for item in items for piece in item.pieces]
    if len(pieces) > limits.max_sentences:
        raise BadRequest(413, f"{len(pieces)} sentences in one request; the limit is {limits.max_sentences} (--max-request-sentences)")
    encoded = [text for item in items for text in item.encoded]
    tokens = sum(translator.token_count(text) for text in encoded)
    return Job(model, pieces, encoded, tokens, beam, items=items, **flags)


def _item(translator: Translator, text: str, where: str, as_document: bool) -> "Item":
    """One text of a request: a sentence, translated whole as fairseq-interactive translates
    a line; or, with ``"document": true`` or line breaks in it, a document (paragraphs and
    lines kept, split into sentences, long ones at safe points: ``inference.documents``)."""
    if not as_document and "\n" not in text and "\r" not in text:
        encoded = translator.encode(text)
        count = translator.token_count(encoded)
        if count > translator.source_limit:
            raise BadRequest(413, f"{where} has {count} tokens; the model reads at most {translator.source_limit}; "
                                  'split it, or send "document": true to have it split into sentences')
        return Item(None, [text], [encoded])
    document = split_document(translator, text.replace("\r\n", "\n"))
    for piece, piece_encoded in zip(document.pieces, document.encoded):
        count = translator.token_count(piece_encoded)
        if count > translator.source_limit:  # a single "word" longer than the model reads
            raise BadRequest(413, f"{where} has a word of {count} tokens; the model reads at most {translator.source_limit}")
    return Item(document, document.pieces, document.encoded)


@dataclass
class Item:
    document: Optional[SplitDocument]  # None: one sentence
    pieces: List[str]
    encoded: List[str]


def _hypothesis_answer(translation: Translation, alignment: bool, attention: bool) -> dict:
    best = translation.best
    answer = {"text": best.text, "score": best.score}
    if alignment:
        answer["alignment"] = [[s, t] for s, t in best.alignment]
    if attention:
        answer["attention"] = {
            "source": best.attention.source,
            "target": best.attention.target,
            "layers": [[[round(w, 4) for w in row] for row in layer] for layer in best.attention.layers],
        }
        if best.p_gen is not None:
            answer["p_gen"] = [round(p, 4) for p in best.p_gen]
    return answer


def answers(job: Job, translations: List[Translation]) -> List[dict]:
    """One answer per text of the request: a sentence's, or a document's text with its sentences'."""
    out, start = [], 0
    for item in job.items:
        mine = translations[start: start + len(item.pieces)]
        start += len(item.pieces)
        if item.document is None:
            out.append(_hypothesis_answer(mine[0], job.alignment, job.attention))
            continue
        sentences = [_hypothesis_answer(t, job.alignment, job.attention) for t in mine]
        out.append({
            "text": item.document.assemble(mine).text,
            "score": sum(s["score"] for s in sentences) / len(sentences) if sentences else 0.0,
            "sentences": sentences,
        })
    return out


def create_app(translators: Dict[str, Translator], default_model: str, default_beam: int,
               batcher: DynamicBatcher, limits: Limits) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app):
        batcher.start()
        yield
        # uvicorn has answered every request in flight (SIGTERM/SIGINT); end the worker
        batcher.stop()
        logger.info("fconv-serve: stopped after %d requests in %d generation calls",
                    batcher.stats.requests, batcher.stats.calls)

    app = FastAPI(title="fconv-serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException):
        return _error(error.status_code, f"{error.detail}: {request.method} {request.url.path}")

    @app.post("/translate")
    async def translate(request: Request):
        try:
            body = await _read_body(request, limits.max_body_bytes)
            # tokenizer and BPE run here: off the event loop, which keeps serving other requests
            job = await run_in_threadpool(parse_translate_request, body, translators, default_model, default_beam, limits)
        except BadRequest as bad:
            return _error(bad.status, str(bad))
        job.deadline = time.monotonic() + limits.timeout
        try:
            future = asyncio.wrap_future(batcher.submit(job))
        except QueueFull as full:  # at once, not after the timeout
            return _error(429, str(full), headers={"Retry-After": str(full.retry_after)})
        except ShuttingDown as stopping:
            return _error(503, str(stopping))
        try:
            translations: List[Translation] = await asyncio.wait_for(asyncio.shield(future), limits.timeout)
        except (asyncio.TimeoutError, DeadlinePassed):
            job.result.cancel()  # dropped before its next chunk; a chunk generating now is discarded
            return _error(503, f"the translation took longer than {limits.timeout:g} s (--timeout); the server is busy, try again")
        except Exception as error:  # the model failed on this input: say so in one line
            logger.exception("fconv-serve: generation failed")
            return _error(500, f"translation failed: {str(error).splitlines()[0] if str(error) else type(error).__name__}")
        return {"translations": answers(job, translations)}

    @app.get("/health")
    async def health():
        """Readiness: 200 while the models are loaded and the generation worker takes work."""
        if not batcher.ready:
            return _error(503, "not ready: the generation worker is not running (starting or shutting down)")
        return {"status": "ok", "models": sorted(translators), "batching": asdict(batcher.stats)}

    @app.get("/health/live")
    async def live():
        """Liveness: the process answers HTTP (a load balancer's restart signal, not its routing one)."""
        return {"status": "alive"}

    @app.get("/models")
    async def models():
        return {"default": default_model, "models": [translators[name].describe() for name in translators]}

    @app.get("/")
    async def page():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/page.js")
    async def page_script():
        return FileResponse(STATIC / "page.js", media_type="text/javascript")

    return app
