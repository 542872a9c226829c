"""fconv-serve: a trained model behind HTTP, with concurrent requests batched together.

- ``translator.py``: one model, loaded and run exactly as fairseq-interactive does;
- ``batching.py``: sentences from requests that arrive together, in one generation call;
- ``app.py``: the HTTP API (FastAPI), its limits and errors, and the page at ``/``;
- ``main.py``: the ``fconv-serve`` command (fairseq-interactive's options, run by uvicorn).
"""
