"""The data every stage shares: the columnar :class:`~tfadvisor.model.trace.Trace` (:mod:`.trace`), the
stat value kinds (:mod:`.kinds`), host names of files (:mod:`.names`) and numpy-column tables
(:mod:`.table`). The model imports nothing of the reader: io builds it, analyses read it."""
