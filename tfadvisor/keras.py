"""Public path of the Keras callback (``from tfadvisor.keras import AdvisorCallback``, as README shows it); the
callback lives in :mod:`tfadvisor.capture.keras`. Importing this module imports neither Keras nor TensorFlow: the
class is made on first access, as there."""

from __future__ import annotations

__all__ = ["AdvisorCallback"]  # noqa: F822 - made on first access (module __getattr__)


def __getattr__(name: str):
    if name == "AdvisorCallback":
        from tfadvisor.capture.keras import AdvisorCallback

        return AdvisorCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
