"""The command line: every ``tfadvisor`` command (typer) and the MCP server that mirrors them.

``app`` (the root command: analyze, export, runs, schema, rules, mcp; ``main`` is the console script), ``diff``,
``scaling``, ``capture`` (service, run, vertex), ``mcp_server``; ``common`` holds what they share (failing with one
line, the options' parsers). The top layer: it may import every other; nothing imports it.
"""
