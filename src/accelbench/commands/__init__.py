"""Subcommands beyond the core ones; each module has ``register(subparsers)``.

A module here adds its parsers with ``set_defaults(handler=fn)`` where
``fn(args, out_console, err_console) -> int``; :mod:`accelbench.cli` lists the
modules in ``COMMAND_MODULES``. Modules must stay light at import time.
"""
