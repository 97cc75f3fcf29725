"""A plugin that calls os._exit(0) while it is imported: no finally, no atexit, no word.
accelbench must report it, not end with exit 0."""

import os

os._exit(0)
