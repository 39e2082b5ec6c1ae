"""Timings of Model Runner V2's hot sampler kernels on CPU at a full vocabulary.

``python tools/mrv2_sample_timings.py [threads ...]`` prints, per row count (one row; a request
with four drafts, 5 rows; a batch of 64) and team size, the best of several launches of
temperature, min-p, Gumbel sampling (float32 over dense logits, float32 over a row that top-k
left 50 candidates, float64 dense) and penalties over V = 128256 float32 logits.
"""

import sys
import time

import torch

import kernels_cpu as K

V = 128256


def cdiv(a, b):
    return -(-a // b)


def best_ms(fn, reps=9):
    fn()
    best = 1e9
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def timings(rows, threads):
    K.set_num_threads(threads)
    torch.manual_seed(0)
    base = torch.randn(rows, V) * 3
    mapping = torch.arange(rows, dtype=torch.int32)
    temps = torch.full((rows,), 0.7)
    seeds = torch.arange(rows, dtype=torch.int64) + 1
    pos = torch.arange(rows, dtype=torch.int64)
    out = {}
    x = base.clone()
    grid = (rows, cdiv(V, 8192))
    out["temperature"] = best_ms(
        lambda: K.temperature_kernel(x, V, mapping, temps, V, 8192, grid=grid)
    )
    minp = torch.full((rows,), 0.05)
    out["min_p"] = best_ms(lambda: K.min_p_kernel(x, V, mapping, minp, V, 1024, grid=(rows,)))
    nb = cdiv(V, 1024)
    la = torch.empty(rows, nb, dtype=torch.int64)

    def gumbel(logits, fp64):
        lm = torch.empty(rows, nb, dtype=torch.float64 if fp64 else torch.float32)
        return lambda: K.gumbel_sample_kernel(
            la, nb, lm, nb, None, 0, 0, None, None, 0, logits, V, mapping, seeds, pos, temps,
            V, 1024, False, False, fp64, False, grid=(rows, nb),
        )  # fmt: skip

    out["gumbel fp32 dense"] = best_ms(gumbel(base, False))
    topk = base.clone()
    topk[topk < topk.topk(50, dim=1).values[:, -1:]] = float("-inf")
    out["gumbel fp32 top-k 50"] = best_ms(gumbel(topk, False))
    out["gumbel fp64 dense"] = best_ms(gumbel(base, True), reps=3)
    rep, freq, pres = (torch.full((rows,), v) for v in (1.1, 0.2, 0.1))
    mask = torch.randint(-(2**31), 2**31, (rows, cdiv(V, 32))).to(torch.int32)
    counts = (torch.rand(rows, V) < 0.01).int()
    toks = torch.randint(0, V, (rows,), dtype=torch.int32)
    local = torch.zeros(rows, dtype=torch.int32)
    x = base.clone()
    out["penalties"] = best_ms(
        lambda: K.penalties_kernel(
            x,
            V,
            mapping,
            toks,
            local,
            rep,
            freq,
            pres,
            mask,
            mask.shape[1],
            counts,
            V,
            V,
            8192,
            grid=grid,
        )  # fmt: skip
    )
    return out


if __name__ == "__main__":
    teams = [int(a) for a in sys.argv[1:]] or [1, 2]
    for rows in (1, 5, 64):
        for n in teams:
            t = timings(rows, n)
            print(f"rows={rows} threads={n}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in t.items()))
