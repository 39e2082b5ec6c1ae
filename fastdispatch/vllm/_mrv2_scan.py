"""Which Triton kernels Model Runner V2 can launch, read from the installed vLLM's source files.

Whether the V2 runner can run without Triton depends on every kernel it may launch having a CPU
kernel, and that list is the installed release's, not one written here: each release adds,
removes and renames kernels (0.32 -> 0.34 changed about twenty). So it is read from vLLM's own
files, without importing them (importing the runner's modules would build half the engine): a
kernel is a module-level function with a ``@triton.jit`` decorator (or ``autotune``/``heuristics``
over one) that some module of the runner launches -- writes as ``kernel[grid](...)``. A jit
function that is only called from other kernels is a device function, inlined into its callers:
it never launches and needs no replacement of its own.

Each kernel is filed under the feature that makes the runner launch it (:func:`feature_of`), so
that a configuration that does not use a feature is not held back by its kernels.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

__all__ = ["RUNNER_PACKAGE", "feature_of", "launched_kernels", "runner_dir"]

#: Model Runner V2's package (0.32-0.34: ``vllm/v1/worker/gpu``).
RUNNER_PACKAGE = "vllm.v1.worker.gpu"

#: Module (under :data:`RUNNER_PACKAGE`, dotted) -> the feature whose use launches its kernels.
#: A prefix names a subpackage. Modules not listed are the runner's core: every step may launch
#: them (inputs, block tables, the sampler and each of its per-request options).
_FEATURES = (
    ("spec_decode.rejection_sampler", "speculative decoding"),
    ("spec_decode.rejection_sampler_utils", "speculative decoding"),
    ("spec_decode.draft_logits", "speculative decoding"),
    ("spec_decode.adaptive_verification", "adaptive verification"),
    ("spec_decode.acceptance_estimator", "adaptive verification"),
    ("spec_decode.standalone_ar", "draft_model"),  # 0.32-0.34
    ("spec_decode.draft_model", "draft_model"),  # 0.31
    ("spec_decode.ngram", "ngram"),
    ("spec_decode.suffix", "suffix"),
    # the autoregressive drafters' shared input kernels: EAGLE's, MTP's and Gemma 4's speculators
    # all build on them (0.32: target_dependent_ar; 0.31 and 0.34: autoregressive)
    ("spec_decode.target_dependent_ar", "autoregressive drafting"),
    ("spec_decode.autoregressive", "autoregressive drafting"),
    ("spec_decode.eagle", "eagle"),
    ("spec_decode.mtp", "mtp"),
    ("spec_decode.gemma4", "gemma4"),
    ("spec_decode.dspark", "dspark"),
    ("spec_decode.lilicorr", "lilicorr"),
    ("spec_decode.multi_module_mtp", "mtp"),
    ("spec_decode.dflash", "dflash"),
    ("spec_decode.dflash2", "dflash"),
    ("spec_decode.xpress", "xpress"),
    ("model_states.mamba_hybrid", "hybrid (mamba) models"),
    ("model_states.recoverssm", "hybrid (mamba) models"),
    ("model_states.prompt_embeds", "prompt embeddings"),
    ("mm.rope", "multimodal M-RoPE"),
    ("cp_utils", "context parallelism"),
    ("sample.watermark", "watermarking"),
    ("sample.thinking_budget", "thinking budget"),
    ("sample.trace_replay", "trace replay"),
    ("sample.batch_shard", "sharded sampling"),
)


#: Modules outside the runner package whose kernels the runner launches (through objects it
#: builds from them), dotted under ``vllm``, with the feature that launches them.
_BEYOND = (
    ("v1.worker.utils", "core"),  # KVBlockZeroer: new KV blocks zeroed, once at warmup too
    ("v1.worker.mamba_utils", "hybrid (mamba) models"),
)


def feature_of(module: str) -> str:
    """The feature that launches the kernels of runner module ``module`` (dotted, relative to
    :data:`RUNNER_PACKAGE`), ``"core"`` for the runner's own step."""
    for prefix, feature in _FEATURES:
        if module == prefix or module.startswith(prefix + "."):
            return feature
    return "core"


def runner_dir() -> Path | None:
    """The installed vLLM's Model Runner V2 package directory, or None (no vLLM, or a release
    without the V2 runner). Found without importing it."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]).joinpath(*RUNNER_PACKAGE.split(".")[1:])
    return path if (path / "model_runner.py").is_file() else None


def _jit(node: ast.stmt) -> bool:
    if not isinstance(node, ast.FunctionDef):
        return False
    names = {ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list}
    return any(n.split(".")[-1] in ("jit", "autotune", "heuristics") for n in names)


def _launched_names(tree: ast.AST) -> set[str]:
    """Names written as ``name[grid](...)`` (or ``mod.name[grid](...)``) in ``tree``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            target = node.func.value
            if isinstance(target, ast.Name):
                found.add(target.id)
            elif isinstance(target, ast.Attribute):
                found.add(target.attr)
    return found


@functools.lru_cache(maxsize=4)
def launched_kernels(package: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """``{qualified name: (feature, argument names)}`` for every kernel the runner package at
    ``package`` defines and launches, in file order."""
    vllm_root = package.parents[2]  # .../vllm (the package is vllm/v1/worker/gpu)
    files: list[tuple[Path, str | None]] = [(p, None) for p in sorted(package.rglob("*.py"))]
    files += [(vllm_root.joinpath(*m.split(".")).with_suffix(".py"), f) for m, f in _BEYOND]
    found = {}
    for path, feature in files:
        if not path.is_file():
            continue
        rel = path.relative_to(vllm_root).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        module = ".".join(("vllm", *parts))
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        launched = _launched_names(tree)
        if feature is None:  # a runner module: its kernels are launched here or elsewhere in it
            launched |= _runner_launches(package)
            feature = feature_of(module[len(RUNNER_PACKAGE) + 1 :])
        for node in tree.body:
            if _jit(node) and node.name in launched:  # type: ignore[attr-defined]
                args = tuple(a.arg for a in node.args.args)  # type: ignore[attr-defined]
                found[f"{module}.{node.name}"] = (feature, args)  # type: ignore[attr-defined]
    return found


def module_defines(package: Path, qualname: str) -> frozenset[str]:
    """The names the module of kernel ``qualname`` (``vllm.x.y.kernel``) defines at its top
    level (functions, classes, assignments), read from its source beside the runner package at
    ``package``; empty when the file cannot be read. Contracts with a ``module_rule`` (a
    signature two releases share with different semantics) are told apart by it."""
    module = qualname.rpartition(".")[0]
    vllm_root = package.parents[2]
    path = vllm_root.joinpath(*module.split(".")[1:]).with_suffix(".py")
    return _defines(path)


@functools.lru_cache(maxsize=64)
def _defines(path: Path) -> frozenset[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return frozenset()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return frozenset(names)


@functools.lru_cache(maxsize=4)
def _runner_launches(package: Path) -> frozenset[str]:
    """Every name launched anywhere in the runner package."""
    names: set[str] = set()
    for path in sorted(package.rglob("*.py")):
        try:
            names |= _launched_names(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
    return frozenset(names)
