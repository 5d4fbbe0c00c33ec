"""What the capture modules share: their logger, :class:`CaptureWarning` and :func:`warn` (capture
never raises into training: a problem is a warning), :func:`say` (every line capture prints: a
full disk, a closed pipe or a closed file never raises into training), and TensorFlow, imported
when first needed."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from types import ModuleType
from typing import TextIO

logger = logging.getLogger("tfadvisor.capture")

TF_INSTALL_HINT = "TensorFlow is not installed: pip install 'tfadvisor[tf]' (or 'tfadvisor[tf-cpu]')"


class CaptureWarning(UserWarning):
    """A capture problem that did not stop training (profiler, metadata or analysis)."""


class TensorFlowMissing(ImportError):
    """TensorFlow is needed for this capture and is not installed."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(TF_INSTALL_HINT + (f" ({detail})" if detail else ""))


_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SKIP_PARTS = (os.sep + "keras" + os.sep, os.sep + "tensorflow" + os.sep)


def _user_stacklevel() -> int:
    """The stacklevel (for :func:`warn`'s caller) of the first frame outside tfadvisor, Keras and TensorFlow."""
    level = 2
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if not (name.startswith(_PKG_DIR) or any(p in name for p in _SKIP_PARTS)):
            return level
        f = f.f_back
        level += 1
    return 2


PREFIX = "tfadvisor: "


def say(line: str, stream: TextIO | None = None) -> bool:
    """Print ``line`` to ``stream`` (default stdout), flushed; False when it cannot be written.

    Output is best-effort: a full disk (``/dev/full``), a pipe whose reader is gone, a closed or
    missing stream never raises into the training program.
    """
    out = stream if stream is not None else sys.stdout
    if out is None:  # pythonw, a daemon with its streams closed
        return False
    try:
        out.write(line + "\n")
        out.flush()
        return True
    except (OSError, ValueError):  # ENOSPC, EPIPE; ValueError: a closed file
        return False


def say_err(line: str) -> bool:
    """:func:`say` on stderr."""
    return say(line, sys.stderr)


def warn(message: str) -> None:
    """A capture problem: one ``tfadvisor: ...`` warning on stderr (never an exception), and a debug log line.

    The warnings machinery prints it (filterable with ``warnings``/``-W``; a stream that cannot be written
    is skipped); the ``tfadvisor.capture`` logger gets it at DEBUG, so that logging set up by the program or
    by TensorFlow (absl) does not print it a second time.
    """
    text = message if message.startswith(PREFIX) else PREFIX + message
    logger.debug(text)
    warnings.warn(text, CaptureWarning, stacklevel=_user_stacklevel())


def import_tf() -> ModuleType:
    """``tensorflow``, or :class:`TensorFlowMissing` with the install hint."""
    try:
        import tensorflow as tf
    except ImportError as err:
        raise TensorFlowMissing(str(err)) from None
    return tf
