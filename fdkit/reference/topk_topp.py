"""Plain-torch reference of top-k / top-p masking (slow, obviously correct).

The kept set of a row, as ``kernels_cpu.top_k_top_p`` defines it (vLLM's semantics):

* top-k keeps every value ``>=`` the k-th largest (ties kept); ``k >= V`` keeps the row;
* top-p, over what top-k kept, ranks tokens by value then index (lowest first) and keeps a token
  when the mass ``exp(x - max)`` ranked strictly above it is ``< p`` times the kept set's mass
  (float64 here); with ``+inf`` values present they share all the mass equally;
* masked entries become ``mask_value``; a row that is all ``-inf`` or holds a NaN is unchanged.
"""

from __future__ import annotations

import inspect
import math

import torch

__all__ = ["kept_mask", "top_k_top_p", "topk_topp_kernel", "topk_topp_nosplit_kernel"]


def kept_mask(row: torch.Tensor, k: int | None, p: float | None) -> torch.Tensor:
    """The bool mask of the kept entries of one row (any float dtype)."""
    x = row.double()
    n = x.numel()
    keep = torch.ones(n, dtype=torch.bool)
    if n == 0 or torch.isnan(x).any() or not bool((x > -math.inf).any()):
        return keep
    if k is not None and k < n:
        thr = torch.sort(x, descending=True).values[k - 1]
        keep = x >= thr
    if p is not None and p < 1.0:
        idx = torch.nonzero(keep).flatten().tolist()
        vals = x.tolist()
        idx.sort(key=lambda i: (-vals[i], i))
        m = vals[idx[0]]
        if m == math.inf:
            mass = {i: (1.0 if vals[i] == math.inf else 0.0) for i in idx}
        else:
            mass = {i: math.exp(vals[i] - m) for i in idx}
        target = p * math.fsum(mass.values())
        keep = torch.zeros(n, dtype=torch.bool)
        above = 0.0
        for i in idx:
            if not above < target:
                break
            keep[i] = True
            above += mass[i]
    return keep


def top_k_top_p(logits, k=None, p=None, mask_value=float("-inf")):
    """Mask ``logits`` [B, V] in place (the contract of ``kernels_cpu.top_k_top_p``)."""
    for r in range(logits.shape[0]):
        keep = kept_mask(
            logits[r],
            None if k is None else int(k.reshape(-1)[r]),
            None if p is None else float(p.reshape(-1)[r]),
        )
        logits[r][~keep] = mask_value


def topk_topp_kernel(
    LOGITS,
    LOGITS_STRIDE_0,
    BUFFER,
    PERCENTILE_TO_STD_TABLE,
    NORMAL_CDF_TO_SIGMA_TABLE,
    K,
    P,
    BATCH_SIZE,
    VOCAB_SIZE,
    MASK_VALUE,
    BLOCK_SIZE=None,
    BLOCK_SIZE_TRUNC=None,
    TOPK_ENABLED=None,
    TOPP_ENABLED=None,
    SPLIT_COVERS_PONLY=None,
):
    """vLLM's ``_topk_topp_kernel`` launch (the contract of ``kernels_cpu.topk_topp_kernel``):
    row ``r`` of ``LOGITS`` at ``r * LOGITS_STRIDE_0``, ``VOCAB_SIZE`` columns."""
    B, V = int(BATCH_SIZE), int(VOCAB_SIZE)
    flat = LOGITS.reshape(-1) if LOGITS.dim() != 2 else None
    for r in range(B):
        row = LOGITS[r, :V] if flat is None else flat[r * LOGITS_STRIDE_0 : r * LOGITS_STRIDE_0 + V]
        k = int(K.reshape(-1)[r]) if TOPK_ENABLED else None
        p = float(P.reshape(-1)[r]) if TOPP_ENABLED else None
        if k is not None and k >= V:
            k = None
            if SPLIT_COVERS_PONLY:
                p = None  # the split top-p kernels own this row
        if p is not None and p >= 1.0:
            p = None
        keep = kept_mask(row, k, p)
        row[~keep] = MASK_VALUE


def _without_split(kernel):
    """``kernel`` under vLLM 0.27-0.29's signature: the same arguments less
    ``SPLIT_COVERS_PONLY`` (those releases have no split top-p kernels, so every row's top-p is
    done here). The older form is the newer one with the flag off, so it is written once, as a
    call of it; its signature is the newer one's without the flag."""
    sig = inspect.signature(kernel)
    sig = sig.replace(
        parameters=[p for p in sig.parameters.values() if p.name != "SPLIT_COVERS_PONLY"]
    )

    def nosplit(*args, **kwargs):
        kernel(**sig.bind(*args, **kwargs).arguments, SPLIT_COVERS_PONLY=False)

    nosplit.__signature__ = sig
    nosplit.__name__ = nosplit.__qualname__ = "topk_topp_nosplit_kernel"
    nosplit.__doc__ = (
        "vLLM 0.27-0.29's form: :func:`topk_topp_kernel` without ``SPLIT_COVERS_PONLY``."
    )
    return nosplit


topk_topp_nosplit_kernel = _without_split(topk_topp_kernel)
