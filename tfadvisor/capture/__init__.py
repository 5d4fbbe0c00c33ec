"""Capturing profiles: in the training program and around it.

In the training program: ``keras`` (the Keras callback; public path ``tfadvisor.keras``), ``session``
(``tfadvisor.profile``: profiler start/stop, run facts, system samples), ``markers`` (``tfadvisor.step``),
``analysis`` (the analysis at the end of a window), ``options``, ``rundirs``, ``runfacts``, ``signals``, ``base``,
``system_sampler`` (CPU, memory, disk, network and GPU use during a window), ``vertex`` (the Vertex AI hook; public
path ``tfadvisor.vertex``); ``profiling`` re-exports ``profile``, ``step``, ``ProfileSession`` and
``CaptureWarning``. From outside it: ``tfadvisor capture service`` (``service``), ``capture run`` (``runner`` and the
``_sitecustomize`` hook), ``capture vertex`` (``vertex_job``, ``wheel``); the commands are in :mod:`tfadvisor.cli`.
"""
