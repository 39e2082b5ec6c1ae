"""What a random launch case is made of, for :mod:`fdkit.cases` and the case generators that
live beside their kernel's reference (``fdkit.reference.<area>.case_<kernel>``).

A :class:`Case` is one launch of one kernel; :class:`Out` a guarded, poisoned output buffer;
:class:`Slice` an input that is a column slice of a wider tensor. ``gen``/``batch`` are the
shared draws (a seeded torch generator; a batch size with empty and single batches common).
"""

import torch

from fdkit import guards

__all__ = ["Case", "Out", "Ptrs", "Slice", "batch", "gen", "next_pow2"]


def next_pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


class Out:
    """An output buffer spec: ``n`` elements (or a 2-D shape) inside guards, pre-filled with
    ``fill`` (guards too), by default the poison of its dtype (:func:`fdkit.guards.poison_for`)."""

    def __init__(self, shape, dtype, fill=None, row_stride=None):
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.dtype = dtype
        self.fill = fill
        self.row_stride = row_stride


class Slice:
    """An input that is a column slice of a wider 2-D tensor (row stride > row length)."""

    def __init__(self, base, cols):
        self.base = base
        self.cols = cols


class Ptrs:
    """An argument of raw addresses (vLLM's per-KV-cache-group table pointers): a 1-D tensor of
    ``dtype`` holding the ``data_ptr()`` of each member, built with the launch. A member is a
    tensor (copied per build) or an :class:`Out`; every member is compared after the launch,
    as ``"<name>[<i>]"`` (an :class:`Out` with its guards)."""

    def __init__(self, members, dtype=torch.uint64):
        self.members = list(members)
        self.dtype = dtype


class Case:
    """One launch: ``kernel`` (contract name), ``grid``, and a recipe for its arguments.

    ``args`` maps argument name to a CPU tensor (copied per build), an :class:`Out` (a guarded,
    pre-filled output), or a plain value. ``inplace`` names input tensors the kernel also writes
    (compared too). ``memcpy`` marks the raw-address case, built by :meth:`_build_memcpy`.
    """

    def __init__(self, kernel, grid, args, inplace=(), memcpy=None, note="", tolerance=None):
        self.kernel = kernel
        #: ``{buffer: (rtol, atol)}`` for float results compared with a tolerance instead of
        #: bit for bit (a transcendental evaluated by another math library); the rest exact.
        self.tolerance = dict(tolerance or {})
        self.grid = tuple(grid)
        self.args = args
        self.inplace = tuple(inplace)
        self.memcpy = memcpy
        self.note = note

    def __repr__(self):
        return f"Case({self.kernel}, grid={self.grid}, {self.note})"

    def build(self, device="cpu"):
        """Fresh ``(launch_kwargs, compared)``; ``compared`` maps a name to a whole backing buffer
        (guards included) to compare across implementations after the launch."""
        if self.memcpy is not None:
            return self._build_memcpy(device)
        kwargs, compared = {}, {}
        for name, spec in self.args.items():
            if isinstance(spec, Out):
                backing, view = guards.guarded(
                    spec.shape,
                    spec.dtype,
                    poison=spec.fill,
                    row_stride=spec.row_stride,
                    device=device,
                )
                kwargs[name] = view
                compared[name] = backing
            elif isinstance(spec, Ptrs):
                addresses = []
                for i, member in enumerate(spec.members):
                    if isinstance(member, Out):
                        backing, view = guards.guarded(
                            member.shape,
                            member.dtype,
                            poison=member.fill,
                            row_stride=member.row_stride,
                            device=device,
                        )
                    else:
                        backing = view = member.clone().to(device)
                    compared[f"{name}[{i}]"] = backing  # also keeps the memory alive
                    addresses.append(view.data_ptr())
                kwargs[name] = torch.tensor(addresses, dtype=spec.dtype, device=device)
            elif isinstance(spec, Slice):
                base = spec.base.clone().to(device)
                kwargs[name] = base[:, : spec.cols]
                if name in self.inplace:  # the whole base: the gaps between rows stay as they were
                    compared[name] = base
            elif isinstance(spec, torch.Tensor):
                kwargs[name] = spec.clone().to(device)
                if name in self.inplace:
                    compared[name] = kwargs[name]
            else:
                kwargs[name] = spec
        return kwargs, compared

    def _build_memcpy(self, device):
        arena_cpu, src_off, dst_off, sizes, block = self.memcpy
        arena = arena_cpu.clone().to(device)
        base = arena.data_ptr()
        kwargs = dict(
            src_ptrs=(src_off + base).to(device),
            dst_ptrs=(dst_off + base).to(device),
            sizes=sizes.clone().to(device),
            BLOCK_SIZE=block,
        )
        # Keep the arena alive with the launch; it is also what gets compared.
        return kwargs, {"arena": arena}


def gen(rng):
    return torch.Generator().manual_seed(rng.getrandbits(63))


def batch(rng, limit):
    r = rng.random()
    if r < 0.05:
        return 0
    if r < 0.2:
        return 1
    return rng.randint(1, limit)
