"""``python -m fastdispatch info`` / ``verify``: text and JSON reports, exit statuses.

Most runs are real ``python -m fastdispatch`` subprocesses in this venv (fresh registry, the
environment under test); the stale-holder cases also run ``main([...])`` in-process against the
fake vLLM-shaped package. ``verify --vllm`` against a real vLLM is in
``tests/vllm_suite/check_cli.py``.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from _runtime_helpers import BLOCKER, ROOT, TESTS
from _triton_helpers import triton_installed
from fakepkg_rt import kernels, users

import fastdispatch
from fastdispatch import _cli

EXPAND = "fakepkg_rt.kernels.expand_kernel"
COPY = "fakepkg_rt.kernels.copy_kernel"
# Kept in a dict: module attributes holding a kernel are themselves rebound by the pass.
ORIGINALS = {"expand": kernels.expand_kernel}


def _env(extra_path=None, **env):
    full = dict(os.environ)
    for name in (
        "FASTDISPATCH_PURE_PYTHON",
        "TRITON_INTERPRET",
        "OMP_NUM_THREADS",
        "FASTDISPATCH_OPS_CPU_KERNELS",
    ):
        full.pop(name, None)
    paths = [ROOT, TESTS] + ([str(extra_path)] if extra_path else [])
    full["PYTHONPATH"] = os.pathsep.join(paths + [full.get("PYTHONPATH", "")])
    full.update(env)
    return full


def fd(*args, extra_path=None, **env):
    """Run ``python -m fastdispatch *args``; return the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "fastdispatch", *args],
        capture_output=True,
        text=True,
        env=_env(extra_path, **env),
        cwd=ROOT,
        timeout=240,
    )


def fd_code(code, extra_path=None, **env):
    """Run Python ``code`` (which calls the CLI's ``main``) in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=_env(extra_path, **env),
        cwd=ROOT,
        timeout=240,
    )


def as_json(proc):
    try:
        return json.loads(proc.stdout)
    except ValueError as exc:
        raise AssertionError(
            f"stdout is not one JSON object ({exc}):\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        ) from exc


# -- help and usage ------------------------------------------------------------------------------


def test_help_lists_commands_and_exit_statuses():
    top = fd("--help")
    assert top.returncode == 0, top.stderr
    for word in ("info", "verify", "exit status", "stale"):
        assert word in top.stdout
    verify = fd("verify", "--help")
    assert verify.returncode == 0
    for option in ("--vllm", "--import", "--ops", "--json", "register_triton_kernel_overrides"):
        assert option in verify.stdout
    info = fd("info", "--help")
    assert info.returncode == 0 and "--json" in info.stdout and "forward mode" in info.stdout


def test_usage_errors_exit_2():
    assert fd().returncode == _cli.EXIT_USAGE  # no command
    bad = fd("verify", "--no-such-option")
    assert bad.returncode == _cli.EXIT_USAGE and "unrecognized arguments" in bad.stderr
    assert fd("info", "--vllm").returncode == _cli.EXIT_USAGE  # --vllm is verify's


# -- info ----------------------------------------------------------------------------------------


def test_info_text_and_json_describe_this_process():
    import torch

    import kernels_cpu

    if triton_installed():  # the dev venv: Triton, no GPU driver
        import triton

        triton_text, version = "installed, no active driver", triton.__version__
        triton_facts = {"mode": "no driver", "version": version, "driver": None}
    else:  # linux/arm64, macOS
        triton_text, version = "not installed: Triton kernels are plain functions here", None
        triton_facts = {"mode": "absent", "version": None, "driver": None}
    text = fd("info")
    assert text.returncode == 0, text.stderr
    assert "backend      cython (compiled hot path)" in text.stdout
    assert triton_text in text.stdout
    assert "vllm         absent" in text.stdout
    assert "registered overrides: 0" in text.stdout

    info = as_json(fd("info", "--json", OMP_NUM_THREADS="1"))
    assert info["fastdispatch"] == {"version": fastdispatch.__version__, "backend": "cython"}
    assert info["versions"] == {"torch": torch.__version__, "triton": version, "vllm": None}
    assert info["triton"] == triton_facts
    assert info["vllm"] == {"present": False, "version": None, "distribution": None}
    omp = info["openmp"]
    assert omp["available"] and omp["compiled"] is kernels_cpu.openmp_enabled()
    # OMP_NUM_THREADS=1 -> torch uses one thread -> so do the kernels (they follow torch)
    assert omp["threads"] == 1 and omp["omp_num_threads_env"] == "1"
    # the threshold of the team size in force there (calibrated per team size)
    same_env = fd_code(
        "import kernels_cpu; print(kernels_cpu.parallel_threshold())", OMP_NUM_THREADS="1"
    )
    assert omp["parallel_threshold"] == int(same_env.stdout)
    assert info["overrides"] == []


def test_info_threads_follow_kernels_cpu_setting():
    proc = fd_code("""
        import json, kernels_cpu
        from fastdispatch._cli import collect_info
        kernels_cpu.set_num_threads(3)
        print(json.dumps(collect_info()["openmp"]))
    """)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["threads"] == 3


def test_info_imports_neither_ops_nor_vllm():
    """Reading the Triton mode must not import fastdispatch.ops (which registers kernels)."""
    proc = fd_code(
        BLOCKER
        + """
import sys
from fastdispatch._cli import main
assert main(["info", "--json"]) == 0
import fastdispatch
assert "fastdispatch.ops" not in sys.modules, "info imported fastdispatch.ops"
assert not any(m == "vllm" or m.startswith("vllm.") for m in sys.modules)
assert fastdispatch._registry == {}
"""
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["overrides"] == []


@pytest.mark.parametrize(
    "env, backend, mode",
    [
        ({"FASTDISPATCH_PURE_PYTHON": "1"}, "python", "no driver"),
        ({"TRITON_INTERPRET": "1"}, "cython", "interpreter"),
    ],
)
def test_info_backend_and_triton_mode_follow_the_environment(env, backend, mode):
    info = as_json(fd("info", "--json", **env))
    assert info["fastdispatch"]["backend"] == backend
    # without Triton there is one mode, whatever TRITON_INTERPRET says
    assert info["triton"]["mode"] == (mode if triton_installed() else "absent")


def test_info_with_triton_absent():
    proc = fd_code(
        BLOCKER
        + """
block("triton")
import sys
from fastdispatch._cli import main
sys.exit(main(["info"]))
"""
    )
    assert proc.returncode == 0, proc.stderr
    assert "triton       absent" in proc.stdout
    assert "not installed: Triton kernels are plain functions here" in proc.stdout


def test_info_after_ops_lists_overrides_with_forward_mode():
    info = as_json(fd("info", "--ops", "--json"))
    assert info.get("imported") == ["fastdispatch.ops"], info
    from fastdispatch.ops import QUALNAMES

    assert [o["name"] for o in info["overrides"]] == list(QUALNAMES.values())
    for item in info["overrides"]:
        assert item["forward"] == "by name"  # kernels_cpu takes the kernels' own names
        assert item["impl"].startswith("kernels_cpu.")


def test_forward_mode_reports_positional_and_by_name(clean_registry, capsys):
    def expand_impl(out, inp, cu, rf, rt, max_tokens):  # names differ: positional
        pass

    def copy_impl(src_ptr, dst_ptr, n, src_stride, BLOCK_SIZE=128):  # the kernel's names
        pass

    fastdispatch.register_kernels({EXPAND: expand_impl, COPY: copy_impl})
    assert _cli.main(["info", "--json"]) == 0
    rows = {o["name"]: o for o in json.loads(capsys.readouterr().out)["overrides"]}
    assert rows[EXPAND]["forward"] == "positional"
    assert rows[COPY]["forward"] == "by name"
    assert rows[EXPAND]["impl"].endswith("expand_impl")
    assert rows[EXPAND]["original"] == "fakepkg_rt.kernels.expand_kernel"
    assert _cli.main(["info"]) == 0
    text = capsys.readouterr().out
    assert f"{EXPAND} -> " in text and "(positional)" in text and "(by name)" in text


# -- verify --------------------------------------------------------------------------------------


def test_verify_ops_is_clean():
    from fastdispatch.ops import QUALNAMES

    text = fd("verify", "--ops")
    assert text.returncode == 0, text.stdout + text.stderr
    assert f"OK: {len(QUALNAMES)} registered, no holder left on an original kernel" in text.stdout
    report = as_json(fd("verify", "--ops", "--json"))
    assert report["ok"] is True and report["status"] == 0 and report["stale"] == {}
    assert report["imported"] == ["fastdispatch.ops"] and report["vllm"] is None
    assert {o["name"] for o in report["overrides"]} == set(QUALNAMES.values())
    assert all(o["stale"] == [] for o in report["overrides"])


STALE_MODULE = """
import fastdispatch
from fakepkg_rt import kernels

_kept = [kernels.expand_kernel]  # out of the rebinding pass's sight (a list item)


def impl(out, inp, cu, rf, rt, max_tokens):
    pass


fastdispatch.register_kernels({"fakepkg_rt.kernels.expand_kernel": impl})
alias = _kept[0]  # a module attribute made after the pass: still the original kernel
"""


def test_verify_reports_a_stale_holder_and_exits_1(tmp_path):
    (tmp_path / "fd_cli_stale.py").write_text(STALE_MODULE)
    text = fd("verify", "--import", "fd_cli_stale", extra_path=tmp_path)
    assert text.returncode == _cli.EXIT_STALE, text.stdout + text.stderr
    assert f"STALE {EXPAND} -> fd_cli_stale.impl (positional)" in text.stdout
    assert "still on the original: fd_cli_stale.alias" in text.stdout
    assert "STALE: 1 holder(s) of 1 kernel(s) still launch the original" in text.stdout

    report = as_json(fd("verify", "--import", "fd_cli_stale", "--json", extra_path=tmp_path))
    assert report["ok"] is False and report["status"] == _cli.EXIT_STALE
    assert report["stale"] == {EXPAND: ["fd_cli_stale.alias"]}
    assert report["imported"] == ["fd_cli_stale"]


def test_verify_in_process_stale_then_clean(clean_registry, capsys):
    def expand_impl(out, inp, cu, rf, rt, max_tokens):
        pass

    fastdispatch.register_kernels({EXPAND: expand_impl})
    assert _cli.main(["verify"]) == _cli.EXIT_OK
    assert "ok    fakepkg_rt.kernels.expand_kernel" in capsys.readouterr().out
    users.expand_kernel = ORIGINALS["expand"]  # a holder rebound back to the original
    try:
        assert _cli.main(["verify", "--json"]) == _cli.EXIT_STALE
        report = json.loads(capsys.readouterr().out)
        assert report["stale"] == {EXPAND: ["fakepkg_rt.users.expand_kernel"]}
    finally:
        users.expand_kernel = kernels.expand_kernel
    assert _cli.main(["verify"]) == _cli.EXIT_OK


def test_verify_import_failure_has_its_own_status():
    text = fd("verify", "--import", "no_such_module_fd")
    assert text.returncode == _cli.EXIT_IMPORT_FAILED
    assert "cannot import 'no_such_module_fd'" in text.stderr
    report = as_json(fd("verify", "--import", "no_such_module_fd", "--json"))
    assert (
        report == {"ok": False, "status": _cli.EXIT_IMPORT_FAILED, "error": report["error"]}
        and "no_such_module_fd" in report["error"]
    )


def test_verify_vllm_without_vllm_exits_3():
    proc = fd_code(
        BLOCKER
        + """
block("vllm")
import sys
from fastdispatch._cli import main
sys.exit(main(["verify", "--vllm"]))
"""
    )
    assert proc.returncode == _cli.EXIT_NO_VLLM, proc.stdout + proc.stderr
    assert "--vllm: vLLM is not importable" in proc.stderr
    assert proc.stdout == ""
    assert fd("verify", "--vllm").returncode == _cli.EXIT_NO_VLLM  # this venv has no vLLM


def test_json_stays_parseable_when_imports_print(tmp_path):
    (tmp_path / "fd_cli_noisy.py").write_text("print('noise from an imported module')\n")
    proc = fd("verify", "--import", "fd_cli_noisy", "--json", extra_path=tmp_path)
    assert proc.returncode == 0
    assert as_json(proc)["imported"] == ["fd_cli_noisy"]
    assert "noise from an imported module" in proc.stderr
