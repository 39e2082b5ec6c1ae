"""Exact tensors are read through torch's DLPack exchange API (one C call per tensor); anything
else through torch's attribute getters. Both readers must give the same answers and the same
errors on every tensor layout (``kernels_cpu._buffers``)."""

import pytest
import torch
from _fuzz import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from kernels_cpu import _buffers, expand_kernel, rejection_greedy_sample_kernel

DTYPES = [
    torch.int32,
    torch.int64,
    torch.float32,
    torch.float64,
    torch.bool,
    torch.uint8,
    torch.uint64,
    torch.int8,
    torch.float16,
    torch.bfloat16,
    torch.complex64,
    torch.int16,
    torch.uint16,
]


@pytest.fixture
def reader():
    """Yields a function that switches the view reader; restores it afterwards."""
    before = _buffers._view_reader_enabled()
    yield _buffers._set_view_reader
    _buffers._set_view_reader(before)


def test_view_reader_is_used_with_this_torch():
    # torch 2.13 exports DLPack 1.3's exchange API; if a torch update changes it, the reader
    # turns itself off and this says so (the kernels stay correct, only slower).
    assert _buffers._view_reader_enabled()
    assert _buffers._set_view_reader(False) is False
    assert not _buffers._view_reader_enabled()
    assert _buffers._set_view_reader(True) is True


def _outcome(t, ndim, mask):
    try:
        return ("ok",) + _buffers._inspect(t, "arg", mask, ndim)
    except (TypeError, ValueError) as exc:
        return (type(exc).__name__, str(exc))


@st.composite
def tensors(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=4)))
    base = torch.zeros(shape, dtype=dtype)
    t = base
    for _ in range(draw(st.integers(0, 3))):
        op = draw(
            st.sampled_from(
                [
                    "slice",
                    "step",
                    "transpose",
                    "unsqueeze",
                    "expand",
                    "select",
                    "flip_view",
                    "negate",
                ]
            )
        )
        if op == "slice" and t.dim() and t.shape[0] > 0:
            t = t[draw(st.integers(0, t.shape[0] - 1)) :]
        elif op == "step" and t.dim():
            t = t[:: draw(st.integers(1, 3))]
        elif op == "transpose" and t.dim() >= 2:
            t = t.transpose(0, t.dim() - 1)
        elif op == "unsqueeze":
            t = t.unsqueeze(draw(st.integers(0, t.dim())))
        elif op == "expand" and t.dim() and t.shape[0] == 1:
            t = t.expand((draw(st.integers(1, 3)),) + tuple(t.shape[1:]))
        elif op == "select" and t.dim() and t.shape[0] > 0:
            t = t[draw(st.integers(0, t.shape[0] - 1))]
        elif op == "negate" and not t.is_neg() and t.dtype != torch.bool:
            t = torch._neg_view(t)  # lazy negation: memory holds the values un-negated
        elif op == "flip_view" and t.dim() >= 1:
            t = t.view(tuple(t.shape)) if t.is_contiguous() else t
    device_meta = draw(st.booleans()) and draw(st.booleans())
    if device_meta:
        t = torch.empty_like(t, device="meta")
    return t


MASKS = [0x7FFFFFFF, (1 << 1) | (1 << 2), (1 << 3) | (1 << 4), 1 << 5]


@fuzz_settings(300)
@given(t=tensors(), ndim=st.integers(-1, 4), mask=st.sampled_from(MASKS))
def test_view_and_attribute_readers_agree(t, ndim, mask):
    try:
        _buffers._set_view_reader(False)
        expected = _outcome(t, ndim, mask)
    finally:
        assert _buffers._set_view_reader(True)
    assert _outcome(t, ndim, mask) == expected


@fuzz_settings(300)
@given(t=tensors(), d=st.integers(0, 4))
def test_stride_reads_agree_with_torch_through_either_reader(t, d):
    """``dim_stride`` (the tables' row strides a launch reads from the view) is ``t.stride(d)``
    -- size-1 and empty dimensions included, whose strides a DLPack producer may normalise --
    and 0 past the last dimension, with the view reader on and off."""
    want = t.stride(d) if d < t.ndim else 0
    assert _buffers._view_strides_trusted()  # torch 2.13's views carry torch's strides
    try:
        assert _buffers._dim_stride(t, d) == want
        _buffers._set_view_reader(False)
        assert _buffers._dim_stride(t, d) == want
    finally:
        assert _buffers._set_view_reader(True)


@pytest.mark.parametrize("view", [True, False])
def test_data_pointer_and_shape_match_torch(reader, view):
    reader(view)
    base = torch.arange(40, dtype=torch.int64)
    t = base[7:31].view(4, 6)
    code, shape, ptr = _buffers._inspect(t, "t", 0x7FFFFFFF, 2)
    assert (shape, ptr) == ((4, 6), t.data_ptr())
    assert ptr == base.data_ptr() + 7 * 8
    code, numel, ptr = _buffers._inspect(t, "t", 0x7FFFFFFF, -1)
    assert numel == (24,)


@pytest.mark.parametrize("view", [True, False])
@pytest.mark.parametrize("wide", [False, True])
def test_kernels_give_the_same_results_through_either_reader(reader, view, wide):
    reader(view)
    dt = torch.int64 if wide else torch.int32
    out = torch.full((2, 3), -7, dtype=dt)
    cu = torch.tensor([2, 4], dtype=dt)
    draft = torch.tensor([5, 6, 7, 8], dtype=dt)
    argmax = torch.tensor([5, 6, 7, 9], dtype=dt)
    bonus = torch.tensor([11, 12], dtype=dt)
    rejection_greedy_sample_kernel(out, cu, draft, argmax, bonus, None, 2)
    assert torch.equal(out, torch.tensor([[5, 6, 11], [7, 9, -7]], dtype=dt))
    e_out = torch.full((5,), -1.0)
    expand_kernel(e_out, torch.tensor([1.5, 2.5]), torch.tensor([2, 5], dtype=dt), 0, 0, 5)
    assert e_out.tolist() == [1.5, 1.5, 2.5, 2.5, 2.5]


@pytest.mark.parametrize("view", [True, False])
def test_errors_name_the_argument_through_either_reader(reader, view):
    reader(view)
    out = torch.full((2, 3), -7, dtype=torch.int32)
    cu = torch.tensor([2, 4], dtype=torch.int32)
    draft = torch.tensor([5, 6, 7, 8], dtype=torch.int32)
    bonus = torch.tensor([11, 12], dtype=torch.int64)
    for bad, match in [
        (torch.tensor([5, 6, 7, 9.0]), "dtype"),
        (torch.tensor([5, 0, 6, 0, 7, 0, 9, 0])[::2], "contiguous"),
        (torch.empty(4, dtype=torch.int64, device="meta"), "CPU"),
    ]:
        with pytest.raises((TypeError, ValueError), match=match) as info:
            rejection_greedy_sample_kernel(out, cu, draft, bad, bonus, None, 2)
        assert "target_argmax_ptr" in str(info.value)
    assert (out == -7).all()


@pytest.mark.parametrize("view", [True, False])
def test_flat_buffers_of_any_shape_read_through_either_reader(reader, view):
    """A Triton kernel reads ``target_argmax_ptr`` by flat offset: a [2, 2] tensor of the four
    ids is the same buffer as the 1-D one, and gives the same launch."""
    reader(view)
    out = torch.full((2, 3), -7, dtype=torch.int32)
    flat = torch.full((2, 3), -7, dtype=torch.int32)
    cu = torch.tensor([2, 4], dtype=torch.int32)
    draft = torch.tensor([5, 6, 7, 8], dtype=torch.int32)
    bonus = torch.tensor([11, 12], dtype=torch.int64)
    argmax = torch.tensor([5, 6, 7, 9])
    rejection_greedy_sample_kernel(flat, cu, draft, argmax, bonus, None, 2)
    rejection_greedy_sample_kernel(out, cu, draft, argmax.view(2, 2), bonus, None, 2)
    assert torch.equal(out, flat)
    assert out.tolist() == [[5, 6, 11], [7, 9, -7]]


def _table_outcome(t, mask):
    try:
        return ("ok",) + _buffers._inspect_table(t, "table", mask)
    except (TypeError, ValueError) as exc:
        return (type(exc).__name__, str(exc))


@fuzz_settings(300)
@given(t=tensors(), mask=st.sampled_from(MASKS))
def test_table_readers_agree(t, mask):
    """2-D tables (block tables, token matrices): rows may be strided, columns unit-stride."""
    try:
        _buffers._set_view_reader(False)
        expected = _table_outcome(t, mask)
    finally:
        assert _buffers._set_view_reader(True)
    assert _table_outcome(t, mask) == expected


@pytest.mark.parametrize("view", [True, False])
def test_table_row_stride_of_a_column_slice(reader, view):
    reader(view)
    wide = torch.arange(5 * 8, dtype=torch.int32).view(5, 8)
    code, shape, stride, ptr = _buffers._inspect_table(wide[1:, 2:5], "bt", (1 << 1) | (1 << 2))
    assert (shape, stride, ptr) == ((4, 3), 8, wide[1:, 2:5].data_ptr())
    with pytest.raises(ValueError, match=r"bt: expected contiguous rows"):
        _buffers._inspect_table(wide.t(), "bt", (1 << 1) | (1 << 2))
    empty = torch.zeros(
        2, 0, dtype=torch.int32
    ).t()  # (0, 2), strides (1, 2): torch says contiguous
    assert _buffers._inspect_table(empty, "bt", (1 << 1) | (1 << 2))[1:3] == ((0, 2), 2)


@pytest.mark.parametrize("view", [True, False])
def test_lazily_negated_float_input_is_refused(reader, view):
    reader(view)
    out = torch.full((5,), -1.0)
    inp = torch._neg_view(torch.tensor([1.5, 2.5]))
    with pytest.raises(
        ValueError, match=r"input_ptr: expected .*resolve_neg.*got a lazily negated view"
    ) as info:
        expand_kernel(out, inp, torch.tensor([2, 5]), 0, 0, 5)
    assert (out == -1.0).all()
    expand_kernel(out, inp.resolve_neg(), torch.tensor([2, 5]), 0, 0, 5)
    assert out.tolist() == [-1.5, -1.5, -2.5, -2.5, -2.5]
    assert info.type is ValueError


def _not_dense():
    yield "sparse_coo", torch.zeros(4, 4, dtype=torch.int32).to_sparse()
    yield "sparse_csr", torch.zeros(4, 4, dtype=torch.int64).to_sparse_csr()
    yield "nested", torch.nested.nested_tensor([torch.zeros(2, 4), torch.zeros(3, 4)])


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("view", [True, False])
def test_tensors_without_a_dense_buffer_are_refused_by_name(reader, view):
    reader(view)
    for _kind, t in _not_dense():
        with pytest.raises(ValueError, match=r"^bt: expected a dense strided tensor"):
            _buffers._inspect(t, "bt", 0x7FFFFFFF, 2)
        with pytest.raises(ValueError, match=r"^bt: expected a dense strided tensor"):
            _buffers._inspect_table(t, "bt", 0x7FFFFFFF)
