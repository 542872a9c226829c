"""The HTTP API: POST /translate (the native API, or LibreTranslate's: ``libretranslate.py``),
LibreTranslate's POST /detect, POST /translate_file, GET /download_file/<name> (``files.py``)
and GET /frontend/settings, GET /languages, GET /health (readiness), /health/live,
GET /models, GET /metrics (Prometheus: ``metrics.py``), GET /openapi.json (``openapi.py``),
and the page at /.

This module is HTTP alone: reading a request's body and fields (any of LibreTranslate's
encodings, the API key), routing it to the service (``service.py``), and turning what the
service raises into a status. Every bad request gets a 4xx answer ``{"error": "<one
line>"}`` and the server goes on serving; a request the full queue cannot take gets 429
with ``Retry-After`` at once, and one that waits longer than the timeout gets 503.
"""

import asyncio
import logging
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Dict, Optional, Sequence

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.middleware.cors import CORSMiddleware

from ..inference import Translator
from .access import ApiKeys, RateLimited
from .batching import DeadlinePassed, DynamicBatcher, QueueFull, ShuttingDown
from .files import TranslatedFiles
from .metrics import ServerMetrics
from .openapi import openapi_document
from .requests import BadRequest, Limits, read_request
from .served import ServedModels
from .service import NotReady, TranslationFailed, TranslationService

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


async def request_fields(request: Request, limits: Limits, api_keys: Optional[ApiKeys]):
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


async def response_of(work, timeout: float) -> Response:
    """``work()``'s answer, or the error it meets in one line with its status."""
    try:
        answer = await work()
    except (RateLimited, QueueFull) as refused:  # at once, not after the timeout
        return _error(429, str(refused), headers={"Retry-After": str(refused.retry_after)})
    except BadRequest as bad:
        return _error(bad.status, str(bad))
    except (ShuttingDown, NotReady) as stopping:
        return _error(503, str(stopping))
    except (asyncio.TimeoutError, DeadlinePassed):
        return _error(503, f"the translation took longer than {timeout:g} s (--timeout); the server is busy, try again")
    except TranslationFailed as failed:
        return _error(500, f"translation failed: {failed}")
    return answer if isinstance(answer, Response) else JSONResponse(answer)


async def _post(request: Request, limits: Limits, api_keys: Optional[ApiKeys], work) -> Response:
    """A POST route's answer: the request's fields and files to ``work``, its answer or error back."""
    async def run():
        fields, files = await request_fields(request, limits, api_keys)
        return await work(fields, files)

    return await response_of(run, limits.timeout)


def _http_basics(app: FastAPI, batcher: DynamicBatcher, cors_origins: Sequence[str]) -> None:
    """What the server answers itself, whatever it serves: CORS where origins are given, the
    metrics (middleware and GET /metrics), liveness, the page, and the error shape for a bug
    or a route that does not exist."""
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

    @app.get("/health/live")
    async def live():  # liveness: the process answers HTTP (a load balancer's restart signal, not its routing one)
        return {"status": "alive"}

    @app.get("/")
    async def page():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/page.js")
    async def page_script():
        return FileResponse(STATIC / "page.js", media_type="text/javascript")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception):  # a bug: still the error shape, and logged
        logger.exception("fconv-serve: %s %s failed", request.method, request.url.path)
        return _error(500, f"internal error ({type(error).__name__}); the server log has the details")

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException):
        return _error(error.status_code, f"{error.detail}: {request.method} {request.url.path}")


def create_app(translators: Dict[str, Translator], default_model: str, batcher: DynamicBatcher, limits: Limits,
               api_keys: Optional[ApiKeys] = None, cors_origins: Sequence[str] = (), translated_files: Optional[TranslatedFiles] = None) -> FastAPI:
    """The app, routes alone; ``api_keys`` None leaves /translate open (for 127.0.0.1),
    ``cors_origins`` empty sends no CORS headers (browsers then refuse other sites' pages);
    ``translated_files`` keeps /translate_file's results (default: a new temporary directory)."""
    served = ServedModels.of(translators, default_model)  # the language pairs, once
    service = TranslationService(served, batcher, limits, translated_files or TranslatedFiles())

    @asynccontextmanager
    async def lifespan(app):  # the batcher was started as the models loaded (main.started_batcher)
        yield
        service.stop()  # uvicorn has answered every request in flight (SIGTERM/SIGINT)

    app = FastAPI(title="fconv-serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    _http_basics(app, batcher, cors_origins)

    @app.post("/translate")
    async def translate(request: Request):
        return await _post(request, limits, api_keys, lambda fields, files: service.translate(fields))

    @app.post("/detect")
    async def detect(request: Request):
        return await _post(request, limits, api_keys, lambda fields, files: service.detect(fields))

    @app.post("/translate_file")
    async def translate_file(request: Request):
        return await _post(request, limits, api_keys, lambda fields, files: service.translate_file(
            fields, files, lambda name: str(request.url_for("download_file", name=name))))

    @app.get("/download_file/{name}")
    async def download_file(name: str):
        path = service.translated_files.path(name)
        if path is None:
            return _error(404, f"no translated file {name!r}: it was never made, or it was deleted after "
                               f"{service.translated_files.max_age:g} s; translate the file again")
        return FileResponse(path, filename=name)

    @app.get("/frontend/settings")
    async def settings():
        return service.settings(keys_required=api_keys is not None)

    @app.get("/languages")
    async def languages():
        return served.language_list()

    @app.get("/health")
    async def health():
        return await response_of(service.health, limits.timeout)

    @app.get("/openapi.json")
    async def openapi():
        return openapi_document(list(translators))

    @app.get("/models")
    async def models():
        return served.described()

    return app
