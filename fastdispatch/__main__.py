"""``python -m fastdispatch {info,verify}``: see :mod:`fastdispatch._cli`."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
