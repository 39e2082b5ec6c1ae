"""The ops of ``fastdispatch.ops`` end to end on CPU, in the three ways they can run here.

* ``cpu`` (this process): Triton installed, no driver -- importing ``fastdispatch.ops``
  registered the ``kernels_cpu`` implementations over our Triton kernels' qualified names.
* ``absent`` (subprocess, ``import triton`` blocked; or this process, where Triton is not
  installed): the kernels are plain functions; the same registration makes the ops work.
* ``interpret`` (subprocess, ``TRITON_INTERPRET=1``): no registration; the ops run our Triton
  kernels in the interpreter (and ``use_cpu_kernels()`` switches them over on demand).

The same tests run in each mode (the subprocesses run this very file); the expected values come
from plain Python written from the contracts, never from the kernels themselves.
"""

import math
import os
import subprocess
import sys

MODE = os.environ.get("FASTDISPATCH_OPS_TEST_MODE")
if MODE == "absent":
    import importlib.abc

    class _NoTriton(importlib.abc.MetaPathFinder):
        """Make ``import triton`` fail as if it were not installed."""

        def find_spec(self, name, path=None, target=None):
            if name == "triton" or name.startswith("triton."):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
            return None

    assert "triton" not in sys.modules, "triton was imported before the blocker was installed"
    sys.meta_path.insert(0, _NoTriton())
elif MODE is None:  # this process: ``cpu`` where Triton is installed, else it runs ``absent``
    from _triton_helpers import require_triton, run_pytest, triton_installed

    MODE = "cpu" if triton_installed() else "absent"

import pytest  # noqa: E402
import torch  # noqa: E402

import fastdispatch  # noqa: E402
import fastdispatch.ops as ops  # noqa: E402
from fastdispatch.ops import triton_kernels  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from fdkit.reference import REFERENCES  # noqa: E402

IDX = [torch.int32, torch.int64]
# Interpreted launches cost ~1 ms per program: keep batches small there.
BIG = MODE != "interpret"


def _owner_kernel(owner):
    return vars(owner)["kernel"]


# -- the mode itself ----------------------------------------------------------------------------


def _op_owners():
    """Every launch owner of the ops modules (the objects whose ``__dict__`` holds a
    ``kernel``), found rather than listed: an op added for a new kernel is checked here too."""
    owners = []
    for module in (ops.sampling, ops.spec_decode, ops.workers, ops.topk_topp, ops.fused):
        for value in vars(module).values():
            if isinstance(getattr(value, "__dict__", None), dict) and "kernel" in vars(value):
                if callable(value) and all(value is not o for o in owners):
                    owners.append(value)
    return owners


def test_run_mode_and_registration():
    owners = _op_owners()
    # one op (a launch owner) per kernel of ours: each of QUALNAMES is reachable as an op
    assert len(owners) == len(ops.QUALNAMES) >= 13, [type(o).__name__ for o in owners]
    if MODE == "interpret":
        assert ops.RUN_MODE == "interpret" and ops.HAS_TRITON
        assert not ops.cpu_kernels_active()
        for owner in owners:
            assert type(_owner_kernel(owner)).__name__ == "InterpretedFunction"
        return
    assert ops.RUN_MODE == "cpu"
    assert ops.HAS_TRITON == (MODE != "absent")
    assert ops.cpu_kernels_active()
    import kernels_cpu

    for owner in owners:
        kernel = _owner_kernel(owner)
        assert isinstance(kernel, fastdispatch.KernelOverride)
        assert kernel.func is getattr(kernels_cpu, kernel.func.__name__)
    # Module attributes are rebound too: a foreign ``kernel[grid](...)`` reaches kernels_cpu.
    assert isinstance(ops.triton_kernels.sampling.expand_kernel, fastdispatch.KernelOverride)
    if MODE == "absent":
        assert "triton" not in sys.modules
        assert callable(triton_kernels.kernel("expand_kernel"))
        assert not hasattr(triton_kernels.kernel("expand_kernel"), "arg_names")


def test_kernel_signatures_match_kernels_cpu():
    """Our kernels and the ``kernels_cpu`` implementations take the same arguments in the same
    order, so a launch by name or by position binds to either."""
    import inspect

    import kernels_cpu

    for name in ops.QUALNAMES:
        kernel = triton_kernels.kernel(name)
        names = getattr(kernel, "arg_names", None) or list(inspect.signature(kernel).parameters)
        cpu = list(inspect.signature(getattr(kernels_cpu, name)).parameters)
        assert list(names) == cpu[: len(names)], name


def test_switching_implementations():
    """``use_triton_kernels`` restores our kernels in every holder; ``use_cpu_kernels`` puts
    ``kernels_cpu`` back. With no driver the Triton kernel cannot launch: the op must fail
    loudly, not return garbage."""
    x = torch.tensor([4, 0, 6], dtype=torch.int64)
    cu = torch.tensor([1, 3, 4], dtype=torch.int32)
    expected = [4, 1, 1, 6]
    was_cpu = ops.cpu_kernels_active()
    try:
        ops.use_triton_kernels()
        assert not ops.cpu_kernels_active()
        assert _owner_kernel(ops.sampling._expand) is triton_kernels.kernel("expand_kernel")
        if MODE == "interpret":
            assert ops.expand_batch_to_tokens(x, cu, 4, 0, 1).tolist() == expected
        elif MODE == "cpu":
            with pytest.raises(RuntimeError, match="active drivers"):
                ops.expand_batch_to_tokens(x, cu, 4, 0, 1)
        ops.use_cpu_kernels()
        assert ops.cpu_kernels_active()
        assert isinstance(_owner_kernel(ops.sampling._expand), fastdispatch.KernelOverride)
        assert ops.expand_batch_to_tokens(x, cu, 4, 0, 1).tolist() == expected
        ops.use_cpu_kernels()  # idempotent
        assert ops.cpu_kernels_active()
    finally:
        if was_cpu:
            ops.use_cpu_kernels()
        else:
            ops.use_triton_kernels()


@pytest.mark.parametrize("mode", ["absent", "interpret"])
def test_other_modes(mode):
    """Run this file again with Triton blocked, and under the interpreter (from the default
    mode only: the subprocesses do not spawn again)."""
    if mode == "interpret":
        require_triton()
    env = {"FASTDISPATCH_OPS_TEST_MODE": mode}
    env["TRITON_INTERPRET"] = "1" if mode == "interpret" else None
    proc = run_pytest(__file__, env, "-p", "no:randomly", timeout=600)
    assert proc.returncode == 0, f"mode {mode}:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    assert " passed" in proc.stdout


def test_env_flag_registers_cpu_kernels_under_the_interpreter():
    """``FASTDISPATCH_OPS_CPU_KERNELS=1`` asks for ``kernels_cpu`` even where the Triton kernels
    could run (here: the interpreter)."""
    require_triton()
    code = (
        "import fastdispatch.ops as o, torch; "
        "assert o.RUN_MODE == 'interpret' and o.cpu_kernels_active(); "
        "x = o.expand_batch_to_tokens(torch.tensor([5, 0]), "
        "torch.tensor([1, 3], dtype=torch.int32), 3, 0, 2); "
        "assert x.tolist() == [5, 2, 2], x; print('ok')"
    )
    env = dict(os.environ, TRITON_INTERPRET="1", FASTDISPATCH_OPS_CPU_KERNELS="1")
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-3000:]


if MODE != "cpu":
    del test_other_modes, test_env_flag_registers_cpu_kernels_under_the_interpreter


# -- sampling -----------------------------------------------------------------------------------


def _cu(counts, dtype):
    return torch.tensor(counts, dtype=dtype).cumsum(0).to(dtype)


@pytest.mark.parametrize("idx", IDX)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
def test_expand_batch_to_tokens(idx, dtype):
    g = torch.Generator().manual_seed(1)
    for B in (0, 1, 5):
        counts = torch.randint(0, 5, (B,), generator=g).tolist()
        x = torch.randint(-2, 3, (B,), generator=g).to(dtype)
        cu = _cu(counts, idx)
        T = sum(counts)
        out = ops.expand_batch_to_tokens(x, cu, T, replace_from=0, replace_to=9)
        expected = torch.repeat_interleave(
            torch.where(x == 0, torch.full_like(x, 9), x), torch.tensor(counts, dtype=torch.int64)
        )
        assert out.dtype == dtype and torch.equal(out, expected)
    with pytest.raises(ValueError, match="cu_num_tokens"):
        ops.expand_batch_to_tokens(torch.zeros(3), torch.zeros(2, dtype=idx), 0)
    with pytest.raises(TypeError, match="x"):
        ops.expand_batch_to_tokens(
            torch.zeros(3, dtype=torch.float64), torch.zeros(3, dtype=idx), 0
        )


def _expected_rejection(
    drafts, cu, K, logits, bonus, is_greedy, draft_probs, uniform, inv_q, rates=None
):
    """What ``ops.rejection_sample`` must return, as the [B, K+1] list of lists: the plain-torch
    references (``fdkit.reference``) of the kernels it launches, on the argmax and float32
    softmax of the logits -- greedy requests first, then the recovered tokens and the random
    requests."""
    B, V = cu.shape[0], logits.shape[-1]
    out = torch.full((B, K + 1), -1, dtype=torch.int64)
    REFERENCES["rejection_greedy_sample_kernel"](
        out, cu, drafts, logits.argmax(-1), bonus, is_greedy, K, uniform, rates
    )
    if is_greedy is not None:  # random requests too
        probs = logits.softmax(-1, dtype=torch.float32)
        recovered = torch.empty_like(drafts)
        REFERENCES["sample_recovered_tokens_kernel"](
            recovered, cu, drafts, draft_probs, probs, inv_q, V
        )
        REFERENCES["rejection_random_sample_kernel"](
            out, cu, drafts, draft_probs, probs, bonus, recovered, uniform, is_greedy, K, V, rates
        )
    return out.tolist()


def _sampling_batch(g, idx, B, K, V, pad=True):
    counts = torch.randint(0, K + 1, (B,), generator=g).tolist()
    T = sum(counts)
    logits = torch.randn((T, V), generator=g) * 2
    drafts = logits.argmax(-1)
    flip = torch.rand(T, generator=g) < 0.3
    drafts = torch.where(flip, torch.randint(0, V, (T,), generator=g), drafts)
    if pad:
        drafts = torch.where(torch.rand(T, generator=g) < 0.1, -1, drafts)
    bonus = torch.randint(0, V, (B,), generator=g)
    return counts, drafts.to(idx), _cu(counts, idx), logits, bonus


@pytest.mark.parametrize("idx", IDX)
def test_rejection_sample_greedy(idx):
    g = torch.Generator().manual_seed(2)
    for B, K, V in ((0, 3, 5), (1, 1, 1), (6, 4, 7)):
        counts, drafts, cu, logits, bonus = _sampling_batch(g, idx, B, K, V)
        out = ops.rejection_sample(drafts, cu, K, logits, bonus)
        assert out.dtype == torch.int32 and out.shape == (B, K + 1)
        expected = _expected_rejection(drafts, cu, K, logits, bonus, None, None, None, None)
        assert out.tolist() == expected


@pytest.mark.parametrize("idx", IDX)
@pytest.mark.parametrize("with_draft_probs", [False, True])
@pytest.mark.parametrize("kind", ["random", "mixed", "synthetic"])
def test_rejection_sample_random_and_mixed(idx, with_draft_probs, kind):
    g = torch.Generator().manual_seed(3)
    for B, K, V in ((1, 2, 3), (7, 4, 9)):
        counts, drafts, cu, logits, bonus = _sampling_batch(g, idx, B, K, V)
        T = sum(counts)
        draft_probs = torch.rand((T, V), generator=g).softmax(-1) if with_draft_probs else None
        if draft_probs is not None and T:
            draft_probs[0] = 0.0  # a zero draft probability rejects
        is_greedy = (
            (torch.rand(B, generator=g) < 0.4)
            if kind != "random"
            else torch.zeros(B, dtype=torch.bool)
        )
        uniform = torch.rand(T, dtype=torch.float64, generator=g)
        inv_q = torch.empty((B, V)).exponential_(generator=g).reciprocal()
        rates = (
            torch.tensor([0.9, 0.5, 0.0, 1.0][:K] + [0.5] * max(0, K - 4))
            if kind == "synthetic"
            else None
        )
        given = dict(
            draft_probs=draft_probs,
            is_greedy=is_greedy,
            all_random=kind == "random",
            uniform_probs=uniform,
            inv_q=inv_q,
            synthetic_conditional_rates=rates,
        )
        out = ops.rejection_sample(drafts, cu, K, logits, bonus, **given)
        expected = _expected_rejection(
            drafts, cu, K, logits, bonus, is_greedy, draft_probs, uniform, inv_q, rates
        )
        assert out.tolist() == expected
        probs = logits.softmax(-1, dtype=torch.float32)
        again = ops.rejection_sample(drafts, cu, K, logits, bonus, **given, target_probs=probs)
        assert again.tolist() == expected


def test_generators_seed_their_own_requests():
    """A request with its own generator draws its uniforms and its noise row from it, so its
    tokens repeat whatever the rest of the batch draws (vLLM's reproducibility promise)."""
    g = torch.Generator().manual_seed(4)
    B, K, V = 4, 3, 6
    counts, drafts, cu, logits, bonus = _sampling_batch(g, torch.int32, B, K, V, pad=False)
    counts[1] = 0  # a request with no drafts draws nothing from its generator
    cu = _cu(counts, torch.int32)
    T = sum(counts)
    drafts, logits = drafts[:T], logits[:T]
    is_greedy = torch.zeros(B, dtype=torch.bool)
    outs = []
    for trial in range(3):
        torch.manual_seed(100 + trial)  # the unseeded requests differ between trials
        gens = {0: torch.Generator().manual_seed(7), 2: torch.Generator().manual_seed(8)}
        outs.append(
            ops.rejection_sample(
                drafts,
                cu,
                K,
                logits,
                bonus,
                is_greedy=is_greedy,
                generators=gens,
                num_draft_tokens=counts,
            )
        )
    for trial in (1, 2):
        assert outs[trial][0].tolist() == outs[0][0].tolist()
        assert outs[trial][2].tolist() == outs[0][2].tolist()
    # The draws themselves: the seeded slice is exactly the generator's stream.
    gens = {2: torch.Generator().manual_seed(8)}
    u = ops.generate_uniform_probs(T, counts, gens)
    s2 = counts[0] + counts[1]
    ref = torch.empty(counts[2], dtype=torch.float64).uniform_(
        generator=torch.Generator().manual_seed(8)
    )
    assert torch.equal(u[s2 : s2 + counts[2]], ref)
    inv_q = ops.generate_inv_q(B, V, counts, {2: torch.Generator().manual_seed(9)})
    ref_q = torch.empty(V).exponential_(generator=torch.Generator().manual_seed(9)).reciprocal()
    assert torch.equal(inv_q[2], ref_q)


def test_rejection_sample_follows_target_distribution():
    """The whole random path (uniforms, exponential race, both kernels): the first emitted token
    of a one-draft request is distributed as the target, whatever the draft distribution."""
    torch.manual_seed(5)
    B, V = (3000 if BIG else 600), 3
    target_logits = torch.tensor([[0.2, 1.0, -0.5]]).log_softmax(-1).expand(B, V).contiguous()
    p = target_logits.softmax(-1)[0]
    draft_probs = torch.tensor([[0.6, 0.1, 0.3]]).expand(B, V).contiguous()
    drafts = torch.multinomial(draft_probs, 1).view(-1).to(torch.int32)
    cu = torch.arange(1, B + 1, dtype=torch.int32)
    out = ops.rejection_sample(
        drafts,
        cu,
        1,
        target_logits,
        torch.zeros(B, dtype=torch.int64),
        draft_probs=draft_probs,
        all_random=True,
    )
    first = out[:, 0].to(torch.int64)
    freq = torch.bincount(first, minlength=V).double() / B
    tol = 4 * (p * (1 - p) / B).sqrt().double() + 1e-3
    assert ((freq - p.double()).abs() <= tol).all(), (freq, p)


@pytest.mark.parametrize("idx", IDX)
@pytest.mark.parametrize("no_draft", [False, True])
def test_sample_recovered_tokens(idx, no_draft):
    g = torch.Generator().manual_seed(6)
    B, K, V = 5, 3, 11
    counts = torch.randint(0, K + 1, (B,), generator=g).tolist()
    T = sum(counts)
    cu = _cu(counts, idx)
    drafts = torch.randint(-1, V, (T,), generator=g).to(idx)
    target = torch.rand((T, V), generator=g).softmax(-1)
    draft = None if no_draft else torch.rand((T, V), generator=g).softmax(-1)
    inv_q = torch.randint(1, 3, (B, V), generator=g).float()  # ties are common
    out = ops.sample_recovered_tokens(cu, drafts, draft, target, inv_q, K)
    expected = torch.full((T,), -5, dtype=idx)
    REFERENCES["sample_recovered_tokens_kernel"](
        expected, cu, drafts, draft, target, inv_q, V, NO_DRAFT_PROBS=no_draft
    )
    assert out.dtype == idx and torch.equal(out, expected)


def test_sampling_bad_inputs_name_the_argument():
    cu = torch.tensor([1, 2], dtype=torch.int32)
    drafts = torch.tensor([0, 1], dtype=torch.int32)
    logits = torch.randn(2, 4)
    bonus = torch.zeros(2, dtype=torch.int64)
    with pytest.raises(ValueError, match="target_logits"):
        ops.rejection_sample(drafts, cu, 1, torch.randn(3, 4), bonus)
    with pytest.raises(TypeError, match="draft_token_ids"):
        ops.rejection_sample(drafts.float(), cu, 1, logits, bonus)
    with pytest.raises(ValueError, match="bonus_token_ids"):
        ops.rejection_sample(drafts, cu, 1, logits, torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match="draft_probs"):
        ops.rejection_sample(drafts, cu, 1, logits, bonus, draft_probs=torch.rand(2, 5))
    with pytest.raises(TypeError, match="is_greedy"):
        ops.rejection_sample(drafts, cu, 1, logits, bonus, is_greedy=torch.zeros(2))
    with pytest.raises(ValueError, match="inv_q"):
        ops.sample_recovered_tokens(cu, drafts, None, logits.softmax(-1), torch.rand(3, 4), 1)


# -- speculative decoding -----------------------------------------------------------------------


@pytest.mark.parametrize("idx", IDX)
def test_eagle_step_update(idx):
    g = torch.Generator().manual_seed(7)
    B, pad, block_size, max_model_len = 6, 2, 4, 30
    n_blocks = -(-max_model_len // block_size)
    wide = torch.randint(0, 100, (B, n_blocks + 3), generator=g).to(idx)
    table = wide[:, :n_blocks]  # a row slice: stride > row length
    positions = torch.randint(0, max_model_len, (B,), generator=g)
    positions[0] = max_model_len - 1  # steps past the end
    seq_lens = (positions + 1).clamp(max=max_model_len).to(idx)
    clamped = torch.full((B,), -9, dtype=torch.int64)
    slots = torch.full((B + pad,), -9, dtype=torch.int64)
    exp_seq, exp_clamped, exp_slots = seq_lens.clone(), clamped.clone(), slots.clone()
    REFERENCES["eagle_step_slot_mapping_metadata_kernel"](
        positions,
        table,
        table.stride(0),
        exp_seq,
        exp_clamped,
        exp_slots,
        block_size,
        max_model_len,
        n_blocks,
        -1,
        B,
    )
    ops.eagle_step_update_slot_mapping_and_metadata(
        positions,
        table,
        seq_lens,
        block_size,
        max_model_len,
        clamped,
        slots,
        input_batch_size=B + pad,
    )
    assert torch.equal(seq_lens, exp_seq) and torch.equal(clamped, exp_clamped)
    assert torch.equal(slots, exp_slots)
    assert slots[0] == -1 and clamped[0] == 0 and seq_lens[0] == 1
    assert (slots[B:] == -1).all()


@pytest.mark.parametrize("idx", IDX)
def test_eagle_prepare_inputs_and_next_token(idx):
    g = torch.Generator().manual_seed(8)
    B, K, V = 5, 3, 20
    counts = torch.randint(0, K + 1, (B,), generator=g).tolist()
    cu = _cu(counts, idx)
    valid = torch.tensor(
        [torch.randint(1, n + 2, (1,), generator=g).item() for n in counts], dtype=idx
    )
    qsl = (
        torch.tensor([0] + counts, dtype=torch.int64)
        .add(1)
        .cumsum(0)
        .sub(torch.arange(B + 1))
        .to(idx)
    )
    qsl = torch.cat([torch.zeros(1, dtype=idx), (torch.tensor(counts) + 1).cumsum(0).to(idx)])
    tis, rej = ops.eagle_prepare_inputs_padded(cu, valid, qsl)
    exp_rej = [n + 1 - int(v) if n > 0 else 0 for n, v in zip(counts, valid)]
    assert rej.tolist() == exp_rej
    assert tis.tolist() == [int(qsl[i + 1]) - 1 - exp_rej[i] for i in range(B)]
    assert tis.dtype == idx

    wide = torch.randint(0, V + 2, (B, K + 3), generator=g).to(idx)
    wide[:, 2:] = torch.where(torch.rand((B, K + 1), generator=g) < 0.4, -1, wide[:, 2:])
    sampled = wide[:, : K + 1]
    discard = torch.tensor([False, True, False, False, False])
    backup = torch.randint(0, V, (B,), generator=g).to(idx)
    nxt, count = ops.eagle_prepare_next_token_padded(sampled, discard, backup, V)
    for r in range(B):
        ids = [t for t in sampled[r].tolist() if t != -1 and t < V]
        if discard[r]:
            assert (int(nxt[r]), int(count[r])) == (int(backup[r]), 0)
        else:
            assert int(count[r]) == len(ids)
            assert int(nxt[r]) == (ids[-1] if ids else int(backup[r]))


@pytest.mark.parametrize("idx", IDX)
@pytest.mark.parametrize("shift", [False, True])
def test_copy_and_expand_eagle_inputs(idx, shift):
    g = torch.Generator().manual_seed(9)
    B, P, V = 4, 3, 50
    lens = [3, 1, 5, 2]
    rejected = [1, 0, 2, 0]
    qsl = torch.tensor([0, 3, 4, 9, 11], dtype=idx)
    qend = torch.tensor([int(qsl[r]) + lens[r] - 1 - rejected[r] for r in range(B)], dtype=idx)
    total_in = int(qsl[-1])
    tokens = torch.randint(0, V, (total_in,), generator=g).to(idx)
    positions = torch.cat([torch.arange(10 * r, 10 * r + n) for r, n in enumerate(lens)])
    nxt = torch.randint(0, V, (B,), generator=g).to(idx)
    res = ops.copy_and_expand_eagle_inputs(
        tokens,
        positions,
        nxt,
        qsl,
        qend,
        num_padding_slots_per_request=P,
        shift_input_ids=shift,
        padding_token_id=0,
        parallel_drafting_token_id=V - 1,
    )
    total_out = total_in + (P - 1 if shift else P) * B
    exp = [
        torch.full((total_out,), -5, dtype=idx),
        torch.full((total_out,), -5),
        torch.zeros(total_out, dtype=torch.bool),
        torch.zeros(total_out, dtype=torch.bool),
        torch.full((B * P,), -5, dtype=idx),
        res.hidden_state_mapping.clone(),
    ]
    REFERENCES["copy_and_expand_eagle_inputs_kernel"](
        tokens,
        positions,
        nxt,
        *exp[:4],
        exp[4],
        exp[5],
        qsl,
        qend,
        0,
        V - 1,
        total_in,
        P,
        shift,
        64,
    )
    for name, got, want in zip(res._fields, res, exp):
        assert torch.equal(got, want), name
    # Every output slot was written (nothing left from the empty allocation is compared above
    # except through the reference writing every slot).
    assert (res.input_ids >= 0).all()


@pytest.mark.parametrize("idx", IDX)
@pytest.mark.parametrize("with_rejected", [False, True])
def test_copy_and_expand_dflash_inputs(idx, with_rejected):
    g = torch.Generator().manual_seed(10)
    B, S, V, block_size = 3, 2, 40, 4
    lens = [2, 4, 1]
    qsl = torch.tensor([0, 2, 6, 7], dtype=idx)
    positions = torch.cat([torch.arange(5 * r, 5 * r + n) for r, n in enumerate(lens)])
    table = torch.randint(0, 100, (B, 6), generator=g).to(idx)
    nxt = torch.randint(0, V, (B,), generator=g).to(idx)
    rej = torch.tensor([1, 2, 0], dtype=idx) if with_rejected else None
    res = ops.copy_and_expand_dflash_inputs(
        nxt,
        positions,
        table,
        qsl,
        num_speculative_tokens=S,
        block_size=block_size,
        parallel_drafting_token_id=V - 1,
        num_rejected_tokens=rej,
    )
    Q = S + 1
    total_in = int(qsl[-1])
    exp = [
        torch.full((B * Q,), -5, dtype=idx),
        torch.full((total_in,), -5),
        torch.full((B * Q,), -5),
        torch.full((total_in,), -5),
        torch.full((B * Q,), -5),
        torch.full((B * S,), -5, dtype=idx),
    ]
    REFERENCES["copy_and_expand_dflash_inputs_kernel"](
        nxt,
        positions,
        *exp,
        table,
        table.stride(0),
        qsl,
        rej if with_rejected else 0,
        V - 1,
        block_size,
        Q,
        S,
        total_in,
        64,
        HAS_NUM_REJECTED=with_rejected,
    )
    for name, got, want in zip(res._fields, res, exp):
        assert torch.equal(got.to(want.dtype), want), name
    assert res.query_positions.view(B, Q)[:, 0].tolist() == [
        int(positions[int(qsl[r + 1]) - 1 - (int(rej[r]) if with_rejected else 0)]) + 1
        for r in range(B)
    ]


# -- workers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("idx", IDX)
@pytest.mark.parametrize("cp", [(1, 0, 1), (2, 1, 2)])
def test_compute_slot_mapping(idx, cp):
    world, rank, inter = cp
    g = torch.Generator().manual_seed(11)
    B, kv_bs, stride = 4, 4, 5
    qsl = torch.tensor([0, 3, 3, 9, 11], dtype=idx)  # request lengths 3, 0, 6, 2
    positions = torch.randint(0, stride * kv_bs * world, (11,), generator=g)
    table = torch.randint(0, 200, (B + 2, stride), generator=g).to(idx)
    slot_mapping = torch.full((15,), -5, dtype=torch.int64)
    expected = slot_mapping.clone()
    REFERENCES["compute_slot_mapping_kernel"](
        11, 15, qsl, positions, table, stride, expected, kv_bs, world, rank, inter, -1
    )
    ops.compute_slot_mapping(
        qsl,
        positions,
        table,
        slot_mapping,
        block_size=kv_bs,
        cp_world_size=world,
        cp_rank=rank,
        cp_interleave_size=inter,
    )
    assert torch.equal(slot_mapping, expected)
    assert (slot_mapping[11:] == -1).all()
    with pytest.raises(ValueError, match="cp_rank"):
        ops.compute_slot_mapping(
            qsl, positions, table, slot_mapping, block_size=kv_bs, cp_world_size=1, cp_rank=1
        )


def test_batch_memcpy_overlap_safe():
    arena = torch.arange(256, dtype=torch.int64).to(torch.uint8)
    expected = bytearray(arena.numpy().tobytes())
    base = arena.data_ptr()
    copies = [(0, 100, 40), (150, 140, 50), (205, 215, 30), (60, 60, 10), (250, 0, 0)]
    for s, d, n in copies:
        expected[d : d + n] = expected[s : s + n]
    src = torch.tensor([base + s for s, _, _ in copies], dtype=torch.int64)
    dst = torch.tensor([base + d for _, d, _ in copies], dtype=torch.int64)
    sizes = torch.tensor([n for _, _, n in copies], dtype=torch.int64)
    ops.batch_memcpy(src, dst, sizes)
    assert arena.numpy().tobytes() == bytes(expected)
    ops.batch_memcpy(src[:0], dst[:0], sizes[:0])  # nothing to do
    with pytest.raises(TypeError, match="sizes"):
        ops.batch_memcpy(src, dst, sizes.to(torch.int32))
    with pytest.raises(ValueError, match="dst_ptrs"):
        ops.batch_memcpy(src, dst[:2], sizes)


@pytest.mark.parametrize("idx", IDX)
def test_scatter_states(idx):
    state = torch.zeros(5, 2, 3)
    src = torch.arange(12, dtype=torch.float32).reshape(2, 2, 3)
    indices = torch.tensor([4, 0, 0, 9], dtype=idx)[::2]  # strided: rows 4 and 0
    assert ops.scatter_states(state, src, indices) is state
    expected = torch.zeros(5, 2, 3)
    expected[torch.tensor([4, 0])] = src
    assert torch.equal(state, expected)
    ops.scatter_states(state, src[:0], indices[:0])  # nothing to do
    with pytest.raises(ValueError, match="^src: expected rows shaped"):
        ops.scatter_states(state, src.reshape(2, 3, 2), indices)
    with pytest.raises(ValueError, match="^indices: expected 2 elements"):
        ops.scatter_states(state, src, indices[:1])
    with pytest.raises(TypeError, match="^indices: expected dtype"):
        ops.scatter_states(state, src, indices.float())


# -- top-k / top-p ------------------------------------------------------------------------------


@pytest.mark.parametrize("idx", IDX)
def test_apply_top_k_top_p(idx):
    """The op launches our kernel through its owner (kernels_cpu registered over it, or the
    interpreted Triton kernel): the kept set is the reference's, masked entries get the mask."""
    from fdkit.reference.topk_topp import top_k_top_p as reference

    g = torch.Generator().manual_seed(7)
    B, V = (5, 300) if BIG else (3, 40)
    x = torch.randn(B, V, generator=g) * 2
    x[1] = torch.round(x[1])  # ties at the k-th value and across the boundary
    k = torch.tensor([1, 5, V, 3, 2][:B], dtype=idx)
    p = torch.tensor([0.5, 0.9, 0.7, 1.0, 0.3][:B])
    for kk, pp in ((k, None), (None, p), (k, p)):
        want = x.clone()
        reference(want, kk, pp, -1e9)
        got = x.clone()
        assert ops.apply_top_k_top_p(got, kk, pp, -1e9) is got
        assert torch.equal(got, want), (kk, pp)
    assert ops.apply_top_k_top_p(x, None, None) is x
    empty = torch.empty(0, V)
    assert ops.apply_top_k_top_p(empty, torch.empty(0, dtype=idx), None) is empty
    # float64 logits are not the kernel's: the sort-based reference takes them
    wide = x.double()
    ops.apply_top_k_top_p(wide, k, None)
    assert torch.equal(wide != -math.inf, reference_mask(x, k))


def reference_mask(x, k):
    from fdkit.reference.topk_topp import kept_mask

    return torch.stack([kept_mask(x[r], int(k[r]), None) for r in range(x.shape[0])])
