"""Fused random rejection sampling taken apart: its kernels, stock vLLM's pieces, memory floors.

One group per vocabulary V ∈ {32000, 128256} (``--quick``: 32000) × {with, without} draft
probabilities, at B = 16 requests × k = 4 drafts (``--fused-batch``, ``--fused-k``), float32, all
requests random. The draft model is the target's logits plus Gaussian noise of std
``--draft-noise`` (2.0; less noise, more acceptance, more rows the fused walk reads); drafts are
sampled from it. Rows:

* ``vLLM rejection_sample (stock)`` and ``fastdispatch.ops.fused.vllm_rejection_sample`` — the
  whole step, logits in (groups with draft probabilities only: without them the same two calls are
  the ``spec_decode/random/B16-k4-V*`` groups' stock and fused rows);
* ``vLLM sample_recovered_tokens (stock)`` — ``q`` noise + kernel, vLLM's CPU override;
* ``fused recovered tokens, all T`` — ``vllm_sample_recovered_tokens``: every draft position (reads
  every row), what the ``sample_recovered_tokens`` override runs;
* ``fused step from logits`` / ``from probs`` — ``kernels_cpu._fused.rejection_sample_step_logits``
  and ``rejection_sample_step``: the accept walk, recovered tokens only where emitted, bonus;
* floors: ``memcpy of probs`` (the probability bytes a full pass reads: target, plus draft when
  given), ``memcpy of the rows the step reads`` (only the rows the fused step reads in full, one per
  rejecting request, counted before timing), ``sum of probs`` (a read without a write);
* ``torch softmax of the logits`` — what stock vLLM computes first (and a probs step would need).

Anchor: stock ``rejection_sample`` (with draft probs) or stock ``sample_recovered_tokens``
(without), else the memcpy floor; the ``vs`` columns are ratios to the floors and to stock
``sample_recovered_tokens``.
"""

from __future__ import annotations

import importlib
import types

from .._model import Built, GroupSpec, Unavailable
from .._rows import RowDef
from .._timing import Case

STOCK_RS = "vLLM rejection_sample (stock)"
FUSED_RS = "fastdispatch.ops.fused.vllm_rejection_sample"
STOCK_REC = "vLLM sample_recovered_tokens (stock)"
FUSED_REC = "fused recovered tokens, all T (vllm_sample_recovered_tokens)"
STEP_LOGITS = "fused step from logits (rejection_sample_step_logits)"
STEP_PROBS = "fused step from probs (rejection_sample_step)"
MEMCPY = "memcpy of probs (floor)"
MEMCPY_ROWS = "memcpy of the rows the step reads"
SUM = "sum of probs (read floor)"
SOFTMAX = "torch softmax of the logits"

VOCABS = (32000, 128256)
DEFAULTS = {"fused_batch": 16, "fused_k": 4, "draft_noise": 2.0}


def _options(ctx):
    return {
        k: (ctx.options.get(k) if ctx.options.get(k) is not None else v)
        for k, v in DEFAULTS.items()
    }


class _Inputs:
    def __init__(self, B, K, V, with_draft, draft_noise, seed=0):
        import torch

        gen = torch.Generator().manual_seed(seed)
        T = B * K
        self.B, self.K, self.V, self.T, self.mode = B, K, V, T, "random"
        self.logits = torch.randn(T, V, generator=gen) * 4
        self.probs = self.logits.softmax(-1)
        # the draft model: the target's logits plus noise (less noise, more acceptance)
        draft_logits = self.logits + torch.randn(T, V, generator=gen) * draft_noise
        self.dprobs = draft_logits.softmax(-1) if with_draft else None
        sample_from = self.dprobs if with_draft else self.probs
        self.draft = torch.multinomial(sample_from, 1, generator=gen).reshape(T).to(torch.int32)
        self.cu = torch.arange(K, T + 1, K, dtype=torch.int32)
        self.bonus = torch.randint(0, V, (B, 1), generator=gen)
        self.meta = types.SimpleNamespace(
            all_greedy=False, all_random=True, generators={}, temperature=torch.ones(B)
        )
        self.counts = [K] * B
        self.src = [self.probs] + ([self.dprobs] if with_draft else [])
        self.dst = [torch.empty_like(s) for s in self.src]
        self.bytes = sum(s.numel() * 4 for s in self.src)


def _modules():
    try:
        fused = importlib.import_module("fastdispatch.ops.fused")
        kfused = importlib.import_module("kernels_cpu._fused")
    except Exception as exc:
        raise Unavailable(
            f"fastdispatch.ops.fused / kernels_cpu._fused not importable: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return fused, kfused


def _rows_read(x, fused, kfused):
    """How many probability rows the fused step reads in full (one per rejecting request)."""
    import torch

    out = torch.full((x.B, x.K + 1), -1, dtype=torch.int32)
    kfused.rejection_sample_step(
        out,
        x.cu,
        x.draft,
        x.dprobs,
        x.probs,
        x.bonus,
        None,
        None,
        fused.request_seeds(x.B),
        x.K,
        None,
    )
    return int((out[:, x.K] == -1).sum())


def _build(B, K, V, with_draft, noise):
    def build(ctx) -> Built:
        import torch

        x = _Inputs(B, K, V, with_draft, noise)
        b = Built(
            info={
                "bytes_probs": x.bytes,
                "tokens": x.T,
                "draft_probs": with_draft,
                "draft_noise": noise,
            }
        )
        ns = {"x": x, "torch": torch}

        def ours(stmt, **extra):
            def make():
                fused, kfused = _modules()
                out = torch.full((x.B, x.K + 1), -1, dtype=torch.int32)
                return Case(
                    "",
                    stmt=stmt,
                    namespace=dict(
                        ns,
                        fused=fused,
                        kfused=kfused,
                        out=out,
                        seeds=fused.request_seeds(x.B),
                        **extra,
                    ),
                )

            return make

        def stock(stmt):
            def make():
                ctx.vllm.require()
                from vllm.v1.sample import rejection_sampler as rs

                # looked up at call time: install() rebinds the module attributes
                return Case("", stmt=stmt, namespace=dict(ns, rs=rs), state="stock")

            return make

        if with_draft:
            b.add(
                STOCK_RS,
                stock(
                    "rs.rejection_sample(x.draft, x.counts, x.K, x.cu, x.dprobs, x.logits, "
                    "x.bonus, x.meta)"
                ),
            )
            b.add(
                FUSED_RS,
                ours(
                    "fused.vllm_rejection_sample(x.draft, x.counts, x.K, x.cu, x.dprobs, "
                    "x.logits, x.bonus, x.meta)"
                ),
            )
        b.add(
            STOCK_REC,
            stock(
                "rs.sample_recovered_tokens(x.K, x.counts, x.cu, x.draft, x.dprobs, x.probs, "
                "x.meta, 'cpu')"
            ),
        )
        b.add(
            FUSED_REC,
            ours(
                "fused.vllm_sample_recovered_tokens(x.K, x.counts, x.cu, x.draft, x.dprobs, "
                "x.probs, x.meta, 'cpu')"
            ),
        )
        b.add(
            STEP_LOGITS,
            ours(
                "kfused.rejection_sample_step_logits(out, x.cu, x.draft, x.dprobs, x.logits, "
                "x.bonus, None, seeds, x.K, None)"
            ),
        )
        b.add(
            STEP_PROBS,
            ours(
                "kfused.rejection_sample_step(out, x.cu, x.draft, x.dprobs, x.probs, x.bonus, "
                "None, None, seeds, x.K, None)"
            ),
        )
        b.add(
            MEMCPY,
            lambda: Case(
                "",
                stmt="for d, s in zip(x.dst, x.src): d.copy_(s)",
                namespace=ns,
                meta={"bytes": x.bytes},
            ),
        )

        def memcpy_rows():
            rows = _rows_read(x, *_modules())
            b.info["rows_read_by_step"] = rows
            return Case(
                "",
                stmt="for d, s in zip(x.dst, x.src): d[:rows].copy_(s[:rows])",
                namespace=dict(ns, rows=rows),
                meta={"rows": rows, "of": x.T},
            )

        b.add(MEMCPY_ROWS, memcpy_rows)
        b.add(SUM, lambda: Case("", stmt="for s in x.src: s.sum()", namespace=ns))
        b.add(
            SOFTMAX,
            lambda: Case("", stmt="x.logits.softmax(-1, dtype=torch.float32)", namespace=ns),
        )
        if with_draft:
            b.verify = lambda results: _verify(x, results)
        b.switch_vllm(ctx, "stock", None)
        return b

    return build


def _verify(x, results):
    """The two whole steps' outputs must be well-formed (random streams differ by design)."""
    from .spec_decode import _verify as verify_step

    return verify_step(x, {n: r for n, r in results.items() if n in (STOCK_RS, FUSED_RS)})


def grid(preset):
    for V in VOCABS if preset != "quick" else VOCABS[:1]:
        for with_draft in (True, False):
            yield V, with_draft


def groups(ctx):
    opts = _options(ctx)
    B, K, noise = int(opts["fused_batch"]), int(opts["fused_k"]), float(opts["draft_noise"])
    suffix = "" if noise == DEFAULTS["draft_noise"] else f"-noise{noise:g}"
    specs = []
    for V, with_draft in grid(ctx.preset):
        rows = [RowDef("stock_rs", STOCK_RS), RowDef("fused_rs", FUSED_RS)] if with_draft else []
        rows += [
            RowDef("stock_recovered", STOCK_REC),
            RowDef("fused_recovered", FUSED_REC),
            RowDef("step_logits", STEP_LOGITS),
            RowDef("step_probs", STEP_PROBS),
            RowDef("memcpy", MEMCPY),
            RowDef("memcpy_rows", MEMCPY_ROWS),
            RowDef("sum", SUM),
            RowDef("softmax", SOFTMAX),
        ]
        draft = "draft" if with_draft else "nodraft"
        specs.append(
            GroupSpec(
                id=f"fused/B{B}-k{K}-V{V}-{draft}{suffix}",
                suite="fused",
                title=(
                    f"fused random rejection sampling, B={B}, {K} drafts/request, V={V}, "
                    f"{'with' if with_draft else 'no'} draft probs, draft noise {noise:g} "
                    "(ns per call)"
                ),
                rows=rows,
                anchor=(STOCK_RS, STOCK_REC, MEMCPY) if with_draft else (STOCK_REC, MEMCPY),
                vs={"floor": MEMCPY, "rows read": MEMCPY_ROWS, "sum": SUM, "stock rec.": STOCK_REC},
                build=_build(B, K, V, with_draft, noise),
                needs_vllm=True,
                params={"B": B, "k": K, "V": V, "draft_probs": with_draft, "draft_noise": noise},
            )
        )
    return specs
