"""The PNG: launch overhead bars, and spec-decode step latency vs batch size per vocab size.

Drawn from the run's JSON document only (so a saved JSON can be re-plotted:
``python -c "import json,bench._plot as p; p.plot(json.load(open('run.json')), 'run.png')"``).
Panels with nothing measured say so instead of disappearing, so the layout is the same every run.
"""

from __future__ import annotations

from ._rows import rows_of

# row name -> (label in the legend, colour, marker)
_STEP_STYLE = [
    ("stock", "vLLM stock", "#c0392b", "o"),
    ("install(fused)", "vLLM + install(fused)", "#8e44ad", "D"),
    ("install()", "vLLM + install()", "#e67e22", "s"),
    ("ops.rejection_sample", "fastdispatch.ops", "#2980b9", "^"),
    ("ops.fused", "fastdispatch fused", "#27ae60", "v"),
    ("memcpy", "memcpy floor", "#7f8c8d", "."),
]


def _style(row_name):
    for key, label, colour, marker in _STEP_STYLE:
        if key in row_name:
            return label, colour, marker
    return row_name, None, "x"


def _empty(ax, text):
    ax.text(
        0.5,
        0.5,
        text,
        ha="center",
        va="center",
        transform=ax.transAxes,
        fontsize=9,
        color="#555555",
        wrap=True,
    )
    ax.set_xticks([])
    ax.set_yticks([])


def _launch_panel(ax, doc):
    groups = [g for g in doc["groups"] if g["suite"] == "launch" and g["status"] == "ok"]
    bars = []
    for g in groups:
        short = "override" if g["id"].endswith("override") else "owner chain"
        for r in rows_of(g):
            if r.ok:
                bars.append((f"{short}: {r.name}", r.ns.median, r.ns.q1, r.ns.q3))
    if not bars:
        _empty(ax, "launch overhead: not measured in this run")
        ax.set_title("Launch overhead")
        return
    labels = [
        b[0].replace("fastdispatch ", "fd ").replace("(pure-Python twin)", "(twin)") for b in bars
    ]
    med = [b[1] for b in bars]
    err = [[b[1] - b[2] for b in bars], [b[3] - b[1] for b in bars]]
    colours = [
        "#c0392b"
        if "vLLM" in lab
        else "#7f8c8d"
        if "direct" in lab
        else "#bdc3c7"
        if "floor" in lab or "NullSink" in lab
        else "#e67e22"
        if "twin" in lab
        else "#2980b9"
        for lab in labels
    ]
    y = range(len(bars))
    ax.barh(list(y), med, xerr=err, color=colours, capsize=2)
    ax.set_yticks(list(y))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("ns per launch (median, IQR whiskers; log scale)")
    ax.set_title("Launch overhead")
    for yi, m in zip(y, med):
        ax.text(m, yi, f" {m:,.0f}", va="center", fontsize=7)


def _step_panel(ax, doc, V, mode):
    title = f"{mode} step, V={V}"
    groups = [
        g
        for g in doc["groups"]
        if g["suite"] == "spec_decode"
        and g["status"] == "ok"
        and g["params"].get("V") == V
        and g["params"].get("mode") == mode
    ]
    if not groups:
        _empty(ax, f"{mode} step, V={V}: not measured in this run")
        ax.set_title(title)
        return
    k = max(g["params"]["k"] for g in groups)  # the largest draft count measured
    series = {}
    for g in groups:
        if g["params"]["k"] != k:
            continue
        for r in rows_of(g):
            if r.ok:
                series.setdefault(r.name, []).append(
                    (g["params"]["B"], r.ns.median / 1e6, r.ns.q1 / 1e6, r.ns.q3 / 1e6)
                )
    for name, pts in series.items():
        pts.sort()
        label, colour, marker = _style(name)
        xs = [p[0] for p in pts]
        ax.plot(
            xs,
            [p[1] for p in pts],
            marker=marker,
            color=colour,
            label=label,
            linewidth=1.2,
            markersize=4,
            linestyle=":" if "memcpy" in name else "-",
        )
        ax.fill_between(
            xs, [p[2] for p in pts], [p[3] for p in pts], color=colour, alpha=0.12, linewidth=0
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size B (requests)")
    ax.set_ylabel("ms per step (median, IQR band)")
    ax.set_title(f"{title}, {k} drafts/request")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, loc="upper left")


def plot(doc: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from pathlib import Path

    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(18, 9))
    grid = fig.add_gridspec(2, 3, width_ratios=[1.25, 1, 1])
    _launch_panel(fig.add_subplot(grid[:, 0]), doc)
    for row, mode in enumerate(("greedy", "random")):
        for col, V in enumerate((32000, 128256)):
            _step_panel(fig.add_subplot(grid[row, col + 1]), doc, V, mode)
    m = doc["machine"]
    i = doc["interpreters"]["main"]
    fig.suptitle(
        f"fastdispatch bench ({doc['preset']}) {doc['created'][:16]}Z — {m['cpu_model']}, "
        f"{m['cpu_count']} CPUs, torch {i['torch']}, backend {i['fastdispatch_backend']}, "
        f"vLLM {doc['vllm'].get('version') or 'n/a'}",
        fontsize=10,
    )
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
