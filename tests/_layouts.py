"""Other shapes of the same memory, as a Triton kernel would accept them.

A Triton kernel receives each tensor as a base pointer and computes flat offsets itself (with
the explicit strides it takes, where it takes them), so a contiguous buffer of any shape holding
the elements it touches is a valid argument: ``[N]``, ``[N, 1]``, ``[1, N]``, a ``[B, K]`` view
of a flat buffer, a flat view of a ``[B, K + 1]`` matrix, a 0-d tensor for one element.
:func:`relayout` turns a case's launch arguments into such views -- same storage, so a case's
guards and compared buffers still see every write -- for differential tests: a launch on the
new layouts must write exactly what the canonical launch writes.

The one shape rule: a 2-D tensor the kernel reads as rows of a given length (an output
``[B, K + 1]``, probabilities ``[T, V]``, a block table) keeps its row length -- a 2-D view with
other rows would not be the rows the kernel reads -- so 2-D tensors are only ever flattened or
given a trailing unit dimension, and 1-D tensors are reshaped into 2-D only where the kernel
reads them flat.
"""

import torch

# 1-D arguments some kernel reads as rows of a length given by another argument: never made 2-D.
_ROWED_1D = frozenset()


def _factor(n, rng):
    """``(a, b)`` with ``a * b == n`` and both > 1, or None."""
    pairs = [(a, n // a) for a in range(2, n) if n % a == 0]
    return rng.choice(pairs) if pairs else None


def _choices(name, t, rng):
    if t.numel() == 0:
        # an empty buffer in another empty shape: nothing is read or written either way
        return [("empty", lambda x: x.reshape(0)), ("empty0x1", lambda x: x.reshape(0, 1))]
    if t.dim() >= 2:
        # flat, or a trailing unit dimension (a 3-D tensor is read flat)
        return [("flat", lambda x: x.reshape(-1)), ("unit", lambda x: x.unsqueeze(-1))]
    n = t.numel()
    out = [
        ("col", lambda x: x.reshape(n, 1)),
        ("row", lambda x: x.reshape(1, n)),
        ("3d", lambda x: x.reshape(1, n, 1)),
    ]
    if n == 1:
        out.append(("0d", lambda x: x.reshape(())))
    ab = _factor(n, rng)
    if ab is not None and name not in _ROWED_1D:
        out.append((f"{ab[0]}x{ab[1]}", lambda x: x.reshape(ab)))
    return out


def relayout(kwargs, rng, p=0.7):
    """``(new_kwargs, how)``: each contiguous tensor argument, with probability ``p``, replaced
    by a view of another shape (``how`` maps the argument to the shape chosen)."""
    new, how = {}, {}
    for name, v in kwargs.items():
        if isinstance(v, torch.Tensor) and v.is_contiguous() and rng.random() < p:
            label, make = rng.choice(_choices(name, v, rng))
            view = make(v)
            assert view.is_contiguous() and (view.numel() == 0 or view.data_ptr() == v.data_ptr())
            new[name] = view
            how[name] = f"{label}{tuple(view.shape)}"
        else:
            new[name] = v
    return new, how
