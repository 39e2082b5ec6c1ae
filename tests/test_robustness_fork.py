"""Fork safety: a process forked after the kernels ran an OpenMP parallel region runs them too.

GNU libgomp is not fork-safe: once a thread has run a parallel region it keeps a pool of worker
threads, and a forked child -- which inherits the pool's bookkeeping but none of its threads --
waits forever at its next parallel region (torch's intra-op loops share that pool, so torch's
own parallel ops in the parent are enough). ``kernels_cpu._parallel`` marks every forked child
through ``pthread_atfork`` and runs its loops serially there.

Each scenario runs this file as a script in a fresh interpreter (so a hang cannot take pytest
with it, and no state of other tests leaks in). The script forces multi-threaded launches,
records every kernel's outputs, runs a parallel region, forks, and the child launches every
kernel again -- once asking for one thread, once for two -- and compares bytes. The parent waits
for the child with a deadline and kills it on expiry, which the test reports as a deadlock.

Every child first sets ``torch.set_num_threads(1)``: torch's own parallel ops (a large
``clone``) hang in such a child otherwise, whatever this package does. The kernels are then
asked for threads explicitly with ``kernels_cpu.set_num_threads`` -- the setting that would
re-enter the dead pool without the fallback.
"""

import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CHILD_DEADLINE_S = 60  # generous: the machine may be shared; a healthy child takes < 5 s
DEADLOCK_EXIT = 86  # the script's exit status when its child had to be killed


def _run_script(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), *args],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_DEADLINE_S + 120,
    )
    detail = f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert proc.returncode != DEADLOCK_EXIT, "forked child deadlocked\n" + detail
    assert proc.returncode == 0, f"script failed (rc={proc.returncode})\n" + detail
    return proc.stdout


@pytest.mark.parametrize("warm", ["kernels", "torch"])
@pytest.mark.parametrize("child_threads", [1, 2])
def test_forked_child_runs_kernels(warm, child_threads):
    """``warm``: whose parallel region ran before the fork (ours, or torch's shared pool)."""
    out = _run_script("fork", warm, str(child_threads))
    assert "parent-parallel-ok" in out
    assert f"child-ok threads={child_threads} effective=1" in out


def test_forked_grandchild_and_multiprocessing_fork():
    """The serial fallback is inherited by a child's own children, and covers multiprocessing's
    fork start method (it forks through the same libc call)."""
    out = _run_script("nested")
    assert "grandchild-ok" in out and "mp-child-ok" in out


def test_spawned_process_stays_parallel():
    """Only forked processes lose their threads: a fresh interpreter keeps them."""
    out = _run_script("fresh")
    assert "fresh threads=2 openmp=True" in out or "fresh threads=1 openmp=False" in out


# ------------------------------------------------------------------------------------------
# The script side (runs in its own interpreter).
# ------------------------------------------------------------------------------------------


def _cases():
    import torch

    import fdkit.cases as fdcases

    cases = []
    for name in fdcases.KERNELS:
        for idx in (torch.int32, torch.int64):
            for seed in range(500):  # a case of several programs, so the launch forms a team
                case = fdcases.make_case(name, seed, idx, scale="large")
                if case.grid and max(case.grid) >= 4:
                    break
            else:
                raise AssertionError(f"fdkit.cases makes no launch of {name} with 4 programs")
            cases.append(case)
    return cases


def _launch_all(cases):
    import kernels_cpu

    results = []
    for case in cases:
        kw, compared = case.build()
        getattr(kernels_cpu, case.kernel)(**kw)
        results.append({k: v.clone() for k, v in compared.items()})
    return results


def _same(a, b):
    import torch

    return all(
        x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x) for x, y in zip(a, b)
    ) and len(a) == len(b)


def _child_start(kernel_threads):
    """In a forked child: torch off its (dead) pool, then ask the kernels for threads."""
    import torch

    import kernels_cpu

    torch.set_num_threads(1)
    kernels_cpu.set_num_threads(kernel_threads)


def _wait(pid):
    """The child's exit status, or DEADLOCK_EXIT after killing it at the deadline."""
    end = time.monotonic() + CHILD_DEADLINE_S
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return DEADLOCK_EXIT


def _parallel_setup():
    import torch

    import kernels_cpu

    torch.set_num_threads(2)
    kernels_cpu.set_num_threads(2)
    kernels_cpu.set_parallel_threshold(0)  # every launch with >1 row forms a team
    # A build without OpenMP has no runtime to deadlock: the scenarios still run, serially.
    assert kernels_cpu.get_num_threads() == (2 if kernels_cpu.openmp_enabled() else 1)


def _warm_torch():
    import torch

    x = torch.rand(1 << 22)
    torch.cumsum(x * 2, 0)  # large enough for torch's OpenMP loops


def _script_fork(warm, child_threads):
    import kernels_cpu

    cases = _cases()
    kernels_cpu.set_num_threads(1)
    serial = _launch_all(cases)
    _parallel_setup()
    if warm == "torch":
        _warm_torch()
    else:
        assert _same(_launch_all(cases), serial), "parallel launch differs from serial"
    print("parent-parallel-ok", flush=True)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _child_start(child_threads)
            effective = kernels_cpu.get_num_threads()
            if _same(_launch_all(cases), serial):
                print(f"child-ok threads={child_threads} effective={effective}", flush=True)
                code = 0
            else:
                print("child results differ", flush=True)
        finally:
            os._exit(code)
    rc = _wait(pid)
    # The parent itself keeps its threads and still runs parallel launches.
    assert kernels_cpu.get_num_threads() == (2 if kernels_cpu.openmp_enabled() else 1)
    assert _same(_launch_all(cases), serial)
    return rc


_MP = {}  # what a multiprocessing child (fork start method) inherits from the script


def _mp_child(q):
    import kernels_cpu

    _child_start(2)
    ok = _same(_launch_all(_MP["cases"]), _MP["serial"])
    q.put((kernels_cpu.get_num_threads(), ok))


def _script_nested():
    import multiprocessing

    import kernels_cpu

    cases = _cases()
    kernels_cpu.set_num_threads(1)
    serial = _launch_all(cases)
    _parallel_setup()
    _launch_all(cases)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _child_start(2)
            _launch_all(cases)
            grandchild = os.fork()
            if grandchild == 0:
                _child_start(2)
                ok = kernels_cpu.get_num_threads() == 1 and _same(_launch_all(cases), serial)
                os._exit(0 if ok else 1)
            code = _wait(grandchild)
        finally:
            os._exit(code)
    rc = _wait(pid)
    if rc != 0:
        return rc
    print("grandchild-ok", flush=True)
    _MP.update(cases=cases, serial=serial)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_mp_child, args=(q,))
    p.start()
    p.join(CHILD_DEADLINE_S)
    if p.is_alive():
        p.kill()
        return DEADLOCK_EXIT
    if p.exitcode != 0 or q.get(timeout=5) != (1, True):
        return 1
    print("mp-child-ok", flush=True)
    return 0


def _script_fresh():
    import kernels_cpu

    _parallel_setup()
    print(
        f"fresh threads={kernels_cpu.get_num_threads()} openmp={kernels_cpu.openmp_enabled()}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "fork":
        sys.exit(_script_fork(sys.argv[2], int(sys.argv[3])))
    if mode == "nested":
        sys.exit(_script_nested())
    if mode == "fresh":
        sys.exit(_script_fresh())
    sys.exit(f"unknown mode {mode!r}")
