"""Writing a summarisation corpus in the form summarise.sh's CORPUS= reads (shared by the corpus builders)."""

import contextlib
import lzma
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Tuple


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


@contextlib.contextmanager
def inputs_directory(given: Optional[Path], fetch: Callable[[Path], None]) -> Iterator[Path]:
    """The directory of downloaded inputs: ``given`` as it is, or a scratch one that
    ``fetch`` fills and that is removed afterwards."""
    if given:
        yield given
        return
    with tempfile.TemporaryDirectory() as scratch:
        fetch(Path(scratch))
        yield Path(scratch)
