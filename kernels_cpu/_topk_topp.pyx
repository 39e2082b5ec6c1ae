# cython: language_level=3
"""Top-k / top-p masking of logits rows, in place: the validated entry points.

``top_k_top_p`` and vLLM's two kernel signatures check every argument before the first write
(errors name the argument), then hand the rows to ``_topk_topp_rows``' ``nogil`` loop, whose
docstring says what is kept (vLLM's semantics) and how it is found without a sort.
"""
from libc.stdint cimport int64_t, uint16_t
from libc.math cimport INFINITY

from kernels_cpu._buffers cimport (
    check_table, check_tensor, is_none, expected,
    DT_FLOAT32, DT_FLOAT16, DT_BFLOAT16, DT_FLOAT64, DT_INT64, M_FLOAT32, M_FLOAT64, M_INDEX,
)
from kernels_cpu._checks cimport as_flag, as_int
from kernels_cpu._parallel cimport threads_for
from kernels_cpu._topk_topp_rows cimport check_k_at, check_p_at, mask_rows


cdef enum:
    M_HALF = (1 << DT_FLOAT16) | (1 << DT_BFLOAT16)
    M_LOGITS = M_FLOAT32 | M_HALF


cdef uint16_t _mask_bits(float mask_value, int code) except? 0:
    """``mask_value`` in the row's 16-bit dtype, rounded as torch rounds it."""
    import torch
    if mask_value == -INFINITY:
        return 0xFC00 if code == DT_FLOAT16 else 0xFF80
    dt = torch.float16 if code == DT_FLOAT16 else torch.bfloat16
    return <uint16_t>(int(torch.tensor(mask_value, dtype=dt).view(torch.int16).item()) & 0xFFFF)


def top_k_top_p(logits, k=None, p=None, mask_value=float("-inf")):
    """Mask ``logits`` ([B, V], fp32/fp16/bf16, rows any distance apart, unit column stride) in
    place to each row's top-k then top-p set; return None.

    ``k``: None or an int32/int64 tensor of B values >= 1 (``k >= V`` keeps the row). ``p``:
    None or a float32/float64 tensor of B values in (0, 1] (``1`` keeps the row). Everything is
    checked before the first write; errors name the argument.
    """
    _mask_rows(logits, k, p, mask_value, "logits", "k", "p", "mask_value", False)


cdef _mask_rows(logits, k, p, mask_value, str ln, str kn, str pn, str mn, bint p_above_one):
    """``top_k_top_p`` under the caller's argument names; ``p_above_one``: p > 1 is a no-op
    (the Triton kernel's ``p < 1.0`` test) instead of an error."""
    cdef Py_ssize_t shp[3]
    cdef Py_ssize_t stride
    cdef int code = 0, kcode = 0, pcode = 0
    cdef char* base = check_table(logits, ln, M_LOGITS, shp, &stride, &code)
    cdef Py_ssize_t B = shp[0], V = shp[1], r
    cdef const char* kp = NULL
    cdef const char* pp = NULL
    cdef bint kwide = False, pdbl = False
    cdef float maskf
    cdef uint16_t mask16 = 0
    try:
        maskf = <float>float(mask_value)
    except (TypeError, ValueError):
        raise TypeError(expected(mn, "a number", type(mask_value).__name__)) from None
    if B > 1 and V > 0 and stride < V:
        raise ValueError(expected(ln, f"rows that do not overlap (stride(0) >= {V})",
                                  f"strides {tuple(logits.stride())}"))
    if not is_none(k):
        kp = check_tensor(k, kn, M_INDEX, -1, &kcode, shp)
        if shp[0] != B:
            raise ValueError(expected(kn, f"{B} values (one per row of {ln})", shp[0]))
        kwide = kcode == DT_INT64
        for r in range(B):
            check_k_at(kp, kwide, r, kn)
    if not is_none(p):
        pp = check_tensor(p, pn, M_FLOAT32 | M_FLOAT64, -1, &pcode, shp)
        if shp[0] != B:
            raise ValueError(expected(pn, f"{B} values (one per row of {ln})", shp[0]))
        pdbl = pcode == DT_FLOAT64
        for r in range(B):
            check_p_at(pp, pdbl, r, pn, p_above_one)
    if B == 0 or V == 0 or (kp == NULL and pp == NULL):
        return
    if code != DT_FLOAT32:
        mask16 = _mask_bits(maskf, code)
    cdef Py_ssize_t esize = 4 if code == DT_FLOAT32 else 2
    cdef Py_ssize_t row_bytes = stride * esize
    cdef int nt = threads_for(B * V)      # mask_rows: at most B unless rows are split
    cdef int failed
    with nogil:
        failed = mask_rows(base, row_bytes, code, B, V, kp, kwide, pp, pdbl, maskf, mask16, nt)
    if failed:
        raise MemoryError("top_k_top_p: scratch allocation failed")


def topk_topp_kernel(LOGITS, LOGITS_STRIDE_0, BUFFER, PERCENTILE_TO_STD_TABLE,
                     NORMAL_CDF_TO_SIGMA_TABLE, K, P, BATCH_SIZE, VOCAB_SIZE, MASK_VALUE,
                     BLOCK_SIZE=None, BLOCK_SIZE_TRUNC=None, TOPK_ENABLED=None,
                     TOPP_ENABLED=None, SPLIT_COVERS_PONLY=None):
    """vLLM's ``_topk_topp_kernel`` (0.30+): rows ``0..BATCH_SIZE-1`` of ``LOGITS`` (row ``r``
    at ``r * LOGITS_STRIDE_0``, ``VOCAB_SIZE`` columns) masked in place to their top-k
    (``TOPK_ENABLED``: ``K[r]``, ``>= VOCAB_SIZE`` keeps the row) then top-p (``TOPP_ENABLED``:
    ``P[r]``, ``>= 1`` keeps it) sets, exactly (``top_k_top_p``'s kept set, where the Triton
    kernel searches a pivot). ``SPLIT_COVERS_PONLY`` with top-k on: rows whose ``K[r] >=
    VOCAB_SIZE`` get no top-p here (vLLM's split top-p kernels own them), as in the kernel.

    ``BUFFER`` and the two tables are the Triton kernel's scratch rows and pivot-estimate
    lookups: the exact selection needs neither (not read, not written). ``K``/``P`` are read
    only when their flag is on (vLLM passes the logits as a dummy then).
    """
    _kernel_form(LOGITS, LOGITS_STRIDE_0, K, P, BATCH_SIZE, VOCAB_SIZE, MASK_VALUE,
                 TOPK_ENABLED, TOPP_ENABLED, SPLIT_COVERS_PONLY)


def topk_topp_nosplit_kernel(LOGITS, LOGITS_STRIDE_0, BUFFER, PERCENTILE_TO_STD_TABLE,
                             NORMAL_CDF_TO_SIGMA_TABLE, K, P, BATCH_SIZE, VOCAB_SIZE,
                             MASK_VALUE, BLOCK_SIZE=None, BLOCK_SIZE_TRUNC=None,
                             TOPK_ENABLED=None, TOPP_ENABLED=None):
    """vLLM 0.27-0.29's ``_topk_topp_kernel`` (no split top-p kernels, so no
    ``SPLIT_COVERS_PONLY``): :func:`topk_topp_kernel` with every row's top-p done here."""
    _kernel_form(LOGITS, LOGITS_STRIDE_0, K, P, BATCH_SIZE, VOCAB_SIZE, MASK_VALUE,
                 TOPK_ENABLED, TOPP_ENABLED, False)


cdef _flat_rows(t, str name, Py_ssize_t rows, Py_ssize_t stride, Py_ssize_t cols, str stride_name):
    """The ``[rows, cols]`` rows a kernel reads at ``t + r * stride``: a 2-D tensor's own rows
    (``stride`` must be its ``stride(0)`` when ``rows > 1``), or a contiguous tensor of any other
    shape read flat; refused when a row read falls outside it."""
    import torch
    if not isinstance(t, torch.Tensor):
        raise TypeError(expected(name, "a tensor", type(t).__name__))
    if t.dim() == 2:
        if rows > 0 and cols > 0 and (t.shape[0] < rows or t.shape[1] < cols):
            raise ValueError(expected(name, f"at least [{rows}, {cols}] (BATCH_SIZE rows of "
                                      f"VOCAB_SIZE)", f"shape {tuple(t.shape)}"))
        if rows > 1 and t.stride(0) != stride:
            raise ValueError(expected(stride_name, f"{name}.stride(0) = {t.stride(0)}", stride))
        if rows == 0 or cols == 0:
            return t.new_empty((rows, cols))   # nothing is read
        return t[:rows, :cols]
    if not t.is_contiguous():
        raise ValueError(expected(name, "a contiguous tensor (read by flat offset)",
                                  f"strides {tuple(t.stride())}"))
    need = (rows - 1) * stride + cols if rows > 0 else 0
    if t.numel() < need:
        raise ValueError(expected(name, f"at least {need} elements ((BATCH_SIZE - 1) * "
                                  f"{stride_name} + VOCAB_SIZE)", t.numel()))
    return t.reshape(-1).as_strided((rows, cols), (stride if rows > 1 else cols, 1))


cdef _first(t, str name, Py_ssize_t n):
    """The first ``n`` elements of a contiguous tensor read by flat offset."""
    import torch
    if not isinstance(t, torch.Tensor):
        raise TypeError(expected(name, "a tensor", type(t).__name__))
    if not t.is_contiguous():
        raise ValueError(expected(name, "a contiguous tensor (read by flat offset)",
                                  f"strides {tuple(t.stride())}"))
    if t.numel() < n:
        raise ValueError(expected(name, f"at least {n} elements (BATCH_SIZE)", t.numel()))
    return t.reshape(-1)[:n]


cdef _kernel_form(LOGITS, LOGITS_STRIDE_0, K, P, BATCH_SIZE, VOCAB_SIZE, MASK_VALUE,
                  TOPK_ENABLED, TOPP_ENABLED, SPLIT_COVERS_PONLY):
    cdef int64_t B = as_int(BATCH_SIZE, "BATCH_SIZE")
    cdef int64_t V = as_int(VOCAB_SIZE, "VOCAB_SIZE")
    cdef int64_t st = as_int(LOGITS_STRIDE_0, "LOGITS_STRIDE_0")
    cdef bint topk = as_flag(TOPK_ENABLED, "TOPK_ENABLED", False)
    cdef bint topp = as_flag(TOPP_ENABLED, "TOPP_ENABLED", False)
    cdef bint split = as_flag(SPLIT_COVERS_PONLY, "SPLIT_COVERS_PONLY", False)
    if B < 0:
        raise ValueError(expected("BATCH_SIZE", ">= 0", B))
    if V < 0:
        raise ValueError(expected("VOCAB_SIZE", ">= 0", V))
    if st < 0 or (B > 1 and V > 0 and st < V):
        raise ValueError(expected("LOGITS_STRIDE_0", f">= VOCAB_SIZE = {V} (rows that do not "
                                  "overlap)", st))
    rows = _flat_rows(LOGITS, "LOGITS", B, st, V, "LOGITS_STRIDE_0")
    k = _first(K, "K", B) if topk else None
    p = _first(P, "P", B) if topp else None
    if p is not None and k is not None and split:
        # the split top-p kernels own the rows whose top-k is off (K >= VOCAB_SIZE)
        p = p.masked_fill(k >= V, 1.0)
    _mask_rows(rows, k, p, MASK_VALUE, "LOGITS", "K", "P", "MASK_VALUE", True)
