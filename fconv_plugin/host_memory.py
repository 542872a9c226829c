"""Training on the CPU: large tensors reuse the memory freed by the last step, not fresh pages.

A training step at fairseq-train's ``--max-tokens 3000`` allocates and frees tensors of tens of
megabytes several times: the logits over the vocabulary (3,000 x 8,000 float32: 96 MB), their
log-probabilities, the loss's gradients. glibc's malloc serves every allocation above its mmap
threshold (which it raises as it sees frees, to at most 32 MB) with new pages from the kernel,
faulted in and zeroed 4 KB at a time, and hands them back at free, so the next step pays again:
casting the 3,000 x 8,000 logits to float32 took 41 ms so, 6.5 ms from reused memory (a scratch
timing, 2026-12-02, 2-core AMD EPYC). ``benchmarks/training_limits.py --allocator`` measures
fairseq-train end to end both ways.

``keep_freed_memory()`` raises glibc's two thresholds (``mallopt``: M_MMAP_THRESHOLD and
M_TRIM_THRESHOLD, to ``REUSED_UP_TO`` bytes), so that allocations up to that size come from
malloc's heap and what a step frees stays there for the next one (once the heap has grown to
hold it beside the small allocations between steps: two or three steps). The price is memory: the
process keeps what it freed, so its resident size stays near its peak and grows by what the
heap's reuse cannot fit (measured in the same benchmark), until ``return_freed_memory()`` hands
the free pages back as the next epoch begins (where ``keeps_freed_memory()`` says this process keeps
them). A training process wants that; a
server may not, so only fairseq-train on the CPU asks for it (``compat/cpu_training_memory``),
and the examples' speed probe, which measures what fairseq-train will run.

Better still is an allocator built for it: gperftools' tcmalloc (Debian's libtcmalloc-minimal4)
serves large tensors from spans it keeps by size, so a step's tensors land where the last step's
were, and the heap neither fragments nor grows over varying batches as glibc's does (which slowed
fairseq-train's updates by a tenth or more over its first minutes, and held 3.8 GB where tcmalloc
holds 1.5). An allocator is chosen as a process starts, so the choice is the launcher's:
``training_preload()`` names the library to preload (``LD_PRELOAD``) for fairseq-train, where it
is installed, and the examples start fairseq-train and their speed probe with it;
``keep_freed_memory()`` finds it in the process and sets nothing. ``benchmarks/training_limits.py
--tcmalloc`` measures fairseq-train end to end both ways.

``FCONV_ALLOCATOR``: ``auto`` (unset: tcmalloc where installed, else glibc's heap kept for reuse),
``tcmalloc`` (the examples refuse it where it is not installed), ``reuse`` (glibc's heap kept, no preload), ``system``
(malloc as it is, to measure the difference). Where the C library is not glibc (musl, macOS)
nothing can be set, and ``describe()`` (fconv-info) says so.

This module imports nothing of the plugin but its error type: every layer may ask it.
"""

import ctypes
import ctypes.util
import os
import sys
from typing import Optional

from .errors import FConvError

SWITCH = "FCONV_ALLOCATOR"
SETTINGS = ("auto", "tcmalloc", "reuse", "system")
TCMALLOC = "tcmalloc_minimal"  # gperftools' allocator without its profilers: libtcmalloc_minimal.so.4
TCMALLOC_PACKAGE = "libtcmalloc-minimal4"  # Debian's and Ubuntu's name for it
REUSED_UP_TO = 1 << 30  # bytes: the largest allocation served from the heap (a 3,000 x 80,000 float32 tensor)
assert REUSED_UP_TO < 1 << 31  # mallopt takes an int
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h


def setting() -> str:
    """``FCONV_ALLOCATOR``: auto (unset or empty: the default), tcmalloc, reuse or system; anything else is
    refused in one line."""
    value = os.environ.get(SWITCH, "").strip().lower() or "auto"
    if value not in SETTINGS:
        raise FConvError(f"{SWITCH} must be one of {', '.join(SETTINGS)}, got {os.environ[SWITCH]!r}; "
                         "unset it to let training reuse freed memory")
    return value


def tcmalloc_installed() -> Optional[str]:
    """tcmalloc's library as Linux's dynamic loader finds it (``libtcmalloc_minimal.so.4``), or None
    (elsewhere too: ``LD_PRELOAD`` is the GNU loader's)."""
    return ctypes.util.find_library(TCMALLOC) if sys.platform.startswith("linux") else None


def tcmalloc_serves() -> bool:
    """Whether this process's ``malloc`` is tcmalloc's (preloaded): its ``malloc`` is its ``tc_malloc``."""
    try:
        process = ctypes.CDLL(None)
        return (ctypes.cast(process.malloc, ctypes.c_void_p).value
                == ctypes.cast(process.tc_malloc, ctypes.c_void_p).value)
    except (OSError, AttributeError, TypeError):
        return False


def training_preload() -> Optional[str]:
    """The library a launcher preloads (``LD_PRELOAD``) for fairseq-train on the CPU under ``FCONV_ALLOCATOR``:
    tcmalloc where installed (auto) or asked for (tcmalloc: refused in one line where missing), else None."""
    chosen, library = setting(), tcmalloc_installed()
    if chosen == "tcmalloc" and library is None:
        raise FConvError(f"{SWITCH}=tcmalloc, but tcmalloc (lib{TCMALLOC}.so) is not installed: "
                         f"install it (apt-get install {TCMALLOC_PACKAGE}) or unset {SWITCH}")
    return library if chosen in ("auto", "tcmalloc") else None


def glibc() -> Optional[ctypes.CDLL]:
    """The process's C library where it is glibc (the one that has ``mallopt`` thresholds), else None."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc's own function: musl and macOS have none
        libc.mallopt
    except (OSError, AttributeError, TypeError):  # TypeError: Windows, where CDLL(None) is not the C library
        return None
    return libc


KEPT = "freed memory is kept for reuse"  # how keep_freed_memory's words begin where the setting took
SERVED = "tcmalloc serves this process (preloaded): freed memory is reused by size, nothing to set"
_glibc_heap_kept = False  # glibc took this process's thresholds (``_keep_glibc_heap``): mallopt's cannot be read back


def keeps_freed_memory() -> bool:
    """Whether this process keeps freed memory for reuse: tcmalloc serves it, or ``keep_freed_memory()``
    raised glibc's thresholds in it (what took, not what was asked)."""
    return tcmalloc_serves() or _glibc_heap_kept


def keep_freed_memory() -> str:
    """Make this process's malloc keep freed memory for reuse (unless ``FCONV_ALLOCATOR=system``);
    returns what was done, in words, for the log."""
    chosen = setting()
    if tcmalloc_serves():
        return SERVED
    if chosen == "system":
        return f"{SWITCH}=system: malloc as the C library sets it (large tensors get new pages at every step)"
    kept = _keep_glibc_heap()
    if chosen == "tcmalloc":  # a process started without it (fairseq-train by hand): glibc's heap kept, and how to
        library = tcmalloc_installed()
        how = (f"started without it (LD_PRELOAD={library}, as the examples start fairseq-train)" if library
               else f"tcmalloc is not installed (apt-get install {TCMALLOC_PACKAGE})")
        return f"{SWITCH}=tcmalloc, but {how}: {kept}"
    library = tcmalloc_installed() if chosen == "auto" and kept.startswith(KEPT) else None
    return f"{kept}; faster: LD_PRELOAD={library} (tcmalloc, installed here)" if library else kept


def _keep_glibc_heap() -> str:
    """glibc's two thresholds raised (``mallopt``), in words; what is said where they cannot be."""
    global _glibc_heap_kept
    libc = glibc()
    if libc is None:
        return "the C library is not glibc: large tensors get new pages at every step (nothing set)"
    for option in (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD):
        if libc.mallopt(ctypes.c_int(option), ctypes.c_int(REUSED_UP_TO)) != 1:
            return "glibc refused the thresholds (mallopt): large tensors get new pages at every step"
    _glibc_heap_kept = True
    return f"{KEPT} by tensors up to {REUSED_UP_TO >> 20} MB (glibc mallopt; {SWITCH}=system turns this off)"


def return_freed_memory() -> bool:
    """Hand the pages the heap holds free back to the kernel (glibc's ``malloc_trim``, tcmalloc's
    ``MallocExtension_ReleaseFreeMemory``): called as each epoch after the first begins, so that
    what is kept for reuse is what one epoch's batches needed, not what the whole run's did. True
    where glibc released any, or tcmalloc was asked."""
    if tcmalloc_serves():
        ctypes.CDLL(None).MallocExtension_ReleaseFreeMemory()
        return True
    libc = glibc()
    return libc is not None and bool(libc.malloc_trim(ctypes.c_size_t(0)))


def describe() -> str:
    """What fairseq-train on the CPU does with freed memory here, for fconv-info: found by making
    the setting in this process (fconv-info's own, which ends right after), as training would."""
    try:
        chosen, library, serves = setting(), tcmalloc_installed(), tcmalloc_serves()
        if chosen == "tcmalloc" and library and not serves:  # fconv-info itself is started without it
            return (f"fairseq-train on the CPU: {SWITCH}=tcmalloc: tcmalloc where started with LD_PRELOAD={library} "
                    "(the examples do)")
        missing = chosen == "auto" and not serves and library is None
        return (f"fairseq-train on the CPU: {keep_freed_memory()}"
                + (f"; faster: tcmalloc ({TCMALLOC_PACKAGE}), not installed" if missing else ""))
    except FConvError as refusal:
        return f"refused: {refusal}"


def main() -> int:
    """``python -m fconv_plugin.host_memory``: the library to preload for fairseq-train (empty for none) and
    the setting, tab-separated on one line, for the examples' shell scripts; a refusal goes to stderr with status 1."""
    try:
        print(f"{training_preload() or ''}\t{setting()}")
    except FConvError as refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
