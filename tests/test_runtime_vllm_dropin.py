"""Drop-in check against the real vLLM: its CPU platform registers its 11 overrides through
*our* ``register_kernels``, every holder (module globals, launch owners, the class-attribute
kernel) is rebound, nothing warns, a real launch runs, and ``unregister_kernels`` restores all.

Runs in vLLM's interpreter (``tests/_vllm_helpers.vllm_python()``: ``$FASTDISPATCH_VLLM_PYTHON``
or ``.venv-vllm``, the same CPython as the dev venv, so the in-place build loads there too); without
one it fails under CI and is skipped, saying so, elsewhere.
"""

import os

from _vllm_helpers import require_vllm_python

CODE = """
import sys, warnings
import torch
import vllm._custom_ops  # noqa: F401  (loads the C++ shims' ops)
import fastdispatch
import vllm.triton_utils.dispatcher as vd
from vllm.platforms.cpu import CpuPlatform
import vllm.v1.sample.rejection_sampler as rs
import vllm.v1.spec_decode.utils as su
import vllm.v1.worker.block_table as bt
import vllm.v1.worker.mamba_utils as mu

assert fastdispatch.BACKEND == "cython"
originals = {"expand": rs.expand_kernel, "greedy": rs.rejection_greedy_sample_kernel,
             "slot": bt.ComputeSlotMappingKernel.__dict__["kernel"],
             "memcpy": mu.batch_memcpy_kernel}
vd.register_kernels = fastdispatch.register_kernels  # the platform hook now uses ours
with warnings.catch_warnings():
    warnings.simplefilter("error")
    CpuPlatform.register_triton_kernel_overrides()
assert len(fastdispatch._registry) == 11, list(fastdispatch._registry)
assert all(v == [] for v in fastdispatch.verify().values()), fastdispatch.verify()
KO = fastdispatch.KernelOverride
assert type(rs.expand_kernel) is KO and type(mu.batch_memcpy_kernel) is KO
assert type(vars(rs._rejection_greedy_sample)["kernel"]) is KO
assert "_kernel_arg_names" not in vars(rs._rejection_greedy_sample)
assert type(bt.ComputeSlotMappingKernel.__dict__["kernel"]) is KO

out = torch.full((2, 4), -1, dtype=torch.int32)
rs._rejection_greedy_sample(out, torch.tensor([2, 3], dtype=torch.int32),
                            torch.tensor([5, 6, 7], dtype=torch.int32),
                            torch.tensor([5, 9, 7]), torch.tensor([11, 12]), None, 3, None, None)
assert out.tolist() == [[5, 9, -1, -1], [7, 12, -1, -1]], out.tolist()

with warnings.catch_warnings():
    warnings.simplefilter("error")
    fastdispatch.unregister_kernels()
assert rs.expand_kernel is originals["expand"]
assert vars(rs._rejection_greedy_sample)["kernel"] is originals["greedy"]
assert bt.ComputeSlotMappingKernel.__dict__["kernel"] is originals["slot"]
assert mu.batch_memcpy_kernel is originals["memcpy"]
print("ok")
"""


def test_vllm_platform_registers_through_fastdispatch():
    import subprocess

    from _runtime_helpers import ROOT, TESTS

    vllm_python = str(require_vllm_python())

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, TESTS]))
    env.pop("FASTDISPATCH_PURE_PYTHON", None)
    proc = subprocess.run(
        [vllm_python, "-c", CODE], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert proc.stdout.strip().splitlines()[-1] == "ok"
