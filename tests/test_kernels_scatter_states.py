"""``kernels_cpu.scatter_states_kernel``: vLLM's ``_scatter_states_kernel`` (mamba/KDA state
caches) on CPU, beyond the generated cases every kernel gets (``test_kernels_layouts``,
``test_triton_parity``, ``test_kernels_scalars``).

The contract is the Triton kernel's: row ``b`` of src -> row ``indices[b]`` of state, rows
``row_size`` contiguous elements at the stride arguments' distances. So: states of any rank
(rows = ``shape[0]``), flat buffers, strided 1-D indices, stride 0, a src aliasing the state,
a src of another dtype (converted by the store) -- accepted; an index outside the state, rows
shorter than ``row_size``, a stride that is not the tensor's own -- refused naming the
argument, the state untouched.
"""

import pytest
import torch
from _fuzz import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

import kernels_cpu
from fdkit import guards
from fdkit.reference import workers as R

scatter = kernels_cpu.scatter_states_kernel
IDX = (torch.int32, torch.int64)


def _launch(fn, state, src, indices, **over):
    kw = dict(
        stride_state_batch=state.stride(0) if state.dim() >= 1 else 0,
        stride_src_batch=src.stride(0) if src.dim() >= 1 else 0,
        stride_indices=indices.stride(0) if indices.dim() == 1 else 1,
        row_size=int(torch.tensor(state.shape[1:]).prod()) if state.dim() >= 2 else 0,
        BLOCK_SIZE=64,
        launch_pdl=False,
    )
    kw.update(over)
    fn(state, src, indices, **kw)


@pytest.mark.parametrize("idx", IDX)
@fuzz_settings(60, deadline=None)
@given(
    rows=st.integers(1, 9),
    inner=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    data=st.data(),
    dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.int64, torch.bool]),
    index_step=st.integers(1, 3),
)
def test_matches_state_indexed_assignment(idx, rows, inner, data, dtype, index_step):
    n = data.draw(st.integers(0, rows))
    slots = data.draw(st.permutations(range(rows)))[:n]
    state = guards.poison(torch.empty((rows, *inner), dtype=dtype))
    src = (torch.randn((n, *inner)) * 9).to(dtype)
    base = torch.zeros(n * index_step, dtype=idx)
    base[::index_step] = torch.tensor(slots, dtype=idx)
    indices = base[::index_step]  # a strided 1-D view: stride_indices = index_step
    expected = state.clone()
    expected[torch.tensor(slots, dtype=torch.long)] = src
    ref = state.clone()
    _launch(scatter, state, src, indices)
    _launch(R.scatter_states_kernel, ref, src, indices)
    assert torch.equal(state, expected)
    assert torch.equal(ref, expected)


@pytest.mark.parametrize("idx", IDX)
def test_flat_buffers_rows_apart_and_a_column_slice_of_src(idx):
    state = guards.poison(torch.empty(5 * 6, dtype=torch.float32))  # 5 rows of 4, 6 apart
    wide = torch.arange(3 * 7, dtype=torch.float32).reshape(3, 7)
    src = wide[:, :4]
    _launch(
        scatter, state, src, torch.tensor([4, 0, 2], dtype=idx), stride_state_batch=6, row_size=4
    )
    rows = state.as_strided((5, 4), (6, 1))
    assert torch.equal(rows[4], src[0]) and torch.equal(rows[0], src[1])
    assert torch.equal(rows[2], src[2])
    untouched = torch.ones(30, dtype=torch.bool)
    for r in (0, 2, 4):
        untouched[r * 6 : r * 6 + 4] = False
    assert (state[untouched] == guards.POISON_FLOAT).all()


def test_stride_zero_state_takes_every_row_at_row_zero():
    state = torch.zeros(4)
    src = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    _launch(scatter, state, src, torch.tensor([3, -5]), stride_state_batch=0, row_size=4)
    assert state.tolist() in (src[0].tolist(), src[1].tolist())


def test_src_aliasing_state_is_read_before_any_row_is_written():
    state = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    src = state[0:2]  # rows 0 and 1, written to rows 1 and 2
    expected = state.clone()
    expected[torch.tensor([1, 2])] = state[0:2].clone()
    _launch(scatter, state, src, torch.tensor([1, 2], dtype=torch.int32))
    assert torch.equal(state, expected)


def test_src_of_another_dtype_is_converted_as_the_store_converts():
    state = torch.zeros(3, 2, dtype=torch.bfloat16)
    src = torch.tensor([[1.0001, 2.5], [-3.25, 1e-3]])
    _launch(scatter, state, src, torch.tensor([2, 0]))
    assert torch.equal(state[2], src[0].to(torch.bfloat16))
    assert torch.equal(state[0], src[1].to(torch.bfloat16))
    assert (state[1] == 0).all()


def test_row_size_zero_or_no_rows_launches_nothing():
    state = torch.zeros(2, 3)
    _launch(scatter, state, torch.ones(0, 3), torch.empty(0, dtype=torch.int32))
    _launch(scatter, state, torch.ones(1, 3), torch.tensor([7]), row_size=0)
    assert (state == 0).all()


_STATE, _SRC = (4, 3), (2, 3)
#: (what is wrong, error, message, (state, src, indices) overrides, launch overrides)
_REFUSALS = [
    (
        "index past the rows",
        IndexError,
        r"^indices_ptr\[1\]: expected a row of state_ptr in \[0, 4\), got 4",
        {"idx": [0, 4]},
        {},
    ),
    ("negative index", IndexError, r"^indices_ptr\[0\]: expected a row", {"idx": [-1, 0]}, {}),
    (
        "rows too short",
        ValueError,
        "^row_size: expected <= the elements of a state_ptr row = 3",
        {},
        {"row_size": 4},
    ),
    (
        "not the state's stride",
        ValueError,
        r"^stride_state_batch: expected state_ptr.stride\(0\) = 3",
        {},
        {"stride_state_batch": 4},
    ),
    (
        "too few src rows",
        ValueError,
        "^src_ptr: expected at least 2 rows",
        {"src": lambda: torch.ones(3)},
        {"stride_src_batch": 3},
    ),
    (
        "float indices",
        TypeError,
        "^indices_ptr: expected dtype int32 or int64",
        {"indices": lambda: torch.tensor([0.0, 1.0])},
        {},
    ),
    (
        "rows not contiguous",
        ValueError,
        "^state_ptr: expected rows with contiguous trailing dimensions",
        {"state": lambda: torch.zeros(4, 3, 2).transpose(1, 2), "src": lambda: torch.ones(2, 2, 3)},
        {"row_size": 6},
    ),
    ("a float row_size", TypeError, "^row_size: expected an int, got float", {}, {"row_size": 3.0}),
    (
        "not the indices' stride",
        ValueError,
        "^stride_indices: expected indices_ptr.stride",
        {},
        {"stride_indices": 2},
    ),
]


@pytest.mark.parametrize("idx", IDX)
@pytest.mark.parametrize(
    ("why", "error", "match", "inputs", "over"), _REFUSALS, ids=[r[0] for r in _REFUSALS]
)
def test_refusals_name_the_argument_and_write_nothing(idx, why, error, match, inputs, over):
    state = inputs.get("state", lambda: torch.zeros(*_STATE))()
    src = inputs.get("src", lambda: torch.ones(*_SRC))()
    indices = inputs.get("indices", lambda: torch.tensor(inputs.get("idx", [0, 1]), dtype=idx))()
    before = state.clone()
    with pytest.raises(error, match=match):
        _launch(scatter, state, src, indices, **over)
    assert torch.equal(state, before), f"a refused launch ({why}) wrote the state"
