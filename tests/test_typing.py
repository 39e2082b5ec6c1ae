"""Typing: mypy passes on the package and on a user's view of it, and the stubs tell the truth.

The compiled modules are described by hand-written ``.pyi`` stubs; nothing ties them to the
``.pyx`` but these tests:

* mypy (the project's ``[tool.mypy]`` config) on ``fastdispatch``, ``kernels_cpu`` and
  ``tests/typing/public_api_usage.py``, which pins the public types with ``assert_type`` and
  must see the wrong calls it lists rejected; the usage file also runs, with each backend;
* every compiled module's Python-visible names are exactly its stub's, with the same
  parameters (names, kinds, defaults) wherever the runtime exposes a signature (Cython
  functions do: ``binding=True``);
* for ``_core`` the stub, the compiled module and the pure-Python twin ``_core_py`` agree three
  ways: same ``__all__``, same functions, same classes with the same members and methods.
"""

import ast
import importlib
import inspect
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from kernels_cpu.contracts import CONTRACTS

ROOT = Path(__file__).resolve().parent.parent
USAGE = "tests/typing/public_api_usage.py"

#: The compiled modules of the wheel's packages.
SHIPPED = [
    "fastdispatch._override",
    "fastdispatch._plan",
    "fastdispatch._owner",
    "fastdispatch._vllm_owner",
    "fastdispatch._fastlaunch",
    "kernels_cpu._buffers",
    "kernels_cpu._parallel",
    "kernels_cpu._tables",
    "kernels_cpu._expand",
    "kernels_cpu._recovered",
    "kernels_cpu._sampling",
    "kernels_cpu._spec_decode",
    "kernels_cpu._workers",
    "kernels_cpu._fused",
    "kernels_cpu._race",
    "kernels_cpu._topk_topp",
    "kernels_cpu._topk_topp_rows",
]
# every kernel module the contract table names (Model Runner V2's among them)
SHIPPED += sorted({f"kernels_cpu.{c.module}" for c in CONTRACTS} - set(SHIPPED))
#: Every compiled module with a stub: the shipped ones and the dev kit's (``fdkit``, built in
#: place only, never in the wheel).
COMPILED = SHIPPED + ["fdkit._floor"]


# -- mypy -----------------------------------------------------------------------------------------


def _mypy(*targets):
    # One persistent cache in the checkout (git-ignored): a warm run takes about a second.
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(ROOT / ".mypy_cache"),
        *targets,
    ]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_mypy_passes_on_the_package_and_the_public_api_usage():
    result = _mypy("fastdispatch", "kernels_cpu", USAGE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success: no issues found"), result.stdout


def test_mypy_rejects_a_wrong_call_of_the_public_api(tmp_path):
    # The check above is only worth something if mypy sees real types through the package.
    wrong = tmp_path / "wrong_usage.py"
    wrong.write_text(
        "import fastdispatch, kernels_cpu\n"
        "fastdispatch.register_kernels(1)\n"
        "kernels_cpu.set_num_threads('4')\n"
    )
    result = _mypy(str(wrong))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.count("[arg-type]") == 2, result.stdout


@pytest.mark.parametrize("pure_python", ["0", "1"], ids=["cython", "python"])
def test_public_api_usage_runs(pure_python):
    env = dict(os.environ, FASTDISPATCH_PURE_PYTHON=pure_python, FASTDISPATCH_OPS_CPU_KERNELS="1")
    env.pop("TRITON_INTERPRET", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, USAGE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    backend = "python" if pure_python == "1" else "cython"
    assert f"public API usage: ok ({backend} backend)" in result.stdout


# -- stubs against the runtime --------------------------------------------------------------------

_NO_DEFAULT = object()
_NOT_LITERAL = object()


def _stub_tree(modname):
    return ast.parse((ROOT / (modname.replace(".", "/") + ".pyi")).read_text())


def _is_type_alias(node):
    ann = node.annotation
    return isinstance(node, ast.AnnAssign) and (
        (isinstance(ann, ast.Name) and ann.id == "TypeAlias")
        or (isinstance(ann, ast.Attribute) and ann.attr == "TypeAlias")
    )


def _stub_api(tree, package="fastdispatch"):
    """The stub's top-level API: ``name -> node`` (functions, classes, variables; type aliases
    exist only for type checkers and are left out). An explicit re-export (``from .m import x as
    x``) stands for ``x``'s definition in the stub of ``m``, read from there."""
    api = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            for alias in node.names:
                if alias.asname == alias.name:
                    source = _stub_api(_stub_tree(f"{package}.{node.module}"), package)
                    api[alias.name] = source[alias.name]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            api[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if not _is_type_alias(node):
                api[node.target.id] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id != "__all__":
                    api[target.id] = node
    return api


def _stub_all(tree):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    return None


def _runtime_api(module):
    """Python-visible names of a module: ``__all__`` when it has one, else every name it defines
    itself (not dunders, not imported modules, not objects that another module defines)."""
    if hasattr(module, "__all__"):
        return set(module.__all__)
    names = set()
    for name, value in vars(module).items():
        if name.startswith("__") or isinstance(value, types.ModuleType):
            continue
        home = getattr(value, "__module__", None)
        if home is not None and home != module.__name__:
            continue
        names.add(name)
    return names


def _introspectable(obj):
    """Whether ``inspect.signature(obj)`` gives the real parameters: Python and Cython
    (``binding=True``) functions do; C slot wrappers only say ``(*args, **kwargs)``."""
    return inspect.isfunction(obj) or type(obj).__name__ == "cython_function_or_method"


def _stub_params(fn):
    """``[(name, kind, default)]`` of a stub function (default: literal value, _NO_DEFAULT or
    _NOT_LITERAL)."""
    a = fn.args
    P = inspect.Parameter

    def default_of(node):
        if node is None:
            return _NO_DEFAULT
        try:
            return ast.literal_eval(node)
        except ValueError:
            return _NOT_LITERAL

    positional = [(arg, P.POSITIONAL_ONLY) for arg in a.posonlyargs]
    positional += [(arg, P.POSITIONAL_OR_KEYWORD) for arg in a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    params = [(arg.arg, kind, default_of(d)) for (arg, kind), d in zip(positional, defaults)]
    if a.vararg is not None:
        params.append((a.vararg.arg, P.VAR_POSITIONAL, _NO_DEFAULT))
    params += [
        (arg.arg, P.KEYWORD_ONLY, default_of(d)) for arg, d in zip(a.kwonlyargs, a.kw_defaults)
    ]
    if a.kwarg is not None:
        params.append((a.kwarg.arg, P.VAR_KEYWORD, _NO_DEFAULT))
    return params


def _assert_same_signature(stub_fn, runtime_obj, where):
    expected = _stub_params(stub_fn)
    actual = [
        (p.name, p.kind, _NO_DEFAULT if p.default is inspect.Parameter.empty else p.default)
        for p in inspect.signature(runtime_obj).parameters.values()
    ]
    shape = [(n, k, d is not _NO_DEFAULT) for n, k, d in expected]
    assert shape == [(n, k, d is not _NO_DEFAULT) for n, k, d in actual], (
        f"{where}: stub parameters {shape} differ from the runtime's "
        f"{inspect.signature(runtime_obj)}"
    )
    for (name, _, want), (_, _, got) in zip(expected, actual):
        if want is not _NO_DEFAULT and want is not _NOT_LITERAL and want is not Ellipsis:
            assert want == got and type(want) is type(got), (
                f"{where}: default of {name!r} is {got!r} at runtime, {want!r} in the stub"
            )


@pytest.mark.parametrize("modname", COMPILED)
def test_stub_names_match_the_compiled_module(modname):
    module = importlib.import_module(modname)
    assert module.__file__.endswith((".so", ".pyd")), f"{modname} is not the compiled module"
    tree = _stub_tree(modname)
    stub = set(_stub_api(tree, modname.rpartition(".")[0]))
    runtime = _runtime_api(module)
    assert stub == runtime, (
        f"{modname}: only in the stub: {sorted(stub - runtime)}; "
        f"only at runtime: {sorted(runtime - stub)}"
    )
    if hasattr(module, "__all__"):
        assert _stub_all(tree) == list(module.__all__)
    for name in stub:
        assert hasattr(module, name), f"{modname}.{name}"


@pytest.mark.parametrize("modname", COMPILED)
def test_stub_signatures_match_the_compiled_functions(modname):
    module = importlib.import_module(modname)
    checked = 0
    for name, node in _stub_api(_stub_tree(modname), modname.rpartition(".")[0]).items():
        if not isinstance(node, ast.FunctionDef):
            continue
        obj = getattr(module, name)
        assert _introspectable(obj), f"{modname}.{name} exposes no signature ({type(obj)})"
        _assert_same_signature(node, obj, f"{modname}.{name}")
        checked += 1
    n_functions = sum(
        callable(getattr(module, n)) and not isinstance(getattr(module, n), type)
        for n in _runtime_api(module)
    )
    assert checked == n_functions


# -- _core: stub, compiled module and twin --------------------------------------------------------


def _cores():
    from fastdispatch import _core, _core_py

    return {"compiled": _core, "twin": _core_py}


def _samples(core):
    """One instance of each ``_core`` class, built with the stub's keyword names (a compiled
    ``__init__`` has no introspectable signature: calling it by keyword checks the names)."""

    def kernel(x_ptr, n, BLOCK=4):
        pass

    def impl(x_ptr, n, BLOCK=4):
        pass

    def dispatch(x, n):
        return (1,), {"n": n}

    override = core.KernelOverride(kernel=kernel, impl=impl)
    cache = core.PlanCache()
    cache.lookup(("x_ptr", "n"), ("x",), {"n": 1})
    return {
        "KernelOverride": override,
        "Launcher": override[(1,)],
        "LaunchBindingPlan": core.LaunchBindingPlan(
            arg_names=("x_ptr", "n"), input_names=("x",), launch_names=("n",)
        ),
        "PlanCache": cache,
        "LaunchOwner": core.LaunchOwner(kernel=kernel, dispatch=dispatch, warmup_inputs=None),
        "LaunchArgumentError": core.LaunchArgumentError("message"),
    }


# The keyword names ``_samples`` constructs with: they must be the stub's ``__init__`` parameters.
_SAMPLE_INIT_KEYWORDS = {
    "KernelOverride": ["kernel", "impl"],
    "LaunchBindingPlan": ["arg_names", "input_names", "launch_names"],
    "PlanCache": [],
    "LaunchOwner": ["kernel", "dispatch", "warmup_inputs"],
}


def _stub_classes():
    return {
        name: node
        for name, node in _stub_api(_stub_tree("fastdispatch._core")).items()
        if isinstance(node, ast.ClassDef)
    }


def _members(cls_node):
    """``name -> ("method" | "data", node)`` for a stub class body (properties are data)."""
    members = {}
    for node in cls_node.body:
        if isinstance(node, ast.FunctionDef):
            is_property = any(
                isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list
            )
            members[node.name] = ("data" if is_property else "method", node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            members[node.target.id] = ("data", node)
    return members


def test_core_backends_export_the_stub_names():
    stub_all = _stub_all(_stub_tree("fastdispatch._core"))
    for backend, core in _cores().items():
        assert list(core.__all__) == stub_all, backend
        for name in stub_all:
            assert hasattr(core, name), f"{backend}: {name}"


def test_core_functions_match_the_stub_in_both_backends():
    for name, node in _stub_api(_stub_tree("fastdispatch._core")).items():
        if not isinstance(node, ast.FunctionDef):
            continue
        for backend, core in _cores().items():
            obj = getattr(core, name)
            assert _introspectable(obj), f"{backend}: {name}"
            _assert_same_signature(node, obj, f"{backend} {name}")


@pytest.mark.parametrize("cls_name", sorted(_stub_classes()))
def test_core_classes_match_the_stub_in_both_backends(cls_name):
    cls_node = _stub_classes()[cls_name]
    members = _members(cls_node)
    stub_bases = [ast.unparse(b) for b in cls_node.bases]
    if "__init__" in members:
        init_params = [p[0] for p in _stub_params(members["__init__"][1])][1:]
        assert init_params == _SAMPLE_INIT_KEYWORDS[cls_name]
    twin_signatures = 0
    for backend, core in _cores().items():
        cls = getattr(core, cls_name)
        assert isinstance(cls, type), f"{backend}: {cls_name}"
        assert [b.__name__ for b in cls.__bases__] == (stub_bases or ["object"]), backend
        instance = _samples(core)[cls_name]
        assert type(instance) is cls
        for name, (what, node) in members.items():
            where = f"{backend} {cls_name}.{name}"
            assert hasattr(instance, name), f"{where}: missing"
            static = inspect.getattr_static(cls, name, None)
            if what == "data":
                in_dict = name in getattr(instance, "__dict__", {})
                assert in_dict or isinstance(
                    static, (property, types.GetSetDescriptorType, types.MemberDescriptorType)
                ), f"{where}: not a data attribute"
            else:
                method = getattr(cls, name)
                assert callable(method), where
                if _introspectable(method):
                    _assert_same_signature(node, method, where)
                    twin_signatures += backend == "twin"
                else:
                    # A C slot (``__call__``, ``__getitem__``, a cdef class's ``__init__``):
                    # its parameters are checked on the twin and by calls (``_samples``).
                    assert backend == "compiled", f"{where}: no signature in the twin"
        # Nothing public at runtime that the stub leaves out (class or instance attributes).
        runtime_public = {n for n in vars(cls) if not n.startswith("_")}
        runtime_public |= {n for n in getattr(instance, "__dict__", {}) if not n.startswith("_")}
        assert runtime_public <= set(members), (
            f"{backend} {cls_name}: not in the stub: {sorted(runtime_public - set(members))}"
        )
    methods = sum(what == "method" for what, _ in members.values())
    assert twin_signatures == methods, "every stub method is compared with the twin"


# -- packaging --------------------------------------------------------------------------------


def test_stubs_and_markers_ship_in_the_wheel():
    import tomllib  # Python >= 3.11, as the project's environments

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_data = config["tool"]["setuptools"]["package-data"]
    for package in ("fastdispatch", "kernels_cpu"):
        patterns = package_data[package]
        assert "py.typed" in patterns and "*.pyi" in patterns, package
        assert (ROOT / package / "py.typed").is_file()
    for modname in SHIPPED:
        package, name = modname.split(".")
        assert (ROOT / package / f"{name}.pyi").is_file()
        assert (ROOT / package / f"{name}.pyx").is_file()
    assert "mypy" in [
        re.split(r"[<>=!~ \[]", req)[0]
        for req in config["project"]["optional-dependencies"]["test"]
    ]
