"""``python -m tfadvisor.capture ...``: the ``tfadvisor capture`` commands on their own."""

from tfadvisor.capture.cli import main

main()
