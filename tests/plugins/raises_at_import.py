"""A plugin whose import raises: accelbench must refuse it in one line."""

raise RuntimeError("this plugin is broken on purpose")
