"""fconv-serve: a trained model behind HTTP, with concurrent requests batched together.

Each model is an ``inference.Translator`` (the inference core), loaded and run as
fairseq-interactive runs it; a text with line breaks, or with ``"document": true``, is
translated as a document (``inference.documents``).

A request goes: ``app.py`` (HTTP: body, fields, API key, routes, status codes) → a
protocol adapter (``requests.py`` the native API, ``libretranslate.py`` LibreTranslate's,
``files.py`` files) that turns its fields into what it asks → ``service.py`` (the
request's parts, deadlines, retry and answer) → ``batching.py`` (sentences from requests
that arrive together, in one generation call) → the translators. ``served.py`` holds the
models by name with their language pairs, worked out once; ``main.py`` is the
``fconv-serve`` command (fairseq-interactive's options, run by uvicorn). Below ``app.py``
nothing imports the web framework (``tests/test_layers.py``).
"""
