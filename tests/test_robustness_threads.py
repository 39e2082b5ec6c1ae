"""Concurrency: every kernel launched from 8 Python threads at once gives the serial results.

The kernels release the GIL around their loops, so launches from several Python threads really
overlap (and, with OpenMP teams forced, each thread may lead its own team). For every kernel,
cases (``fdkit.cases``: valid random launches, outputs poisoned between canary
guards) are first launched one by one for the expected bytes. Then 8 threads, released together
by a barrier, each launch every case several times into their *own* outputs; read-only inputs
are either one set of tensors shared by all threads (``shared``) or per-thread copies
(``private``). Every output of every launch must equal the serial one bit for bit, no guard may
change, and shared inputs must come out untouched. The fused whole-step entry points
(``kernels_cpu._fused``) get the same treatment. The interpreter's switch interval is cut to
10 us meanwhile, so the threads also interleave at many points outside the kernels.
"""

import sys
import threading

import pytest
import torch
from _robustness_helpers import FUSED_ENTRIES, fused_launches, shared_inputs

import fdkit.cases as fdcases
import kernels_cpu

THREADS = 8
ROUNDS = 10
SEEDS = (0, 1, 2)


@pytest.fixture(params=["serial_loops", "openmp_teams"])
def loops(request):
    """Loop mode inside each launch: serial, or an OpenMP team of 2 for every launch."""
    saved = kernels_cpu.parallel_threshold()
    if request.param == "openmp_teams":  # (a build without OpenMP runs these serially)
        kernels_cpu.set_num_threads(2)
        kernels_cpu.set_parallel_threshold(0)
    else:
        kernels_cpu.set_num_threads(1)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield request.param
    sys.setswitchinterval(interval)
    kernels_cpu.set_num_threads(None)
    kernels_cpu.set_parallel_threshold(saved)


def _cases(name):
    cases = []
    for idx in (torch.int32, torch.int64):
        for seed in SEEDS:
            cases.append(fdcases.make_case(name, seed, idx, scale="large"))
    return cases


def _build(case, shared):
    """Launch kwargs with fresh outputs (and in-place inputs); read-only inputs from ``shared``."""
    kw, compared = case.build()
    if shared is not None and case.memcpy is None:  # memcpy addresses point into its own arena
        for name, value in kw.items():
            if isinstance(value, torch.Tensor) and name not in compared:
                kw[name] = shared[name]
    return kw, compared


def _snapshot(compared):
    return {k: v.clone() for k, v in compared.items()}


def _on_threads(worker):
    """Run ``worker(t, barrier)`` on THREADS threads at once (each waits at the barrier before
    launching) and return the failures they yield; an exception a thread raises is one, and
    aborts the barrier for the others."""
    barrier = threading.Barrier(THREADS)
    failures = []

    def run(t):
        try:
            failures.extend(worker(t, barrier))
        except Exception as exc:  # noqa: BLE001 -- reported below, with the thread that raised
            barrier.abort()
            failures.append(f"thread {t}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not any(th.is_alive() for th in threads), "a launching thread did not finish"
    return failures


@pytest.mark.parametrize("inputs", ["shared", "private"])
@pytest.mark.parametrize("name", fdcases.KERNELS)
def test_kernel_from_8_threads_matches_serial(name, inputs, loops):
    impl = getattr(kernels_cpu, name)
    cases = _cases(name)
    expected = []
    for case in cases:
        kw, compared = case.build()
        impl(**kw)
        expected.append(_snapshot(compared))
        assert not fdcases.guard_violations(case, compared), f"serial launch wrote a guard: {case}"

    shared = [case.build()[0] if inputs == "shared" else None for case in cases]
    pristine = [
        None if s is None else {k: v.clone() for k, v in s.items() if isinstance(v, torch.Tensor)}
        for s in shared
    ]

    def worker(t, barrier):
        # Every launch of this thread gets its own outputs, built before the start signal.
        launches = [
            [_build(case, shared[i]) for i, case in enumerate(cases)] for _ in range(ROUNDS)
        ]
        barrier.wait()
        for launch_round in launches:
            for kw, _ in launch_round:
                impl(**kw)
        for r, launch_round in enumerate(launches):
            for i, (_, compared) in enumerate(launch_round):
                for buf, want in expected[i].items():
                    if not torch.equal(compared[buf], want):
                        yield f"thread {t} round {r}: {cases[i]} differs in {buf}"
                if fdcases.guard_violations(cases[i], compared):
                    yield f"thread {t} round {r}: {cases[i]} wrote a guard"

    failures = _on_threads(worker)
    assert not failures, "\n".join(failures[:20])
    for i, inputs_before in enumerate(pristine):
        if inputs_before is None:
            continue
        for k, before in inputs_before.items():
            assert torch.equal(shared[i][k], before), f"{cases[i]}: shared input {k} was written"


@pytest.mark.parametrize("idx", [torch.int32, torch.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("entry", FUSED_ENTRIES)
def test_fused_entry_point_from_8_threads_matches_serial(entry, idx, loops):
    """The fused entry points draw their noise from per-request counters, not shared state:
    concurrent launches over shared inputs give the serial tokens."""
    label, new_output, launch = next(x for x in fused_launches(idx) if x[0] == entry)
    want = new_output()
    launch(want)
    inputs = shared_inputs(launch)
    pristine = [t.clone() for t in inputs]

    def worker(t, barrier):
        outs = [new_output() for _ in range(ROUNDS * 4)]
        barrier.wait()
        for out in outs:
            launch(out)
        for i, out in enumerate(outs):
            if not torch.equal(out, want):
                yield f"thread {t} launch {i}: {out.tolist()} != {want.tolist()}"

    failures = _on_threads(worker)
    assert not failures, f"{label}:\n" + "\n".join(failures[:10])
    assert all(torch.equal(a, b) for a, b in zip(inputs, pristine)), f"{label} wrote an input"
