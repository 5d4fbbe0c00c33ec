"""Capturing profiles.

In the training program: ``session`` (``tfadvisor.profile``: profiler start/stop, run facts, system
samples), ``markers`` (``tfadvisor.step``), ``analysis`` (the analysis at the end of a window),
``options``, ``rundirs``, ``runfacts``, ``signals``, ``base``; the Keras callback is
:mod:`tfadvisor.keras`, the public module :mod:`tfadvisor.profiling`. From outside it: ``tfadvisor
capture service`` (``service``), ``capture run`` (``runner`` and the ``_sitecustomize`` hook), ``capture
vertex`` (``vertex``, ``wheel``); ``cli`` holds the commands.
"""
