"""The HTTP API as an OpenAPI 3.1 document, served at /openapi.json.

Written out by hand because /translate reads its body itself (JSON or a form, the
native API or LibreTranslate's) to give one-line errors instead of FastAPI's
validation lists. tests/serve/test_fuzz.py fuzzes the server from this document
with schemathesis.
"""

from typing import Dict, List

ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string", "description": "one line: what is wrong and what to do"}},
    "additionalProperties": False,
}

NATIVE_REQUEST = {
    "type": "object",
    "required": ["text"],
    "properties": {
        "text": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                 "description": "a sentence or a document, or a list of them"},
        "beam": {"type": "integer", "minimum": 1},
        "alignment": {"type": "boolean"},
        "attention": {"type": "boolean"},
        "document": {"type": "boolean", "description": "split into sentences, keep lines and paragraphs"},
        "model": {"type": "string"},
        "api_key": {"type": "string"},
    },
    "additionalProperties": False,
}

LIBRETRANSLATE_REQUEST = {
    "type": "object",
    "required": ["q", "source", "target"],
    "properties": {
        "q": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "source": {"type": "string", "description": "a served model's source language, or auto"},
        "target": {"type": "string"},
        "format": {"type": "string", "enum": ["text", "html"]},
        "api_key": {"type": "string"},
        "alternatives": {"type": "integer", "minimum": 0},
    },
    "additionalProperties": False,
}

DETECT_REQUEST = {
    "type": "object", "required": ["q"], "additionalProperties": False,
    "properties": {"q": {"type": "string"}, "api_key": {"type": "string"}},
}

DETECTION = {
    "type": "object", "required": ["language", "confidence"],
    "properties": {"language": {"type": "string"}, "confidence": {"type": "number", "minimum": 0, "maximum": 100}},
}

FILE_REQUEST = {
    "type": "object", "required": ["file", "source", "target"],
    "properties": {"file": {"type": "string", "format": "binary"}, "source": {"type": "string"},
                   "target": {"type": "string"}, "api_key": {"type": "string"}},
}

HYPOTHESIS = {
    "type": "object",
    "required": ["text", "score"],
    "properties": {
        "text": {"type": "string"},
        "score": {"type": "number"},
        "alignment": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        "attention": {"type": "object"},
        "p_gen": {"type": "array", "items": {"type": "number"}},
        "sentences": {"type": "array", "items": {"type": "object"}},
    },
}


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> Dict[str, dict]:
    return {str(status): _json(ERROR, "a one-line error") for status in statuses}


def _get(summary: str, schema: dict, *statuses: int) -> dict:
    return {"get": {"summary": summary, "responses": {"200": _json(schema, "ok"), **_errors(*statuses)}}}


def openapi_document(model_names: List[str]) -> dict:
    translate_answer = {"oneOf": [
        {"type": "object", "required": ["translations"],
         "properties": {"translations": {"type": "array", "items": HYPOTHESIS}}},
        {"type": "object", "required": ["translatedText"],
         "properties": {"translatedText": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                        "alternatives": {"type": "array"},
                        "detectedLanguage": {"oneOf": [{"type": "object"}, {"type": "array"}]}}},
    ]}
    native = dict(NATIVE_REQUEST, properties=dict(NATIVE_REQUEST["properties"], model={"type": "string", "enum": model_names}))
    return {
        "openapi": "3.1.0",
        "info": {"title": "fconv-serve", "version": "1",
                 "description": "ConvS2S translation: the native API and LibreTranslate's (docs/serving.md)"},
        "paths": {
            "/translate": {"post": {
                "summary": "translate texts (the native API, or LibreTranslate's when the request has q)",
                "requestBody": {"required": True, "content": {
                    "application/json": {"schema": {"oneOf": [native, LIBRETRANSLATE_REQUEST]}},
                    "application/x-www-form-urlencoded": {"schema": LIBRETRANSLATE_REQUEST},
                    "multipart/form-data": {"schema": LIBRETRANSLATE_REQUEST},
                }},
                "responses": {"200": _json(translate_answer, "the translations, in input order"),
                              **_errors(400, 403, 404, 413, 415, 422, 429, 503)},
            }},
            "/detect": {"post": {
                "summary": "LibreTranslate's: the served source languages, most likely first",
                "requestBody": {"required": True, "content": {
                    media: {"schema": DETECT_REQUEST} for media in
                    ("application/json", "application/x-www-form-urlencoded", "multipart/form-data")}},
                "responses": {"200": _json({"type": "array", "items": DETECTION}, "detections"),
                              **_errors(400, 403, 413, 415, 422, 429)},
            }},
            "/translate_file": {"post": {
                "summary": "LibreTranslate's: a .txt, .html or .docx file translated; its address answered",
                "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": FILE_REQUEST}}},
                "responses": {"200": _json({"type": "object", "required": ["translatedFileUrl"],
                                            "properties": {"translatedFileUrl": {"type": "string"}}}, "where to fetch it"),
                              **_errors(400, 403, 413, 415, 422, 429, 503)},
            }},
            "/download_file/{name}": {"get": {
                "summary": "a translated file, while it is kept",
                "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "the file", "content": {"application/octet-stream": {}}},
                              **_errors(404)},
            }},
            "/frontend/settings": _get("LibreTranslate's frontend settings: limits, keys, file formats, languages",
                                       {"type": "object", "required": ["charLimit", "keyRequired", "language"]}),
            "/languages": _get("LibreTranslate's languages, each with its targets",
                               {"type": "array", "items": {"type": "object"}}),
            "/models": _get("the served models", {"type": "object"}),
            "/health": _get("readiness: the models are loaded and the worker takes work", {"type": "object"}, 503),
            "/health/live": _get("liveness", {"type": "object"}),
        },
    }
