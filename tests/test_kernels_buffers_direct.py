"""Tensor validation reads torch's C slots directly for exact ``torch.Tensor`` inputs and plain
attributes for anything else; both paths must agree (``kernels_cpu._buffers``)."""

import pytest
import torch

from kernels_cpu import expand_kernel, rejection_greedy_sample_kernel


class MyTensor(torch.Tensor):
    """A subclass: validated through plain attribute access."""


def _greedy_inputs(bonus_shape=(2,)):
    out = torch.full((2, 3), -7, dtype=torch.int32)
    cu = torch.tensor([2, 4], dtype=torch.int32)
    draft = torch.tensor([5, 6, 7, 8], dtype=torch.int32)
    argmax = torch.tensor([5, 6, 7, 9], dtype=torch.int64)
    bonus = torch.tensor([11, 12], dtype=torch.int64).reshape(bonus_shape)
    return out, cu, draft, argmax, bonus


@pytest.mark.parametrize("bonus_shape", [(2,), (2, 1)])
@pytest.mark.parametrize("subclass", [False, True])
def test_greedy_same_result_for_tensor_and_subclass(bonus_shape, subclass):
    out, cu, draft, argmax, bonus = _greedy_inputs(bonus_shape)
    if subclass:
        out, cu, draft, argmax, bonus = (
            t.as_subclass(MyTensor) for t in (out, cu, draft, argmax, bonus)
        )
    rejection_greedy_sample_kernel(out, cu, draft, argmax, bonus, None, 2)
    assert torch.equal(
        torch.as_tensor(out).as_subclass(torch.Tensor),
        torch.tensor([[5, 6, 11], [7, 9, -7]], dtype=torch.int32),
    )


@pytest.mark.parametrize("subclass", [False, True])
@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda t: t.to(torch.float32), "dtype"),
        (lambda t: torch.stack([t, t], 1)[:, 0], "contiguous"),
    ],
)
def test_bad_cu_is_named_on_both_paths(subclass, bad, match):
    out, cu, draft, argmax, bonus = _greedy_inputs()
    cu = bad(cu)
    if subclass:
        cu = cu.as_subclass(MyTensor)
    with pytest.raises((TypeError, ValueError), match=match) as info:
        rejection_greedy_sample_kernel(out, cu, draft, argmax, bonus, None, 2)
    assert "cu_num_draft_tokens_ptr" in str(info.value)
    assert (out == -7).all()


@pytest.mark.parametrize("subclass", [False, True])
def test_offsets_of_any_shape_are_read_flat_on_both_paths(subclass):
    """The request count is the offsets' element count, whatever their shape: a [1, 2] view is
    the 1-D offsets, a 0-d one is one request (the others' rows stay untouched)."""
    out, cu, draft, argmax, bonus = _greedy_inputs()
    expected = out.clone()
    rejection_greedy_sample_kernel(expected, cu, draft, argmax, bonus, None, 2)
    for view, rows in ((cu.reshape(1, 2), 2), (cu[0], 1)):
        got, _, _, _, _ = _greedy_inputs()
        if subclass:
            view = view.as_subclass(MyTensor)
        rejection_greedy_sample_kernel(got, view, draft, argmax, bonus, None, 2)
        got = torch.as_tensor(got).as_subclass(torch.Tensor)
        assert torch.equal(got[:rows], expected[:rows])
        assert (got[rows:] == -7).all()


def test_class_attribute_changes_are_seen():
    """Assigning to torch.Tensor changes its type version tag: the slots are re-verified, and
    validation keeps working (and stays correct) afterwards."""
    out = torch.empty(4, dtype=torch.int32)
    inp = torch.tensor([1, 2], dtype=torch.int32)
    cu = torch.tensor([1, 4], dtype=torch.int32)
    torch.Tensor._fd_probe_attr = 1
    try:
        expand_kernel(out, inp, cu, 0, 0, 4)
        assert out.tolist() == [1, 2, 2, 2]
        with pytest.raises(ValueError, match="contiguous"):
            expand_kernel(torch.empty(8, dtype=torch.int32)[::2], inp, cu, 0, 0, 4)
    finally:
        del torch.Tensor._fd_probe_attr
    expand_kernel(out, inp * 3, cu, 0, 0, 4)
    assert out.tolist() == [3, 6, 6, 6]


def test_empty_and_meta_tensors():
    out = torch.empty(0, dtype=torch.int32)
    expand_kernel(out, torch.empty(0, dtype=torch.int32), torch.empty(0, dtype=torch.int32), 0, 0)
    with pytest.raises(ValueError, match="output_ptr: expected a CPU tensor"):
        expand_kernel(
            torch.empty(4, dtype=torch.int32, device="meta"),
            torch.tensor([1, 2], dtype=torch.int32),
            torch.tensor([1, 4], dtype=torch.int32),
            0,
            0,
        )


class ListShape(torch.Tensor):
    """A subclass whose ``shape`` is a list, not a ``torch.Size``."""

    @property
    def shape(self):
        return list(super().shape)


def test_subclass_whose_shape_is_a_list_is_read_not_crashed():
    out = torch.full((5,), -1.0).as_subclass(ListShape)
    inp = torch.tensor([1.5, 2.5]).as_subclass(ListShape)
    cu = torch.tensor([2, 5], dtype=torch.int32).as_subclass(ListShape)
    expand_kernel(out, inp, cu, 0, 0)
    assert torch.Tensor.as_subclass(out, torch.Tensor).tolist() == [1.5, 1.5, 2.5, 2.5, 2.5]
