"""The mamba/KDA state-cache write: ``scatter_states`` (``state[indices] = src``) per step.

vLLM's KDA layers (GLM-5-next) write each scheduled sequence's recurrent state back to its cache
slot once per layer per step through ``_scatter_states_kernel``. vLLM 0.32 has no CPU path for
it (its dispatch function asserts CUDA tensors); vLLM's newer CPU fallback is the indexed
assignment ``state[indices.long()] = src``. Rows:

* ``state[indices] = src`` -- that fallback, the anchor;
* ``kernels_cpu`` -- ``scatter_states_kernel`` with the launch vLLM's dispatch computes;
* ``one copy`` -- ``dst.copy_(src)`` of the same bytes into a contiguous buffer: the floor of a
  write of these rows.

Sizes: float32 states of ``heads x K x V`` per slot (64 slots), ``N`` sequences written.
"""

from __future__ import annotations

from .._model import Built, GroupSpec
from .._rows import RowDef
from .._timing import Case

VLLM = "state[indices] = src (vLLM's CPU fallback)"
OURS = "kernels_cpu.scatter_states_kernel"
COPY = "one copy of the rows (copy_)"
ROWS = (RowDef("index", VLLM), RowDef("ours", OURS), RowDef("copy", COPY))

SLOTS = 64
#: (heads, K, V, sequences written)
SHAPES = ((8, 64, 64, 32), (32, 128, 128, 16))


def _inputs(heads, k, v, n):
    import torch

    g = torch.Generator().manual_seed(heads * 1000 + n)
    state = torch.randn(SLOTS, heads, k, v, generator=g)
    src = torch.randn(n, heads, k, v, generator=g)
    indices = torch.randperm(SLOTS, generator=g)[:n].to(torch.int32)
    return state, src, indices


def _build(heads, k, v, n):
    def build(ctx) -> Built:
        import torch

        state, src, indices = _inputs(heads, k, v, n)
        row = heads * k * v
        b = Built(info={"bytes_written": n * row * 4, "row_elements": row})
        long_idx = indices.long()
        b.add(
            VLLM,
            lambda: Case(
                "",
                stmt="s[i.long()] = x",
                namespace={"s": state.clone(), "i": indices, "x": src},
            ),
        )

        def ours():
            import kernels_cpu

            return Case(
                "",
                stmt="f(s, x, i, s.stride(0), x.stride(0), i.stride(0), r, 1024, False)",
                namespace={
                    "f": kernels_cpu.scatter_states_kernel,
                    "s": state.clone(),
                    "x": src,
                    "i": indices,
                    "r": row,
                },
            )

        b.add(OURS, ours)
        b.add(
            COPY,
            lambda: Case("", stmt="d.copy_(x)", namespace={"d": torch.empty_like(src), "x": src}),
        )

        def verify(results):
            import kernels_cpu

            want = state.clone()
            want[long_idx] = src
            got = state.clone()
            kernels_cpu.scatter_states_kernel(
                got, src, indices, got.stride(0), src.stride(0), 1, row, 1024, False
            )
            same = torch.equal(got, want)
            return {
                "ok": same,
                "detail": "kernels_cpu equals state[indices] = src"
                if same
                else "kernels_cpu DIFFERS from state[indices] = src",
                "rows": [VLLM, OURS],
            }

        b.verify = verify
        return b

    return build


def groups(ctx):
    shapes = SHAPES[:1] if ctx.preset == "quick" else SHAPES
    return [
        GroupSpec(
            id=f"states/scatter-{heads}x{k}x{v}-N{n}",
            suite="states",
            title=(
                f"scatter_states, {SLOTS} slots of {heads}x{k}x{v} float32, {n} rows written "
                "(ns per call)"
            ),
            rows=ROWS,
            anchor=(VLLM,),
            vs={"copy": COPY},
            build=_build(heads, k, v, n),
            params={"heads": heads, "K": k, "V": v, "N": n},
        )
        for heads, k, v, n in shapes
    ]
