"""fconv-serve: a trained model behind HTTP, with concurrent requests batched together.

Each model is an ``inference.Translator`` (the inference core), loaded and run as
fairseq-interactive runs it; a text with line breaks, or with ``"document": true``, is
translated as a document (``inference.documents``).

- ``batching.py``: sentences from requests that arrive together, in one generation call;
- ``app.py``: the HTTP API (FastAPI), its limits and errors, and the page at ``/``;
- ``main.py``: the ``fconv-serve`` command (fairseq-interactive's options, run by uvicorn).
"""
