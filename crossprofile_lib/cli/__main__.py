"""``python -m crossprofile_lib.cli``: the same as the ``crossprofile`` console script."""

import sys

from crossprofile_lib.cli import main

sys.exit(main())
