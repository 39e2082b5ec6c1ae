"""glibc's malloc told to keep the large blocks a CPU worker frees and allocates again each step.

Model Runner V2 materialises its processed logits as a fresh float32 tensor every step
(``Sampler.apply_sampling_params``: ``torch.empty_like(logits, dtype=torch.float32).copy_``),
and the V1 runner allocates step-sized tensors too. A block past glibc's mmap threshold
(dynamic, at most 32 MiB on 64-bit) is mapped for each allocation and unmapped when freed, so
every step faults in its pages again: at B = 16, k = 4, V = 128256 (41 MB) the copy takes
~18 ms in a vLLM worker instead of ~2 ms into memory already touched -- more than all of the
sampler's kernels. vLLM's CPU documentation asks for tcmalloc in ``LD_PRELOAD`` for this
reason (the worker warns without it); where it is absent, :func:`keep_large_blocks` asks glibc
for the same behaviour: ``mallopt(M_MMAP_THRESHOLD, 1 GiB)`` (vLLM caps its float32 logits
buffer at 1 GiB, ``MAX_CHUNK_BYTES``) and a trim threshold above it, so a freed block is
reused instead of returned. The cost is memory a process keeps after a peak, which a caching
allocator keeps too.

``FASTDISPATCH_VLLM_MALLOC=0`` leaves malloc alone. Nothing is done where another allocator
is preloaded (``LD_PRELOAD`` names tcmalloc or jemalloc), where ``GLIBC_TUNABLES`` already
sets a malloc threshold, or where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

from .._env import env_flag

__all__ = ["MALLOC_ENV", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_large_blocks"]

#: ``0``/``off``: leave glibc's malloc as it is.
MALLOC_ENV = "FASTDISPATCH_VLLM_MALLOC"
#: Blocks below this come from the heap (reused when freed) instead of a fresh mapping.
MMAP_THRESHOLD = 1 << 30
#: Free memory at the top of the heap returned to the system only past this.
TRIM_THRESHOLD = (1 << 31) - 1

# glibc's <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_done: str | None = None


def keep_large_blocks() -> str:
    """Apply the thresholds once per process; return what was done (or why not), for the log."""
    global _done
    if _done is not None:
        return _done
    _done = _why_not() or _apply()
    return _done


def _why_not() -> str | None:
    if env_flag(MALLOC_ENV) is False:
        return f"malloc left as it is ({MALLOC_ENV}=0)"
    if not sys.platform.startswith("linux"):
        return f"malloc left as it is (not glibc: {sys.platform})"
    preload = os.environ.get("LD_PRELOAD", "")
    for name in ("tcmalloc", "jemalloc"):
        if name in preload:
            return f"malloc left as it is ({name} is preloaded)"
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if "mmap_threshold" in tunables or "trim_threshold" in tunables:
        return "malloc left as it is (GLIBC_TUNABLES sets its thresholds)"
    return None


def _apply() -> str:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        gnu_get_libc_version = libc.gnu_get_libc_version
    except (OSError, AttributeError):
        return "malloc left as it is (the C library is not glibc)"
    gnu_get_libc_version.restype = ctypes.c_char_p
    version = gnu_get_libc_version().decode()
    mallopt = libc.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # the trim threshold first: were the mmap one refused, nothing is half-applied but this
    if not mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD):
        return f"malloc left as it is (glibc {version} refused M_TRIM_THRESHOLD)"
    if not mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        return f"glibc {version}: trim threshold raised, M_MMAP_THRESHOLD refused"
    return (
        f"glibc {version}: blocks up to {MMAP_THRESHOLD >> 20} MiB reused from the heap "
        f"(mmap threshold), freed memory kept up to {TRIM_THRESHOLD >> 20} MiB ({MALLOC_ENV}=0 "
        "leaves malloc alone)"
    )
