"""A plugin whose import never ends: accelbench must end it, in one line, not hang."""

while True:
    pass
