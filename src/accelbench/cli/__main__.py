"""``python -m accelbench.cli``."""

import sys

from accelbench.cli import main

sys.exit(main())
