"""Who may translate: optional API keys from a file, each with its own request limit.

    # --api-keys keys.txt: one key a line, then optionally its requests per minute
    team-a-4f9c2e  120
    page-demo-91b3 10
    unlimited-7d0a

With keys, every POST /translate must carry one: the ``api_key`` field (LibreTranslate's
clients send it) or the ``X-API-Key`` header. A missing or unknown key gets 403; a key
over its limit in the last 60 seconds gets 429 with ``Retry-After``. Without
``--api-keys`` the server is open, as it should be on 127.0.0.1 only.
"""

import logging
import math
import re
import time
from collections import deque
from pathlib import Path
from typing import Deque, Dict, Optional

from ..errors import FConvError
from .requests import BadRequest

WINDOW_SECONDS = 60.0


# a key in a query string (LibreTranslate's clients may send ?api_key=...), as logged
KEY_IN_QUERY = re.compile(r"(?i)((?:^|[?&;])api[_-]?key=)[^&;\s\"]*")


def redacted(text: str) -> str:
    """``text`` with every api_key=... of a query string replaced by api_key=[redacted]."""
    return KEY_IN_QUERY.sub(r"\1[redacted]", text)


class RedactKeys(logging.Filter):
    """Keeps API keys out of the log: uvicorn's access log writes the request line, query
    string and all; this filter redacts keys in a record's arguments and message before any
    handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redacted(arg) if isinstance(arg, str) else arg for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redacted(v) if isinstance(v, str) else v for k, v in record.args.items()}
        if isinstance(record.msg, str):
            record.msg = redacted(record.msg)
        return True


class RateLimited(BadRequest):
    def __init__(self, retry_after: int):
        super().__init__(429, f"this API key's limit is reached; try again in {retry_after} s")
        self.retry_after = retry_after


class ApiKeys:
    def __init__(self, limits: Dict[str, Optional[int]], clock=time.monotonic):
        self.limits = limits  # key -> requests per minute (None: no limit)
        self._recent: Dict[str, Deque[float]] = {key: deque() for key in limits}
        self._clock = clock

    @classmethod
    def read(cls, path: str) -> "ApiKeys":
        """The keys of ``path``; one line naming the problem for a malformed file."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise FConvError(f"--api-keys {path}: {getattr(error, 'strerror', None) or error}") from None
        limits: Dict[str, Optional[int]] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if len(fields) > 2 or (len(fields) == 2 and not (fields[1].isdigit() and int(fields[1]) > 0)):
                raise FConvError(f"--api-keys {path} line {number}: write a key, then optionally its requests "
                                 "per minute (a whole number above 0)")
            if fields[0] in limits:
                raise FConvError(f"--api-keys {path} line {number}: the key is listed twice")
            limits[fields[0]] = int(fields[1]) if len(fields) == 2 else None
        if not limits:
            raise FConvError(f"--api-keys {path} holds no key; list one a line, or leave --api-keys out")
        return cls(limits)

    def admit(self, key: Optional[str]) -> None:
        """Count one request for ``key``; BadRequest (403) or RateLimited (429) if it may not."""
        if not isinstance(key, str) or key not in self.limits:
            raise BadRequest(403, "Invalid API key" if key else "an API key is required: send api_key or X-API-Key")
        limit = self.limits[key]
        if limit is None:
            return
        now = self._clock()
        recent = self._recent[key]
        while recent and recent[0] <= now - WINDOW_SECONDS:
            recent.popleft()
        if len(recent) >= limit:
            raise RateLimited(max(1, math.ceil(recent[0] + WINDOW_SECONDS - now)))
        recent.append(now)
