"""Process isolation: everything about the child processes that run a case or any other
code that may crash, hang or exit (a model's FLOP count, a kernel, a framework's probe).

Parent side: :mod:`child` (spawn, watch, kill, the reason of a death), :mod:`forkserver`
(a warm server per framework that forks each child), :mod:`warmhub` (servers kept between
commands), :mod:`isolate` (call one function in a child), :mod:`ask` (what a framework
offers here, asked in a child). Child side: :mod:`channel` (the private answer channel,
death with the parent), :mod:`serve` (the warm server's loop). Framework knowledge comes
from :mod:`accelbench.backends` (``startup``, ``probe``); what a child runs is named by
module (the case's worker is :mod:`accelbench.execution.worker`).
"""
