"""Public path of the Vertex AI hook (``import tfadvisor.vertex; tfadvisor.vertex.init()``, as README shows it);
it lives in :mod:`tfadvisor.capture.vertex`."""

from tfadvisor.capture.vertex import init

__all__ = ["init"]
