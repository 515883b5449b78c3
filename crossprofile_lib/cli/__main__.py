"""``python -m crossprofile_lib.cli``: the same as the ``crossprofile`` console script."""

import sys

from . import main

sys.exit(main())
