"""Name tests applied to a plane's names once per distinct list of names (tfadvisor.analyses.names): the devices of
a host and the hosts of a pod share their metadata's names, so each list is classified once per process."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SAMPLES

import tfadvisor
from tfadvisor.analyses import names as nm
from tfadvisor.analyses.activity import _device_class


def test_values_equal_the_test_per_name_and_are_shared_read_only():
    names = np.array(["ncclAllReduceRingLLKernel", "MemcpyH2D", "volta_sgemm_128x64_nn"], dtype=object)
    got = nm.name_values(names, _device_class, np.int64, 4)
    assert got.tolist() == [_device_class(str(n)) for n in names] + [4]
    assert not got.flags.writeable
    with pytest.raises(ValueError):
        got[0] = 0  # shared by every plane of these names: never written
    # an equal list (another plane's copy) gets the same array; another list its own
    assert nm.name_values(names.copy(), _device_class, np.int64, 4) is got
    other = nm.name_values(names[:2], _device_class, np.int64, 4)
    assert other is not got and other.tolist() == got[:2].tolist() + [4]
    # the dtype and the extra slot are part of what is asked
    assert nm.name_values(names, _device_class, np.int8, 4).dtype == np.int8
    assert nm.name_values(names, _device_class, np.int64).tolist() == got[:-1].tolist()


def test_mask_is_bool_of_the_test():
    names = ["a", "bb", ""]
    got = nm.name_mask(names, lambda n: n or None, extra=True)
    assert got.dtype == bool and got.tolist() == [True, True, False, True]
    assert nm.name_mask([], len).shape == (0,)


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(nm, "CACHED_ARRAYS", 4)
    nm._ARRAYS.clear()
    for i in range(10):
        nm.name_values([f"n{i}"], len, np.int64)
    assert len(nm._ARRAYS) == 4


def test_planes_of_one_trace_share_their_classes():
    """The GPU planes of a real multi-worker capture: each gets its own names' classes, planes whose names are equal
    one array."""
    trace = tfadvisor.load(SAMPLES / "real_tf_gpu_multiworker")
    devs = [p for p in trace.planes if p.name.startswith("/device:GPU")]
    assert devs
    seen = {}
    for p in devs:
        got = nm.name_values(p.event_names, _device_class, np.int64, 4)
        assert got.tolist() == [_device_class(str(n)) for n in p.event_names] + [4]
        key = tuple(p.event_names.tolist())
        assert seen.setdefault(key, got) is got
