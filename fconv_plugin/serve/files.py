"""LibreTranslate's file translation: ``POST /translate_file`` takes a .txt, .html or .docx
file and answers the address of its translation, which ``GET /download_file/<name>``
serves for a bounded time.

A file becomes the texts to translate and a way to put their translations back:
.txt is one document (paragraphs and line breaks kept, as ``q`` is); .html keeps its
markup and translates each text between tags (``libretranslate.html_pieces``); .docx is
read by python-docx and each run with text (in paragraphs and table cells) is translated
on its own, so every run keeps its style and every paragraph its place. The texts go
through the same parts, back-pressure and limits as a /translate request.

Translated files are kept under names of 32 random URL-safe characters (unguessable,
nothing else accepted, so no name reaches outside the directory), at most
``max_files`` of them and for ``max_age`` seconds; then they are deleted, and their
names get 404.
"""

import io
import os
import re
import secrets
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

from .libretranslate import html_pieces, rebuild_html
from .requests import BadRequest

FORMATS = (".txt", ".html", ".docx")
NAME = re.compile(r"^[A-Za-z0-9_-]{32}\.(txt|html|docx)$")


@dataclass
class TranslatableFile:
    """The texts of a file to translate, and ``rebuild(translations) -> bytes``."""

    texts: List[str]
    rebuild: Callable[[List[str]], bytes]


def read_file(filename: str, data: bytes) -> TranslatableFile:
    """The file's texts, by its extension; BadRequest (400) for another format or bad content."""
    suffix = os.path.splitext(filename or "")[1].lower()
    if suffix not in FORMATS:
        raise BadRequest(400, f"Invalid request: file format {suffix or '(none)'} not supported; "
                              f"send {', '.join(FORMATS)}")
    if suffix == ".docx":
        return _docx(data)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise BadRequest(400, f"Invalid request: {filename} is not UTF-8 text (byte {data[e.start]:#04x} at offset "
                              f"{e.start})") from None
    if suffix == ".txt":
        return TranslatableFile([text] if text.strip() else [], lambda translated: (translated[0] if translated
                                                                                    else text).encode("utf-8"))
    pieces = html_pieces(text)
    return TranslatableFile([raw.strip() for translate, raw in pieces if translate],
                            lambda translated: rebuild_html(pieces, iter(translated)).encode("utf-8"))


def _docx_runs(document):
    """Every run with text: the body's paragraphs, then each table cell's, in order."""
    paragraphs = list(document.paragraphs)
    for table in document.tables:
        for row in table.rows:
            for cell in row.cells:
                paragraphs.extend(cell.paragraphs)
    return [run for paragraph in paragraphs for run in paragraph.runs if run.text.strip()]


def _docx(data: bytes) -> TranslatableFile:
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as error:  # not a zip, or one python-docx cannot read: still the sender's file
        raise BadRequest(400, f"Invalid request: not a readable .docx document ({type(error).__name__})") from None
    runs = _docx_runs(document)

    def rebuild(translated: List[str]) -> bytes:
        for run, text in zip(runs, translated):
            original = run.text
            lead, trail = original[: len(original) - len(original.lstrip())], original[len(original.rstrip()):]
            run.text = lead + text + trail  # the run, and so its style, stays
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()

    return TranslatableFile([run.text.strip() for run in runs], rebuild)


class TranslatedFiles:
    """Translated files on disk, under random names, bounded in count and age."""

    def __init__(self, directory: Optional[str] = None, max_files: int = 100, max_age: float = 3600.0):
        self._own_directory = directory is None  # made here: removed on close
        self.directory = Path(directory or tempfile.mkdtemp(prefix="fconv-serve-files-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_files = max_files
        self.max_age = max_age
        self._lock = threading.Lock()

    def close(self) -> None:
        """Delete every translated file (the server stops)."""
        with self._lock:
            for path in self.directory.iterdir():
                if NAME.fullmatch(path.name) or path.name.endswith(".part"):
                    path.unlink(missing_ok=True)
            if self._own_directory:
                try:
                    self.directory.rmdir()
                except OSError:  # something else was put there: left as it is
                    pass

    def keep(self, data: bytes, suffix: str) -> str:
        """Store ``data``; its name, for /download_file."""
        name = secrets.token_urlsafe(24) + suffix  # 32 characters of 6 random bits each
        with self._lock:
            self._prune()
            path = self.directory / name
            temporary = path.with_suffix(path.suffix + ".part")
            temporary.write_bytes(data)
            os.replace(temporary, path)  # a download never sees half a file
            self._prune(keep=name)
        return name

    def path(self, name: str) -> Optional[Path]:
        """The file stored as ``name``, or None: a name of another form, one pruned, or one never given."""
        if not NAME.fullmatch(name):
            return None
        with self._lock:
            self._prune()
            path = self.directory / name
            return path if path.is_file() else None

    def _prune(self, keep: Optional[str] = None) -> None:
        now = time.time()
        files = sorted((p for p in self.directory.iterdir() if NAME.fullmatch(p.name)), key=lambda p: p.stat().st_mtime)
        for path in files:
            if now - path.stat().st_mtime > self.max_age:
                path.unlink(missing_ok=True)
        files = [p for p in files if p.exists()]
        while len(files) > self.max_files:
            oldest = files.pop(0)
            if oldest.name != keep:
                oldest.unlink(missing_ok=True)
