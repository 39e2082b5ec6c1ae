# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Model Runner V2's memory kernels: zeroing newly allocated KV-cache blocks.

vLLM's ``_zero_kv_blocks_kernel`` (``vllm/v1/worker/utils.py``, ``KVBlockZeroer``) zeroes the
blocks the scheduler hands out fresh, across every segment of the KV cache in one launch: program
``(b, s, c)`` writes int32 zeros at ``seg_addrs[s] + 4 * (block_ids[b] * seg_block_strides[s] +
c * BLOCK_SIZE + [0, BLOCK_SIZE))``, masked to the segment's page (``< seg_page_sizes[s]``
elements), and does nothing when its chunk starts at or past the page. So block ``b`` of segment
``s`` gets ``min(page, grid[2] * BLOCK_SIZE)`` int32 zeros from its block's start: the grid's
third axis bounds how much of a page is cleared, and only the grid says how many blocks and
segments there are (the tables are built for all segments, the block list per step) -- hence
``grid``. The CPU kernel writes the same elements with one ``memset`` per (block, segment).

The addresses are the caller's promise, as for the Triton kernel (they cannot be checked for
ownership); what can be checked is: every table holds the entries the grid reads, ``BLOCK_SIZE``
is >= 1, and a segment that would be written has a non-null address.
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t
from libc.string cimport memset

from kernels_cpu._buffers cimport IBuf, M_INT64, M_UINT64, check_tensor, expected, iget
from kernels_cpu._checks cimport as_int, index_at_least, need_count, need_min
from kernels_cpu._parallel cimport threads_for

__all__ = ["zero_kv_blocks_kernel"]


cdef struct ZeroArgs:
    IBuf addrs
    IBuf strides
    IBuf pages
    IBuf blocks
    Py_ssize_t n_blocks
    Py_ssize_t n_segs
    int64_t reach      # elements a page can be cleared up to: grid[2] * BLOCK_SIZE


cdef Py_ssize_t _null_segment(const ZeroArgs* a) noexcept nogil:
    """The first segment that would be written through a null address, else -1."""
    cdef Py_ssize_t s
    for s in range(a.n_segs):
        if iget(a.pages, s) > 0 and iget(a.addrs, s) == 0:
            return s
    return -1


cdef void _zero(const ZeroArgs* a, int threads) noexcept nogil:
    cdef Py_ssize_t i, b, s
    cdef int64_t n, page
    cdef char* base
    for i in prange(a.n_blocks * a.n_segs, num_threads=threads, schedule="static"):
        b = i // a.n_segs
        s = i - b * a.n_segs
        page = iget(a.pages, s)
        n = page if page < a.reach else a.reach
        if n <= 0:
            continue
        base = <char*><size_t>iget(a.addrs, s)
        memset(base + 4 * iget(a.blocks, b) * iget(a.strides, s), 0, <size_t>(4 * n))


def zero_kv_blocks_kernel(seg_addrs_ptr, seg_block_strides_ptr, seg_page_sizes_ptr,
                          block_ids_ptr, BLOCK_SIZE, *, grid):
    """Zero ``min(seg_page_sizes[s], grid[2] * BLOCK_SIZE)`` int32 elements at the start of
    block ``block_ids[b]`` of every segment ``s``, for ``b < grid[0]``, ``s < grid[1]``."""
    cdef ZeroArgs a
    cdef Py_ssize_t n, bad
    cdef int64_t total
    g0, g1, g2 = grid
    block = as_int(BLOCK_SIZE, "BLOCK_SIZE")
    need_min("BLOCK_SIZE", block, 1)
    a.n_blocks = as_int(g0, "grid[0]")
    a.n_segs = as_int(g1, "grid[1]")
    a.reach = as_int(g2, "grid[2]") * block
    if a.n_blocks < 0 or a.n_segs < 0 or a.reach < 0:
        raise ValueError(expected("grid", "non-negative axes", tuple(grid)))
    a.addrs.ptr = check_tensor(seg_addrs_ptr, "seg_addrs_ptr", M_INT64 | M_UINT64, -1, NULL, &n)
    a.addrs.wide = True                      # addresses are read as 64-bit patterns either way
    if a.n_blocks == 0 or a.reach == 0:      # no program writes: nothing else is read
        return
    need_count("seg_addrs_ptr", n, a.n_segs, "one per segment of the grid")
    a.strides = index_at_least(seg_block_strides_ptr, "seg_block_strides_ptr", a.n_segs,
                               "one per segment of the grid")
    a.pages = index_at_least(seg_page_sizes_ptr, "seg_page_sizes_ptr", a.n_segs,
                             "one per segment of the grid")
    a.blocks = index_at_least(block_ids_ptr, "block_ids_ptr", a.n_blocks,
                              "one per block of the grid")
    with nogil:
        bad = _null_segment(&a)
    if bad >= 0:
        raise ValueError(expected(f"seg_addrs_ptr[{bad}]",
                                  "a non-null address for a segment that is written", 0))
    total = a.n_blocks * a.n_segs * (a.reach if a.reach < (1 << 20) else (1 << 20))
    _zero(&a, threads_for(total >> 2))
