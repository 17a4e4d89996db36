"""The fault suite: paid load through a real ``gateway up`` stack while faults are injected one at a
time, then proof that nothing was lost (``python -m tests.faults``, ``make faults``; docs/reliability.md).
"""
