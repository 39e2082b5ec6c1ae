"""``python -m fastdispatch``: what this process would run, and whether every call site gets it.

    python -m fastdispatch info              # backend, OpenMP, versions, Triton mode, overrides
    python -m fastdispatch verify --ops      # import fastdispatch.ops, then check every holder
    python -m fastdispatch verify --vllm     # a vLLM CPU worker's start-up, then the same check

``verify`` exists because an override that some holder never sees fails silently: that call site
keeps launching the original kernel (on a CPU-only host, a Triton kernel that cannot run, or
vLLM's copying shim). :func:`fastdispatch.verify` finds such holders; this command makes the
question answerable from a shell or CI, with an exit status and ``--json`` for machines.

``info`` reads without side effects: it never imports vLLM (its version comes from the package
metadata) nor :mod:`fastdispatch.ops` (whose import registers ``kernels_cpu`` when Triton has no
driver) unless told to with ``--import``/``--ops``.

The report goes to stdout; anything the imported modules print (vLLM logs to stdout by default)
is sent to stderr while they run, so ``--json`` output stays parseable.
"""

import argparse
import contextlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import sys

__all__ = [
    "EXIT_IMPORT_FAILED",
    "EXIT_NO_VLLM",
    "EXIT_NOT_OURS",
    "EXIT_OK",
    "EXIT_STALE",
    "EXIT_USAGE",
    "collect_info",
    "collect_verify",
    "main",
]

#: Exit statuses of ``python -m fastdispatch`` (also in ``--help``).
EXIT_OK = 0
EXIT_STALE = 1  # a holder still points at an original kernel
EXIT_USAGE = 2  # argparse's own status for a bad command line
EXIT_NO_VLLM = 3  # --vllm, but vLLM cannot be imported by this Python
EXIT_NOT_OURS = 4  # --vllm: some of vLLM's kernels do not launch kernels_cpu via fastdispatch
EXIT_IMPORT_FAILED = 5  # a module named by --import (or --ops) failed to import

_EPILOG = f"""\
exit status:
  {EXIT_OK}  every holder of every registered kernel launches its override
  {EXIT_STALE}  some holder still points at an original kernel (verify)
  {EXIT_USAGE}  bad command line
  {EXIT_NO_VLLM}  --vllm given but vLLM is not importable in this Python
  {EXIT_NOT_OURS}  --vllm: some of vLLM's kernels do not launch kernels_cpu through fastdispatch
  {EXIT_IMPORT_FAILED}  a module to import (--import, --ops) raised
"""


class _Failure(Exception):
    """Stop with ``status`` and a message for the user (and the ``--json`` report)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _describe(obj):
    from ._registration import _describe as describe

    return describe(obj)


# -- facts ---------------------------------------------------------------------------------------


def _dist_version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _openmp_facts():
    """What ``kernels_cpu`` would do: OpenMP compiled in, and the threads a large launch uses."""
    try:
        import kernels_cpu
    except Exception as exc:  # noqa: BLE001 - an unbuilt checkout: report, don't fail
        return {"available": False, "error": f"{type(exc).__name__}: {exc}"}
    return {
        "available": True,
        "compiled": bool(kernels_cpu.openmp_enabled()),
        "threads": int(kernels_cpu.get_num_threads()),
        "parallel_threshold": int(kernels_cpu.parallel_threshold()),
        "omp_num_threads_env": os.environ.get("OMP_NUM_THREADS"),
    }


def _triton_module():
    """``fastdispatch.ops._triton`` -- without importing :mod:`fastdispatch.ops`.

    Importing the ops package registers ``kernels_cpu`` when Triton has no driver, which would
    change the very registry ``info`` reports. So unless the package is already imported, its
    ``_triton`` module (self-contained: it imports only ``os``, ``types`` and Triton) is loaded
    from its file under a private name, leaving ``sys.modules`` as it was.
    """
    loaded = sys.modules.get("fastdispatch.ops._triton")
    if loaded is not None:
        return loaded
    ops_spec = importlib.util.find_spec("fastdispatch.ops")
    for folder in ops_spec.submodule_search_locations or ():
        path = os.path.join(folder, "_triton.py")
        if os.path.exists(path):
            spec = importlib.util.spec_from_file_location("fastdispatch._cli_triton_probe", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise ImportError("fastdispatch.ops._triton not found")


def _triton_facts():
    """Triton's version, and how Triton kernels run here: native, interpreter, no driver, absent."""
    try:
        probe = _triton_module()
    except Exception as exc:  # noqa: BLE001 - Triton itself fails to import
        return {
            "mode": "error",
            "version": _dist_version("triton"),
            "driver": None,
            "error": f"{type(exc).__name__}: {exc}",
        }
    if not probe.HAS_TRITON:
        return {"mode": "absent", "version": None, "driver": None}
    version = getattr(probe.triton, "__version__", None) or _dist_version("triton")
    if probe.INTERPRET:
        return {"mode": "interpreter", "version": version, "driver": None}
    driver = probe.active_driver()
    return {"mode": "native" if driver else "no driver", "version": version, "driver": driver}


_TRITON_MODE_TEXT = {
    "native": "native driver ({driver}): Triton kernels launch on the device",
    "interpreter": "interpreter (TRITON_INTERPRET=1): Triton kernels run on CPU tensors, slowly",
    "no driver": "installed, no active driver: Triton kernels cannot launch here",
    "absent": "not installed: Triton kernels are plain functions here",
    "error": "import failed: {error}",
}


def _vllm_facts():
    """vLLM's distribution and version from package metadata; vLLM itself is not imported."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return {"present": False, "version": None, "distribution": None}
    dists = importlib.metadata.packages_distributions().get("vllm") or ["vllm"]
    for dist in dists:
        version = _dist_version(dist)
        if version is not None:
            return {"present": True, "version": version, "distribution": dist}
    return {"present": True, "version": None, "distribution": None}


def _overrides():
    """The registry as a list of ``{name, impl, original, forward}``, in registration order."""
    from ._registration import _registry, forward_mode

    return [
        {
            "name": name,
            "impl": _describe(entry.impl),
            "original": _describe(entry.original),
            "forward": forward_mode(entry.override),
        }
        for name, entry in list(_registry.items())
    ]


def collect_info():
    """Everything ``info`` reports, as a JSON-ready dict."""
    import fastdispatch

    try:
        import torch

        torch_version = torch.__version__
    except Exception:  # noqa: BLE001
        torch_version = None
    triton = _triton_facts()
    vllm = _vllm_facts()
    return {
        "fastdispatch": {"version": fastdispatch.__version__, "backend": fastdispatch.BACKEND},
        "openmp": _openmp_facts(),
        "versions": {"torch": torch_version, "triton": triton["version"], "vllm": vllm["version"]},
        "triton": triton,
        "vllm": vllm,
        "overrides": _overrides(),
        "fast_launch": _fast_launch_stats(),
    }


def _fast_launch_stats():
    """Every kernel given to ``fastdispatch.fast_launch`` in this process, with its fallbacks
    from the fast path by reason (``FastLaunch.stats()``); none in a fresh ``info`` process,
    so embedders call :func:`info` (or ``stats()``) from their own."""
    import sys

    planner = sys.modules.get("fastdispatch._fastlaunch_planner")
    return planner.launch_stats() if planner is not None else []


# -- verify --------------------------------------------------------------------------------------


def _import_modules(names):
    for name in names:
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - SystemExit from a module is a failure too
            raise _Failure(
                EXIT_IMPORT_FAILED, f"cannot import {name!r}: {type(exc).__name__}: {exc}"
            ) from exc


def vllm_worker_startup():
    """What a vLLM CPU worker runs at start-up that decides who launches its kernels, in its
    order; returns the current platform.

    ``WorkerBase.init_worker`` loads the general plugins (our ``vllm.general_plugins`` entry
    point among them), then -- vLLM 0.31+ -- runs the platform's
    ``register_triton_kernel_overrides``. Releases without that hook (0.27-0.30) replace the
    kernels in ``CPUModelRunner._postprocess_triton``, which the model runner's ``__init__``
    runs after the plugins; building a runner needs a model, so the method is run on a bare
    runner object (it reads nothing of the runner in those releases).
    """
    from vllm.platforms import current_platform
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    hook = getattr(type(current_platform), "register_triton_kernel_overrides", None)
    if hook is not None:
        current_platform.register_triton_kernel_overrides()
        return current_platform
    from vllm.v1.worker.cpu_model_runner import CPUModelRunner

    CPUModelRunner._postprocess_triton(CPUModelRunner.__new__(CPUModelRunner))
    return current_platform


def _startup_text(platform):
    """What :func:`vllm_worker_startup` ran after the plugins, in words."""
    if hasattr(type(platform), "register_triton_kernel_overrides"):
        return "platform hook run"
    return "CPUModelRunner._postprocess_triton run"


def _vllm_worker_sequence():
    """:func:`vllm_worker_startup`, with a missing vLLM reported as such."""
    try:
        if importlib.util.find_spec("vllm") is None:
            raise ImportError("no module named 'vllm'")
        import vllm.platforms  # noqa: F401
        import vllm.plugins  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        raise _Failure(
            EXIT_NO_VLLM,
            f"--vllm: vLLM is not importable by {sys.executable} ({type(exc).__name__}: {exc})",
        ) from exc
    return vllm_worker_startup()


def _vllm_report(platform):
    """Who launches each of vLLM's kernels on this release: ``ours`` (kernels_cpu through
    fastdispatch), ``vllm`` (left to vLLM: a signature we do not know, fastdispatch not
    installed -- ``why`` says which), ``absent`` (a kernel of other releases that this one
    lacks: ``why`` says "not in this release (removed in 0.34)" or "(added in 0.30)"),
    ``stale`` (ours is registered but some holder still launches vLLM's object),
    ``fastdispatch`` (another impl through fastdispatch), ``none`` (no override at all: the
    Triton kernel itself)."""
    import fastdispatch.vllm as fv

    from ._env import env_flag
    from ._registration import _registry
    from .vllm._plugin import _reason_to_stay_out

    installed = fv.installed()
    kernels, why = {}, {}
    if installed:
        for name, item in fv.kernel_report().items():
            kernels[name] = item["who"]
            if item["reason"]:
                why[name] = item["reason"]
    else:
        dispatcher = sys.modules.get("vllm.triton_utils.dispatcher")
        vllm_registry = getattr(dispatcher, "_registry", None)
        for name in fv.kernel_names():
            if name in _registry:
                kernels[name] = "fastdispatch"
            elif isinstance(vllm_registry, dict) and name in vllm_registry:
                kernels[name] = "vllm"
            elif dispatcher is None:
                kernels[name] = "vllm"  # 0.27-0.30: vLLM patches its kernels itself
            else:
                kernels[name] = "none"
        for name in fv.SAMPLING_NAMES:
            kernels[name] = "fastdispatch" if name in _registry else "vllm"
    reason = None
    if not installed:
        wanted = env_flag(fv.PLUGIN_ENV)
        reason = (
            f"{fv.PLUGIN_ENV}={os.environ.get(fv.PLUGIN_ENV)} disables the plugin"
            if wanted is False
            else _reason_to_stay_out()
            or "the plugin did not run (is fastdispatch installed in this environment?)"
        )
        for name in kernels:
            why.setdefault(name, f"fastdispatch not installed: {reason}")
    return {
        "version": _vllm_facts()["version"],
        "platform": type(platform).__name__,
        "startup": _startup_text(platform),
        "installed": installed,
        "reason": reason,
        "kernels": kernels,
        "why": why,
        # the speculative step (RejectionSampler.forward): one pass, or vLLM's and why
        "step": fv.step_report() if installed else {},
        # Model Runner V2 (vllm/v1/worker/gpu): its kernels ours, or vLLM's and why
        "mrv2": fv.mrv2_report() if installed else {},
    }


def collect_verify(imports=(), vllm=False):
    """Run ``verify``: import ``imports`` in order, then (``vllm``) a worker's start-up; report.

    Returns ``(report, status)``. Raises ``_Failure`` for an import that fails or a missing vLLM.
    """
    import fastdispatch

    with contextlib.redirect_stdout(sys.stderr):
        _import_modules(imports)
        platform = _vllm_worker_sequence() if vllm else None
    stale = {name: holders for name, holders in fastdispatch.verify().items() if holders}
    overrides = _overrides()
    for item in overrides:
        item["stale"] = stale.get(item["name"], [])
    report = {
        "backend": fastdispatch.BACKEND,
        "imported": list(imports),
        "overrides": overrides,
        "stale": stale,
        "vllm": _vllm_report(platform) if vllm else None,
    }
    if stale:
        status = EXIT_STALE
    elif vllm and any(v not in ("ours", "absent") for v in report["vllm"]["kernels"].values()):
        status = EXIT_NOT_OURS
    else:
        status = EXIT_OK
    report["status"] = status
    report["ok"] = status == EXIT_OK
    return report, status


# -- text ----------------------------------------------------------------------------------------


def _format_overrides(overrides, with_stale):
    lines = [f"registered overrides: {len(overrides)}"]
    for item in overrides:
        mark = ""
        if with_stale:
            mark = "STALE " if item["stale"] else "ok    "
        lines.append(f"  {mark}{item['name']} -> {item['impl']} ({item['forward']})")
        if with_stale and item["stale"]:
            lines.append(f"        still on the original: {', '.join(item['stale'])}")
    return lines


def format_info(info):
    fd, omp, tr, vl = info["fastdispatch"], info["openmp"], info["triton"], info["vllm"]
    backend = {"cython": "cython (compiled hot path)", "python": "python (pure-Python twin)"}.get(
        fd["backend"], fd["backend"]
    )
    if not omp["available"]:
        openmp = f"kernels_cpu unavailable ({omp['error']})"
    elif omp["compiled"]:
        openmp = (
            f"compiled in; {omp['threads']} thread(s) for a large launch "
            f"(serial below {omp['parallel_threshold']} element-visits)"
        )
    else:
        openmp = "not compiled in; kernels run serially (1 thread)"
    triton_mode = _TRITON_MODE_TEXT[tr["mode"]].format(**tr)
    vllm = f"{vl['version']} ({vl['distribution']})" if vl["present"] else "absent"
    lines = [
        f"fastdispatch {fd['version']}",
        f"  backend      {backend}",
        f"  OpenMP       {openmp}",
        f"  torch        {info['versions']['torch'] or 'absent'}",
        f"  triton       {tr['version'] or 'absent'}",
        f"  Triton mode  {triton_mode}",
        f"  vllm         {vllm}",
    ]
    fl = info.get("fast_launch") or []
    lines.append(f"  fast launch  {len(fl)} kernel(s) in this process")
    for item in fl:
        served = "fast path" if item["fast_path"] else f"Triton's own ({item['disabled']})"
        falls = ", ".join(f"{why}: {n}" for why, n in item["fallbacks"].items()) or "none"
        lines.append(f"    {item['kernel']}: {served}; {item['cached']} cached; fallbacks {falls}")
    return "\n".join(lines + _format_overrides(info["overrides"], with_stale=False))


_VLLM_KERNEL_TEXT = {
    "ours": "kernels_cpu through fastdispatch",
    "fastdispatch": "another impl through fastdispatch",
    "vllm": "left to vLLM",
    "stale": "registered, but a holder still launches vLLM's object",
    "none": "no override: the Triton kernel itself",
    "absent": "not in this release",
}


def _format_mrv2(mrv2):
    """Model Runner V2's lines of ``verify --vllm``: whether the runner may run without Triton,
    and each kernel it can launch that is not ours, filed by the feature that launches it (a
    configuration using that feature keeps vLLM's "Model Runner V2 requires Triton.")."""
    if not mrv2:
        return []
    kernels = mrv2["kernels"]
    ours = sorted(n for n, k in kernels.items() if k["who"] == "ours")
    if mrv2["installed"]:
        head = f"{len(ours)}/{len(kernels)} of its kernels launch kernels_cpu"
    else:
        head = f"left to vLLM ({mrv2['reason']})"
    lines = [f"  Model Runner V2: {head}"]
    verify = mrv2.get("verify")
    if verify and mrv2["installed"]:
        if verify["who"] == "ours":
            taken = sum(verify["fallbacks"].values())
            lines.append(
                "    speculative verification: one pass (RejectionSampler._verify)"
                + (f"; {taken} batch(es) took vLLM's: {verify['fallbacks']}" if taken else "")
            )
        else:
            lines.append(
                f"    speculative verification: vLLM's _verify, our kernels ({verify['reason']})"
            )
    draft = mrv2.get("draft")
    if draft and mrv2["installed"]:
        if draft["who"] == "ours":
            lines.append(
                "    greedy draft pick: kernels_cpu.argmax_rows (DraftModelSpeculator.sample_draft)"
            )
        else:
            lines.append(f"    greedy draft pick: vLLM's torch argmax ({draft['reason']})")
    by_feature = {}
    for name, item in sorted(kernels.items()):
        if item["who"] != "ours":
            by_feature.setdefault(item["feature"], []).append((name, item))
    for feature, items in sorted(by_feature.items()):
        lines.append(
            f"    {feature}: kept on vLLM's refusal without Triton ({len(items)} kernel(s))"
        )
        for name, item in items:
            who = "STALE   " if item["who"] == "stale" else "NOT OURS"
            lines.append(f"      {who} {name} ({item['reason']})")
    return lines


def format_verify(report):
    lines = [f"fastdispatch verify (backend {report['backend']})"]
    if report["imported"]:
        lines.append(f"imported: {', '.join(report['imported'])}")
    vl = report["vllm"]
    if vl is not None:
        state = "installed" if vl["installed"] else f"NOT installed ({vl['reason']})"
        lines.append(
            f"vLLM {vl['version']} ({vl['platform']}): plugins loaded, "
            f"{vl.get('startup', 'platform hook run')}; fastdispatch {state}"
        )
        ours = sum(v == "ours" for v in vl["kernels"].values())
        here = sum(v != "absent" for v in vl["kernels"].values())
        lines.append(f"  {ours}/{here} of vLLM's kernels launch kernels_cpu through fastdispatch")
        for name, who in vl["kernels"].items():
            why = vl.get("why", {}).get(name)
            if who == "ours":
                lines.append(f"  ours     {name}")
            elif who == "absent":
                lines.append(f"  absent   {name}: {why or _VLLM_KERNEL_TEXT[who]}")
            else:
                lines.append(
                    f"  NOT OURS {name}: {_VLLM_KERNEL_TEXT[who]}" + (f" ({why})" if why else "")
                )
        step = vl.get("step") or {}
        if step.get("who") == "ours":
            took = ", ".join(f"{why}: {n}" for why, n in step["fallbacks"].items())
            lines.append(
                "  speculative step: one pass (RejectionSampler.forward replaced)"
                + (f"; batches on vLLM's forward: {took}" if took else "")
            )
        elif step:
            lines.append(f"  speculative step: vLLM's RejectionSampler.forward ({step['reason']})")
        lines += _format_mrv2(vl.get("mrv2") or {})
    lines += _format_overrides(report["overrides"], with_stale=True)
    n = len(report["overrides"])
    if report["status"] == EXIT_OK:
        lines.append(f"OK: {n} registered, no holder left on an original kernel")
    elif report["status"] == EXIT_STALE:
        holders = sum(len(h) for h in report["stale"].values())
        lines.append(
            f"STALE: {holders} holder(s) of {len(report['stale'])} kernel(s) still "
            "launch the original"
        )
    else:
        lines.append("FAILED: vLLM does not launch all of its kernels through fastdispatch")
    return "\n".join(lines)


# -- command line --------------------------------------------------------------------------------


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m fastdispatch",
        description="Inspect fastdispatch in this Python: what runs, and whether every call "
        "site launches the registered overrides.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="{info,verify}")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    common.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MOD",
        help="import MOD first (repeatable; in the order given)",
    )
    common.add_argument(
        "--ops",
        action="store_true",
        help="import fastdispatch.ops first (registers kernels_cpu over our "
        "Triton kernels when Triton has no driver)",
    )

    sub.add_parser(
        "info",
        parents=[common],
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="backend, OpenMP and threads, versions, Triton mode, registered overrides",
        description="Backend (cython/python), OpenMP compiled in and the threads kernels_cpu "
        "would use, torch/triton/vllm versions (vLLM is not imported), how Triton "
        "kernels run here, and the registered overrides with their forward mode "
        "(by name, or positionally in the kernel's order). Imports nothing that "
        "registers kernels unless --import/--ops says so.",
    )
    verify = sub.add_parser(
        "verify",
        parents=[common],
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="import what it is told to, then list every registered kernel and every holder "
        "still pointing at an original; non-zero exit when anything is stale",
        description="Import the modules named (--import, --ops), then with --vllm run what a "
        "vLLM CPU worker runs at start-up (vLLM's load_general_plugins, then the "
        "current platform's register_triton_kernel_overrides), then list every "
        "registered kernel and every holder (module attribute, launch owner, class "
        "attribute) still pointing at its original kernel.",
    )
    verify.add_argument(
        "--vllm",
        action="store_true",
        help="run a vLLM CPU worker's start-up sequence and check that all of "
        "vLLM's kernels launch kernels_cpu through fastdispatch",
    )
    return parser


def _write(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def main(argv=None):
    """Run the command line ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2): argparse has written it
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    imports = (["fastdispatch.ops"] if args.ops else []) + list(args.imports)
    try:
        if args.command == "info":
            with contextlib.redirect_stdout(sys.stderr):
                _import_modules(imports)
            result = collect_info()
            if imports:
                result["imported"] = imports
            status = EXIT_OK
            text = format_info
        else:
            result, status = collect_verify(imports, vllm=args.vllm)
            text = format_verify
    except _Failure as failure:
        sys.stderr.write(f"python -m fastdispatch {args.command}: {failure}\n")
        if args.json:
            _write(json.dumps({"ok": False, "status": failure.status, "error": str(failure)}))
        return failure.status
    _write(json.dumps(result, indent=2) if args.json else text(result))
    return status
