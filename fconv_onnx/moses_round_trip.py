"""What Moses' round trip gives back as written: programming names and quotation marks.

fairseq's ``--tokenizer moses`` (sacremoses) splits "C++" into "C + +" and "C#" into
"C #", and its detokenizer leaves them so; it also leaves the spaces it put inside
guillemets and German quotes: "»pbuilder erstellen«" comes back as "» pbuilder erstellen «".
Here, with sacremoses doing everything else:

- tokenising keeps ``PROTECTED`` as single tokens (sacremoses' ``protected_patterns``):
  a name followed by ``++`` and perhaps a version (C++, g++, clang++, C++17, Notepad++), a
  name of two characters or more followed by one ``+`` (GTK+) and a single letter followed
  by ``#`` (C#, F#);
- detokenising attaches each opening quotation mark to the word after it and its closing
  mark to the word before, pairing them as they come: »…« (German), «…» (French, Spanish,
  Swiss), „…“ and „…” (German), ‚…‘, ‹…› and ›…‹.

Standard library only: the plugin's fix of fairseq's ``--tokenizer moses``
(``fconv_plugin.compat.moses_round_trip``, which the inference core calls too) and the ONNX
runtime (``fconv_onnx.text``) apply these same functions.
"""

import re
from typing import List, Sequence

PROTECTED = (
    r"(?<![\w+#])[A-Za-z][A-Za-z0-9]*\+\+[0-9]*(?![\w+#])",  # C++, g++, clang++, C++17, Notepad++
    r"(?<![\w+#])[A-Za-z][A-Za-z0-9]+\+(?![\w+#])",  # GTK+, Disney+ (two characters at least: "C+" is a grade)
    r"(?<![\w+#])[A-Za-z]#(?![\w+#])",  # C#, F#
)
# an opening mark -> the marks that close it
CLOSING = {"»": "«", "«": "»", "„": "“”", "‚": "‘’", "‹": "›", "›": "‹"}
_PROTECTED = [re.compile(pattern) for pattern in PROTECTED]


def tokenize(moses, line: str, aggressive_dash_splits: bool, escape: bool) -> str:
    """``moses`` (a sacremoses MosesTokenizer) tokenising ``line`` with the names kept whole."""
    patterns = [pattern for pattern in PROTECTED if re.search(pattern, line)]  # sacremoses scans for each it is given
    return moses.tokenize(line, aggressive_dash_splits=aggressive_dash_splits, return_str=True, escape=escape,
                          protected_patterns=patterns or None)


def attach_quotes(tokens: Sequence[str]) -> List[str]:
    """``tokens`` with each paired quotation mark joined to the word it encloses."""
    joined: List[str] = []
    closers: List[str] = []  # the marks that close the quotes opened so far, innermost last
    opening = False
    for token in tokens:
        if closers and token in closers[-1] and joined:
            joined[-1] += token
            closers.pop()
            continue
        if opening and joined:
            joined[-1] += token
        else:
            joined.append(token)
        opening = token in CLOSING
        if opening:
            closers.append(CLOSING[token])
    return joined


def detokenize(moses_detokenizer, line: str) -> str:
    """``moses_detokenizer`` (a sacremoses MosesDetokenizer) on ``line``, quotation marks attached."""
    return moses_detokenizer.detokenize(attach_quotes(line.split()))
