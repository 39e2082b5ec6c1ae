"""Run as a script: after a parallel launch of ``kernels_cpu``, the process must hold exactly one
OpenMP runtime, and ``torch.set_num_threads`` must set the kernels' team size.

    python tests/_openmp_runtime.py [--torchs]

``--torchs``: that runtime must also be torch's own (``torch/lib/libgomp*``), as with the CPU
wheel of torch. Exits non-zero on the first broken expectation, naming it; prints ``NO-OPENMP``
for a build without OpenMP. Used by ``tests/test_kernels_threads.py`` (the dev build) and by
``tools/check_builds.sh`` (the installed manylinux wheel), so both check the same thing.
"""

import os
import re
import sys

import torch

import kernels_cpu


def openmp_runtimes():
    """The OpenMP runtime libraries mapped into this process (real paths)."""
    found = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            path = fields[-1] if len(fields) >= 6 else ""
            if re.search(r"lib(gomp|omp|iomp5)[^/]*\.so", path.rsplit("/", 1)[-1]):
                found.add(os.path.realpath(path))
    return sorted(found)


def main(argv):
    if not kernels_cpu.openmp_enabled():
        print("NO-OPENMP")
        return 0
    # a parallel launch, so our OpenMP team exists
    out = torch.empty(1 << 16, dtype=torch.int64)
    kernels_cpu.set_parallel_threshold(1)
    cu = torch.arange(16, (1 << 16) + 1, 16, dtype=torch.int64)
    kernels_cpu.expand_kernel(out, torch.arange(1 << 12, dtype=torch.int64), cu, -1, 0)
    libs = openmp_runtimes()
    assert len(libs) == 1, f"want exactly one OpenMP runtime in the process, got {libs}"
    if "--torchs" in argv:
        assert "/torch/lib/" in libs[0], f"the OpenMP runtime is not torch's: {libs[0]}"
    for n in (1, 2):
        torch.set_num_threads(n)
        got = kernels_cpu.get_num_threads()
        assert got == n, f"torch.set_num_threads({n}) left the kernels' team at {got}"
    follows = kernels_cpu._parallel._calibration()["omp_follows_torch"]
    assert follows, "omp_get_max_threads() does not follow torch's setting"
    print(f"one OpenMP runtime: {libs[0]}; torch.set_num_threads governs it")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
