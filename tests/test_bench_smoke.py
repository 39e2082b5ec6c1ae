"""Smoke and behaviour tests for ``python -m bench`` (timing discipline, JSON schema, plot).

These check that the benchmark *works* (every field present, anchors consistent, a PNG that
loads, the vLLM worker path), never how fast anything is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _required import missing

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import _headlines, _report, _rows, _timing  # noqa: E402
from bench._vllm import find_vllm_python  # noqa: E402


def _run_bench(tmp_path, *args, env=None, timeout=240):
    out_json, out_png = tmp_path / "run.json", tmp_path / "run.png"
    cmd = [
        sys.executable,
        "-m",
        "bench",
        "--quick",
        "--json",
        str(out_json),
        "--plot",
        str(out_png),
        *args,
    ]
    proc = subprocess.run(
        cmd,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    return proc, out_json, out_png


def _load_png(path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.image as mpimg

    img = mpimg.imread(str(path))
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    return img


def test_quick_filter_one_small_case_writes_valid_json_and_png(tmp_path):
    out_md = tmp_path / "run.md"
    proc, out_json, out_png = _run_bench(
        tmp_path, "--filter", "launch/override", "--no-vllm", "--markdown", str(out_md)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out_json.read_text())
    assert _report.validate(doc) == []
    assert doc["preset"] == "quick" and doc["filter"] == "launch/override"
    assert [g["id"] for g in doc["groups"]] == ["launch/override"]
    g = doc["groups"][0]
    assert g["status"] == "ok" and g["interpreter"] == "main"
    rows = {r["name"]: r for r in g["rows"]}
    anchor = rows[g["anchor"]]
    assert anchor["anchor"] and anchor["status"] == "ok" and anchor["ratio"] == 1.0
    # every row carries its stable key; the launch script's rows live on in this group
    keys = {r["key"]: r for r in g["rows"]}
    assert keys["launch/override/direct"]["name"] == g["anchor"]
    for slug in ("direct_kw", "compiled", "compiled_runtime_keys", "twin", "floor", "caller_only"):
        assert "launch/override/" + slug in keys, slug
    measured = [r for r in g["rows"] if r["status"] == "ok"]
    assert len(measured) >= 2  # the anchor and at least our override
    for r in measured:
        assert len(r["samples_ns"]) == doc["settings"]["repeats"] == r["repeats"]
        assert (
            r["ns"]["min"] <= r["ns"]["q1"] <= r["ns"]["median"] <= r["ns"]["q3"] <= r["ns"]["max"]
        )
        assert r["ns"]["median"] > 0 and r["loops"] >= 1
    # no vLLM asked for: its row is there, says why, and carries no figures
    v = rows["vLLM KernelOverride"]
    assert v["status"] == "unavailable" and "no-vllm" in v["reason"] and v["ns"] is None
    assert doc["vllm"]["available"] is False
    # the table names the group, its interpreter and the anchor
    assert "launch/override" in proc.stdout and "(anchor)" in proc.stdout
    _load_png(out_png)
    # the saved JSON renders the page the run wrote (docs/bench_figures.md is made this way)
    rendered = tmp_path / "again.md"
    again = subprocess.run(
        [sys.executable, "-m", "bench", "--from-json", str(out_json), "--markdown", str(rendered)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert rendered.read_text() == out_md.read_text()
    assert r"override\[grid\](**kw)" in rendered.read_text()  # text, not a link to **kw


def test_filter_that_matches_nothing_exits_2(tmp_path):
    proc, out_json, _ = _run_bench(tmp_path, "--filter", "no-such-group-xyz", "--no-vllm")
    assert proc.returncode == 2
    assert not out_json.exists()


def test_list_names_every_suite():
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--list", "--no-vllm"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for prefix in (
        "launch/override",
        "launch/owner_chain",
        "kernels/expand_kernel",
        "kernels/batch_memcpy_kernel",
        "spec_decode/greedy/B1-k4-V32000",
        "spec_decode/random/B64-k4-V128256",
        "threads/recovered_tokens",
        "fused/B16-k4-V32000-draft",
        "fused/B16-k4-V128256-nodraft",
    ):
        assert prefix in proc.stdout, prefix
    assert "[launch/override/compiled]" in proc.stdout  # rows are listed with their keys


def test_worker_path_measures_vllm_rows_in_the_vllm_interpreter(tmp_path):
    vllm_python, origin = find_vllm_python()
    if vllm_python is None:
        missing(f"no vLLM interpreter for the bench worker path here: {origin}")
    proc, out_json, out_png = _run_bench(
        tmp_path, "--filter", "launch/override", "--vllm-python", vllm_python
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out_json.read_text())
    assert _report.validate(doc) == []
    assert doc["vllm"]["where"] == "worker" and doc["vllm"]["version"]
    assert doc["interpreters"]["vllm-worker"]["executable"]
    g = doc["groups"][0]
    assert g["interpreter"] == "vllm-worker"
    rows = {r["name"]: r for r in g["rows"]}
    assert rows["vLLM KernelOverride"]["status"] == "ok", rows["vLLM KernelOverride"]
    assert rows["vLLM KernelOverride"]["ratio"] > 0
    _load_png(out_png)


# -- rows are typed records; headlines find them by key ----------------------------------------
def _row(key, name, median, **kw):
    ns = _rows.Summary(median, median, 0.0, median, median, median, median, 0.0, 0.0)
    return _rows.Row(name=name, status="ok", key=key, ns=ns, samples_ns=(median,), **kw)


def test_row_json_keeps_the_schema_keys_and_reads_back():
    r = _row("g/x", "x", 5.0, loops=2, repeats=1, ratio=1.0, anchor=True, vs={"a": 0.5})
    d = json.loads(json.dumps(r, default=_rows.json_default))
    assert set(d) == set(_report._ROW)
    assert set(d["ns"]) == set(_report._NS) and d["samples_ns"] == [5.0]
    assert _rows.Row.from_dict(d) == r


def test_headlines_find_rows_by_key_not_by_display_name():
    gid = "vllm_entry/_rejection_greedy_sample@B4"
    rows = [
        _row(f"{gid}/stock", "renamed stock row", 20000.0, ratio=1.0, anchor=True),
        _row(f"{gid}/installed", "renamed installed row", 1000.0, ratio=0.05),
    ]
    doc = {"groups": [{"id": gid, "status": "ok", "params": {}, "rows": rows}]}
    (h,) = _headlines.headlines(doc)
    assert h["label"] == "vLLM _rejection_greedy_sample B4: install() vs stock"
    assert h["value"] == 20.0 and h["num"] == "renamed stock row" and h["den_key"] == rows[1].key


def test_headlines_do_not_depend_on_the_report():
    """One-way: the report renders headlines; headlines (and their formatting) never import the
    report, even when formatting one."""
    code = (
        "import sys\n"
        "from bench import _headlines\n"
        "h = {'value': 2.0, 'kind': 'x', 'noisy': False, 'num_ns': 200.0, 'den_ns': 100.0}\n"
        "assert _headlines.fmt(h) == '2.00x (200 ns vs 100 ns)', _headlines.fmt(h)\n"
        "assert 'bench._report' not in sys.modules, 'bench._headlines imported bench._report'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_no_headline_sets_a_goal_below_the_launch_floor():
    """A launcher of the ``override[grid](**kw)`` form cannot beat the floor row
    (docs/benchmark.md, "The launch floor"): its ratio to a direct call, and the compiled
    launcher's gain over the twin (bounded by the twin's ratio to the floor), carry no goal, only
    context; nor does the owner chain against a direct call (its dispatch fn plus a launch's
    floor exceed any goal)."""
    rows = [
        _row(f"launch/override/{slug}", slug, ns, ratio=ns / 50.0, anchor=slug == "direct")
        for slug, ns in (("direct", 50.0), ("floor", 120.0), ("compiled", 140.0), ("twin", 1800.0))
    ]
    chain = [
        _row(f"launch/owner_chain/{slug}", slug, ns, ratio=ns / 35.0, anchor=slug == "direct")
        for slug, ns in (("direct", 35.0), ("dispatch_only", 250.0), ("compiled", 400.0))
    ]
    doc = {
        "groups": [
            {"id": "launch/override", "status": "ok", "params": {}, "rows": rows},
            {"id": "launch/owner_chain", "status": "ok", "params": {}, "rows": chain},
        ]
    }
    by_keys = {(h["num_key"], h["den_key"]): h for h in _headlines.headlines(doc)}
    for num, den in (
        ("launch/override/compiled", "launch/override/direct"),
        ("launch/override/twin", "launch/override/compiled"),
        ("launch/owner_chain/compiled", "launch/owner_chain/direct"),
    ):
        h = by_keys[(num, den)]
        assert h["goal"].startswith("context:"), (num, den, h["goal"])


def test_declared_rows_have_unique_keys():
    from bench._model import Context
    from bench._vllm import VllmSide
    from bench.suites import all_groups

    for preset in ("quick", "full"):
        ctx = Context(_timing.QUICK, preset, VllmSide(allowed=False), "main")
        keys = [g.key(r.name) for g in all_groups(ctx) for r in g.rows]
        assert len(keys) == len(set(keys))


# -- the timing discipline itself --------------------------------------------------------------
def test_interleaving_is_abba_and_switches_state_once_per_repeat():
    calls, switches = [], []
    cases = [
        _timing.Case("a", fn=lambda: calls.append("a"), state="s1"),
        _timing.Case("b", fn=lambda: calls.append("b"), state="s2"),
        _timing.Case("c", fn=lambda: calls.append("c"), state="s1"),
    ]
    settings = _timing.Settings("t", repeats=4, min_time=0.0, warmup=0, max_loops=1)
    stats = _timing.measure(cases, settings, switch=switches.append)
    assert set(stats) == {"a", "b", "c"} and all(len(s.samples) == 4 for s in stats.values())
    assert calls[:3] == ["b", "c", "a"]  # calibration walks backwards, ending in the first state
    timed = calls[3:]
    # same-state cases are grouped; even repeats forward, odd repeats reversed (ABBA)
    assert timed == ["a", "c", "b", "b", "c", "a", "a", "c", "b", "b", "c", "a"]
    # calibration enters s2 then s1; then each repeat switches exactly once (the state carries over)
    assert switches == ["s2", "s1", "s2", "s1", "s2", "s1"]


def test_calibration_reaches_min_time_and_gc_is_off_inside_the_loop():
    import gc

    seen = []
    case = _timing.Case("x", stmt="seen.append(gc.isenabled())", namespace={"seen": seen, "gc": gc})
    settings = _timing.Settings("t", repeats=3, min_time=0.002, warmup=1)
    was = gc.isenabled()
    st = _timing.measure([case], settings)["x"]
    assert gc.isenabled() == was
    assert seen and not any(seen)
    assert st.loops > 1 and st.loops * st.median >= 0.002e9 * 0.5


def test_paired_ratio_and_noise_flag():
    a = _timing.Stats([100.0, 200.0, 100.0, 200.0, 100.0], loops=1)
    b = _timing.Stats([50.0, 100.0, 50.0, 100.0, 50.0], loops=1)
    r = _timing.paired_ratio(b, a)
    assert r["ratio"] == 0.5 and r["ratio_q1"] == 0.5 and r["ratio_q3"] == 0.5
    assert a.noisy  # IQR of 100 on a median of 100
    quiet = _timing.Stats([100.0, 101.0, 100.0, 99.0, 100.0], loops=1)
    assert not quiet.noisy


def test_validate_rejects_a_measured_row_without_ratio(tmp_path):
    proc, out_json, _ = _run_bench(tmp_path, "--filter", "launch/override/direct", "--no-vllm")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out_json.read_text())
    assert _report.validate(doc) == []
    doc["groups"][0]["rows"][0]["ratio"] = None
    assert any("without a ratio" in e for e in _report.validate(doc))
    del doc["machine"]["cpu_model"]
    assert any("cpu_model" in e for e in _report.validate(doc))


# -- the output checks that keep a fast wrong row from passing unnoticed ----------------------
def test_kernel_output_check_flags_a_wrong_implementation():
    from bench.suites import kernels

    ref = kernels.reference_fn("expand_kernel")
    right = kernels.kernels_cpu_fn("expand_kernel")

    def wrong(output_ptr, *rest):
        output_ptr.zero_()

    verdict = kernels._verify(
        "expand_kernel", {"B": 4}, {kernels.REF: ref, kernels.OURS: right, kernels.VLLM: wrong}
    )
    assert verdict["verdict"][kernels.OURS] == "matches the reference"
    assert verdict["verdict"][kernels.VLLM].startswith("DIFFERS in output_ptr")
    assert verdict["ok"]  # ours is right; the wrong row is reported in the detail
    verdict = kernels._verify("expand_kernel", {"B": 4}, {kernels.REF: ref, kernels.OURS: wrong})
    assert not verdict["ok"]


def test_kernel_presets_are_the_contracts_sized_to_a_decode_step():
    """The bench's kernel list is the contract table's vLLM kernels; each launch holds its
    contract's arguments in order, with dtypes the contract accepts; a contract without a preset
    fails naming it."""
    import importlib

    import torch

    from bench.suites import _presets
    from kernels_cpu import contracts

    vllm_kernels = [c.name for c in contracts.CONTRACTS if c.vllm and c.runner == "v1"]
    assert list(_presets.KERNELS) == [k for k in vllm_kernels if k not in _presets.OWN_SUITE]
    assert set(_presets.OWN_SUITE) <= set(vllm_kernels)
    for suite in _presets.OWN_SUITE.values():
        assert (REPO / suite).is_file(), suite
    for name in _presets.KERNELS:
        args, kw, _ = _presets.build(name)
        c = contracts.contract(name)
        assert list(kw) == [a.name for a in c.args] and len(args) == len(c.args), name
        for a in c.args:
            if isinstance(kw[a.name], torch.Tensor):
                assert str(kw[a.name].dtype).removeprefix("torch.") in a.dtypes, (name, a.name)
    # vLLM's int32 and int64 buffers, as its launches allocate them
    kw = _presets.build("rejection_greedy_sample_kernel")[1]
    assert kw["output_token_ids_ptr"].dtype == kw["draft_token_ids_ptr"].dtype == torch.int32
    assert kw["target_argmax_ptr"].dtype == kw["bonus_token_ids_ptr"].dtype == torch.int64
    extra = contracts.CONTRACTS[0]._replace(name="no_such_preset_kernel")
    try:
        contracts.CONTRACTS += (extra,)
        with pytest.raises(ImportError, match="no_such_preset_kernel"):
            importlib.reload(_presets)
    finally:
        contracts.CONTRACTS = contracts.CONTRACTS[:-1]
        importlib.reload(_presets)


def test_spec_decode_output_check_flags_disagreeing_greedy_rows():
    import torch

    from bench.suites import spec_decode as sd

    inp = sd._Inputs("greedy", 2, 2, 50)
    good = torch.full((2, 3), -1, dtype=torch.int32)
    good[:, 0] = (inp.draft.view(2, 2)[:, 0] + 1) % 50  # first draft rejected, token in range
    other = good.clone()
    other[1, 0] = (other[1, 0] + 1) % 50
    assert sd._verify(inp, {sd.OPS: good, sd.FUSED: good.clone()})["ok"]
    res = sd._verify(inp, {sd.OPS: good, sd.FUSED: other})
    assert not res["ok"] and "differ" in res["detail"]
    bad = good.clone()
    bad[0, 2] = 7  # a token after the emitted one: malformed
    assert not sd._verify(inp, {sd.OPS: bad})["ok"]


def test_a_failing_vllm_worker_falls_back_and_says_why(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "FASTDISPATCH_VLLM_PYTHON"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--quick",
            "--filter",
            "launch/override",
            "--vllm-python",
            str(fake),
            "--json",
            str(tmp_path / "run.json"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "run.json").read_text())
    assert _report.validate(doc) == []
    assert "status 3" in doc["vllm"]["reason"]
    g = doc["groups"][0]
    assert g["interpreter"] == "main"
    rows = {r["name"]: r for r in g["rows"]}
    assert rows["vLLM KernelOverride"]["status"] == "unavailable"
    assert "vllm not available" in rows["vLLM KernelOverride"]["reason"]
    assert rows["direct call of the no-op"]["status"] == "ok"


def test_an_engine_row_waits_for_the_other_engines_to_go_idle(monkeypatch):
    """Two engines side by side (the runners groups): before a row of one is timed, the other's
    processes must have passed their polling spin; an engine never waits for itself, and one
    idle long enough costs no wait."""
    from bench.suites import engine as E

    clock = [100.0]
    slept = []
    monkeypatch.setattr(E.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(
        E.time, "sleep", lambda s: (slept.append(s), clock.__setitem__(0, clock[0] + s))
    )
    monkeypatch.setattr(E._Engine, "spin_s", 1.0)
    a, b = object.__new__(E._Engine), object.__new__(E._Engine)
    monkeypatch.setattr(E._Engine, "live", {"a": a, "b": b})
    a.touch()
    b.touch()
    clock[0] += 0.3
    a.quiet_others()  # b spoke 0.3 s ago: wait out the rest of its spin
    assert len(slept) == 1 and slept[0] > 0.7
    clock[0] += 2.0
    b.touch()
    slept.clear()
    b.quiet_others()  # a has been idle for 2 s: no wait; b's own spin is not waited for
    a.quiet_others()  # ... but a waits for b, which just spoke
    assert len(slept) == 1 and slept[0] > 1.0
    clock[0] += 5.0
    slept.clear()
    a.quiet_others()
    assert slept == []
