"""The HTTP API: POST /translate, GET /health, GET /models, and the page at /.

Every bad request gets a 4xx answer ``{"error": "<one line>"}`` and the server goes
on serving; a request that waits longer than the timeout gets 503.
"""

import asyncio
import json
import logging
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from .batching import DynamicBatcher, Job
from .translator import Translator

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


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


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
    unknown = sorted(set(request) - {"text", "beam", "alignment", "attention", "model"})
    if unknown:
        raise BadRequest(422, f"unknown field {unknown[0]!r}; the fields are text, beam, alignment, attention, model")
    if "text" not in request:
        raise BadRequest(422, 'missing "text": give one sentence or a list of sentences')
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
    for flag in ("alignment", "attention"):
        flags[flag] = request.get(flag, False)
        if type(flags[flag]) is not bool:
            raise BadRequest(422, f'"{flag}" must be true or false, got {json.dumps(flags[flag])}')
    translator = translators[model]
    lines = [line.strip() for line in lines]
    encoded, tokens = [], 0
    for number, line in enumerate(lines, start=1):
        where = f"sentence {number}" if len(lines) > 1 else "the sentence"
        if not line:
            raise BadRequest(422, f"{where} is empty")
        if "\n" in line or "\r" in line:
            raise BadRequest(422, f"{where} spans several lines; send each line as its own sentence in a list")
        encoded.append(translator.encode(line))
        count = len(encoded[-1].split()) + 1  # + </s>
        if count > translator.source_limit:
            raise BadRequest(413, f"{where} has {count} tokens; the model reads at most {translator.source_limit}; split it")
        tokens += count
    return Job(model, lines, encoded, tokens, beam, **flags)


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
        future = asyncio.wrap_future(batcher.submit(job))
        try:
            translations: List[dict] = await asyncio.wait_for(asyncio.shield(future), limits.timeout)
        except asyncio.TimeoutError:
            job.result.cancel()  # dropped if its round has not started
            return _error(503, f"the translation took longer than {limits.timeout:g} s (--timeout); the server is busy, try again")
        except Exception as error:  # the model failed on this input: say so in one line
            logger.exception("fconv-serve: generation failed")
            return _error(500, f"translation failed: {str(error).splitlines()[0] if str(error) else type(error).__name__}")
        return {"translations": translations}

    @app.get("/health")
    async def health():
        return {"status": "ok", "models": sorted(translators), "batching": asdict(batcher.stats)}

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
