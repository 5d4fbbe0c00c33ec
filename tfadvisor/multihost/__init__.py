"""A run of one or many hosts, analysed: ``analysis`` (``analyze_run``, ``analyze_hosts``: per-host analyses,
then the run-level metrics: stragglers, stand-out hosts), ``result`` (``RunResult``), ``scaling`` (efficiency across
runs at different replica counts), and the executors: ``worker`` (what each host's task runs) and ``runtime/`` (a
local process pool, Dask, the in-flight observer).
"""
