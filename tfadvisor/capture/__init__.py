"""Capturing profiles: ``tfadvisor capture service`` and ``tfadvisor capture run``.

The Keras callback lives in :mod:`tfadvisor.keras`; the in-program context managers in
:mod:`tfadvisor.profiling` (``tfadvisor.profile``, ``tfadvisor.step``).
"""
