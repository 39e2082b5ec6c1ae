"""The kernels' thread policy (``kernels_cpu._parallel``): calibrated thresholds, a pinned
threshold, and a team size that follows torch's setting without asking Python every launch."""

import threading

import pytest
import torch

import kernels_cpu
from kernels_cpu import _parallel

needs_openmp = pytest.mark.skipif(
    not kernels_cpu.openmp_enabled(), reason="built without OpenMP: every loop is serial"
)


@pytest.fixture
def restore():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
    kernels_cpu.set_num_threads(None)
    kernels_cpu.set_parallel_threshold(None)


def _settle(n):
    """Ask for team ``n``'s threshold until its calibration has settled (one burst of timed
    regions per ask; 16 regions settle it -- one ask on a host that is not stalling)."""
    for _ in range(64):
        work = kernels_cpu.parallel_threshold()
        if n in _parallel._calibration()["thresholds"]:
            return work
    raise AssertionError(f"team {n}'s calibration never settled: {_parallel._calibration()}")


@needs_openmp
def test_threshold_is_calibrated_per_team_size(restore):
    kernels_cpu.set_parallel_threshold(None)  # whatever an earlier test pinned
    kernels_cpu.set_num_threads(2)
    work = _settle(2)
    cal = _parallel._calibration()
    assert cal["pinned"] is None and cal["visit_ns"] > 0
    assert cal["thresholds"][2] == work and 2 not in cal["settling"]
    assert 1024 <= work <= 1 << 24
    assert kernels_cpu.parallel_threshold() == work  # settled, then remembered


@needs_openmp
def test_a_stalled_first_burst_does_not_decide_the_threshold(restore):
    """A burst the host stalled -- its one region milliseconds, a team's threads waiting for
    cores -- gives a threshold that keeps the team off every launch; it is not remembered:
    the team settles on the minimum of the regions timed until 16 have been (fed here as the
    calibration's bursts fold them in, so the figures are exact on any host)."""
    kernels_cpu.set_parallel_threshold(None)
    kernels_cpu.set_num_threads(2)
    kernels_cpu.parallel_threshold()  # the serial visit is measured once
    visit = _parallel._calibration()["visit_ns"]
    _parallel._forget()
    try:
        _parallel._record_regions(2, 5e6, 1)  # one region of 5 ms: the first burst, stalled
        cal = _parallel._calibration()
        assert 2 not in cal["thresholds"] and cal["settling"][2] == (1, 5e6)
        _parallel._record_regions(2, 3000.0, 14)  # later bursts: 15 regions, not yet settled
        assert 2 not in _parallel._calibration()["thresholds"]
        _parallel._record_regions(2, 4000.0, 1)  # the 16th
        cal = _parallel._calibration()
        # MARGIN * region / (visit * (1 - MARGIN / n)), the 3 us minimum's: far below the
        # ceiling the stalled region alone gives (5 ms of start-up outweighs 2**24 visits)
        want = int(1.5 * 3000.0 / (visit * (1 - 1.5 / 2)))
        assert cal["thresholds"][2] == max(1024, want) and 2 not in cal["settling"]
        assert want < 1 << 24
        assert kernels_cpu.parallel_threshold() == cal["thresholds"][2]  # settled: remembered
    finally:
        _parallel._forget()
    with pytest.raises(ValueError, match="region_ns"):
        _parallel._record_regions(2, -1.0, 1)
    with pytest.raises(ValueError, match="count"):
        _parallel._record_regions(1, 5.0, 1)


def test_pinned_threshold_and_back(restore):
    kernels_cpu.set_parallel_threshold(123)
    assert kernels_cpu.parallel_threshold() == 123
    assert _parallel._calibration()["pinned"] == 123
    kernels_cpu.set_parallel_threshold(None)
    assert _parallel._calibration()["pinned"] is None
    for bad in (-1, 1.5, True, "8"):
        with pytest.raises(ValueError, match="work"):
            kernels_cpu.set_parallel_threshold(bad)


@needs_openmp
def test_team_size_follows_torch_in_every_thread(restore):
    assert _parallel._check_omp_follows_torch() in (True, False)
    for n in (1, 2, 1):
        torch.set_num_threads(n)
        assert kernels_cpu.get_num_threads() == torch.get_num_threads() == n
    seen = {}

    def worker():
        seen["first"] = (kernels_cpu.get_num_threads(), torch.get_num_threads())
        torch.set_num_threads(1)
        seen["after"] = (kernels_cpu.get_num_threads(), torch.get_num_threads())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["first"][0] == seen["first"][1]
    assert seen["after"] == (1, 1)
    kernels_cpu.set_num_threads(3)
    assert kernels_cpu.get_num_threads() == 3  # an explicit setting wins over torch's


@needs_openmp
def test_results_do_not_depend_on_the_decision(restore):
    """The same launch, forced serial and forced parallel, writes the same tokens."""
    g = torch.Generator().manual_seed(3)
    B, K, V = 8, 3, 4096
    T = B * K
    cu = torch.arange(K, T + 1, K, dtype=torch.int32)
    draft = torch.randint(0, V, (T,), generator=g, dtype=torch.int32)
    target = torch.rand((T, V), generator=g)
    inv_q = torch.rand((B, V), generator=g) + 0.5
    outs = []
    kernels_cpu.set_num_threads(2)
    for pinned in (1 << 40, 0):
        kernels_cpu.set_parallel_threshold(pinned)
        out = torch.full((T,), -7, dtype=torch.int32)
        kernels_cpu.sample_recovered_tokens_kernel(out, cu, draft, None, target, inv_q, V)
        outs.append(out)
    assert torch.equal(outs[0], outs[1])


def test_one_openmp_runtime_which_torch_set_num_threads_governs():
    """torch loads its libgomp first (``import torch`` in ``kernels_cpu/__init__``); our
    extensions need ``libgomp.so.1`` by SONAME and must bind to that one: exactly one OpenMP
    runtime in the process, whose thread count ``torch.set_num_threads`` sets. (The wheels are
    built with libgomp excluded from vendoring for this: ``tools/build_wheels.sh``.)"""
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [os.path.dirname(here)]
            + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        ),
    )
    proc = subprocess.run(
        [sys.executable, os.path.join(here, "_openmp_runtime.py")],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    if "NO-OPENMP" in proc.stdout:
        pytest.skip("this build has no OpenMP")
    assert "one OpenMP runtime:" in proc.stdout, proc.stdout
