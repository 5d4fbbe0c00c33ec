"""What the capture modules share: their logger, :class:`CaptureWarning` and :func:`warn` (capture
never raises into training: a problem is a warning), and TensorFlow, imported when first needed."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from types import ModuleType

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


def warn(message: str) -> None:
    """A capture problem: a warning (and a log line where logging is set up), never an exception."""
    if logger.hasHandlers():
        logger.warning(message)
    warnings.warn(message, CaptureWarning, stacklevel=_user_stacklevel())


def import_tf() -> ModuleType:
    """``tensorflow``, or :class:`TensorFlowMissing` with the install hint."""
    try:
        import tensorflow as tf
    except ImportError as err:
        raise TensorFlowMissing(str(err)) from None
    return tf
