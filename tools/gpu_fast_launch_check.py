#!/usr/bin/env python
"""GPU check: launches through ``fastdispatch.fast_launch`` are bit-identical to Triton's own.

    python setup.py build_ext --inplace       # builds fastdispatch._fastlaunch
    python tools/gpu_fast_launch_check.py     # exit status 0: every output identical

Why: the fast path computes its own key and calls the compiled kernel's launcher itself; a key
that is too coarse (an unaligned pointer served by a kernel compiled for aligned ones, an int
that was 1 at compile time) or a wrong argument order would show up as different outputs.

For our 11 Triton kernels (``fdkit.cases`` cases: several sizes, int32 and int64 index buffers,
guards around poisoned outputs) and for generic kernels that mix pointers at random byte offsets,
ints of every range class (including 1 and multiples of 16), floats, bools, ``None``, tuples of
pointers and of numbers, constexprs, launch options and callable grids, every case is built twice
from the same seed and launched once by Triton (``kernel[grid](...)``) and once by
``fast_launch(kernel)``, whose cache was warmed by an earlier build of the same case, so the
compared launch takes the fast path (checked: the launch must not have gone through Triton's
``run``). The arguments are passed with a random split between positional and keyword. Every
compared buffer, guards included, must be bit-identical. The generic kernels also run through a
``LaunchOwner`` whose ``.kernel`` is the fast-launch object. Both backends (compiled and twin) are
checked.

Prints one PASS/FAIL line per kernel and a summary; exits 1 on any mismatch, 2 when it cannot
run. ``--json PATH`` writes the counts.
"""

import argparse
import json
import os
import platform
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

try:
    import triton  # noqa: E402
    import triton.language as tl  # noqa: E402
except ImportError:
    print("gpu_fast_launch_check: triton is not installed", file=sys.stderr)
    sys.exit(2)

import fastdispatch  # noqa: E402
import fdkit.cases as fdcases  # noqa: E402
from fastdispatch import _fastlaunch_py  # noqa: E402
from fastdispatch.ops import triton_kernels  # noqa: E402


def _parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=4, help="random cases per kernel, scale, dtype")
    p.add_argument("--generic", type=int, default=60, help="random generic launches per kernel")
    p.add_argument("--json", default="", help="write the results here")
    return p.parse_args()


# -- generic kernels ----------------------------------------------------------------------------


@triton.jit
def mixed_kernel(x_ptr, y_ptr, out_ptr, n, alpha, shift, extra_ptr, flag, BLOCK: tl.constexpr):
    """out = x * alpha + y + (shift % 7) [+ extra] [negated when flag]: pointers, an int, a
    float, an optional pointer (None is a constexpr), a bool, a constexpr."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m).to(tl.float32) * alpha + tl.load(y_ptr + offs, mask=m).to(
        tl.float32
    )
    v = v + (shift % 7)
    if extra_ptr is not None:
        v = v + tl.load(extra_ptr + offs, mask=m).to(tl.float32)
    if flag:
        v = -v
    tl.store(out_ptr + offs, v.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def strided_kernel(src, dst, n, stride_src, stride_dst, scale, bias, BLOCK: tl.constexpr):
    """dst[i * stride_dst] = src[i * stride_src] * scale + bias: strides that are 1 (Triton makes
    them constexpr) or not, divisible by 16 or not."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(src + offs * stride_src, mask=m)
    tl.store(dst + offs * stride_dst, v * scale + bias, mask=m)


@triton.jit
def wide_kernel(
    x,
    y,
    out,
    n,
    a1,
    a2,
    a3,
    a4,
    a5,
    a6,
    p1,
    p2,
    p3,
    p4,
    p5,
    p6,
    b1,
    b2,
    b3,
    b4,
    BLOCK: tl.constexpr,
):
    """A 20-argument kernel (plus its constexpr): 9 pointers, 11 ints."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    s = a1 + a2 * 2 + a3 * 3 + a4 * 5 + a5 * 7 + a6 * 11 + b1 + b2 + b3 + b4
    v = tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m) + (s % 13)
    v = v + tl.load(p1 + offs, mask=m) + tl.load(p2 + offs, mask=m) + tl.load(p3 + offs, mask=m)
    v = v + tl.load(p4 + offs, mask=m) + tl.load(p5 + offs, mask=m) + tl.load(p6 + offs, mask=m)
    tl.store(out + offs, v, mask=m)


@triton.jit
def tuple_kernel(ptrs, coefs, n, BLOCK: tl.constexpr):
    """out = x * coefs[0] + y * coefs[1] + (coefs[2] % 7): tuple arguments, one of pointers
    (x, y, out) at random offsets, one of a float and two ints (1 or not, any range class)."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(ptrs[0] + offs, mask=m).to(tl.float32)
    y = tl.load(ptrs[1] + offs, mask=m).to(tl.float32)
    v = x * coefs[0] + y * coefs[1] + (coefs[2] % 7)
    tl.store(ptrs[2] + offs, v.to(ptrs[2].dtype.element_ty), mask=m)


_INTS = [1, 2, 3, 16, 17, 32, 48, 100, 2**31 - 1, 2**31, 2**31 + 16, 2**40 + 3, -5, -16]


def _offset_view(n, dtype, rng, fill=None):
    """A tensor of ``n`` elements starting at a random element offset (so its pointer is
    16-byte aligned or not) inside a larger buffer; returns (view, backing)."""
    off = rng.choice([0, 0, 1, 2, 3, 4, 8])
    backing = torch.empty(n + off + 8, dtype=dtype, device="cuda")
    if fill is None:
        gen = torch.Generator(device="cuda").manual_seed(rng.randrange(2**31))
        backing.copy_(
            (torch.randn(backing.shape, device="cuda", generator=gen) * 8).to(dtype)
            if dtype.is_floating_point
            else torch.randint(-50, 50, backing.shape, device="cuda", generator=gen).to(dtype)
        )
    else:
        backing.fill_(fill)
    return backing[off : off + n], backing


def _generic_case(kname, seed):
    """(kernel, grid, names, values, compared buffers) for one random generic launch."""
    rng = random.Random(seed)
    n = rng.choice([1, 7, 16, 100, 1000, 1024, 4097])
    block = rng.choice([64, 128, 256])
    if kname == "mixed_kernel":
        dt = rng.choice([torch.float32, torch.float16, torch.bfloat16])
        x, _ = _offset_view(n, dt, rng)
        y, _ = _offset_view(n, dt, rng)
        out, out_b = _offset_view(n, dt, rng, fill=-7.0)
        extra = _offset_view(n, dt, rng)[0] if rng.random() < 0.5 else None
        vals = dict(
            x_ptr=x,
            y_ptr=y,
            out_ptr=out,
            n=n,
            alpha=rng.choice([0.5, 1.0, -2.25, 3.0]),
            shift=rng.choice(_INTS),
            extra_ptr=extra,
            flag=rng.random() < 0.5,
            BLOCK=block,
        )
        kernel, compared = mixed_kernel, {"out": out_b}
    elif kname == "strided_kernel":
        ss, sd = rng.choice([1, 2, 3, 16, 17]), rng.choice([1, 2, 16])
        src, _ = _offset_view(n * ss, torch.float32, rng)
        dst, dst_b = _offset_view(n * sd, torch.float32, rng, fill=-3.0)
        vals = dict(
            src=src,
            dst=dst,
            n=n,
            stride_src=ss,
            stride_dst=sd,
            scale=rng.choice([1.0, 0.25, -1.5]),
            bias=rng.choice([0.0, 2.0, -0.0]),
            BLOCK=block,
        )
        kernel, compared = strided_kernel, {"dst": dst_b}
    elif kname == "tuple_kernel":
        dt = rng.choice([torch.float32, torch.float16])
        x, _ = _offset_view(n, dt, rng)
        y, _ = _offset_view(n, dt, rng)
        out, out_b = _offset_view(n, dt, rng, fill=-5.0)
        coefs = (rng.choice([0.5, 1.0, -2.25]), rng.choice([1, 2, 3, 16, -5]), rng.choice(_INTS))
        vals = dict(ptrs=(x, y, out), coefs=coefs, n=n, BLOCK=block)
        kernel, compared = tuple_kernel, {"out": out_b}
    else:
        vals = {}
        for name in ("x", "y", "out", "p1", "p2", "p3", "p4", "p5", "p6"):
            vals[name] = _offset_view(n, torch.float32, rng, fill=-1.0 if name == "out" else None)
        compared = {"out": vals["out"][1]}
        vals = {k: v[0] for k, v in vals.items()}
        vals["n"] = n
        for name in ("a1", "a2", "a3", "a4", "a5", "a6", "b1", "b2", "b3", "b4"):
            vals[name] = rng.choice(_INTS)
        vals["BLOCK"] = block
        kernel = wide_kernel
        vals = {k: vals[k] for k in kernel.arg_names}
    grid_n = triton.cdiv(n, block)
    grid = rng.choice(
        [
            (grid_n,),
            [grid_n, 1],
            (grid_n, 1, 1),
            lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
        ]
    )
    opts = {"num_warps": rng.choice([1, 2, 4])} if rng.random() < 0.3 else {}
    return kernel, grid, vals, opts, compared


def _split(rng, kernel, kw):
    """The same launch arguments with a random positional prefix (in the kernel's order)."""
    names = list(kernel.arg_names)
    k = 0
    limit = rng.randrange(len(names) + 1)
    while k < limit and names[k] in kw:
        k += 1
    args = tuple(kw[nm] for nm in names[:k])
    rest = {nm: v for nm, v in kw.items() if nm not in names[:k]}
    return args, rest


def _equal(a, b):
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    )


def _launch_counts(fl):
    st = fl.state
    return st.stats["learned"] + st.stats["triton"]


def _warm(fl, case, rng, kernel):
    """Launch builds of ``case`` until one is served from our cache (the first launch of a key
    goes through Triton's run; a Triton that injects options we did not read yet takes one
    more)."""
    for _ in range(3):
        kw_w, _ = case.build("cuda")
        a, k = _split(rng, kernel, kw_w)
        before = _launch_counts(fl)
        fl[case.grid](*a, **k)
        if _launch_counts(fl) == before:
            return


def _compared(fl, before, why, where, bufs_a, bufs_b, failures):
    """Judge one compared launch of ``fl``: it must have taken the fast path (no launch counted
    since ``before``; the state's ``why`` attribute says why not) and its buffers must equal the
    other launch's bit for bit. Appends each failure; returns 1 for a slow launch, else 0."""
    slow = 0
    if _launch_counts(fl) != before:
        slow = 1
        failures.append(f"{where}: not on the fast path ({getattr(fl.state, why)})")
    torch.cuda.synchronize()
    for buf in bufs_a:
        if not _equal(bufs_a[buf], bufs_b[buf]):
            failures.append(f"{where}: {buf} differs")
    return slow


def check_contract(name, seeds, flcls, rng):
    kernel = triton_kernels.kernel(name)
    fl = flcls(kernel)
    n, failures, slow = 0, [], 0
    for scale in ("small", "large"):
        for idx in (torch.int32, torch.int64):
            for seed in range(seeds):
                case = fdcases.make_case(name, seed, idx, scale)
                if not all(case.grid):
                    continue
                n += 1
                where = f"{scale}/{str(idx)[6:]}/seed={seed}"
                _warm(fl, case, rng, kernel)
                kw_t, bufs_t = case.build("cuda")
                kernel[case.grid](**kw_t)
                kw_f, bufs_f = case.build("cuda")
                a, k = _split(rng, kernel, kw_f)
                before = _launch_counts(fl)
                fl[case.grid](*a, **k)
                slow += _compared(fl, before, "last_slow", where, bufs_t, bufs_f, failures)
    return n, failures, slow


def check_generic(kname, count, flcls, rng):
    kernel = globals()[kname]
    fl = flcls(kernel)
    # a launch owner whose dispatch function takes the kernel's argument names (they bind by
    # name) and returns the grid and the launch options
    ns = {}
    params = ", ".join(kernel.arg_names)
    exec(f"def dispatch({params}, _grid, _opts):\n    return _grid, dict(_opts)\n", ns)
    owner_fl = fastdispatch.kernel_dispatcher(kernel=fl)(ns["dispatch"])
    n, failures, slow = 0, [], 0
    for seed in range(count):
        n += 1
        for rep in range(3):  # rep 0 warms our cache; 1 and 2 are compared
            _, grid, vals, opts, compared = _generic_case(kname, seed)
            if rep == 0:  # twice: the first launch of a key goes through Triton's run
                fl[grid](**vals, **opts)
                fl[grid](**vals, **opts)
                continue
            _, grid, vals_t, opts, compared_t = _generic_case(kname, seed)
            kernel[grid](**vals_t, **opts)
            before = _launch_counts(fl)
            if rep == 1:
                a, k = _split(rng, kernel, vals)
                fl[grid](*a, **k, **opts)
            else:  # through a launch owner whose .kernel is the fast-launch object
                owner_fl(**vals, _grid=grid, _opts=opts)
            where = f"seed={seed} rep={rep}"
            slow += _compared(fl, before, "disabled", where, compared, compared_t, failures)
    return n, failures, slow


def check_options_and_parameters(kname, count, flcls, rng):
    """A launch option on one launch (``debug=True``, ``num_warps=8``) must not change the path
    of later launches without it; ``nn.Parameter`` arguments take the fast path as tensors do
    (same outputs as Triton's). Counted with ``stats()``: after the warm-up, no fallback."""
    kernel = mixed_kernel
    fl = flcls(kernel)
    n, failures, slow = 0, [], 0
    x = torch.randn(4096, device="cuda")
    y = torch.nn.Parameter(torch.randn(4096, device="cuda"), requires_grad=False)
    for opts in ({}, {"debug": True}, {"num_warps": 8}, {}):
        for rep in range(3):
            out_f = torch.empty(4096, device="cuda")
            out_t = torch.empty(4096, device="cuda")
            fl[(4,)](x, y, out_f, 4096, 1.5, 3, None, False, BLOCK=1024, **opts)
            kernel[(4,)](x, y, out_t, 4096, 1.5, 3, None, False, BLOCK=1024, **opts)
            torch.cuda.synchronize()
            n += 1
            if not _equal(out_f, out_t):
                failures.append(f"{opts} rep={rep}: output differs")
    st = fl.stats()
    new_keys = st["fallbacks"].get("a new key", 0)
    other = {k: v for k, v in st["fallbacks"].items() if k != "a new key"}
    slow = sum(other.values()) + max(0, new_keys - 6)  # 3 keys, each at most twice to learn
    if not st["fast_path"] or other or new_keys > 6:
        failures.append(f"stats after the launches: {st}")
    print(f"     stats(): {st}")
    return n, failures, slow


def main():
    args = _parse()
    if not torch.cuda.is_available():
        print("gpu_fast_launch_check: no CUDA device", file=sys.stderr)
        return 2
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, triton "
        f"{triton.__version__}, device {torch.cuda.get_device_name()}"
    )
    from fastdispatch import _fastlaunch

    results, total_fail = [], 0
    for label, flcls in (("compiled", _fastlaunch.FastLaunch), ("twin", _fastlaunch_py.FastLaunch)):
        rng = random.Random(1234)
        jobs = [(nm, check_contract, args.seeds) for nm in fdcases.KERNELS]
        jobs += [
            (nm, check_generic, args.generic)
            for nm in ("mixed_kernel", "strided_kernel", "wide_kernel", "tuple_kernel")
        ]
        jobs.append(("options_and_parameters", check_options_and_parameters, 0))
        for nm, fn, count in jobs:
            t0 = time.perf_counter()
            n, failures, slow = fn(nm, count, flcls, rng)
            ok = not failures and slow == 0
            print(
                f"{'PASS' if ok else 'FAIL'} {label:8s} {nm:42s} {n:4d} cases "
                f"{time.perf_counter() - t0:6.1f} s  not on the fast path: {slow}"
            )
            for f in failures[:5]:
                print(f"     {f}")
            sys.stdout.flush()
            total_fail += not ok
            results.append(
                dict(backend=label, kernel=nm, cases=n, failures=len(failures), slow=slow)
            )
    print(f"SUMMARY: {len(results) - total_fail}/{len(results)} PASS")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                dict(triton=triton.__version__, torch=torch.__version__, results=results),
                f,
                indent=1,
            )
    return 1 if total_fail else 0


if __name__ == "__main__":
    sys.exit(main())
