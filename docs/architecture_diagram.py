"""Draw docs/architecture.png: the launch path, the registration pass and where each piece lives.

    python docs/architecture_diagram.py            # writes docs/architecture.png next to this file
    python docs/architecture_diagram.py out.svg    # any format matplotlib writes

The diagram is data (the ``BOXES`` and ``ARROWS`` tables below) drawn with plain matplotlib
patches, so it renders wherever matplotlib does (no graphviz) and a change to the architecture is a
change to a table. ``docs/architecture.md`` explains every box.
"""

import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

# Colours by layer.
VLLM = "#fde2c8"  # vLLM's own code
GLUE = "#fff3b0"  # fastdispatch.vllm
RUNTIME = "#cfe3ff"  # fastdispatch runtime (compiled _core / twin _core_py)
REGISTRY = "#d9f2d9"  # registry and rebinding pass
KERNELS = "#f4d0e4"  # kernels_cpu
OPS = "#e4dcf5"  # fastdispatch.ops and our Triton kernels

# name: (x, y, width, height, colour, title, body lines, file path). Coordinates: 0..100 each way,
# (x, y) is the lower-left corner.
BOXES = {
    # -- the launch path, every call (centre column) --------------------------------------------
    "call": (
        36,
        86,
        29,
        10,
        VLLM,
        "vLLM call site",
        [
            "rejection_sample(...)  calls",
            "_rejection_greedy_sample(out, cu, draft, argmax, bonus, ...)",
        ],
        "vllm/v1/sample/rejection_sampler.py",
    ),
    "owner": (
        36,
        72,
        29,
        10,
        RUNTIME,
        "launch owner  .__call__",
        [
            "vLLM's _DecoratedTritonJitKernel: __call__ = owner_call_method",
            "(compiled glue);  ours: LaunchOwner (kernel_dispatcher)",
            "spec = dispatch_fn(*args)  ->  (grid, launch_kwargs)",
        ],
        "fastdispatch/_vllm_owner.pyx, _owner.pyx  (patched in by vllm/_owners.py)",
    ),
    "planner": (
        36,
        58,
        29,
        10,
        RUNTIME,
        "launch_owner  +  binding planner",
        [
            "PlanCache (same keys as last launch?)  ->  LaunchBindingPlan:",
            "input x -> x | x_ptr | X | X_PTR;  x_stride_d <- x.stride(d)",
            "kernel is a KernelOverride  ->  straight into its slots",
        ],
        "fastdispatch/_owner.pyx, _plan.pyx  (rules: _planner.py)",
    ),
    "override": (
        36,
        44,
        29,
        10,
        RUNTIME,
        "KernelOverride.launch",
        [
            "launch kwargs + planned inputs/strides -> C slot array",
            "(tables from the bind layout, keys matched by pointer)",
            "-> PyObject_Vectorcall(impl)",
        ],
        "fastdispatch/_override.pyx,  _bindcheck.py",
    ),
    "wrapper": (
        36,
        30,
        29,
        10,
        KERNELS,
        "kernels_cpu wrapper  (def)",
        [
            "rejection_greedy_sample_kernel(...): check_index / check_tensor",
            "-> IBuf pointers (int32 | int64);  errors name the argument",
            "nt = threads_for(work)",
        ],
        "kernels_cpu/_sampling.pyx,  _buffers.pxd,  _parallel.pyx",
    ),
    "loop": (
        36,
        16,
        29,
        10,
        KERNELS,
        "nogil loop",
        [
            "_run_rows: for / prange(B) over requests, raw pointers,",
            "buffers read in place, outputs at the caller's dtype",
            "(tiny serial launches keep the GIL: cheaper than a hand-off)",
        ],
        "kernels_cpu/_sampling.pyx",
    ),
    # -- registration, once (left column) --------------------------------------------------------
    "register": (
        1.5,
        72,
        28.5,
        10,
        REGISTRY,
        "register_kernels({qualname: impl})",
        [
            "all or nothing, under a lock; warns on overwrite",
            "_resolve_kernel: 'pkg.mod.attr' | 'pkg.mod.Class.attr'",
            "-> (host, attr)",
        ],
        "fastdispatch/_registration.py",
    ),
    "bind": (
        1.5,
        58,
        28.5,
        10,
        REGISTRY,
        "KernelOverride(original, impl)",
        [
            "bind check: impl params vs kernel arg names",
            "-> BindLayout (by name | positional), or TypeError",
            "naming the parameters",
        ],
        "fastdispatch/_bindcheck.py",
    ),
    "rebind": (
        1.5,
        44,
        28.5,
        10,
        REGISTRY,
        "_rebind_kernels: one pass over sys.modules",
        [
            "by identity only: module attrs and `from` copies,",
            "owners' __dict__['kernel'] (drop _kernel_arg_names),",
            "class attrs; then the defining attribute",
        ],
        "fastdispatch/_registration.py",
    ),
    "registry": (
        1.5,
        30,
        28.5,
        10,
        REGISTRY,
        "_registry[qualname]",
        [
            "(original, impl) + override, host, attr",
            "unregister_kernels / overrides(...) / verify()",
            "restore or check every holder",
        ],
        "fastdispatch/_registration.py",
    ),
    "backend": (
        1.5,
        12,
        28.5,
        12,
        RUNTIME,
        "backend choice  (import time)",
        [
            "BACKEND 'cython': fastdispatch/_core -> 4 .so modules",
            "BACKEND 'python': fastdispatch/_core_py.py, the twin",
            "(same hot path, shared cold code, same tests);",
            "FASTDISPATCH_PURE_PYTHON=1 or no .so -> twin",
        ],
        "fastdispatch/_backend.py",
    ),
    # -- integrations and our ops (right column) ------------------------------------------------
    "plugin": (
        71,
        84,
        27.5,
        12,
        GLUE,
        "fastdispatch.vllm.install()",
        [
            "vllm.general_plugins entry point -> plugin()",
            "1. dispatcher module API -> fastdispatch's",
            "2. patch vLLM's launch owners (compiled __call__/launch)",
            "3. register the 11 kernels_cpu kernels (front keeps",
            "   them standing after the platform hook)",
        ],
        "fastdispatch/vllm/  (one module per concern)",
    ),
    "ops": (
        71,
        66,
        27.5,
        12,
        OPS,
        "fastdispatch.ops  (our ops)",
        [
            "rejection_sample, expand_batch_to_tokens, ...",
            "each launches through a LaunchOwner",
            "import: no Triton driver -> register_kernels(",
            "  kernels_cpu over our kernels)  (RUN_MODE 'cpu')",
        ],
        "fastdispatch/ops/sampling.py, spec_decode.py, workers.py",
    ),
    "triton": (
        71,
        48,
        27.5,
        12,
        OPS,
        "our Triton kernels",
        [
            "11 contracts, vLLM's arguments and names",
            "GPU: owner launches kernel[grid](**kw) natively",
            "TRITON_INTERPRET=1: interpreted on CPU tensors",
            "(differential tests against kernels_cpu)",
        ],
        "fastdispatch/ops/triton_kernels/",
    ),
    "fused": (
        71,
        30,
        27.5,
        12,
        OPS,
        "fused random sampler  (opt-in)",
        [
            "rejection_sample_fused: Gumbel-max noise drawn",
            "in the kernel from Philox-4x32-10, no [B, V] tensor",
            "install(fused_noise=True) swaps vLLM's functions",
            "(its own nogil loops in kernels_cpu/_fused.pyx)",
        ],
        "fastdispatch/ops/fused.py -> kernels_cpu/_fused.pyx",
    ),
    "reference": (
        71,
        12,
        27.5,
        12,
        KERNELS,
        "plain-torch references",
        [
            "one per kernel, same names and signatures",
            "the oracle of the differential tests",
            "(hypothesis, int32 and int64, canaries)",
        ],
        "fdkit/reference/",
    ),
}

# (from, to, label, style[, where]): style "launch" (solid, every call) or "once" (dashed,
# registration/install time); ``where`` overrides the start/end points and the label's position.
ARROWS = [
    ("call", "owner", "", "launch"),
    ("owner", "planner", "", "launch"),
    ("planner", "override", "", "launch"),
    ("override", "wrapper", "", "launch"),
    ("wrapper", "loop", "", "launch"),
    ("register", "bind", "", "once"),
    ("bind", "rebind", "", "once"),
    ("rebind", "registry", "", "once"),
    (
        "rebind",
        "owner",
        "owner.kernel\n:= override",
        "once",
        {"p": (30, 51), "q": (36, 74), "label": (33, 62.5)},
    ),
    (
        "plugin",
        "register",
        "registers the 11\nkernels_cpu kernels",
        "once",
        {"p": (71, 86), "q": (16, 82), "label": (29.5, 84.6)},
    ),
    (
        "plugin",
        "owner",
        "patches\nowners",
        "once",
        {"p": (71, 85), "q": (65, 79.5), "label": (68, 80.2)},
    ),
    ("ops", "owner", "our\nowners", "launch", {"p": (71, 73), "q": (65, 75), "label": (68, 71.2)}),
    (
        "planner",
        "triton",
        "not overridden:\nkernel[grid](**kw)",
        "launch",
        {"p": (65, 61), "q": (71, 56), "label": (68, 61.8)},
    ),
]


def _edge(box, toward):
    """The point on ``box``'s border facing the centre of ``toward``."""
    x, y, w, h = box[:4]
    tx, ty, tw, th = toward[:4]
    cx = x + w / 2
    ox, oy = tx + tw / 2, ty + th / 2
    if ty >= y + h:  # target above
        return (min(max(ox, x + 2), x + w - 2), y + h)
    if ty + th <= y:  # target below
        return (min(max(ox, x + 2), x + w - 2), y)
    return (x + w if ox > cx else x, min(max(oy, y + 1), y + h - 1))


def draw(path):
    fig = plt.figure(figsize=(20, 11.5), dpi=100)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.axis("off")

    for x, y, w, h, colour, title, body, where in BOXES.values():
        ax.add_patch(
            FancyBboxPatch(
                (x, y),
                w,
                h,
                boxstyle="round,pad=0.25,rounding_size=0.8",
                facecolor=colour,
                edgecolor="#444444",
                linewidth=1.1,
            )
        )
        ax.text(
            x + 0.8,
            y + h - 1.0,
            title,
            ha="left",
            va="top",
            fontsize=10.5,
            fontweight="bold",
            family="DejaVu Sans",
        )
        ax.text(
            x + 0.8,
            y + h - 3.0,
            "\n".join(body),
            ha="left",
            va="top",
            fontsize=8.3,
            family="DejaVu Sans Mono",
            linespacing=1.3,
        )
        ax.text(
            x + w - 0.6,
            y + 0.7,
            where,
            ha="right",
            va="bottom",
            fontsize=7.8,
            family="DejaVu Sans Mono",
            color="#1f4e99",
            style="italic",
        )

    for src, dst, label, style, *where in ARROWS:
        a, b = BOXES[src], BOXES[dst]
        where = where[0] if where else {}
        p, q = where.get("p") or _edge(a, b), where.get("q") or _edge(b, a)
        solid = style == "launch"
        ax.add_patch(
            FancyArrowPatch(
                p,
                q,
                arrowstyle="-|>",
                mutation_scale=14,
                linewidth=1.6 if solid else 1.2,
                linestyle="-" if solid else (0, (4, 3)),
                color="#222222" if solid else "#2c7a2c",
                shrinkA=2,
                shrinkB=2,
                connectionstyle="arc3,rad=0.0",
            )
        )
        if label:
            mx, my = where.get("label") or ((p[0] + q[0]) / 2, (p[1] + q[1]) / 2 + 0.6)
            ax.text(
                mx,
                my,
                label,
                ha="center",
                va="bottom",
                fontsize=7.8,
                color="#333333",
                bbox={
                    "boxstyle": "round,pad=0.15",
                    "facecolor": "white",
                    "edgecolor": "none",
                    "alpha": 0.85,
                },
            )

    ax.text(
        50.5,
        99.4,
        "fastdispatch: from a vLLM call site to a nogil loop",
        ha="center",
        va="top",
        fontsize=15,
        fontweight="bold",
    )
    ax.text(
        15.75,
        97.5,
        "registration (once)",
        ha="center",
        fontsize=11.5,
        color="#2c7a2c",
        fontweight="bold",
    )
    ax.text(
        84.75,
        97.5,
        "integration, our ops, tests",
        ha="center",
        fontsize=11.5,
        color="#5a3d8a",
        fontweight="bold",
    )
    legend = [
        (VLLM, "vLLM"),
        (GLUE, "fastdispatch.vllm"),
        (RUNTIME, "runtime (_core / twin)"),
        (REGISTRY, "registry"),
        (KERNELS, "kernels_cpu"),
        (OPS, "fastdispatch.ops"),
    ]
    for i, (colour, text) in enumerate(legend):
        lx = 2 + i * 11.5
        ax.add_patch(
            FancyBboxPatch(
                (lx, 3.2), 1.6, 1.6, boxstyle="square,pad=0", facecolor=colour, edgecolor="#444444"
            )
        )
        ax.text(lx + 2.2, 4.0, text, va="center", fontsize=9)
    ax.plot([71, 75], [4.0, 4.0], color="#222222", linewidth=1.6)
    ax.text(75.8, 4.0, "every launch", va="center", fontsize=9)
    ax.plot([84, 88], [4.0, 4.0], color="#2c7a2c", linewidth=1.2, linestyle=(0, (4, 3)))
    ax.text(88.8, 4.0, "registration / install", va="center", fontsize=9)

    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "architecture.png")
    draw(out)
    print(out)
