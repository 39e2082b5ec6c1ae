"""Model Runner V2's sampling step on CPU, on our kernels, against one read of its rows.

``python tools/mrv2_step_scaling.py [--threads 1,2,4,8,16] [--batches 1,64]`` (after
``python setup.py build_ext --inplace``; torch only, no vLLM) prints, per batch ``B`` (each
request with ``k = 4`` drafts: ``B * 5`` target rows of V = 128256 float32 logits, temperature
0.8, top-p 0.9) and team size, the median of several steps and of one read of the same rows.

The step is what V2's ``Sampler`` does with those rows when a request has top-k/top-p
(vllm/v1/worker/gpu/sample/sampler.py, 0.32-0.34): the temperature kernel in place,
``apply_top_k_top_p`` (ours: ``kernels_cpu.top_k_top_p``), the Gumbel kernel without
temperature, and the winner of each row's blocks (``local_max.argmax`` + gather, as vLLM's host
code does). Then each kernel's share (the step timed up to it). The read is ``torch.amax`` over
the rows at the same thread count: the floor a pass over the logits cannot beat. Reported: step,
read, step / read, and the step's speed-up from one thread.

``--verify`` measures the speculative step instead: what V2's ``RejectionSampler._verify``
runs for those rows (each request's k drafts and its bonus row) with the plugin -- the one-pass
verification, ``kernels_cpu.rejection_sample_one_pass``, temperature 0.8 and top-p 0.9 -- in
three cases: every request's first draft rejected (one-hot drafts off the top-p set: one row
read and drawn from), every draft accepted with one-hot drafts (peaked rows, the drafts their
argmax: all five rows read, the bonus row drawn from), and every draft accepted with the
drafter's probabilities (its logits the target's: five target rows and four draft rows read).

``--floor`` times what no step with draft probabilities does without: vLLM's statistics
kernel (``kernels_cpu.compute_local_logits_stats_kernel``) over the nine rows that step reads
-- each value's exponential, each block's maximum and pairwise sum, one launch -- against the
same read of the 5 target rows.

``--ahead`` times the step with draft probabilities with drafts accepted ahead of their rows
(``kernels_cpu._mrv2_spec._accept_ahead``) in each of its batchings and without it, the modes
alternated step by step in one process (a shared host's drift falls on every mode alike): every
draft accepted (flat rows, as above; peaked rows, a confident model's) and every first draft
rejected (the drafter confident in a token outside top-p).

``--fixed`` times each call's own cost: the step with draft probabilities on rows of 16
values beside the same on full rows.

``--rounds N`` instead times every thread count in turn, N rounds, and reports each step's
speed-up over the same round's one-thread time (median and range over rounds) beside the host's
own ceiling, a step with nothing shared (``_host_reference``), and with ``--verify`` the read of
each batch's target rows (the memory system's ceiling) and the V1 runner's one-pass step over
the same rows (``make_v1``: the step whose scaling V2's is held to): on a shared host whose
speed drifts, one-thread and many-thread times from separate passes do not divide.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time

import torch

import kernels_cpu as K

V = 128256
DRAFTS = 4
TEMPERATURE = 0.8
TOP_P = 0.9


def _cdiv(a, b):
    return -(-a // b)


def _median_ms(fn, reps=15):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def make_step(batch):
    """The step over ``batch * (DRAFTS + 1)`` rows, and the read of the same rows."""
    rows = batch * (DRAFTS + 1)
    g = torch.Generator().manual_seed(rows)
    base = torch.randn(rows, V, generator=g) * 3
    logits = base.clone()
    mapping = torch.arange(rows, dtype=torch.int32)
    temps = torch.full((rows,), TEMPERATURE)
    seeds = torch.arange(rows, dtype=torch.int64) + 1
    pos = torch.arange(rows, dtype=torch.int64)
    p = torch.full((rows,), TOP_P)
    nb = _cdiv(V, 1024)
    local_argmax = torch.empty(rows, nb, dtype=torch.int64)
    local_max = torch.empty(rows, nb)

    def step(upto=3):
        logits.copy_(base)  # the step runs in place; each sample starts from the same logits
        K.temperature_kernel(logits, V, mapping, temps, V, 8192, grid=(rows, _cdiv(V, 8192)))
        if upto == 1:
            return None
        K.top_k_top_p(logits, None, p)  # in place: the rows outside top-p become -inf
        if upto == 2:
            return None
        K.gumbel_sample_kernel(
            local_argmax, nb, local_max, nb, None, 0, 0, None, None, 0, logits, V, mapping,
            seeds, pos, temps, V, 1024, False, False, False, False, grid=(rows, nb),
        )  # fmt: skip
        return local_argmax.gather(1, local_max.argmax(1, keepdim=True)).view(-1)

    def copy_only():
        logits.copy_(base)

    def read():
        return torch.amax(base, dim=1)

    return step, copy_only, read, base


def _verify_rows(batch, case, vocab):
    """``make_verify``'s rows: the ``[batch * 5, vocab]`` target logits, the draft logits (None:
    one-hot drafts) and V2's ``draft_sampled`` (the token drafted for row ``i`` at ``i + 1``)."""
    steps = DRAFTS + 1
    rows = batch * steps
    g = torch.Generator().manual_seed(rows + 7)
    base = torch.randn(rows, vocab, generator=g) * 3
    top = base.argmax(1)
    draft_sampled = torch.randint(0, vocab, (rows,), generator=g)
    draft = None
    if case in ("accepted", "peaked+probs"):
        base[torch.arange(rows), top] += 20.0  # a confident model: p(argmax) ~ 1
    for li in range(rows):
        if not case.startswith("rejected") and li % steps < DRAFTS:
            draft_sampled[li + 1] = top[li]  # the draft checked at row li is its argmax
    if case.endswith("+probs"):
        draft = base.view(batch, steps, vocab)[:, :DRAFTS].clone()
    if case == "rejected+probs":  # the drafter sure of a token top-p masks at the target
        for r in range(batch):
            for i in range(DRAFTS):
                draft[r, i, draft_sampled[r * steps + i + 1]] += 20.0
    return base, draft, draft_sampled


def make_v1(batch, case):
    """The V1 runner's one-pass step (``kernels_cpu.spec_sample_step``, what the plugin's
    ``RejectionSampler.forward`` runs; no draft probabilities) over ``make_verify``'s rows for a
    one-hot ``case``: the same requests, drafts, temperature and top-p -- the step whose
    many-thread scaling the V2 step is held to."""
    from kernels_cpu._spec_step import spec_sample_step

    steps = DRAFTS + 1
    base, _, draft_sampled = _verify_rows(batch, case, V)
    rows = torch.arange(batch * steps).view(batch, steps)
    target = rows[:, :DRAFTS].reshape(-1)
    bonus = rows[:, DRAFTS].contiguous()
    drafts = draft_sampled.view(batch, steps)[:, 1:].reshape(-1)
    cu = torch.arange(1, batch + 1, dtype=torch.int32) * DRAFTS
    temp = torch.full((batch,), TEMPERATURE)
    p = torch.full((batch,), TOP_P)
    seeds = torch.stack([torch.arange(batch) + 1, torch.zeros(batch, dtype=torch.int64)], 1)
    out = torch.empty(batch, steps, dtype=torch.int32)

    def step():
        out.fill_(-1)
        spec_sample_step(
            out, base, target, bonus, cu, drafts, None, temp, None,
            None, None, p, seeds, DRAFTS,
        )  # fmt: skip
        return out

    got = (step() >= 0).sum(1)
    want = 1 if case.startswith("rejected") else steps
    assert got.tolist() == [want] * batch, f"V1 {case}: {got.tolist()} tokens, expected {want}"
    return step


def make_verify(batch, case, vocab=V):
    """The speculative step over ``batch`` requests of ``DRAFTS`` drafts each (``case``:
    "rejected", "accepted" or "accepted+probs"; rows of ``vocab`` values), and the read of the
    same target rows."""
    from kernels_cpu import rejection_sample_one_pass

    steps = DRAFTS + 1
    rows = batch * steps
    base, draft, draft_sampled = _verify_rows(batch, case, vocab)
    req = torch.arange(batch)
    args = (
        base, draft, draft_sampled, torch.arange(0, rows + 1, steps), torch.arange(rows), req,
        req.repeat_interleave(steps), torch.arange(steps).repeat(batch),
        torch.full((batch,), TEMPERATURE), req + 1, DRAFTS,
    )  # fmt: skip
    p = torch.full((batch,), TOP_P)

    def step():
        return rejection_sample_one_pass(*args, apply_temperature=True, top_p=p)

    def read():
        return torch.amax(base, dim=1)

    want = 1 if case.startswith("rejected") else steps
    got = step()[1]
    assert got.tolist() == [want] * batch, f"{case}: {got.tolist()} tokens, expected {want}"
    return step, read


def make_floor():
    """The exponentials of the B1 step with draft probabilities (``--floor``): the statistics
    launch over its 9 rows (5 target, 4 draft; fp32, already divided by the temperature), and
    the read of the 5 target rows."""
    from kernels_cpu import compute_local_logits_stats_kernel

    rows, bs = 2 * DRAFTS + 1, 8192
    nb = _cdiv(V, bs)
    g = torch.Generator().manual_seed(12)
    logits = torch.randn(rows, V, generator=g) * 3 / TEMPERATURE
    zeros = torch.zeros(rows, dtype=torch.int32)
    tables = [torch.empty(rows, nb, dtype=torch.int64)] + [torch.empty(rows, nb) for _ in range(4)]

    def stats():
        compute_local_logits_stats_kernel(
            tables[0], nb, tables[1], nb, tables[2], nb, tables[3], nb, tables[4], nb, logits,
            V, None, 0, 0, zeros, zeros, torch.ones(1), V, DRAFTS, bs,
            HAS_DRAFT_LOGITS=False, grid=(rows, nb),
        )  # fmt: skip

    def read():
        return torch.amax(logits[: DRAFTS + 1], dim=1)

    return stats, read


def floor_table(threads):
    print(f"kernels_cpu OpenMP: {K.openmp_enabled()}")
    print("| threads | statistics of 9 rows ms | read of 5 ms | statistics / read |")
    print("|---|---|---|---|")
    stats, read = make_floor()
    for n in threads:
        K.set_num_threads(n)
        torch.set_num_threads(n)
        s, r = _median_ms(stats, 100), _median_ms(read, 100)
        print(f"| {n} | {s:.3f} | {r:.3f} | {s / r:.1f} |")


def verify_table(threads, batches):
    print(f"kernels_cpu OpenMP: {K.openmp_enabled()}")
    print("| B | case | threads | step ms | read ms | step / read | speed-up |")
    print("|---|---|---|---|---|---|---|")
    for batch in batches:
        for case in ("rejected", "accepted", "accepted+probs"):
            step, read = make_verify(batch, case)
            first = None
            for n in threads:
                K.set_num_threads(n)
                torch.set_num_threads(n)
                s = _median_ms(step)
                r = _median_ms(read)
                first = first or s
                print(
                    f"| {batch} | {case} | {n} | {s:.3f} | {r:.3f} | {s / r:.1f} | "
                    f"{first / s:.1f}x |"
                )


def fixed_table(threads, reps=400):
    """``--fixed``: each call's own cost -- B1 k4 with draft probabilities, every draft accepted,
    on rows of 16 values (the arguments' handling, the regions' starts, the walk), against the
    same step on full rows; medians of ``reps`` calls."""
    print(f"kernels_cpu OpenMP: {K.openmp_enabled()}; medians of {reps} calls")
    print("| threads | rows of 16: call us | rows of 128256: call us | share |")
    print("|---|---|---|---|")
    small, _ = make_verify(1, "accepted+probs", vocab=16)
    full, _ = make_verify(1, "accepted+probs")
    for n in threads:
        K.set_num_threads(n)
        torch.set_num_threads(n)
        a, b = _median_ms(small, reps) * 1e3, _median_ms(full, reps // 10) * 1e3
        print(f"| {n} | {a:.1f} | {b:.1f} | {a / b:.0%} |")


AHEAD_MODES = {"processed": None, "row by row": 0, "first, then rest": 1, "all together": 2}


def ahead_table(threads, batches, reps=40):
    """``--ahead``: the step with draft probabilities per way of accepting drafts ahead."""
    from kernels_cpu import _mrv2_spec as spec

    print(f"kernels_cpu OpenMP: {K.openmp_enabled()}; medians of {reps} steps per mode")
    print("| B | case | threads | read ms | " + " | ".join(f"{m} ms" for m in AHEAD_MODES) + " |")
    print("|---|---|---|---|" + "---|" * len(AHEAD_MODES))
    was_on, was_mode = spec._set_accept_ahead(True), spec._set_ahead_batching(1)
    try:
        for batch in batches:
            for case in ("accepted+probs", "peaked+probs", "rejected+probs"):
                step, read = make_verify(batch, case)
                for n in threads:
                    K.set_num_threads(n)
                    torch.set_num_threads(n)
                    times = {m: [] for m in AHEAD_MODES}
                    for _ in range(reps):
                        for m, mode in AHEAD_MODES.items():
                            spec._set_accept_ahead(mode is not None)
                            spec._set_ahead_batching(1 if mode is None else mode)
                            t0 = time.perf_counter()
                            step()
                            times[m].append(time.perf_counter() - t0)
                    r = _median_ms(read, reps)
                    cells = " | ".join(f"{statistics.median(t) * 1e3:.3f}" for t in times.values())
                    print(f"| {batch} | {case} | {n} | {r:.3f} | {cells} |")
    finally:
        spec._set_accept_ahead(was_on)
        spec._set_ahead_batching(was_mode)


def check(step, base):
    """The sampled tokens are inside each row's top-p set (the step is a step, not a no-op)."""
    tokens = step()
    probs = torch.softmax(base / TEMPERATURE, dim=1)
    sorted_p, order = probs.sort(dim=1, descending=True)
    inside = (sorted_p.cumsum(1) - sorted_p) < TOP_P
    for r, tok in enumerate(tokens.tolist()):
        rank = (order[r] == tok).nonzero().item()
        assert inside[r, rank], f"row {r}: token {tok} (rank {rank}) is outside the top-p set"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--batches", default="1,64")
    ap.add_argument(
        "--rounds",
        type=int,
        default=0,
        help="instead: this many rounds alternating the thread counts, each round's speed-up "
        "over its own one-thread time, the median over rounds (a host whose speed drifts); "
        "with --verify, of the speculative cases",
    )
    ap.add_argument("--verify", action="store_true", help="the speculative step (docstring)")
    ap.add_argument(
        "--ahead", action="store_true", help="drafts accepted ahead, per batching (docstring)"
    )
    ap.add_argument("--fixed", action="store_true", help="each call's own cost (docstring)")
    ap.add_argument(
        "--floor", action="store_true", help="the exponentials of the step with draft probabilities"
    )
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    if args.floor:
        return floor_table(threads)
    if args.fixed:
        return fixed_table(threads)
    if args.ahead:
        return ahead_table(threads, batches)
    if args.rounds:
        return _rounds(threads, batches, args.rounds, args.verify)
    if args.verify:
        return verify_table(threads, batches)
    print(f"kernels_cpu OpenMP: {K.openmp_enabled()}")
    parts = []
    print("| B | rows | threads | step ms | copy ms | read ms | (step - copy) / read | speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    for batch in (int(b) for b in args.batches.split(",")):
        step, copy_only, read, base = make_step(batch)
        check(step, base)
        first = None
        for n in threads:
            K.set_num_threads(n)
            torch.set_num_threads(n)
            s = _median_ms(step)
            c = _median_ms(copy_only)
            r = _median_ms(read)
            t1 = _median_ms(functools.partial(step, 1))
            t2 = _median_ms(functools.partial(step, 2))
            parts.append((batch, n, t1 - c, t2 - t1, s - t2))
            net = s - c
            first = first or net
            print(
                f"| {batch} | {batch * (DRAFTS + 1)} | {n} | {s:.3f} | {c:.3f} | {r:.3f} | "
                f"{net / r:.1f} | {first / net:.1f}x |"
            )
    # each kernel's share: the step timed up to it, less the step up to the one before
    print()
    print("| B | threads | temperature ms | top-k/top-p ms | Gumbel draw + argmax ms |")
    print("|---|---|---|---|---|")
    for batch, n, temp_ms, topp_ms, draw_ms in parts:
        print(f"| {batch} | {n} | {temp_ms:.3f} | {topp_ms:.3f} | {draw_ms:.3f} |")


def _host_reference():
    """A step with nothing shared between threads and no memory traffic to speak of: ``sin``
    over 64k floats per thread (in cache), on torch's pool. Its speed-up is what the host
    itself gives a perfectly parallel step -- below the thread count where all-core clocks
    run slower than one core's, or where the threads share cores."""
    x = torch.randn(1 << 20)
    y = torch.empty_like(x)
    return lambda: torch.sin(x, out=y)


def _rounds(threads, batches, rounds, verify=False):
    """Speed-ups side by side: per round, every thread count timed in turn, each divided into
    the round's first; the median and range over rounds -- on a host whose speed drifts (one
    thread's time moved by half between runs on the lent 16-core host), figures from separate
    passes do not divide. The plain step is reported gross and less the copy that restores its
    logits (the kernels alone); ``verify``: each speculative case (``make_verify``). The host's
    own ceiling (``_host_reference``) is timed in the same rounds; with ``verify``, so is the read
    of each batch's target rows, whose speed-up is the memory system's: a step that reads those
    rows once and does little else per value scales no better."""
    steps = {}
    for batch in batches:
        if verify:
            for case in ("rejected", "accepted", "accepted+probs"):
                step, read = make_verify(batch, case)
                steps[(batch, case)] = (step, None)
            steps[(batch, "read: amax of its target rows")] = (read, None)
            for case in ("rejected", "accepted"):
                steps[(batch, f"V1 one-pass step, {case}")] = (make_v1(batch, case), None)
        else:
            step, copy_only, _, base = make_step(batch)
            check(step, base)
            steps[(batch, "step")] = (step, copy_only)
    steps[("-", "host: sin, nothing shared")] = (_host_reference(), None)
    gross = {key: {n: [] for n in threads} for key in steps}
    net = {key: {n: [] for n in threads} for key in steps}
    for _ in range(rounds):
        for key, (step, copy_only) in steps.items():
            g, k = {}, {}
            for n in threads:
                K.set_num_threads(n)
                torch.set_num_threads(n)
                g[n] = _median_ms(step, 7)
                k[n] = g[n] - (_median_ms(copy_only, 7) if copy_only else 0.0)
            for n in threads:
                gross[key][n].append((g[threads[0]] / g[n], g[n]))
                net[key][n].append(k[threads[0]] / k[n])
    print(f"kernels_cpu OpenMP: {K.openmp_enabled()}; {rounds} rounds")
    print(
        "| B | step | threads | ms (median of rounds) | speed-up (median) | range | "
        "kernels alone | range |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (batch, name), per in gross.items():
        for n in threads:
            a = sorted(r for r, _ in per[n])
            ms = statistics.median(t for _, t in per[n])
            b = sorted(net[(batch, name)][n])
            alone = (
                f"{statistics.median(b):.1f}x | {b[0]:.1f}-{b[-1]:.1f}x"
                if name == "step"
                else "- | -"
            )
            print(
                f"| {batch} | {name} | {n} | {ms:.3f} | {statistics.median(a):.1f}x | "
                f"{a[0]:.1f}-{a[-1]:.1f}x | {alone} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
