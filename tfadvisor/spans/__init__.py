"""The interval engine every analysis stands on: event times as sets of ``[start, end)`` intervals
(``intervals``: unions, coverage, time inside windows, event rows of a plane) and big sets of event rows read a
time chunk at a time (``rowsets``). It reads the model's planes and the C kernels, and knows no analysis.
"""
