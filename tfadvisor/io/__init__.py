"""Reading profiles: find the runs and host files of a logdir (:mod:`.discovery`), decode each XPlane's
wire format into columns (:mod:`.wire`, C kernels), fix what a file gets wrong (:mod:`.sanity`), and
build the :class:`~tfadvisor.model.trace.Trace` (:mod:`.reader`)."""
