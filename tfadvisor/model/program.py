"""What the logdir says of the program besides the profile: the TensorBoard event files beside it (the Keras model's
config, the graph's function library, the scalars' tags), as :mod:`tfadvisor.io.events` reads them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class EventFacts:
    """The program's facts in a run's TensorBoard event files; empty where there are none."""

    #: the event files read, their paths relative to the directory the search started from where they lie below it
    files: list[str] = field(default_factory=list)
    #: the Keras model's config (the ``graph_keras_model`` summary: ``model.to_json()``), None where none was written
    model_config: dict[str, Any] | None = None
    #: the file that held it
    model_config_file: str = ""
    #: function name (``__inference_train_function_1234``) -> {node name: op type} of its body, from the graphs'
    #: function libraries (``graph_def`` events, ``graph_run_metadata_graph`` summaries)
    functions: dict[str, dict[str, str]] = field(default_factory=dict)
    #: the op name prefix a call opens (``StatefulPartitionedCall``, ``StatefulPartitionedCall/PartitionedCall_1``)
    #: -> the functions it calls (the node's ``f`` attribute) in the graphs written, for their call nodes and their
    #: functions' own (several graphs may each have a ``StatefulPartitionedCall``)
    calls: dict[str, list[str]] = field(default_factory=dict)
    #: the scalars' tags by the directory of their file (``train``: ``epoch_loss``, ``epoch_auc``, ...)
    scalar_tags: dict[str, list[str]] = field(default_factory=dict)
    #: what could not be read (a bad record, a file cut short or past the cap): said as ``load:`` notes
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.model_config or self.functions or self.calls or self.scalar_tags)

    def function_of(self, op_name: str) -> str | None:
        """The function whose call made the op ``op_name`` (``scope/.../name``): of the functions called at its
        longest call prefix, the one whose body has a node of the rest of its name, or the only one; None where no
        call says or the graphs' calls there differ and no body tells them apart."""
        parts = op_name.split("/")
        for n in range(len(parts) - 1, 0, -1):
            called = self.calls.get("/".join(parts[:n]))
            if not called:
                continue
            rest = "/".join(parts[n:])
            holds = [f for f in called if rest in self.functions.get(f, ())]
            if len(holds) == 1 or len(called) == 1:
                return (holds or called)[0]
            return None
        return None


__all__ = ["EventFacts"]
