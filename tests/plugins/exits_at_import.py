"""A plugin that calls sys.exit(7) while it is imported: accelbench must say so."""

import sys

sys.exit(7)
