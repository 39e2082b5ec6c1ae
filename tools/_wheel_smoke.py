"""What the smoke test of an installed wheel checks, in both places a wheel is installed:
``tools/check_builds.sh`` (a throwaway venv on this machine) and ``tools/arm64_emulated.sh``
(a fresh venv under emulation). Their scripts import it from the source tree's ``tools/``
(searched after the venv) and add what only they check.

* :func:`installed_from` -- the product loads from the venv, compiled;
* :func:`launches` -- the greedy op (owner -> KernelOverride -> kernels_cpu wrapper -> nogil
  loop) against the dev kit's reference, a kernel called directly with int32 offsets writing
  float32 values in place, and a short ``cu_num_tokens`` refused with its name.
"""

import os


def installed_from(venv):
    """fastdispatch and kernels_cpu load from ``venv``, as extension modules, on the Cython
    backend."""
    import fastdispatch
    import fastdispatch._override
    import fastdispatch._owner
    import fastdispatch._plan
    import fastdispatch._vllm_owner
    import kernels_cpu
    import kernels_cpu._sampling

    venv = os.path.realpath(venv)
    for mod in (fastdispatch, fastdispatch._override, kernels_cpu, kernels_cpu._sampling):
        path = os.path.realpath(mod.__file__)
        assert path.startswith(venv + os.sep), f"{mod.__name__} loaded from {path}"
    compiled = (
        fastdispatch._override,
        fastdispatch._plan,
        fastdispatch._owner,
        fastdispatch._vllm_owner,
    )
    for mod in compiled:
        assert mod.__file__.endswith(".so"), mod.__file__
    assert fastdispatch.BACKEND == "cython", fastdispatch.BACKEND


def launches(reference):
    """Launch the ops and a kernel on small hand-checked inputs (``reference``: the module
    ``fdkit.reference.sampling``)."""
    import torch

    import fastdispatch.ops as ops
    import kernels_cpu

    draft = torch.tensor([1, 2, 3, 4, 5], dtype=torch.int32)
    cu = torch.tensor([3, 5], dtype=torch.int32)
    logits = torch.full((5, 16), -1.0)
    logits[torch.arange(5), torch.tensor([1, 2, 9, 4, 5])] = 1.0  # argmax: accept 1 2, reject 3
    bonus = torch.tensor([7, 8], dtype=torch.int64)
    got = ops.rejection_sample(draft, cu, 3, logits, bonus)
    want = torch.full((2, 4), ops.PLACEHOLDER_TOKEN_ID, dtype=torch.int32)
    reference.rejection_greedy_sample_kernel(want, cu, draft, logits.argmax(-1), bonus, None, 3)
    assert torch.equal(got, want), (got, want)
    assert got.tolist() == [[1, 2, 9, -1], [4, 5, 8, -1]], got.tolist()

    x = torch.tensor([0.0, 2.5, 3.0])
    out = torch.full((6,), float("nan"))
    kernels_cpu.expand_kernel(out, x, torch.tensor([2, 5, 6], dtype=torch.int32), 0, 1, 8)
    assert out.tolist() == [1.0, 1.0, 2.5, 2.5, 2.5, 3.0], out.tolist()
    try:
        kernels_cpu.expand_kernel(out, x, torch.tensor([2, 5], dtype=torch.int32), 0, 1, 8)
    except (TypeError, ValueError, IndexError) as e:
        assert "cu_num_tokens" in str(e), e
    else:
        raise AssertionError("a short cu_num_tokens was accepted")
