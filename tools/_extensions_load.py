"""Every compiled module of a tree loads from that tree, built for the running interpreter.

    python tools/_extensions_load.py ROOT [--fdkit] [--debug] [--no-openmp]

Imports the module of every ``fastdispatch/*.pyx`` and ``kernels_cpu/*.pyx`` under ROOT (and
``fdkit/*.pyx`` with ``--fdkit``) and checks that each came from ROOT with this interpreter's
extension suffix (with ``--debug``: a debug interpreter's, ``...d-...``), that fastdispatch
chose its compiled backend, and with ``--no-openmp`` that ``kernels_cpu`` was built without
OpenMP. Used by ``tools/debug_python_tests.sh``, ``tools/python_matrix.sh`` and
``tools/check_builds.sh`` (its no-OpenMP and clang builds) on their copies of the tree; exits
non-zero naming the first module that did not load as it should.
"""

import glob
import importlib
import importlib.machinery
import os
import sys


def main(argv):
    root = os.path.realpath(argv[0])
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    if "--debug" in argv:
        assert "d-" in suffix, f"not a debug interpreter's suffix: {suffix}"
    packages = ["fastdispatch", "kernels_cpu"] + (["fdkit"] if "--fdkit" in argv else [])
    pyx = sorted(p for pkg in packages for p in glob.glob(f"{root}/{pkg}/*.pyx"))
    for p in pyx:
        mod = importlib.import_module(os.path.relpath(p, root)[:-4].replace(os.sep, "."))
        where = os.path.realpath(mod.__file__)
        assert where.startswith(root + os.sep) and where.endswith(suffix), (
            f"{mod.__name__} from {where}"
        )
    import fastdispatch

    assert fastdispatch.BACKEND == "cython", fastdispatch.BACKEND
    if "--no-openmp" in argv:
        import kernels_cpu

        assert kernels_cpu.openmp_enabled() is False, "a build without OpenMP reports OpenMP"
    print(f"{len(pyx)} extensions ({suffix}) load from {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
