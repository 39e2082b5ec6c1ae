"""Compile every kernel in ``fastdispatch.ops.triton_kernels`` for a GPU target, with no GPU.

The Triton interpreter accepts code the GPU compiler rejects (``break``, calls to plain Python
helpers, loop-carried values that change type), so passing the interpreter-based parity tests
says nothing about whether a kernel compiles. ``triton.compile`` of an ``ASTSource`` for an
sm_90 target runs the real front end (and the PTX back end) on this machine.

Each kernel is compiled for every specialisation of the launches ``fdkit.cases`` generates for it
at GPU sizes (int32 and int64 index buffers, optional pointers present and ``None``, each
constexpr flag as drawn), and with every integer scalar equal to 1 (which Triton specialises
into a constant); ``CASES`` adds the dtypes the generators do not draw.
"""

import itertools
import os

import pytest
from _triton_helpers import require_triton

require_triton(allow_module_level=True)
import triton  # noqa: E402

if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    pytest.skip("interpreted kernels cannot be compiled", allow_module_level=True)

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)


def _kernel(module, name):
    """Our kernel as defined, even after ``register_kernels`` replaced the module attribute."""
    from fastdispatch.ops import triton_kernels

    assert triton_kernels.QUALNAMES[name] == f"fastdispatch.ops.triton_kernels.{module}.{name}"
    kernel = triton_kernels.kernel(name)
    assert isinstance(kernel, triton.runtime.JITFunction), kernel
    return kernel


def _compile(kernel, args):
    """``args``: ordered name -> Triton type string, or ``("constexpr", value)``."""
    assert tuple(args) == tuple(kernel.arg_names), (tuple(args), kernel.arg_names)
    signature, constexprs = {}, {}
    for name, spec in args.items():
        if isinstance(spec, tuple):
            signature[name] = "constexpr"
            constexprs[name] = spec[1]
        else:
            signature[name] = spec
    # No a*b+c contraction, as kernels_cpu is built (-ffp-contract=off): the GPU build of our
    # kernels must round as the CPU kernels do.
    return triton.compile(
        ASTSource(kernel, signature, constexprs),
        target=TARGET,
        options={"enable_fp_fusion": False},
    )


def _c(value):
    return ("constexpr", value)


IDX = ("i32", "i64")


def _cases_topk_topp():
    for logits, idx, prob, (topk, topp, split) in itertools.product(
        ("*fp32", "*bf16"),
        IDX,
        ("*fp32", "*fp64"),
        ((True, False, False), (False, True, True), (True, True, True), (True, True, False)),
    ):
        yield dict(
            LOGITS=logits,
            LOGITS_STRIDE_0="i32",
            BUFFER="*fp32",
            PERCENTILE_TO_STD_TABLE="*fp32",
            NORMAL_CDF_TO_SIGMA_TABLE="*fp32",
            K=f"*{idx}",
            P=prob,
            BATCH_SIZE="i32",
            VOCAB_SIZE=_c(32000),
            MASK_VALUE=_c(float("-inf")),
            BLOCK_SIZE=_c(1024),
            BLOCK_SIZE_TRUNC=_c(512),
            TOPK_ENABLED=_c(topk),
            TOPP_ENABLED=_c(topp),
            SPLIT_COVERS_PONLY=_c(split),
        )


#: Specialisations the case generators do not draw, written out: the top-k/top-p kernel on
#: bfloat16 logits and float64 probabilities (vLLM's dtypes on GPUs), every flag combination.
#: Every other kernel compiles from its generated launches (test_the_generated_launches_...).
CASES = [
    ("topk_topp", "topk_topp_kernel", _cases_topk_topp),
]


#: Kernels using the float64 ``exp`` (libdevice ``__nv_exp``), whose range check takes
#: ``abs.ftz.f32`` of the argument's high word: a flushed subnormal high word is a |x| far
#: below the bound it is compared with, so the branch -- and the result -- are the same.
_F64_EXP = frozenset({"topk_topp_kernel"})


def _ones(args):
    """The same launch with every integer scalar equal to 1: Triton specializes such arguments
    into constants (``tl.constexpr``), which some expressions handle differently."""
    return {k: (_c(1) if v in ("i32", "i64") else v) for k, v in args.items()}


@pytest.mark.parametrize("module,name,cases", CASES, ids=[c[1] for c in CASES])
def test_compiles_for_sm90(module, name, cases):
    kernel = _kernel(module, name)
    for args in cases():
        for variant in (args, _ones(args)):
            _check_ptx(name, _compile(kernel, variant), variant)


def _check_ptx(name, compiled, args):
    ptx = compiled.asm.get("ptx")
    assert ptx, f"{name}: no PTX for {args}"
    # Bitwise GPU/CPU parity needs IEEE float arithmetic: no approximate division or
    # reciprocal, no flush-to-zero (Triton's `/` on fp32 is div.full.f32).
    approx = [
        line.strip()
        for line in ptx.splitlines()
        if any(op in line for op in ("div.full", "div.approx", "rcp.approx", ".ftz."))
        and not (name in _F64_EXP and "abs.ftz.f32" in line)
    ]
    assert not approx, f"{name}: non-IEEE float instructions {approx[:3]}"


_TRITON_DTYPES = {
    "float32": "*fp32",
    "float64": "*fp64",
    "float16": "*fp16",
    "bfloat16": "*bf16",
    "int32": "*i32",
    "int64": "*i64",
    "uint64": "*u64",
    "bool": "*i1",
    "uint8": "*u8",
    "int8": "*i8",
}


def _signature_of(kernel, kwargs):
    """The Triton signature a launch with these arguments specialises to: pointers by dtype,
    the kernel's constexprs as values, integers as i32/i64 by range, floats as fp32."""
    constexpr_names = {kernel.arg_names[i] for i in kernel.constexprs}
    args = {}
    for name in kernel.arg_names:
        value = kwargs.get(name)
        if name in constexpr_names:
            args[name] = _c(value)
        elif value is None:
            args[name] = _c(None)
        elif hasattr(value, "dtype"):
            args[name] = _TRITON_DTYPES[str(value.dtype).removeprefix("torch.")]
        elif isinstance(value, bool):
            args[name] = "i1"
        elif isinstance(value, int):
            args[name] = "i32" if -(2**31) <= value < 2**31 else "i64"
        else:
            args[name] = "fp32"
    return args


def _specialisation(sig):
    """What makes two signatures compile differently beyond constant values: pointer dtypes,
    scalar types, and the constexprs that are flags or None."""
    return tuple(
        (n, v if not (isinstance(v, tuple) and not isinstance(v[1], (bool, type(None)))) else "c")
        for n, v in sig.items()
    )


def _generated_signatures(name):
    """One signature per specialisation of the random launches ``fdkit.cases`` makes of
    ``name`` at GPU sizes (both index dtypes): int32/int64 buffers, optional pointers present
    and None, each flag as drawn. The compile check follows the case generators, so a kernel
    added to the contract table is compiled without a line here."""
    import torch

    import fdkit.cases as fdcases

    kernel = _kernel_any(name)
    seen = {}
    for idx in (torch.int32, torch.int64):
        for seed in range(40):
            kwargs, _ = fdcases.make_case(name, seed, idx, scale="large").build()
            sig = _signature_of(kernel, kwargs)
            seen.setdefault(_specialisation(sig), sig)
    return list(seen.values())


def _kernel_any(name):
    from fastdispatch.ops import triton_kernels

    kernel = triton_kernels.kernel(name)
    assert isinstance(kernel, triton.runtime.JITFunction), kernel
    return kernel


def _generated_kernels():
    import fdkit.cases as fdcases

    return list(fdcases.KERNELS)


@pytest.mark.parametrize("name", _generated_kernels())
def test_the_generated_launches_compile_for_sm90(name):
    kernel = _kernel_any(name)
    for args in _generated_signatures(name):
        for variant in (args, _ones(args)):
            _check_ptx(name, _compile(kernel, variant), variant)
