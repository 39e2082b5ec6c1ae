"""fdkit: the project's dev kit -- what tests/, bench/ and tools/ share, kept out of the wheel.

The wheel holds the product only (``fastdispatch``, ``kernels_cpu``). What exists to test and
measure it lives here, in one place, so the three users do not each grow a copy:

* :mod:`fdkit.cases` -- random valid launch cases for the kernel contracts (poisoned outputs
  between canary guards), for differential tests on CPU, under the interpreter and on a GPU;
* :mod:`fdkit.guards` -- the one guard/poison scheme of every buffer handed to a kernel (tests and
  bench);
* :mod:`fdkit.reference` -- the plain-torch reference of each kernel (one per kernel), the
  oracle of those tests and the baseline row of the kernel benchmarks;
* ``fdkit._floor`` -- the measuring instruments of the launch-overhead floor (a Cython
  extension, built only by in-place/dev builds: ``setup.py build_ext --inplace``, an editable
  install, or ``FASTDISPATCH_DEV_EXTENSIONS=1``).

It is not installed: run from the repository root (pytest's ``pythonpath`` and the scripts in
tools/ put the root on ``sys.path``). Nothing in ``fastdispatch`` or ``kernels_cpu`` may import it.
"""
