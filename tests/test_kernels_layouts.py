"""Every layout the Triton kernel accepts, for every kernel of the table (both index dtypes).

Each random case (``fdkit.cases``: valid inputs, poisoned outputs between canary
guards) is launched on ``kernels_cpu`` with its tensors re-shaped by ``_layouts.relayout`` --
``[N, 1]`` draft ids, flat outputs and probability rows, ``[B, K]`` views of flat buffers, 0-d
single elements -- and compared bit for bit with the plain reference run on the canonical
layout. The same comparison against our Triton kernels under the interpreter is in
``test_triton_parity.py``. Together: the CPU kernels refuse no layout the Triton kernel handles.
"""

import random

import pytest
import torch
from _fuzz import fuzz_settings
from _layouts import relayout
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import fdkit.cases as fdcases
import kernels_cpu
from fdkit.reference import REFERENCES


@pytest.mark.parametrize("idx", ["int32", "int64"])
@pytest.mark.parametrize("name", fdcases.KERNELS)
@fuzz_settings(40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_any_layout_gives_the_canonical_result(name, idx, seed):
    case = fdcases.make_case(name, seed, getattr(torch, idx))
    cpu_kw, cpu = case.build()
    ref_kw, ref = case.build()
    alt, how = relayout(cpu_kw, random.Random(seed))
    getattr(kernels_cpu, name)(**alt)
    REFERENCES[name](**ref_kw)
    for buf in ref:
        assert torch.equal(cpu[buf], ref[buf]), (
            f"{case} with layouts {how}: kernels_cpu differs from the reference in {buf}\n"
            f"cpu: {cpu[buf].tolist()}\nref: {ref[buf].tolist()}"
        )
    assert not fdcases.guard_violations(case, cpu), f"guard written: {case} {how}"
