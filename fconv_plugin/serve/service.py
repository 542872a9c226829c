"""The translation service: what a request asks, run through the batcher, and its answer.

Between the protocols and the batcher: the protocol adapters turn a request's fields into
what it asks (``requests.parse_translate_request`` for the native API,
``libretranslate.parse_libretranslate_request`` for LibreTranslate's, ``files.read_file``
for a file), and ``TranslationService`` owns the rest of a request's life: its sentences
sent in parts, each part's deadline, the retry of a part that finds the queue full, and
the answer. It knows nothing of HTTP; ``app.py`` routes requests to it and turns its
exceptions into status codes.
"""

import asyncio
import functools
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import anyio

from ..inference import Translation, TranslationOptions
from .batching import DeadlinePassed, DynamicBatcher, Job, QueueFull
from .files import FORMATS, TranslatedFiles, read_file
from .libretranslate import (detect_answer, detected_source, frontend_settings, is_libretranslate_request,
                             libretranslate_answer, model_for, parse_libretranslate_request)
from .requests import (BadRequest, Limits, answers, check_size, parse_translate_request, request_text,
                       text_translations, translation_request)
from .served import ServedModels

logger = logging.getLogger("fconv_plugin.serve")


class TranslationFailed(Exception):
    """The model failed on a request's input (logged where it happened)."""


class NotReady(Exception):
    """The generation worker does not take work (starting or shutting down)."""


async def run_in_threadpool(function, *args):
    """``function(*args)`` in a worker thread (anyio's, as the web stack runs its own)."""
    return await anyio.to_thread.run_sync(functools.partial(function, *args))


class TranslationService:
    """The served models, the batcher that runs them, the request limits and the kept files."""

    def __init__(self, served: ServedModels, batcher: DynamicBatcher, limits: Limits,
                 translated_files: TranslatedFiles):
        self.served, self.batcher, self.limits, self.translated_files = served, batcher, limits, translated_files

    async def translated(self, job: Job) -> List[Translation]:
        """The job's translations. Its sentences go to the batcher in parts of at most
        --max-request-sentences, one after another, as fconv-translate's batches go to the
        model: a document of any length passes through the same back-pressure. The first
        part that finds the queue full is refused at once (QueueFull: 429); a later one
        waits for room. Each part has --timeout to be answered; on the timeout, or the
        client leaving, wait_for cancels the part, which cancels its job: it leaves the
        queue, and the round it is in at the round's next generation batch (batching.py),
        and no late DeadlinePassed is left unread."""
        translations: List[Translation] = []
        for number, part in enumerate(job.parts(self.limits.max_request_sentences)):
            part.deadline = time.monotonic() + self.limits.timeout
            while True:
                try:
                    future = asyncio.wrap_future(self.batcher.submit(part))
                    break
                except QueueFull as full:
                    if number == 0 or time.monotonic() + 0.1 > part.deadline:
                        raise
                    await asyncio.sleep(min(full.retry_after, 0.5, part.deadline - time.monotonic()))
            try:
                translations += await asyncio.wait_for(future, self.limits.timeout)
            except (asyncio.TimeoutError, DeadlinePassed):  # answered as 503 (CancelledError is no Exception)
                raise
            except Exception as error:  # the model failed on this input: say so in one line
                logger.exception("fconv-serve: generation failed")
                raise TranslationFailed(str(error).splitlines()[0] if str(error) else type(error).__name__) from error
        return translations

    async def translate(self, fields: dict) -> dict:
        """POST /translate: LibreTranslate's request where it has ``q``, else the native API's.
        Tokenizer and BPE run in a thread: off the event loop, which keeps serving others."""
        if is_libretranslate_request(fields):
            request, form = await run_in_threadpool(parse_libretranslate_request, fields, self.served, self.limits)
            return libretranslate_answer(form, request, await self.translated(request.job))
        request = await run_in_threadpool(parse_translate_request, fields, self.served, self.limits)
        return {"translations": answers(request, await self.translated(request.job))}

    async def detect(self, fields: dict) -> List[dict]:
        """LibreTranslate's POST /detect: the served source languages, most likely first."""
        return await run_in_threadpool(detect_answer, fields, self.served)

    async def translate_file(self, fields: dict, files: Dict[str, Tuple[str, bytes]],
                             address: Callable[[str], str]) -> dict:
        """LibreTranslate's POST /translate_file: a .txt, .html or .docx file in, the
        ``address`` of its kept translation out."""
        for name in ("source", "target"):
            if not isinstance(fields.get(name), str) or not fields[name]:
                raise BadRequest(400, f"Invalid request: missing {name} parameter")
        if "file" not in files:
            raise BadRequest(400, "Invalid request: missing file parameter (send it in a multipart form)")
        filename, data = files["file"]
        document = await run_in_threadpool(read_file, filename, data)
        check_size(document.texts, self.limits, count_texts=False)
        source = fields["source"]
        if source == "auto":
            source = detected_source(document.texts or [""], fields["target"], self.served)[0]
        model = model_for(self.served, source, fields["target"])
        translator = self.served.translators[model]
        texts = await run_in_threadpool(
            lambda: [request_text(translator, text, f"text {n}", as_document=True)
                     for n, text in enumerate(document.texts, start=1)])
        request = translation_request(model, texts, TranslationOptions.asked(translator.defaults, nbest=1))
        translations = await self.translated(request.job) if request.job.sentences else []
        texts = [text.document.assemble(mine).text for text, mine in text_translations(request, translations)]
        data = await run_in_threadpool(document.rebuild, texts)
        return {"translatedFileUrl": address(self.translated_files.keep(data, Path(filename).suffix.lower()))}

    def settings(self, keys_required: bool) -> dict:
        """LibreTranslate's GET /frontend/settings: the limits, keys setting, file formats and languages."""
        return frontend_settings(self.served, self.limits, keys_required, list(FORMATS))

    async def health(self) -> dict:
        """Readiness: the models loaded and the generation worker taking work, else NotReady."""
        if not self.batcher.ready:
            raise NotReady("not ready: the generation worker is not running (starting or shutting down)")
        return {"status": "ok", "models": sorted(self.served.translators), "batching": asdict(self.batcher.stats)}

    def stop(self) -> None:
        """After the last request: the generation worker ends, the kept files go."""
        self.batcher.stop()
        self.translated_files.close()
        logger.info("fconv-serve: stopped after %d requests in %d generation calls",
                    self.batcher.stats.requests, self.batcher.stats.calls)
