"""One guard/poison scheme for every buffer a test hands to a kernel.

Tests poison a kernel's outputs before the launch, so an element the kernel should write but does
not keeps a value no kernel writes, and put guard ("canary") elements around every buffer, so a
write out of bounds changes memory the kernel was never given. The launch cases
(:mod:`fdkit.cases`) and the kernel tests' helpers (``tests/_sampling_helpers.py``,
``tests/_spec_helpers.py``) all build their buffers here, with the same constants: a change to
how outputs are guarded -- the guard length, a poison value, the bool pattern, the 2-D form -- is
one edit, in this module.

The scheme:

* :data:`GUARD` elements of guard on each side of a flat allocation (:func:`guarded`), or
  :data:`GUARD` whole rows above and below a 2-D one, plus optional extra columns on the right
  that make the view row-strided (:func:`guarded_rows`).
* The poison (:func:`poison_for`) fills the guards and, unless values are given, the view:
  :data:`POISON_INT` for integer dtypes (negative, so never a token id, position, slot, count
  or index a kernel writes -- the padding ids are -1), :data:`POISON_FLOAT` for floating dtypes
  (no probability, temperature or replacement value a test uses). A bool buffer cannot have a
  value that no kernel writes, so it holds :data:`BOOL_PATTERN` repeated by flat position in the
  allocation, guards included: a run of two or more equal values written where it should not be
  differs from it.
* A caller may give its own scalar ``poison`` (a ``uint8`` arena, where -7777 does not fit; an
  output the kernel contract says starts at -1); it then fills that allocation instead.
* :func:`guards_intact` / :func:`check_guards`: every element of the allocation outside the view
  -- the guards, and between the rows of a row-strided view -- still holds the poison, compared
  bit for bit.
"""

import torch

__all__ = [
    "GUARD",
    "POISON_INT",
    "POISON_FLOAT",
    "BOOL_PATTERN",
    "Guarded",
    "bits",
    "check_guards",
    "guarded",
    "guarded_rows",
    "guards_intact",
    "poison",
    "poison_for",
    "poison_image",
    "view_of",
]

#: Guard elements on each side of a flat allocation (guard rows above and below a 2-D one).
GUARD = 7
#: Poison of integer buffers: a correct kernel overwrites every element it owns.
POISON_INT = -7777
#: Poison of floating-point buffers.
POISON_FLOAT = 1234.5
#: Poison of bool buffers, repeated by flat position in the allocation (guards included).
BOOL_PATTERN = (True, False)


def poison_for(dtype):
    """The scalar poison of ``dtype``; None for bool (which takes :data:`BOOL_PATTERN`)."""
    if dtype == torch.bool:
        return None
    if dtype.is_floating_point:
        return POISON_FLOAT
    info = torch.iinfo(dtype)
    if not info.min <= POISON_INT <= info.max:
        raise ValueError(f"{dtype} cannot hold POISON_INT={POISON_INT}: pass a poison= of its own")
    return POISON_INT


def poison(t, value=None):
    """Fill the contiguous tensor ``t`` in place with the poison of its dtype (``value``: a scalar
    of the caller's own instead); returns ``t``."""
    if value is None:
        value = poison_for(t.dtype)
    if value is not None:
        return t.fill_(value)
    flat = t.view(-1)
    for k, v in enumerate(BOOL_PATTERN):
        flat[k :: len(BOOL_PATTERN)] = v
    return t


_poison = poison  # for the builders below, whose ``poison`` argument is the scalar


def poison_image(base, value=None):
    """A new tensor like ``base`` holding what :func:`poison` writes into it."""
    return _poison(torch.empty(base.shape, dtype=base.dtype, device=base.device), value)


def bits(t):
    """The bit pattern of a tensor, so NaN compares equal to itself."""
    if t.dtype == torch.float32:
        return t.view(torch.int32)
    if t.dtype == torch.float64:
        return t.view(torch.int64)
    return t


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _extent(shape, row_stride):
    """Elements of flat storage a ``shape`` view spans (rows ``row_stride`` apart, if given)."""
    if row_stride is None:
        return _numel(shape)
    rows, cols = shape
    return (rows - 1) * row_stride + cols if rows else 0


def view_of(base, shape, row_stride=None):
    """The view of a :func:`guarded` (flat ``base``) or :func:`guarded_rows` (2-D ``base``)
    allocation: the same view the builder returned, for an allocation copied or cloned since."""
    shape = tuple(shape)
    if base.dim() == 2:
        rows, cols = shape
        return base[GUARD : GUARD + rows, :cols]
    inner = base[GUARD : GUARD + _extent(shape, row_stride)]
    if row_stride is not None:
        return inner.as_strided(shape, (row_stride, 1))
    return inner.view(shape)


def _fill_view(view, fill):
    if fill is None:
        return
    if isinstance(fill, torch.Tensor):
        fill = fill.to(view.dtype)
    else:
        fill = torch.as_tensor(fill, dtype=view.dtype)  # no float32 detour for float64 values
    view.copy_(fill.reshape(view.shape))


def guarded(like, dtype=None, *, fill=None, poison=None, row_stride=None, device=None):
    """``(base, view)``: a flat poisoned allocation with :data:`GUARD` elements each side, and
    the view of its middle the kernel is given.

    ``like`` is a shape (an int or a tuple) or a tensor, whose shape, dtype (unless ``dtype``)
    and values the view takes. ``fill``: values for the view (else it stays poisoned, as an
    output must). ``poison``: a scalar of the caller's own instead of :func:`poison_for`'s.
    ``row_stride``: a 2-D view whose rows lie that many elements apart (gaps poisoned too).
    ``device``: where the allocation goes (built on the CPU, then moved).
    """
    if isinstance(like, torch.Tensor):
        shape, dtype = tuple(like.shape), like.dtype if dtype is None else dtype
        if fill is None:
            fill = like
    else:
        shape = (like,) if isinstance(like, int) else tuple(like)
    base = _poison(torch.empty(_extent(shape, row_stride) + 2 * GUARD, dtype=dtype), poison)
    _fill_view(view_of(base, shape, row_stride), fill)
    if device is not None:
        base = base.to(device)
    return base, view_of(base, shape, row_stride)


def guarded_rows(shape, dtype, *, fill=None, poison=None, extra_cols=0, device=None):
    """``(base, view)``: a 2-D poisoned allocation of ``rows + 2 * GUARD`` rows (:data:`GUARD`
    guard rows above and below) of ``cols + extra_cols`` columns, and the view of its middle
    rows' first ``cols`` columns -- row-strided (not contiguous) when ``extra_cols > 0``, which
    exercises a kernel's stride arguments; the extra columns are guard columns.
    ``fill``, ``poison``, ``device`` as for :func:`guarded`."""
    rows, cols = shape
    base = _poison(torch.empty((rows + 2 * GUARD, cols + extra_cols), dtype=dtype), poison)
    _fill_view(view_of(base, shape), fill)
    if device is not None:
        base = base.to(device)
    return base, view_of(base, shape)


def _outside(base, view):
    """Bool mask, shaped like the contiguous ``base``: the elements ``view`` does not cover."""
    covered = torch.zeros(base.numel(), dtype=torch.bool, device=base.device)
    offset = view.storage_offset() - base.storage_offset()
    covered.as_strided(view.shape, view.stride(), offset).fill_(True)
    return ~covered.view(base.shape)


def guards_intact(base, view, poison=None):
    """True when every element of ``base`` outside ``view`` still holds the poison (``poison``:
    the scalar the allocation was built with, if its own), bit for bit."""
    outside = _outside(base, view)
    want = poison_image(base, poison)
    return torch.equal(bits(base[outside]), bits(want[outside]))


def check_guards(base, view, poison=None, name="buffer"):
    """Raise AssertionError, naming ``name`` and the first written guard positions, unless
    :func:`guards_intact`."""
    outside = _outside(base, view)
    differs = outside & (bits(base) != bits(poison_image(base, poison)))
    if bool(differs.any()):
        where = differs.view(-1).nonzero().view(-1)[:8].tolist()
        raise AssertionError(f"{name}: guard overwritten at flat allocation index {where}")


class Guarded:
    """A guarded allocation kept together with its view: ``base``, ``view`` (recomputed from
    ``base``), ``clone()``, ``guards_intact()``.

    A 1-D ``shape`` is a :func:`guarded` allocation; a 2-D one a :func:`guarded_rows` allocation
    (``extra_cols`` guard columns on the right). ``fill`` and ``poison`` as there.
    """

    def __init__(self, shape, dtype, fill=None, extra_cols=0, poison=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.extra_cols = extra_cols
        self.poison = poison
        if len(self.shape) == 1:
            self.base, _ = guarded(self.shape, dtype, fill=fill, poison=poison)
        else:
            self.base, _ = guarded_rows(
                self.shape, dtype, fill=fill, poison=poison, extra_cols=extra_cols
            )

    @property
    def view(self):
        return view_of(self.base, self.shape)

    def clone(self):
        g = object.__new__(Guarded)
        g.shape, g.dtype, g.extra_cols, g.poison = (
            self.shape,
            self.dtype,
            self.extra_cols,
            self.poison,
        )
        g.base = self.base.clone()
        return g

    def guards_intact(self):
        """True when nothing outside the view changed."""
        return guards_intact(self.base, self.view, self.poison)

    def check_guards(self, name="buffer"):
        check_guards(self.base, self.view, self.poison, name)
