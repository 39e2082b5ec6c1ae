"""The plugin's malloc setting (fastdispatch.vllm._malloc): applied once, skipped where asked."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")

_PROBE = textwrap.dedent(
    """
    from fastdispatch.vllm import _malloc
    print(_malloc.keep_large_blocks())
    print(_malloc.keep_large_blocks() is _malloc.keep_large_blocks())
    """
)


def _run(env_extra):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "GLIBC_TUNABLES")}
    env.pop("FASTDISPATCH_VLLM_MALLOC", None)
    env.update(env_extra)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def test_applied_once_in_a_process():
    said, same = _run({})
    assert said.startswith("glibc ") and "reused from the heap" in said, said
    assert same == "True"


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"FASTDISPATCH_VLLM_MALLOC": "0"}, "FASTDISPATCH_VLLM_MALLOC=0"),
        ({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}, "GLIBC_TUNABLES"),
    ],
)
def test_left_alone_where_asked(env, why):
    said, _ = _run(env)
    assert said.startswith("malloc left as it is") and why in said, said


def test_a_large_block_is_reused_after_it():
    """The effect itself: a freed 64 MiB block comes back at the same address (the heap),
    where without the setting each allocation is a fresh mapping."""
    probe = textwrap.dedent(
        """
        import ctypes, sys
        from fastdispatch.vllm import _malloc
        if sys.argv[1] == "on":
            _malloc.keep_large_blocks()
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc.restype = ctypes.c_void_p
        libc.free.argtypes = (ctypes.c_void_p,)
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        n = 64 << 20
        a = libc.malloc(n); ctypes.memset(a, 1, n); libc.free(a)
        b = libc.malloc(n)
        # a mapped block is freed by munmap: the heap's reuse keeps the pages (no new faults)
        import resource
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        ctypes.memset(b, 2, n)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        """
    )
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "GLIBC_TUNABLES")}
    env.pop("FASTDISPATCH_VLLM_MALLOC", None)

    def faults(mode):
        out = subprocess.run(
            [sys.executable, "-c", probe, mode],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return int(out.stdout.strip())

    pages = (64 << 20) // 4096
    assert faults("off") > pages // 2  # a fresh mapping: its pages fault in again
    assert faults("on") < pages // 10  # the same heap block: already resident
