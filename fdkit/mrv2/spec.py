"""Launch cases for Model Runner V2's spec kernels (see ``fdkit.mrv2``).

One random verification step (:class:`_Step`) underlies every case: a few requests with up to
``K`` drafts each, their rows laid out as vLLM lays them (``cu_num_logits``, the expanded slot
mapping and local positions, request slots drawn from a larger persistent table), greedy
(temperature 0) and random requests, per-slot seeds and temperatures (fp32, fp64 at times),
positions, target logits (fp32, fp16 or bf16; a column slice of a wider table at times), draft
logits (absent, fp32, bf16 or fp16; a draft vocabulary wider than the target's; steps and slots
in either memory order) and drafts that often match the target's argmax (ties made on purpose)
or are -1 placeholders; a NaN target logit at times. A kernel further down the chain gets its
inputs computed from the step with torch (block maxima, sums of exponentials, log-sum-exps) as
the kernels before it would compute them.

Vocabulary blocks are smaller powers of two than vLLM's (8192, 1024) so a row spans several
blocks at the interpreter's vocabulary sizes; the grids follow vLLM's formulas for them.
Tolerances: float results of a log/exp (libm on CPU, numpy in the interpreter) within a few
ulp, named per buffer (the draft residual's noised maxima wider: see ``_RESIDUAL_TOL``); token
ids, counts and argmaxes are compared exactly.
"""

import torch

from fdkit._case import Case, Out, Slice, batch, gen, next_pow2

__all__ = ["CASES"]

_TOL = (1e-5, 1e-5)  # a few ulp of fp32 values of magnitude <= ~30
#: The draft residual ``log p + log1p(-exp(log q - log p))``: where ``q/p`` is within a few ulp of
#: 1, log1p magnifies the last-ulp difference of ``exp`` (libm vs numpy) by ``1 / (1 - q/p)``,
#: so a block's noised max may differ far beyond an ulp; the drawn token ids stay exact.
_RESIDUAL_TOL = (1e-2, 1e-5)


def _cdiv(a, b):
    return -(-a // b)


class _Step:
    """One verification step's inputs (see the module)."""

    def __init__(self, rng, idx, *, max_reqs=4, max_vocab=300):
        g = gen(rng)
        self.idx = idx
        self.K = rng.randint(1, 4)
        self.R = batch(rng, max_reqs)
        self.n = [rng.randint(0, self.K) for _ in range(self.R)]  # drafts per request
        cu = [0]
        for n in self.n:
            cu.append(cu[-1] + n + 1)
        self.cu = cu
        self.L = cu[-1]
        self.V = rng.randint(1, max_vocab)
        self.S = self.R + rng.randint(0, 3)  # persistent request slots
        slots = torch.randperm(self.S, generator=g)[: self.R].tolist()
        self.slots = slots
        self.eim = [slots[r] for r in range(self.R) for _ in range(self.n[r] + 1)]
        self.elp = [i for r in range(self.R) for i in range(self.n[r] + 1)]
        temp = []
        for _ in range(self.S):
            temp.append(0.0 if rng.random() < 0.35 else rng.choice([1.0, rng.uniform(0.3, 2.0)]))
        self.temp = torch.tensor(temp, dtype=rng.choice([torch.float32] * 3 + [torch.float64]))
        self.seed = torch.randint(-(2**62), 2**62, (self.S,), generator=g, dtype=torch.int64)
        if idx == torch.int32:
            self.seed = torch.randint(-(2**31), 2**31, (self.S,), generator=g).to(torch.int32)
        hi = 2**33 if idx == torch.int64 and rng.random() < 0.5 else 2**20
        self.pos = torch.randint(0, hi, (self.L,), generator=g).to(idx)
        # target logits: coarse values make ties, a few -inf
        scale = rng.choice([0.5, 2.0, 8.0])
        x = torch.randn(self.L, self.V, generator=g) * scale
        if rng.random() < 0.3:
            x = torch.round(x)
        if rng.random() < 0.3:
            x[torch.rand(self.L, self.V, generator=g) < 0.2] = float("-inf")
        if rng.random() < 0.15 and self.L:  # a NaN logit (vLLM maps NaN maxima to -inf)
            x[rng.randrange(self.L), rng.randrange(self.V)] = float("nan")
        if rng.random() < 0.1 and self.L:
            # a row with no number above -inf: -inf with NaN lanes (argmaxes read NaN as -inf)
            r = rng.randrange(self.L)
            x[r] = float("-inf")
            x[r, torch.rand(self.V, generator=g) < rng.choice([0.1, 0.5, 1.0])] = float("nan")
            # a -inf in every 8 lanes (blocks are 16 or more, a multiple of 8): a full block of
            # NaN only is past what vLLM's kernels can run under the interpreter (nanargmax
            # raises on it)
            x[r, 7::8] = float("-inf")
        self.extra = rng.choice([0, 0, rng.randint(1, 7)])
        # vLLM hands the kernels fp32 logits; the kernels read fp16/bf16 ones too
        dt = rng.choice([torch.float32] * 4 + [torch.float16, torch.bfloat16])
        self.target = x.to(dt)
        # draft logits: none, fp32 or bf16, [S, K, Vd] with Vd >= V, either memory order
        self.has_draft = rng.random() < 0.6
        self.Vd = self.V + rng.choice([0, 0, rng.randint(1, 5)])
        d = torch.randn(self.S, self.K, self.Vd, generator=g) * scale
        for r in range(self.R):
            for i in range(self.n[r]):
                d[slots[r], i, : self.V] = x[cu[r] + i] + 0.5 * d[slots[r], i, : self.V]
        d = d * torch.tensor(temp).clamp(min=0.1)[:, None, None]  # stored pre-temperature
        d[torch.isnan(d)] = 0.0
        d = torch.where(torch.isinf(d), torch.full_like(d, -30.0), d)
        self.draft_dtype = rng.choice([torch.float32] * 3 + [torch.bfloat16, torch.float16])
        d = d.to(self.draft_dtype)
        if rng.random() < 0.4:  # slots and steps in the other memory order
            d = d.transpose(0, 1).contiguous().transpose(0, 1)
        self.draft = d
        # draft tokens: the token after each draft row; matching the target argmax often
        ds = torch.randint(0, self.V, (self.L,), generator=g)
        am = x.argmax(dim=1)
        for r in range(self.R):
            for i in range(self.n[r]):
                u = rng.random()
                if u < 0.5:
                    ds[cu[r] + i + 1] = am[cu[r] + i]
                elif u < 0.6:
                    ds[cu[r] + i + 1] = -1
        self.ds = ds.to(idx)

    # -- views as the kernels take them -------------------------------------------------------

    def target_arg(self):
        """Target logits (a column slice of a wider table at times) and its row stride."""
        if self.extra:
            wide = torch.randn(self.L, self.extra).to(self.target.dtype)
            base = torch.cat([self.target, wide], dim=1)
            return Slice(base, self.V), self.V + self.extra
        return self.target.clone(), self.V

    def t(self, values, dtype=None):
        return torch.tensor(values, dtype=dtype or self.idx)

    def stats(self, bs):
        """Block max/argmax/sumexp of the target and (temperature-scaled) draft rows."""
        nb = max(_cdiv(self.V, bs), 1)
        tmax, targ, tsum = _block_stats(self.target.float(), bs, nb)
        dl = torch.full((self.L, self.V), float("-inf"))
        for li in range(self.L):
            s, step = self.eim[li], self.elp[li]
            temp = float(self.temp[s])
            if step < self.K and temp != 0.0:
                dl[li] = self.draft[s, step, : self.V].float() / temp
        dmax, _, dsum = _block_stats(dl, bs, nb)
        return nb, tmax, targ, tsum, dmax, dsum

    def draft_arg(self):
        if not self.has_draft:
            return None, 0, 0
        return self.draft.clone(), self.draft.stride(0), self.draft.stride(1)

    def cumulative_log_p(self, g):
        return -torch.rand(self.L, generator=g) * 3.0


def _standing_args(kernel):
    """The argument names of ``rejection_sampler_utils.<kernel>`` in the vLLM sources under test
    (``fdkit.vllm_source``; 0.32's signature where there are none): the case launches that
    signature."""
    from fdkit import vllm_source

    try:
        names = vllm_source.arg_names(f"{_UTILS}.{kernel}")
    except FileNotFoundError:
        names = None
    return names or ()


_UTILS = "vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils"


def _block_stats(x, bs, nb):
    """Per vocabulary block of ``bs``: max, first argmax (as a token id), sum(exp(x - max))."""
    L, V = x.shape
    pad = torch.full((L, nb * bs), float("-inf"))
    pad[:, :V] = x
    blocks = pad.view(L, nb, bs)
    mx = blocks.amax(dim=-1)
    arg = blocks.argmax(dim=-1) + torch.arange(nb) * bs
    se = torch.where(mx > float("-inf"), (blocks - mx[..., None]).exp().sum(-1), 0.0)
    return mx, arg, se


def _table_out(rng, rows, cols, dtype):
    """An output table, its rows padded apart at times; (Out, row stride)."""
    stride = cols + rng.choice([0, 0, rng.randint(1, 3)])
    if rows <= 1 or stride == cols:
        return Out((rows, cols), dtype), cols
    return Out((rows, cols), dtype, row_stride=stride), stride


def _table_in(rng, t):
    """An input table as a column slice of a wider one at times; (arg, row stride)."""
    if t.dim() == 2 and rng.random() < 0.4 and t.shape[0] > 0:
        extra = rng.randint(1, 3)
        base = torch.cat([t, torch.zeros(t.shape[0], extra, dtype=t.dtype)], dim=1)
        return Slice(base, t.shape[1]), t.shape[1] + extra
    return t.clone(), t.shape[1]


def _bs(rng, choices=(16, 32, 64, 128)):
    return rng.choice(choices)


def _row_mapping(rng, st, idx):
    """A sharded draft logits cache's rows of the request slots (-1: none, row 0 is read), or
    None (a replicated cache: the slot is its row)."""
    if rng.random() < 0.4:
        return None
    mapping = torch.randperm(st.S, generator=gen(rng))
    mapping[torch.rand(st.S, generator=gen(rng)) < 0.2] = -1
    return mapping.to(idx)


def _standing_form(kernel, args, rng, st, idx):
    """``args`` in the signature of ``kernel`` standing in the sources under test: vLLM 0.33's
    ``num_logits`` for ``num_speculative_steps`` (the step's rows, now and then one fewer) and
    the rejection's FLy window (its entropies per row), 0.34's draft logits row mapping and the
    resampling's SKIP_MASKED_BLOCKS; 0.32's signature where the sources have none of them."""
    names = _standing_args(kernel)
    fly = rng.choice([0, 1, 1, 2, 3])  # FLy's window (0.33+ rejection): 0 is off
    later = {
        "num_logits": lambda: st.L - (1 if st.L and rng.random() < 0.2 else 0),
        "draft_logits_row_mapping_ptr": lambda: _row_mapping(rng, st, idx),
        "SKIP_MASKED_BLOCKS": lambda: rng.random() < 0.6,
        "fly_entropy_ptr": lambda: torch.rand(st.L, generator=gen(rng)) * 1.2 if fly else None,
        "fly_entropy_threshold": lambda: rng.choice([0.3, 0.0, 0.8]),
        "FLY_WINDOW_SIZE": lambda: fly,
    }
    if not any(name in later for name in names):
        return args
    args = dict(args)
    for name in names:
        if name in later:
            args[name] = later[name]()
    return {name: args[name] for name in names}


# -- the kernels ----------------------------------------------------------------------------------


def local_logits_stats(rng, idx, scale):
    st = _Step(rng, idx)
    bs = _bs(rng)
    nb = _cdiv(st.V, bs)
    tgt, ts = st.target_arg()
    draft, d0, d1 = st.draft_arg()
    tam, tas = _table_out(rng, st.L, nb, idx)
    tmx, tms = _table_out(rng, st.L, nb, torch.float32)
    tsm, tss = _table_out(rng, st.L, nb, torch.float32)
    dmx, dms = _table_out(rng, st.L, nb, torch.float32)
    dsm, dss = _table_out(rng, st.L, nb, torch.float32)
    args = dict(
        target_local_argmax_ptr=tam,
        target_local_argmax_stride=tas,
        target_local_max_ptr=tmx,
        target_local_max_stride=tms,
        target_local_sumexp_ptr=tsm,
        target_local_sumexp_stride=tss,
        draft_local_max_ptr=dmx,
        draft_local_max_stride=dms,
        draft_local_sumexp_ptr=dsm,
        draft_local_sumexp_stride=dss,
        target_logits_ptr=tgt,
        target_logits_stride=ts,
        draft_logits_ptr=draft,
        draft_logits_stride_0=d0,
        draft_logits_stride_1=d1,
        expanded_idx_mapping_ptr=st.t(st.eim),
        expanded_local_pos_ptr=st.t(st.elp),
        temp_ptr=st.temp,
        vocab_size=st.V,
        num_speculative_steps=st.K,
        BLOCK_SIZE=bs,
        HAS_DRAFT_LOGITS=st.has_draft,
    )
    args = _standing_form("_compute_local_logits_stats_kernel", args, rng, st, idx)
    return Case(
        "compute_local_logits_stats_kernel",
        (st.L, nb),
        args,
        note=f"L={st.L} V={st.V} bs={bs} draft={st.has_draft}",
        tolerance={"target_local_sumexp_ptr": _TOL, "draft_local_sumexp_ptr": _TOL},
    )


def _lse_args(st, rng, bs, with_draft=True):
    nb, tmax, targ, tsum, dmax, dsum = st.stats(bs)
    a, ams = _table_in(rng, tmax)
    b, bss = _table_in(rng, tsum)
    args = dict(
        target_local_max_ptr=a,
        target_local_max_stride=ams,
        target_local_sumexp_ptr=b,
        target_local_sumexp_stride=bss,
    )
    c, cms = _table_in(rng, dmax)
    d, dss = _table_in(rng, dsum)
    args.update(
        draft_local_max_ptr=c,
        draft_local_max_stride=cms,
        draft_local_sumexp_ptr=d,
        draft_local_sumexp_stride=dss,
    )
    return nb, targ, args


def cumulative_log_p(rng, idx, scale):
    st = _Step(rng, idx)
    bs = _bs(rng)
    nb, _, lse = _lse_args(st, rng, bs)
    tgt, ts = st.target_arg()
    draft, d0, d1 = st.draft_arg()
    args = dict(
        cumulative_log_p_ptr=Out(st.L, torch.float32),
        target_logits_ptr=tgt,
        target_logits_stride=ts,
        target_local_max_ptr=lse["target_local_max_ptr"],
        target_local_max_stride=lse["target_local_max_stride"],
        target_local_sumexp_ptr=lse["target_local_sumexp_ptr"],
        target_local_sumexp_stride=lse["target_local_sumexp_stride"],
        draft_sampled_ptr=st.ds,
        draft_logits_ptr=draft,
        draft_logits_stride_0=d0,
        draft_logits_stride_1=d1,
        draft_local_max_ptr=lse["draft_local_max_ptr"],
        draft_local_max_stride=lse["draft_local_max_stride"],
        draft_local_sumexp_ptr=lse["draft_local_sumexp_ptr"],
        draft_local_sumexp_stride=lse["draft_local_sumexp_stride"],
        cu_num_logits_ptr=st.t(st.cu),
        idx_mapping_ptr=st.t(st.slots),
        temp_ptr=st.temp,
        vocab_num_blocks=nb,
        PADDED_VOCAB_NUM_BLOCKS=next_pow2(nb),
        HAS_DRAFT_LOGITS=st.has_draft,
    )
    if "draft_logits_row_mapping_ptr" in _standing_args("_compute_cumulative_log_p_kernel"):
        # vLLM 0.34: a sharded draft logits cache maps request slots to rows (-1: none)
        mapping = None
        if rng.random() < 0.6:
            mapping = torch.randperm(st.S, generator=gen(rng))
            mapping[torch.rand(st.S, generator=gen(rng)) < 0.2] = -1
            mapping = mapping.to(idx)
        args = dict(args)
        keys = list(args)
        at = keys.index("draft_logits_stride_1") + 1
        args = dict(
            list(args.items())[:at]
            + [("draft_logits_row_mapping_ptr", mapping)]
            + list(args.items())[at:]
        )
    return Case(
        "compute_cumulative_log_p_kernel",
        (st.R,),
        args,
        note=f"R={st.R} V={st.V} draft={st.has_draft}",
        tolerance={"cumulative_log_p_ptr": _TOL},
    )


def local_residual_mass(rng, idx, scale):
    st = _Step(rng, idx)
    st.has_draft = True  # launched for full draft distributions only
    bs = _bs(rng)
    nb, _, lse = _lse_args(st, rng, bs)
    tgt, ts = st.target_arg()
    draft, d0, d1 = st.draft_arg()
    out, os_ = _table_out(rng, st.L, nb, torch.float32)
    args = dict(
        local_residual_mass_ptr=out,
        local_residual_mass_stride=os_,
        cumulative_log_p_ptr=st.cumulative_log_p(gen(rng)),
        target_logits_ptr=tgt,
        target_logits_stride=ts,
        target_local_max_ptr=lse["target_local_max_ptr"],
        target_local_max_stride=lse["target_local_max_stride"],
        target_local_sumexp_ptr=lse["target_local_sumexp_ptr"],
        target_local_sumexp_stride=lse["target_local_sumexp_stride"],
        draft_logits_ptr=draft,
        draft_logits_stride_0=d0,
        draft_logits_stride_1=d1,
        draft_local_max_ptr=lse["draft_local_max_ptr"],
        draft_local_max_stride=lse["draft_local_max_stride"],
        draft_local_sumexp_ptr=lse["draft_local_sumexp_ptr"],
        draft_local_sumexp_stride=lse["draft_local_sumexp_stride"],
        draft_sampled_ptr=st.ds,
        expanded_idx_mapping_ptr=st.t(st.eim),
        expanded_local_pos_ptr=st.t(st.elp),
        temp_ptr=st.temp,
        vocab_size=st.V,
        num_speculative_steps=st.K,
        vocab_num_blocks=nb,
        BLOCK_SIZE=bs,
        PADDED_VOCAB_NUM_BLOCKS=next_pow2(nb),
    )
    args = _standing_form("_compute_local_residual_mass_kernel", args, rng, st, idx)
    return Case(
        "compute_local_residual_mass_kernel",
        (st.L, nb),
        args,
        note=f"L={st.L} V={st.V} bs={bs}",
        tolerance={"local_residual_mass_ptr": _TOL},
    )


def rejection(rng, idx, scale):
    st = _Step(rng, idx)
    bs = _bs(rng)
    nb, targ, lse = _lse_args(st, rng, bs)
    tgt, ts = st.target_arg()
    draft, d0, d1 = st.draft_arg()
    g = gen(rng)
    mode = rng.choice(["standard", "standard", "synthetic", "block"])
    tam, tas = _table_in(rng, targ.to(idx))
    sampled, ss = _table_out(rng, st.R, st.K + 1, idx)
    resid = None
    if mode == "block" and st.has_draft:
        resid = torch.rand(st.L, nb, generator=g) / nb
    args = dict(
        sampled_ptr=sampled,
        sampled_stride=ss,
        rejected_steps_ptr=Out(st.R, idx),
        target_rejected_logsumexp_ptr=Out(st.R, torch.float32),
        draft_rejected_logsumexp_ptr=Out(st.R, torch.float32),
        target_logits_ptr=tgt,
        target_logits_stride=ts,
        target_local_argmax_ptr=tam,
        target_local_argmax_stride=tas,
        target_local_max_ptr=lse["target_local_max_ptr"],
        target_local_max_stride=lse["target_local_max_stride"],
        target_local_sumexp_ptr=lse["target_local_sumexp_ptr"],
        target_local_sumexp_stride=lse["target_local_sumexp_stride"],
        draft_sampled_ptr=st.ds,
        draft_logits_ptr=draft,
        draft_logits_stride_0=d0,
        draft_logits_stride_1=d1,
        draft_local_max_ptr=lse["draft_local_max_ptr"],
        draft_local_max_stride=lse["draft_local_max_stride"],
        draft_local_sumexp_ptr=lse["draft_local_sumexp_ptr"],
        draft_local_sumexp_stride=lse["draft_local_sumexp_stride"],
        cu_num_logits_ptr=st.t(st.cu),
        idx_mapping_ptr=st.t(st.slots),
        temp_ptr=st.temp,
        seed_ptr=st.seed,
        pos_ptr=st.pos,
        synthetic_conditional_rates_ptr=(
            torch.rand(st.K, generator=g) if mode == "synthetic" else None
        ),
        cumulative_log_p_ptr=st.cumulative_log_p(g) if mode == "block" else None,
        local_residual_mass_ptr=resid,
        local_residual_mass_stride=nb if resid is not None else 0,
        vocab_num_blocks=nb,
        PADDED_VOCAB_NUM_BLOCKS=next_pow2(nb),
        HAS_DRAFT_LOGITS=st.has_draft,
        SYNTHETIC_MODE=mode == "synthetic",
        USE_BLOCK_VERIFICATION=mode == "block",
    )
    args = _standing_form("_rejection_kernel", args, rng, st, idx)
    return Case(
        "rejection_kernel",
        (st.R,),
        args,
        note=f"R={st.R} V={st.V} {mode} draft={st.has_draft}",
        tolerance={
            "target_rejected_logsumexp_ptr": _TOL,
            "draft_rejected_logsumexp_ptr": _TOL,
        },
    )


def resample(rng, idx, scale):
    st = _Step(rng, idx)
    g = gen(rng)
    bs = _bs(rng, (16, 32, 64))
    nb = _cdiv(st.V, bs)
    block = rng.random() < 0.3
    fp64 = rng.random() < 0.3
    for _ in range(rng.randint(0, 3) if st.L and nb > 1 else 0):
        # a block of a row masked whole, as top-k/top-p leave most blocks of a row
        b = rng.randrange(nb)
        st.target[rng.randrange(st.L), b * bs : (b + 1) * bs] = float("-inf")
    tgt, ts = st.target_arg()
    draft, d0, d1 = st.draft_arg()
    # accepted counts and the log-sum-exps of each request's rejected row
    acc = [rng.randint(0, n) for n in st.n]
    trl = torch.zeros(st.R)
    drl = torch.zeros(st.R)
    for r in range(st.R):
        li = st.cu[r] + acc[r]
        trl[r] = torch.logsumexp(st.target[li].float(), 0)
        s = st.slots[r]
        temp = float(st.temp[s])
        if acc[r] < st.K and temp != 0.0:
            drl[r] = torch.logsumexp(st.draft[s, acc[r], : st.V].float() / temp, 0)
    arg, argst = _table_out(rng, st.R, nb, idx)
    mx, mxs = _table_out(rng, st.R, nb, torch.float64 if fp64 else torch.float32)
    # watermarking: per-row context words, per-slot flags (a bool's bytes, as vLLM passes them),
    # at times the rows whose context was seen before, and a 64-bit key split in two words
    watermark = bs % 4 == 0 and rng.random() < 0.35
    width = rng.randint(1, 6)
    contexts = torch.randint(-5, 1000, (st.L, width), generator=g).to(idx)
    wm = (torch.rand(st.S, generator=g) < 0.7).view(torch.uint8)
    dedup = watermark and rng.random() < 0.5
    skip = (torch.rand(st.L, generator=g) < 0.3).view(torch.uint8)
    key = rng.getrandbits(64)
    args = dict(
        resampled_local_argmax_ptr=arg,
        resampled_local_argmax_stride=argst,
        resampled_local_max_ptr=mx,
        resampled_local_max_stride=mxs,
        target_logits_ptr=tgt,
        target_logits_stride=ts,
        target_rejected_logsumexp_ptr=trl,
        draft_logits_ptr=draft,
        draft_logits_stride_0=d0,
        draft_logits_stride_1=d1,
        draft_rejected_logsumexp_ptr=drl,
        rejected_step_ptr=st.t(acc),
        cu_num_logits_ptr=st.t(st.cu),
        expanded_idx_mapping_ptr=st.t(st.eim),
        draft_sampled_ptr=st.ds,
        temp_ptr=st.temp,
        seed_ptr=st.seed,
        pos_ptr=st.pos,
        cumulative_log_p_ptr=st.cumulative_log_p(g) if block else None,
        contexts_ptr=contexts if watermark else None,
        contexts_stride=width if watermark else 0,
        watermarking_ptr=wm if watermark else None,
        watermarking_skip_mask_ptr=skip if dedup else None,
        watermark_key_0=key & 0xFFFFFFFF if watermark else 0,
        watermark_key_1=key >> 32 if watermark else 0,
        vocab_size=st.V,
        BLOCK_SIZE=bs,
        HAS_DRAFT_LOGITS=st.has_draft,
        USE_FP64=fp64,
        USE_BLOCK_VERIFICATION=block,
        CONTEXT_WIDTH=width if watermark else 1,
        WATERMARK=watermark,
        DEDUPLICATE_CONTEXTS=dedup,
    )
    args = _standing_form("_resample_kernel", args, rng, st, idx)
    return Case(
        "resample_kernel",
        (st.R, nb),
        args,
        note=f"R={st.R} V={st.V} bs={bs} draft={st.has_draft} block={block} fp64={fp64} "
        f"watermark={watermark} dedup={dedup}",
        tolerance={"resampled_local_max_ptr": _RESIDUAL_TOL if st.has_draft else _TOL},
    )


def insert_resampled(rng, idx, scale):
    st = _Step(rng, idx)
    g = gen(rng)
    bs = rng.choice((16, 32, 64))
    nb = _cdiv(st.V, bs)
    fp64 = rng.random() < 0.3
    acc = [rng.randint(0, n) for n in st.n]
    sampled0 = torch.randint(0, st.V, (st.R, st.K + 1), generator=g).to(idx)
    sampled, ss = _table_in(rng, sampled0)
    mx = torch.randn(st.R, nb, generator=g, dtype=torch.float64 if fp64 else torch.float32)
    if rng.random() < 0.3:
        mx = torch.round(mx)  # ties between blocks
    if rng.random() < 0.2 and st.R:
        mx[0, 0] = float("nan")
    arg = torch.randint(0, bs, (st.R, nb), generator=g) + torch.arange(nb) * bs
    a, ast = _table_in(rng, arg.to(idx))
    m, mst = _table_in(rng, mx)
    args = dict(
        sampled_ptr=sampled,
        sampled_stride=ss,
        num_sampled_ptr=st.t(acc),
        resampled_local_argmax_ptr=a,
        resampled_local_argmax_stride=ast,
        resampled_local_max_ptr=m,
        resampled_local_max_stride=mst,
        resample_num_blocks=nb,
        cu_num_logits_ptr=st.t(st.cu),
        expanded_idx_mapping_ptr=st.t(st.eim),
        temp_ptr=st.temp,
        PADDED_RESAMPLE_NUM_BLOCKS=next_pow2(nb),
    )
    return Case(
        "insert_resampled_kernel",
        (st.R,),
        args,
        inplace=("sampled_ptr", "num_sampled_ptr"),
        note=f"R={st.R} nb={nb}",
    )


def gather_draft_sampled(rng, idx, scale):
    g = gen(rng)
    n = rng.choice([0, rng.randint(1, 40)])
    T = n + rng.randint(0, 10)
    S = rng.randint(1, 6)
    bs = rng.choice([16, 32, 64])
    positions = torch.randint(0, 50, (max(T, 1),), generator=g)[:T]
    args = dict(
        draft_sampled_ptr=Out(n, idx),
        pos_ptr=Out(n, idx),
        input_ids_ptr=torch.randint(0, 1000, (T,), generator=g).to(idx),
        positions_ptr=positions.to(idx),
        logits_indices_ptr=torch.randint(0, max(T, 1), (n,), generator=g).to(idx),
        expanded_idx_mapping_ptr=torch.randint(0, S, (n,), generator=g).to(idx),
        expanded_local_pos_ptr=torch.randint(0, 4, (n,), generator=g).to(idx),
        prefill_len_ptr=torch.randint(0, 50, (S,), generator=g).to(idx),
        num_logits=n,
        BLOCK_SIZE=bs,
    )
    return Case("gather_draft_sampled_kernel", (_cdiv(n, bs),), args, note=f"n={n}")


def flatten_sampled(rng, idx, scale):
    st = _Step(rng, idx)
    g = gen(rng)
    ns = [rng.randint(0, n + 1) for n in st.n]
    sampled = torch.randint(0, 1000, (st.R, st.K + 1), generator=g).to(idx)
    s, ss = _table_in(rng, sampled)
    args = dict(
        flat_sampled_ptr=Out(st.L, idx),
        sampled_ptr=s,
        sampled_stride=ss,
        num_sampled_ptr=st.t(ns, torch.int32 if rng.random() < 0.5 else idx),
        cu_num_logits_ptr=st.t(st.cu),
    )
    return Case("flatten_sampled_kernel", (st.R,), args, note=f"R={st.R}")


def _slot_tables(rng, idx, slots):
    """Index tables of vLLM's int32 or of ``idx``, one entry per request slot, holding what an
    earlier step left there."""
    dtype = torch.int32 if rng.random() < 0.6 else idx
    return torch.randint(-1, slots + 2, (slots,), generator=gen(rng)).to(dtype)


def assign_rows(rng, idx, scale):
    """``DraftLogitsCache.assign``: a batch of distinct request slots given out over 1-4 TP
    ranks (this one any of them, or none now and then); the tables are persistent, compared
    whole. The request slots past the batch are -3: reading them would show."""
    n = batch(rng, 6)
    slots = n + rng.randint(0, 3)
    shards = rng.randint(1, 4)
    me = rng.randrange(shards) if rng.random() < 0.9 else shards
    bs = rng.choice([1, 2, 4, 1024])
    g = gen(rng)
    mapping = torch.randperm(max(slots, 1), generator=g)[:n].tolist()
    args = dict(
        idx_mapping_ptr=torch.tensor(mapping + [-3] * rng.randint(0, 2), dtype=idx),
        shard_mapping_ptr=_slot_tables(rng, idx, slots),
        row_mapping_ptr=_slot_tables(rng, idx, slots),
        inverse_row_mapping_ptr=_slot_tables(rng, idx, _cdiv(slots, shards)),
        num_reqs=n,
        NUM_SHARDS=shards,
        SHARD_IDX=me,
        BLOCK_SIZE=bs,
    )
    return Case(
        "assign_rows_kernel",
        (_cdiv(n, bs),),
        args,
        inplace=("shard_mapping_ptr", "row_mapping_ptr", "inverse_row_mapping_ptr"),
        note=f"n={n} shards={shards} me={me} bs={bs}",
    )


def stale_drafts(rng, idx, scale):
    """``DraftLogitsCache.stale_drafts``: a verification step's rows (a bonus row and up to
    three drafts per request) against a sharded cache's row tables, rows held by the slot,
    by another slot or by none, slots without a row here; now and then a replicated cache
    (no row mapping) and a -1 slot (a padded row)."""
    slots = rng.randint(1, 6)
    g = gen(rng)
    eim, elp = [], []
    for _ in range(batch(rng, 4)):
        s = rng.randrange(slots) if rng.random() < 0.9 else -1
        k = rng.randint(0, 3)
        eim += [s] * (k + 1)
        elp += list(range(k + 1))
    n = len(eim)
    sharded = rng.random() < 0.8
    rows = slots if not sharded else rng.randint(1, slots)
    mapping = None
    if sharded:
        mapping = torch.randint(-1, rows, (slots,), generator=g).to(
            torch.int32 if rng.random() < 0.6 else idx
        )
    holders = torch.randint(-1, slots, (rows,), generator=g)
    if mapping is not None:  # most rows held by the slot mapped to them
        for s in range(slots):
            r = int(mapping[s])
            if r >= 0 and rng.random() < 0.7:
                holders[r] = s
    bs = rng.choice([1, 4, 1024])
    args = dict(
        stale_ptr=Out(n, torch.bool),
        expanded_idx_mapping_ptr=torch.tensor(eim + [0], dtype=idx),
        expanded_local_pos_ptr=torch.tensor(elp + [0], dtype=idx),
        row_mapping_ptr=mapping,
        inverse_row_mapping_ptr=holders.to(torch.int32),
        num_logits=n,
        BLOCK_SIZE=bs,
    )
    return Case(
        "stale_drafts_kernel",
        (_cdiv(n, bs),),
        args,
        note=f"n={n} slots={slots} rows={rows} sharded={sharded} bs={bs}",
    )


#: contract name -> case(rng, idx, scale)
CASES = {
    "compute_local_logits_stats_kernel": local_logits_stats,
    "compute_cumulative_log_p_kernel": cumulative_log_p,
    "compute_local_residual_mass_kernel": local_residual_mass,
    "rejection_kernel": rejection,
    "resample_kernel": resample,
    "insert_resampled_kernel": insert_resampled,
    "gather_draft_sampled_kernel": gather_draft_sampled,
    "flatten_sampled_kernel": flatten_sampled,
    "assign_rows_kernel": assign_rows,
    "stale_drafts_kernel": stale_drafts,
}
