"""Writing a summarisation corpus in the form summarise.sh's CORPUS= reads (shared by the corpus builders)."""

import lzma
from pathlib import Path
from typing import Iterable, Tuple


def write_pairs(out: Path, rows: Iterable[Tuple[str, str, str]]) -> int:
    """xz-compressed ``group <TAB> summary <TAB> document`` lines; a document seen before is skipped.

    Returns the number of lines written. Tabs and line breaks inside a text become spaces."""
    seen, written = set(), 0
    with lzma.open(out, "wt", encoding="utf-8") as f:
        for group, summary, document in rows:
            summary, document = (" ".join(text.split()) for text in (summary, document))
            if document in seen:
                continue
            seen.add(document)
            f.write(f"{group}\t{summary}\t{document}\n")
            written += 1
    return written
