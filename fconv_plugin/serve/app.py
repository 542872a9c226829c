"""The HTTP API: POST /translate (the native API, or LibreTranslate's: ``libretranslate.py``),
LibreTranslate's POST /detect, POST /translate_file, GET /download_file/<name> (``files.py``)
and GET /frontend/settings, GET /languages, GET /health (readiness), /health/live,
GET /models, GET /metrics (Prometheus: ``metrics.py``), GET /openapi.json (``openapi.py``),
and the page at /.

Every bad request gets a 4xx answer ``{"error": "<one line>"}`` and the server goes
on serving; a request the full queue cannot take gets 429 with ``Retry-After`` at
once, and one that waits longer than the timeout gets 503.
"""

import asyncio
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware

from ..inference import Translation, Translator
from .access import ApiKeys, RateLimited
from .batching import DeadlinePassed, DynamicBatcher, Job, QueueFull, ShuttingDown
from .files import FORMATS, TranslatedFiles, read_file
from .libretranslate import (detect_answer, detected_source, frontend_settings, is_libretranslate_request, language_list,
                             libretranslate_answer, model_for, parse_libretranslate_request)
from .metrics import ServerMetrics
from .openapi import openapi_document
from .requests import (BadRequest, Limits, answers, check_size, item_translations, job_of, parse_translate_request,
                       read_request, text_item)

logger = logging.getLogger("fconv_plugin.serve")
STATIC = Path(__file__).parent / "static"


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


class TranslationFailed(Exception):
    """The model failed on a request's input (logged where it happened)."""


async def _multipart(headers, body: bytes):
    """A multipart form's (name, value) pairs and its files {name: (filename, bytes)}."""
    async def chunks():
        yield body
        yield b""

    try:
        form = await MultiPartParser(headers, chunks(), max_files=1, max_fields=64).parse()
    except MultiPartException as error:
        raise BadRequest(400, f"Invalid request: the multipart form cannot be read ({error.message})") from None
    pairs, files = [], {}
    for name, value in form.multi_items():
        if isinstance(value, UploadFile):
            files[name] = (value.filename or "", await value.read())
        else:
            pairs.append((name, value))
    return pairs, files


def create_app(translators: Dict[str, Translator], default_model: str, default_beam: int,
               batcher: DynamicBatcher, limits: Limits, api_keys: Optional[ApiKeys] = None,
               cors_origins: Sequence[str] = (), translated_files: Optional[TranslatedFiles] = None) -> FastAPI:
    """The app; ``api_keys`` None leaves /translate open (for 127.0.0.1), ``cors_origins``
    empty sends no CORS headers (browsers then refuse other sites' pages); ``translated_files``
    keeps /translate_file's results (default: a new temporary directory)."""
    translated_files = translated_files or TranslatedFiles()
    @asynccontextmanager
    async def lifespan(app):
        batcher.start()
        yield
        # uvicorn has answered every request in flight (SIGTERM/SIGINT); end the worker
        batcher.stop()
        translated_files.close()
        logger.info("fconv-serve: stopped after %d requests in %d generation calls",
                    batcher.stats.requests, batcher.stats.calls)

    app = FastAPI(title="fconv-serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    if cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Content-Type", "X-API-Key"], max_age=600)
    metrics = ServerMetrics(batcher)

    @app.middleware("http")
    async def count(request: Request, call_next):
        began = time.monotonic()
        response = await call_next(request)
        metrics.answered(request.url.path, response.status_code, time.monotonic() - began)
        return response

    @app.get("/metrics")
    async def prometheus_metrics():
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception):  # a bug: still the error shape, and logged
        logger.exception("fconv-serve: %s %s failed", request.method, request.url.path)
        return _error(500, f"internal error ({type(error).__name__}); the server log has the details")

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException):
        return _error(error.status_code, f"{error.detail}: {request.method} {request.url.path}")

    async def translated(job: Job) -> List[Translation]:
        """The job's translations. Its sentences go to the batcher in parts of at most
        --max-request-sentences, one after another, as fconv-translate's batches go to the
        model: a document of any length passes through the same back-pressure. The first
        part that finds the queue full is refused at once (QueueFull: 429); a later one
        waits for room. Each part has --timeout to be answered; on the timeout, or the
        client leaving, wait_for cancels the part, which cancels its job: it leaves the
        queue, and the round it is in at the round's next generation batch (batching.py),
        and no late DeadlinePassed is left unread."""
        translations: List[Translation] = []
        for number, part in enumerate(job.parts(limits.max_sentences)):
            part.deadline = time.monotonic() + limits.timeout
            while True:
                try:
                    future = asyncio.wrap_future(batcher.submit(part))
                    break
                except QueueFull as full:
                    if number == 0 or time.monotonic() + 0.1 > part.deadline:
                        raise
                    await asyncio.sleep(min(full.retry_after, 0.5, part.deadline - time.monotonic()))
            try:
                translations += await asyncio.wait_for(future, limits.timeout)
            except (asyncio.TimeoutError, DeadlinePassed):  # answered as 503 (CancelledError is no Exception)
                raise
            except Exception as error:  # the model failed on this input: say so in one line
                logger.exception("fconv-serve: generation failed")
                raise TranslationFailed(str(error).splitlines()[0] if str(error) else type(error).__name__) from error
        return translations

    async def answered(work) -> Response:
        """``work()``'s answer, or the error it meets in one line with its status."""
        try:
            answer = await work()
        except RateLimited as limited:
            return _error(429, str(limited), headers={"Retry-After": str(limited.retry_after)})
        except BadRequest as bad:
            return _error(bad.status, str(bad))
        except QueueFull as full:  # at once, not after the timeout
            return _error(429, str(full), headers={"Retry-After": str(full.retry_after)})
        except ShuttingDown as stopping:
            return _error(503, str(stopping))
        except (asyncio.TimeoutError, DeadlinePassed):
            return _error(503, f"the translation took longer than {limits.timeout:g} s (--timeout); the server is busy, try again")
        except TranslationFailed as failed:
            return _error(500, f"translation failed: {failed}")
        return answer if isinstance(answer, Response) else JSONResponse(answer)

    async def request_fields(request: Request):
        """The request's fields in any of LibreTranslate's encodings (``read_request``), its
        files, and its API key admitted (``api_key`` among the fields, or X-API-Key)."""
        body = await _read_body(request, limits.max_body_bytes)
        content_type = request.headers.get("content-type", "")
        form, files = None, {}
        if content_type.split(";")[0].strip().lower() == "multipart/form-data":
            form, files = await _multipart(request.headers, body)
        fields = read_request(body, content_type, request.query_params.multi_items(), form)
        key = fields.pop("api_key", None) or request.headers.get("x-api-key")
        if api_keys is not None:
            api_keys.admit(key)
        return fields, files

    @app.post("/translate")
    async def translate(request: Request):
        async def work():
            fields, _ = await request_fields(request)
            # tokenizer and BPE run here: off the event loop, which keeps serving other requests
            if is_libretranslate_request(fields):
                job, shape = await run_in_threadpool(parse_libretranslate_request, fields, translators, limits)
                return libretranslate_answer(shape, job, await translated(job))
            job = await run_in_threadpool(parse_translate_request, fields, translators, default_model, default_beam,
                                          limits)
            return {"translations": answers(job, await translated(job))}

        return await answered(work)

    @app.post("/detect")
    async def detect(request: Request):
        """LibreTranslate's: the served source languages, most likely first (``language_id``)."""
        async def work():
            fields, _ = await request_fields(request)
            return await run_in_threadpool(detect_answer, fields, translators)

        return await answered(work)

    @app.post("/translate_file")
    async def translate_file(request: Request):
        """LibreTranslate's: a .txt, .html or .docx file in, the address of its translation out."""
        async def work():
            fields, files = await request_fields(request)
            for name in ("source", "target"):
                if not isinstance(fields.get(name), str) or not fields[name]:
                    raise BadRequest(400, f"Invalid request: missing {name} parameter")
            if "file" not in files:
                raise BadRequest(400, "Invalid request: missing file parameter (send it in a multipart form)")
            filename, data = files["file"]
            document = await run_in_threadpool(read_file, filename, data)
            check_size(document.texts, limits, count_texts=False)
            source = fields["source"]
            if source == "auto":
                source = detected_source(document.texts or [""], fields["target"], translators)[0]
            model = model_for(translators, source, fields["target"])
            translator = translators[model]
            items = await run_in_threadpool(
                lambda: [text_item(translator, text, f"text {n}", as_document=True)
                         for n, text in enumerate(document.texts, start=1)])
            job = job_of(model, items, translator.defaults.beam, limits)
            translations = await translated(job) if job.lines else []
            texts = [item.document.assemble(mine).text for item, mine in item_translations(job, translations)]
            data = await run_in_threadpool(document.rebuild, texts)
            name = translated_files.keep(data, Path(filename).suffix.lower())
            return {"translatedFileUrl": str(request.url_for("download_file", name=name))}

        return await answered(work)

    @app.get("/download_file/{name}")
    async def download_file(name: str):
        path = translated_files.path(name)
        if path is None:
            return _error(404, f"no translated file {name!r}: it was never made, or it was deleted after "
                               f"{translated_files.max_age:g} s; translate the file again")
        return FileResponse(path, filename=name)

    @app.get("/frontend/settings")
    async def settings():
        """LibreTranslate's: the limits, keys setting, file formats and languages, for its page and clients."""
        return frontend_settings(translators, limits, api_keys is not None, list(FORMATS))

    @app.get("/languages")
    async def languages():
        """LibreTranslate's list: each language with the languages it translates into."""
        return language_list(translators)

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

    @app.get("/openapi.json")
    async def openapi():
        return openapi_document(list(translators))

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
