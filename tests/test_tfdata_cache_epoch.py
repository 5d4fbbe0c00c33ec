"""A pipeline with ``.cache()`` captured in a later epoch (issue 26, point 5): the filled cache is still seen
in the pipeline as built (its iterator names), so no finding says that nothing caches the map's output, and
no fix adds a cache the pipeline already has. Real TensorFlow capture, TF's default tf.data optimizations."""

from __future__ import annotations

from conftest import CAPTURE_MARKS, run_capture_script

import tfadvisor
from tfadvisor.report.findings import finding_rule

pytestmark = CAPTURE_MARKS

SCRIPT = r'''
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np, keras, tensorflow as tf
from tfadvisor.keras import AdvisorCallback
x = np.random.rand(2048, 64).astype("float32"); y = np.random.randint(0, 4, 2048)
def expensive(a, b):  # deterministic: cached after the first epoch
    for _ in range(30):
        a = tf.tanh(tf.linalg.matvec(tf.eye(64), a))
    return a, b
def augment(a, b):  # random: after the cache, runs every epoch
    a = tf.where(tf.random.uniform(()) > 0.5, a, -a)
    for _ in range(30):
        a = tf.tanh(tf.linalg.matvec(tf.eye(64), a) + tf.random.uniform((64,), -0.1, 0.1))
    return a, b
ds = (tf.data.Dataset.from_tensor_slices((x, y)).map(expensive, num_parallel_calls=tf.data.AUTOTUNE).cache()
      .shuffle(512).map(augment, num_parallel_calls=tf.data.AUTOTUNE).batch(32).prefetch(tf.data.AUTOTUNE))
m = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(4)])
m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
cb = AdvisorCallback(sys.argv[1], steps=(64 + 10, 64 + 30), analyze=False)  # epoch 2: the cache is filled
m.fit(ds, epochs=3, verbose=0, callbacks=[cb])
print("RUN", cb.run_dir, flush=True)
'''


def test_a_filled_cache_is_no_missing_cache(tmp_path):
    r = tfadvisor.analyze(run_capture_script(SCRIPT, tmp_path))
    assert "Cache" in str(r.metrics["tfdata_pipeline"]), r.metrics["tfdata_pipeline"]
    rules = [finding_rule(f) for f in r.findings]
    assert "tfdata_no_cache" not in rules, rules
    for f in r.findings:  # no fix adds the cache this pipeline has
        assert ".cache()  # after the map" not in (f.fix or ""), (finding_rule(f), f.fix)
