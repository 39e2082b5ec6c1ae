"""The whole speculative sampling step: vLLM's ``RejectionSampler.forward`` on one step's inputs.

What the engine's worker calls once per step, taken out of the engine: B = 16 requests × k = 4
drafts, V ∈ {32000, 128256} (``--quick``: 32000, T0.8 only), float32 ``logits`` laid out as
the model runner hands them (each request's k target rows, then its bonus row), no draft
probabilities, all requests random at temperature 0.8, alone or with top-p 0.9 or top-k 50 (the
settings models ship). A third of the drafts are the target's most likely token, so the walks
stop at different depths, as in an engine.

Rows (one ``RejectionSampler(Sampler())``, the worker's state switched between samples and
verified):

* ``plugin`` -- ``install()``: vLLM's forward over our kernels;
* ``plugin + fused noise`` -- ``install(fused_noise=True, one_pass=False)``: vLLM's forward, the
  fused rejection sampling inside it;
* ``one-pass step`` -- ``install(fused_noise=True)``: ``RejectionSampler.forward`` replaced by
  the one-pass step (``fastdispatch.vllm._spec_step_dropin``);
* ``one read of the sampled rows`` -- ``logits.max(dim=-1)`` over all ``B·(k + 1)`` rows: what
  reading every row the step may sample costs once (the floor of a step that reads them all; the
  one-pass step reads only the rows up to each request's first rejection).

Anchor: the fused row; ``vs read`` is each row's ratio to the read.
"""

from __future__ import annotations

from .._model import Built, GroupSpec, Unavailable
from .._rows import RowDef
from .._timing import Case

PLUGIN = "RejectionSampler.forward + install()"
FUSED = "RejectionSampler.forward + install(fused_noise, one_pass=False)"
ONE_PASS = "one-pass step (install(fused_noise))"
READ = "one read of the sampled rows (max(dim=-1))"
ROWS = (
    RowDef("plugin", PLUGIN),
    RowDef("fused", FUSED),
    RowDef("onepass", ONE_PASS),
    RowDef("read", READ),
)
STATES = {PLUGIN: "installed", FUSED: "installed-fused", ONE_PASS: "installed-one-pass"}

B, K, TEMPERATURE = 16, 4, 0.8
#: setting slug -> (label, top-k, top-p)
SETTINGS = {
    "random": (f"T{TEMPERATURE}", None, None),
    "topp": (f"T{TEMPERATURE} + top-p 0.9", None, 0.9),
    "topk": (f"T{TEMPERATURE} + top-k 50", 50, None),
}


def grid(preset):
    if preset == "quick":
        yield 32000, "random"
        return
    for V in (32000, 128256):
        for setting in SETTINGS:
            if V == 32000 and setting != "random":
                continue
            yield V, setting


class _Inputs:
    def __init__(self, V, setting, seed=0):
        import torch

        g = torch.Generator().manual_seed(seed + V)
        T = B * K
        self.V, self.T = V, T
        self.logits = torch.randn(T + B, V, generator=g) * 3
        target = torch.tensor([r * (K + 1) + j for r in range(B) for j in range(K)])
        bonus = torch.tensor([r * (K + 1) + K for r in range(B)])
        draft = torch.randint(0, V, (T,), generator=g, dtype=torch.int32)
        top = self.logits[target].argmax(-1).to(torch.int32)
        hit = torch.rand(T, generator=g) < 1 / 3
        draft[hit] = top[hit]
        self.logits[target[hit], top[hit].long()] += 12.0  # a likely token: often accepted
        self.target, self.bonus, self.draft = target, bonus, draft
        _, self.k, self.p = SETTINGS[setting]

    def vllm_call(self):
        import torch
        from vllm.v1.sample.rejection_sampler import RejectionSampler
        from vllm.v1.sample.sampler import Sampler
        from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

        from .._vllm import sampling_metadata

        md = SpecDecodeMetadata.make_dummy(
            [self.draft[r * K : (r + 1) * K].tolist() for r in range(B)], torch.device("cpu")
        )
        md.target_logits_indices = self.target.to(torch.int32)
        md.bonus_logits_indices = self.bonus.to(torch.int32)
        sm = sampling_metadata(
            B,
            torch.full((B,), TEMPERATURE),
            top_p=None if self.p is None else torch.full((B,), self.p),
            top_k=None if self.k is None else torch.full((B,), self.k, dtype=torch.int32),
        )
        return RejectionSampler(Sampler()), (md, None, self.logits, sm)


def _build(V, setting):
    def build(ctx) -> Built:
        inp = _Inputs(V, setting)
        b = Built(info={"rows_sampled": inp.T + B, "bytes_read_once": (inp.T + B) * V * 4})
        b.add(
            READ,
            lambda: Case(
                "",
                stmt="x.max(dim=-1)",
                namespace={"x": inp.logits},
                meta={"bytes": (inp.T + B) * V * 4},
            ),
        )

        def forward_case(state):
            def make():
                ctx.vllm.require()
                fdv = ctx.vllm.require_install()
                if not ctx.vllm.fused_supported(fdv):
                    raise Unavailable("fastdispatch.vllm.install() has no fused opt-in")
                sampler, args = inp.vllm_call()
                # RejectionSampler.forward is looked up at call time: the state switch rebinds it
                return Case(
                    "",
                    stmt="s.forward(*a).sampled_token_ids",
                    namespace={"s": sampler, "a": args},
                    state=state,
                )

            return make

        for row, state in STATES.items():
            b.add(row, forward_case(state))
        b.verify = lambda results: _verify(inp, results)
        b.switch_vllm(ctx, None, "installed", "installed-fused", "installed-one-pass")
        return b

    return build


def _verify(inp, results):
    """Every step row's output is well-formed: accepted drafts, one token in [0, V), then -1."""
    import torch

    bad, names = [], []
    for name, out in results.items():
        if name == READ or not isinstance(out, torch.Tensor):
            continue
        names.append(name)
        o = out.to(torch.int64)
        d = inp.draft.to(torch.int64).view(B, K)
        for i in range(B):
            row = o[i].tolist()
            n = next((j for j in range(K) if row[j] != d[i, j]), K)
            if not (0 <= row[n] < inp.V) or any(t != -1 for t in row[n + 1 :]):
                bad.append(f"{name}: request {i} malformed {row}")
                break
    detail = f"{len(names)} rows well-formed (random streams differ by design)"
    return {"ok": not bad, "detail": "; ".join(bad) if bad else detail, "rows": names}


def groups(ctx):
    return [
        GroupSpec(
            id=f"step/B{B}-k{K}-V{V}-{setting}",
            suite="step",
            title=(
                f"RejectionSampler.forward, B={B}, k={K}, V={V}, {SETTINGS[setting][0]}, "
                "no draft probs (ns per step)"
            ),
            rows=ROWS,
            anchor=(FUSED,),
            vs={"read": READ},
            build=_build(V, setting),
            needs_vllm=True,
            family="step",
            params={"B": B, "k": K, "V": V, "setting": setting},
        )
        for V, setting in grid(ctx.preset)
    ]
