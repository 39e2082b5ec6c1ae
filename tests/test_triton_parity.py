"""Differential tests: each ``kernels_cpu`` kernel vs our Triton kernel under the interpreter.

Every case (``fdkit.cases.make_case``: random valid inputs, int32 and int64 index
buffers, poisoned outputs between canary guards) is launched three times on identical inputs:
our Triton kernel interpreted (``TRITON_INTERPRET=1``), the ``kernels_cpu`` implementation
(launched by name or positionally, alternately) and the plain-torch reference
(``fdkit.reference``).
All outputs, in-place inputs and guards must be bit-identical, and no guard may change.

The interpreter must be switched on before Triton decorates anything, so in an ordinary pytest
run (where another module may already have imported Triton) the module re-runs itself in a
subprocess with ``TRITON_INTERPRET=1`` once, and each outer test reports one kernel's result
from that run. Interpreter launches are slow and not thread-safe: cases stay small and serial.
"""

import os
import sys

import pytest
from _triton_helpers import assert_interpreted_passed, interpreted_run, require_triton

from kernels_cpu import VLLM_KERNELS

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The kernels, from the kernel table (tests/test_contracts.py checks the table itself).
KERNELS = tuple(VLLM_KERNELS)
EXAMPLES = int(os.environ.get("FASTDISPATCH_PARITY_EXAMPLES", "25"))

if INTERPRETED:
    import torch
    from hypothesis import HealthCheck, given
    from hypothesis import strategies as st

    import fdkit.cases as fdcases
    import kernels_cpu
    from fastdispatch.ops import triton_kernels

    sys.path.insert(0, HERE)
    import random

    from _fuzz import fuzz_settings  # noqa: E402
    from _layouts import relayout  # noqa: E402

    from fdkit.reference import REFERENCES  # noqa: E402

    def _launch_cpu(name, case, kwargs, positional):
        impl = getattr(kernels_cpu, name)
        if positional:
            # In the kernel's argument order, as a positional Triton launch would pass them.
            order = triton_kernels.kernel(name).arg_names
            return impl(*(kwargs[a] for a in order))
        return impl(**kwargs)

    def _three_ways(name, idx, seed, relayout_seed=None):
        """Launch one case on our interpreted Triton kernel, ``kernels_cpu`` (by name or
        positionally) and the reference; with ``relayout_seed`` the first two get the case's
        tensors re-shaped (the reference keeps the canonical layout). Every compared buffer,
        guards included, must be bit-identical to the reference's, and no guard written."""
        case = fdcases.make_case(name, seed, getattr(torch, idx))
        kernel = triton_kernels.kernel(name)
        assert type(kernel).__name__ == "InterpretedFunction"
        tri_kw, tri = case.build()
        cpu_kw, cpu = case.build()
        ref_kw, ref = case.build()
        how = "canonical"
        if relayout_seed is not None:
            tri_kw, how = relayout(tri_kw, random.Random(relayout_seed))
            cpu_kw, _ = relayout(cpu_kw, random.Random(relayout_seed))
        if all(case.grid):
            kernel[case.grid](**tri_kw)
        _launch_cpu(name, case, cpu_kw, positional=seed % 2 == 1)
        REFERENCES[name](**ref_kw)
        for label, bufs in (("triton", tri), ("kernels_cpu", cpu)):
            for buf in ref:
                assert torch.equal(bufs[buf], ref[buf]), (
                    f"{case} ({how}): {label} differs from the reference in {buf}\n"
                    f"{label}: {bufs[buf].tolist()}\nref: {ref[buf].tolist()}"
                )
            assert not fdcases.guard_violations(case, bufs), f"{label} wrote a guard: {case}"

    _settings = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))

    @pytest.mark.parametrize("idx", ["int32", "int64"])
    @pytest.mark.parametrize("name", KERNELS)
    # Deep profile: 500 (not 10,000) -- ~8 ms per interpreted example, 22 tests.
    @fuzz_settings(EXAMPLES, deep_examples=500, **_settings)
    @given(seed=st.integers(0, 2**32 - 1))
    def test_interpreted_parity(name, idx, seed):
        _three_ways(name, idx, seed)

    @pytest.mark.parametrize("idx", ["int32", "int64"])
    @pytest.mark.parametrize("name", KERNELS)
    @fuzz_settings(max(4, EXAMPLES // 3), deep_examples=150, **_settings)
    @given(seed=st.integers(0, 2**32 - 1))
    def test_interpreted_layouts(name, idx, seed):
        """The same launch with its tensors re-shaped (``_layouts.relayout``: flat, column,
        ``[B, K]``, 0-d and empty views of the same memory): our Triton kernel and
        ``kernels_cpu`` both write what the reference writes on the canonical layout."""
        _three_ways(name, idx, seed, relayout_seed=seed)

else:

    @pytest.fixture(scope="module")
    def interpreter_run(tmp_path_factory):
        """Run this module once under ``TRITON_INTERPRET=1``; per-test outcomes from JUnit XML."""
        require_triton()
        pytest.importorskip("hypothesis")
        report = tmp_path_factory.mktemp("parity") / "junit.xml"
        return interpreted_run(__file__, report)

    @pytest.mark.parametrize("test", ["test_interpreted_parity", "test_interpreted_layouts"])
    @pytest.mark.parametrize("idx", ["int32", "int64"])
    @pytest.mark.parametrize("name", KERNELS)
    def test_interpreted_parity(interpreter_run, name, idx, test):
        assert_interpreted_passed(interpreter_run, f"{test}[{name}-{idx}]")
