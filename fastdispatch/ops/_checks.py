"""Argument checks shared by the ops: cheap metadata only, errors name the argument.

Messages have the style of ``kernels_cpu``'s (numpy/torch-like, the argument first):
``<argument>: expected <what>, got <what>``.

The ops check shapes and dtypes that decide how a launch is laid out (a wrong one would make a
Triton kernel read or write out of bounds, silently). Value checks (ids in range, monotonic
offsets) are the kernels' business: the ``kernels_cpu`` implementations validate them, and the
ops do not pay for a device sync to repeat that on a GPU.
"""

import torch

_INDEX_DTYPES = (torch.int32, torch.int64)


def vector(name, t, dtypes=None, length=None):
    """``t`` is a contiguous vector (of one of ``dtypes``, of ``length`` elements): ``[N]``, or a
    column ``[N, 1]`` such as ``torch.multinomial(probs, 1)`` returns -- the kernels read it by
    flat offset, and the ops size their launches by ``t.shape[0]``, as vLLM's do."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(expected(name, "a torch.Tensor", type(t).__name__))
    if t.dim() == 0 or t.numel() != t.shape[0]:
        raise ValueError(expected(name, "a 1-D tensor (or a column [N, 1])", _shape(t)))
    _common(name, t, dtypes)
    if length is not None and t.shape[0] != length:
        raise ValueError(expected(name, f"{length} elements", t.shape[0]))
    return t


def matrix(name, t, dtypes=None, rows=None, cols=None, contiguous=True):
    """``t`` is a 2-D tensor (row-contiguous at least; fully contiguous unless told)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(expected(name, "a torch.Tensor", type(t).__name__))
    if t.dim() != 2:
        raise ValueError(expected(name, "a 2-D tensor", _shape(t)))
    if dtypes is not None and t.dtype not in dtypes:
        raise TypeError(expected(name, f"dtype in {_names(dtypes)}", t.dtype))
    if contiguous and not t.is_contiguous():
        raise ValueError(expected(name, "a contiguous tensor", f"strides {t.stride()}"))
    if not contiguous and t.shape[1] > 1 and t.stride(1) != 1:
        raise ValueError(
            expected(name, "contiguous rows (stride(1) == 1)", f"strides {t.stride()}")
        )
    if rows is not None and t.shape[0] != rows:
        raise ValueError(expected(name, f"{rows} rows", t.shape[0]))
    if cols is not None and t.shape[1] != cols:
        raise ValueError(expected(name, f"{cols} columns", t.shape[1]))
    return t


def offsets(name, t):
    """Per-request offsets: the batch is ``t.shape[0]`` (how vLLM sizes the launch grid), so
    ``t`` is ``[B]`` or a column ``[B, 1]`` -- any shape whose first dimension holds every
    element; a 0-d tensor has no batch dimension."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(expected(name, "a 1-D tensor", type(t).__name__))
    if t.dim() == 0 or t.numel() != t.shape[0]:
        raise TypeError(expected(name, "a 1-D tensor (or [B, 1])", _shape(t)))
    return t


def block_table(t, num_reqs):
    """``t`` is a block table for ``num_reqs`` requests: an index matrix with contiguous rows
    (the row stride is passed to the kernel) and at least ``num_reqs`` rows -- vLLM's tables
    are allocated for the largest batch, so a table may have more."""
    matrix("block_table", t, _INDEX_DTYPES, contiguous=False)
    if t.shape[0] < num_reqs:
        raise ValueError(
            expected("block_table", f"at least num_reqs = {num_reqs} rows", t.shape[0])
        )
    return t


def index_vector(name, t, length=None):
    return vector(name, t, _INDEX_DTYPES, length)


def same_device(**tensors):
    devices = {name: t.device for name, t in tensors.items() if isinstance(t, torch.Tensor)}
    if len(set(devices.values())) > 1:
        first = next(iter(devices))
        for name, dev in devices.items():
            if dev != devices[first]:
                raise ValueError(expected(name, f"device {devices[first]} (that of {first})", dev))


def _common(name, t, dtypes):
    if dtypes is not None and t.dtype not in dtypes:
        raise TypeError(expected(name, f"dtype in {_names(dtypes)}", t.dtype))
    if not t.is_contiguous():
        raise ValueError(expected(name, "a contiguous tensor", f"strides {t.stride()}"))


def _names(dtypes):
    return "(" + ", ".join(str(d).replace("torch.", "") for d in dtypes) + ")"


def expected(name, what, got):
    return f"{name}: expected {what}, got {got}"


def _shape(t):
    return f"shape {tuple(t.shape)}"
