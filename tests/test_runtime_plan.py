"""Binding planner: dispatch inputs -> kernel arguments, strides, explicit kwargs (both
backends)."""

import json
import subprocess

import pytest
import torch
from _fuzz import fuzz_settings
from _runtime_helpers import contract_args, load_core
from _vllm_helpers import require_vllm_python
from hypothesis import given
from hypothesis import strategies as st


def test_input_binds_to_name_ptr_upper_and_upper_ptr(core):
    arg_names = ("a", "b_ptr", "C", "D_PTR", "e")
    plan = core.launch_binding_plan(arg_names, ("a", "b", "c", "d", "zzz"))
    assert plan.input_targets == ((0, "a"), (1, "b_ptr"), (2, "C"), (3, "D_PTR"))
    assert plan.stride_targets == ()


def test_first_candidate_wins(core):
    plan = core.launch_binding_plan(("x_ptr", "x", "X"), ("x",))
    assert plan.input_targets == ((0, "x"),)


def test_explicit_launch_kwargs_win(core):
    plan = core.launch_binding_plan(("x_ptr", "n"), ("x", "n"), ("x_ptr",))
    assert plan.input_targets == ((1, "n"),)


def test_two_argument_form_and_cache(core):
    p1 = core.launch_binding_plan(("x_ptr",), ("x",))
    p2 = core.launch_binding_plan(["x_ptr"], ["x"], [])
    assert p1 is p2


def test_stride_targets(core):
    arg_names = (
        "x_ptr",
        "x_stride",
        "x_stride_1",
        "Y",
        "Y_STRIDE_0",
        "z_stride",
        "w_stride_k",
        "q_stride_",
    )
    plan = core.launch_binding_plan(arg_names, ("x", "y"))
    assert plan.input_targets == ((0, "x_ptr"), (1, "Y"))
    # x_stride(_1) from x_ptr; Y_STRIDE_0 from Y; z and q have no bound source; "k" is no dim.
    assert plan.stride_targets == (
        ("x_stride", "x_ptr", 0),
        ("x_stride_1", "x_ptr", 1),
        ("Y_STRIDE_0", "Y", 0),
    )


def test_stride_from_explicit_launch_kwarg_and_explicit_stride_wins(core):
    plan = core.launch_binding_plan(
        ("t", "t_stride", "u_ptr", "u_stride"), ("u",), ("t", "u_stride")
    )
    assert plan.input_targets == ((0, "u_ptr"),)
    assert plan.stride_targets == (("t_stride", "t", 0),)


def test_prepare_launch_kwargs_semantics(core):
    x = torch.zeros(3, 5)
    kw = {"BLOCK": 4, "y_ptr": "explicit"}
    out = core.prepare_launch_kwargs(
        ("x_ptr", "y_ptr", "x_stride_0", "x_stride_1", "BLOCK", "n"),
        ("x", "y", "n"),
        (x, "input y", 7),
        kw,
    )
    assert out is kw
    assert out == {
        "BLOCK": 4,
        "y_ptr": "explicit",
        "x_ptr": x,
        "n": 7,
        "x_stride_0": 5,
        "x_stride_1": 1,
    }


def _plan_fields(plan):
    return (
        plan.input_targets,
        plan.stride_targets,
        plan.input_fill,
        plan.stride_fill,
        plan.generic,
    )


names = st.sampled_from(["a", "b", "x", "y", "n", "BLOCK", "kernel", "out"])
suffixes = st.sampled_from(
    ["", "_ptr", "_PTR", "_stride", "_stride_0", "_stride_1", "_STRIDE", "_STRIDE_1", "_stride_x"]
)


@st.composite
def plan_cases(draw):
    arg_names = draw(
        st.lists(
            st.builds(lambda n, s: n + s, names, suffixes), min_size=1, max_size=8, unique=True
        )
    )
    upper = draw(st.booleans())
    if upper:
        arg_names = [a.upper() if draw(st.booleans()) else a for a in arg_names]
        arg_names = list(dict.fromkeys(arg_names))
    input_names = draw(st.lists(names, max_size=5, unique=True))
    launch_names = draw(st.lists(st.sampled_from(arg_names), max_size=3, unique=True))
    return tuple(arg_names), tuple(input_names), tuple(launch_names)


@fuzz_settings(300, deadline=None)
@given(plan_cases())
def test_compiled_and_twin_plans_agree(case):
    # includes "kernel" among names: such plans take the generic path in both
    a = load_core("cython").launch_binding_plan(*case)
    b = load_core("python").launch_binding_plan(*case)
    assert _plan_fields(a) == _plan_fields(b)


class FakeTensor:
    """Has ``stride(d)`` like a tensor; values identify it in the launch record."""

    def __init__(self, tag):
        self.tag = tag

    def stride(self, dim):
        return (self.tag, dim)

    def __repr__(self):
        return f"T{self.tag}"


@fuzz_settings(200, deadline=None)
@given(plan_cases(), st.sampled_from(["cython", "python"]))
def test_planned_launch_equals_prepare_then_launch(case, backend):
    """The override fast path (plan straight into call slots) == prepare_launch_kwargs + launch."""
    core = load_core(backend)
    arg_names, input_names, launch_names = case
    if "kernel" in arg_names:  # reserved in a launch (it replaces the kernel): not this test
        arg_names = tuple(n for n in arg_names if n != "kernel") or ("x",)
    launch_names = tuple(n for n in launch_names if n in arg_names)
    ns = {}
    exec(f"def k({', '.join(arg_names)}): pass", ns)
    exec(
        f"def impl({', '.join(f'p{i}' for i in range(len(arg_names)))}=None):\n"
        f"    return ({', '.join(f'p{i}' for i in range(len(arg_names)))},)",
        ns,
    )
    results = []

    def record(*args):
        results.append(args)

    ov = core.KernelOverride(ns["k"], record)
    values = tuple(FakeTensor(i) for i in range(len(input_names)))
    launch_kwargs = {name: FakeTensor(100 + i) for i, name in enumerate(launch_names)}
    expected = core.prepare_launch_kwargs(arg_names, input_names, values, dict(launch_kwargs))
    try:
        core.launch_owner(ov, arg_names, ((1,), launch_kwargs), input_names, values)
    except TypeError as exc:  # missing arguments: both ways must agree it is an error
        with pytest.raises(TypeError):
            ov[(1,)](**expected)
        assert "missing" in str(exc)
        return
    ov[(1,)](**expected)
    assert results[0] == results[1]


def test_plans_match_vllm():
    vllm_python = str(require_vllm_python())
    cases = [
        (
            contract_args("expand_kernel"),
            ("output", "input", "cu_num_tokens", "replace_from", "replace_to"),
            ("MAX_NUM_TOKENS",),
        ),
        (("x_ptr", "x_stride", "x_stride_1", "Y", "Y_STRIDE_0", "n"), ("x", "y", "n"), ("n",)),
        (("t", "t_stride", "u_ptr", "u_stride"), ("u",), ("t", "u_stride")),
        (("a", "A_PTR", "a_ptr"), ("a",), ()),
        (
            ("block_table_ptr", "block_table_stride", "positions_ptr"),
            ("block_table", "positions"),
            (),
        ),
    ]
    code = (
        "import json, sys\n"
        "from vllm.model_executor.warmup.jit_warmup_triton_helper import _launch_binding_plan\n"
        "out = []\n"
        "for a, i, l in json.loads(sys.argv[1]):\n"
        "    p = _launch_binding_plan(tuple(a), tuple(i), tuple(l))\n"
        "    out.append([p.input_targets, p.stride_targets])\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [vllm_python, "-c", code, json.dumps(cases)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    for backend in ("cython", "python"):
        core = load_core(backend)
        ours = [core.launch_binding_plan(*c) for c in cases]
        assert [
            [list(map(list, p.input_targets)), list(map(list, p.stride_targets))] for p in ours
        ] == theirs
