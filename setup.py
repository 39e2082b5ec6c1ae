"""Build script: compiles the Cython modules of ``fastdispatch`` and ``kernels_cpu``.

Development builds also compile ``fdkit/*.pyx`` (the dev kit's measuring instruments, e.g.
``fdkit._floor``; ``fdkit`` is not a package of the wheel): see ``FASTDISPATCH_DEV_EXTENSIONS``.

torch is deliberately *not* a build requirement: every extension reads tensors through
``data_ptr()``/dtype/shape at run time and loops over raw pointers, so the wheel builds on a
machine without torch (and without a GPU).

Knobs (environment variables, all optional):

``FASTDISPATCH_NO_OPENMP=1``
    build ``kernels_cpu`` without OpenMP (serial loops). Without the variable, OpenMP is used
    when the compiler accepts ``-fopenmp`` (GCC, most Linux clangs) and silently skipped
    otherwise (Apple clang); ``kernels_cpu.openmp_enabled()`` reports which.
``FASTDISPATCH_NATIVE=1``
    add ``-march=native`` (GCC/clang): code for *this* CPU only, for local builds. Never set it
    for a wheel you hand to anyone else: the default targets the platform baseline (x86-64,
    aarch64), and the kernels that profit from wider vectors already carry AVX2/AVX-512
    clones chosen at load time (``target_clones``). Float results do not depend on it
    (``-ffp-contract=off`` stays).
``FASTDISPATCH_OPT_LEVEL=N``
    ``-ON`` (0, 1, 2 or 3; default 3) for the test builds whose point is not speed -- the debug
    CPython's (``tools/debug_python_tests.sh`` uses 1: half the compile time of -O3, the same
    C-API calls). Never for a wheel you hand to anyone else.
``FASTDISPATCH_BUILD_JOBS=N``
    how many modules are cythonized and compiled at once (default: the CPU count; ``-j`` on the
    command line and a ``[build_ext] parallel`` configuration win over it). 27 modules, a few
    seconds of compiler each: a serial build leaves all but one core idle.
``FASTDISPATCH_SANITIZE=address``
    build with AddressSanitizer (for ``tools/asan_tests.sh``); never for release builds.
``FASTDISPATCH_EXTENSIONS=mod1,mod2``
    build only these extension modules (dotted names, ``fdkit._floor`` included); a developer
    convenience.
``FASTDISPATCH_NO_BUILD=1``
    only with an editable install (``pip install --no-build-isolation -e .``): declare no
    extension module, so the install registers the metadata (the vLLM plugin's entry point)
    and the path to a tree whose extensions are already built in place (``build_ext
    --inplace``) without compiling them again -- a second venv over the same checkout
    (tools/make_vllm_venv.sh). Refused for any other build: a wheel without its extensions
    would run the pure-Python twin.
``FASTDISPATCH_DEV_EXTENSIONS=1``
    also build the dev kit's extensions, ``fdkit/*.pyx``. They are built without the variable
    too whenever the build is in place -- ``build_ext --inplace`` (``-i``) or an editable install
    (``pip install -e .``, the ``editable_wheel`` command) -- and never otherwise: a regular
    ``python -m build`` / ``pip wheel`` has neither, so the wheel holds no ``fdkit`` extension
    (nor any other ``fdkit`` file: the package list in pyproject.toml excludes it).
"""

import glob
import os
import shutil
import sys
import tempfile

from setuptools import Extension, setup


def _compiler_accepts_openmp():
    """Try to compile and link a tiny OpenMP program with the configured C compiler."""
    if os.environ.get("FASTDISPATCH_NO_OPENMP") == "1":
        return False
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    cc = new_compiler()
    customize_compiler(cc)
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "omp_probe.c")
        with open(src, "w") as f:
            f.write("#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
        devnull = os.open(os.devnull, os.O_WRONLY)
        saved = os.dup(2)
        os.dup2(devnull, 2)  # keep the probe quiet on compilers without OpenMP
        try:
            objs = cc.compile([src], output_dir=tmp, extra_postargs=["-fopenmp"])
            cc.link_executable(objs, os.path.join(tmp, "omp_probe"), extra_postargs=["-fopenmp"])
        finally:
            os.dup2(saved, 2)
            os.close(devnull)
            os.close(saved)
        return True
    except Exception:  # noqa: BLE001 - whatever fails (compile, link, no compiler): no OpenMP
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _dev_build():
    """Whether this is an in-place/development build, which also compiles ``fdkit/*.pyx``."""
    if os.environ.get("FASTDISPATCH_DEV_EXTENSIONS") == "1":
        return True
    return "editable_wheel" in sys.argv or "--inplace" in sys.argv or "-i" in sys.argv


def _jobs():
    jobs = os.environ.get("FASTDISPATCH_BUILD_JOBS", "")
    if jobs and not jobs.isdigit():
        raise ValueError(f"FASTDISPATCH_BUILD_JOBS must be a positive integer, got {jobs!r}")
    return max(1, int(jobs) if jobs else (os.cpu_count() or 1))


def _extensions():
    if os.environ.get("FASTDISPATCH_NO_BUILD") == "1":
        if {"build", "build_ext", "bdist_wheel", "bdist", "sdist", "install"} & set(sys.argv):
            raise ValueError("FASTDISPATCH_NO_BUILD=1 is for an editable install only")
        return []
    from Cython.Build import cythonize

    use_omp = _compiler_accepts_openmp()
    sanitize = os.environ.get("FASTDISPATCH_SANITIZE", "")
    only = {m for m in os.environ.get("FASTDISPATCH_EXTENSIONS", "").split(",") if m}
    if sys.platform == "win32":
        base_cflags = ["/O2"]
    else:
        # -O3 without -ffast-math: IEEE semantics stay. -ffp-contract=off: no a*b+c -> fma
        # contraction, so float results round the same on every target (aarch64 has fma in its
        # baseline, the x86-64-v3/v4 clones in kernels_cpu do too) and match the torch references
        # bit for bit.
        level = os.environ.get("FASTDISPATCH_OPT_LEVEL", "3")
        if level not in ("0", "1", "2", "3"):
            raise ValueError(f"FASTDISPATCH_OPT_LEVEL must be 0, 1, 2 or 3, got {level!r}")
        # -fno-trapping-math: no code relies on floating-point exceptions, and without it GCC
        # keeps a select on a float compare (x < c ? c : x) as a branch, so loops such as
        # fd_expf's (kernels_cpu/_fastexp.h) do not vectorise; values are unchanged (clang's
        # default).
        base_cflags = [f"-O{level}", "-ffp-contract=off", "-fno-trapping-math"]
        if os.environ.get("FASTDISPATCH_NATIVE") == "1":
            base_cflags.append("-march=native")
    base_ldflags = []
    if sanitize:
        base_cflags += [f"-fsanitize={sanitize}", "-fno-omit-frame-pointer", "-O1", "-g"]
        base_ldflags += [f"-fsanitize={sanitize}"]

    exts = []
    sources = glob.glob("fastdispatch/*.pyx") + glob.glob("kernels_cpu/*.pyx")
    if _dev_build():
        sources += glob.glob("fdkit/*.pyx")
    for pyx in sorted(sources):
        name = pyx[:-4].replace(os.sep, ".").replace("/", ".")
        if only and name not in only:
            continue
        cflags, ldflags = list(base_cflags), list(base_ldflags)
        if name.startswith("kernels_cpu.") and use_omp:
            cflags.append("-fopenmp")
            ldflags.append("-fopenmp")
        exts.append(Extension(name, [pyx], extra_compile_args=cflags, extra_link_args=ldflags))
    return cythonize(
        exts,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
        compile_time_env={},
        quiet=True,
        nthreads=_jobs() if _jobs() > 1 else 0,
    )


setup(ext_modules=_extensions(), options={"build_ext": {"parallel": _jobs()}})
