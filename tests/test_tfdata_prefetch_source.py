"""The tf.data panel names a stage tf.data put there as tf.data's (issue 55): on real captures, a prefetch that TF's
default optimizations injected reads "injected by tf.data (autotune)", the program's own ``.prefetch`` reads "yes", and
a pipeline with no Prefetch stage at all says which stage buffers ahead instead of "yes"."""

from __future__ import annotations

import re

import pytest
from conftest import SAMPLES

import tfadvisor
from tfadvisor.report.html import render_html
from tfadvisor.report.markdown import render_markdown

#: sample -> (what its script wrote, the stage that produces ahead, who made it, the panel's words);
#: the scripts are in sample_traces/make_input_samples.py.
CASES = {
    # from_tensor_slices().map(f).batch(32).repeat(): no prefetch written; TF injects one
    "tfdata_seq_map": ("Prefetch", "tf.data", "injected by tf.data (autotune)"),
    # the same pipeline with .prefetch(tf.data.AUTOTUNE) at the end
    "tfdata_seq_map_tuned": ("Prefetch", "program", "yes"),
    # repeat().map(f).batch(32): no prefetch written and none injected; the map and batch fused by tf.data buffer
    "tfdata_repeat_map": ("MapAndBatch", "tf.data", "no Prefetch stage; MapAndBatch (made by tf.data) buffers ahead"),
    # map(f).cache().repeat().batch(32).prefetch(AUTOTUNE)
    "tfdata_repeat_map_tuned": ("Prefetch", "program", "yes"),
}


def _panel(text: str) -> str:
    m = re.search(r"prefetch: <strong>([^<]*)</strong>", text) or re.search(r"^\| prefetch \| (.*?) \|$", text, re.M)
    assert m, "no prefetch figure"
    return m.group(1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_prefetch_says_who_made_it(name):
    stage, by, words = CASES[name]
    res = tfadvisor.analyze(SAMPLES / name)
    assert (res.metrics["tfdata_prefetch_stage"], res.metrics["tfdata_prefetch_by"]) == (stage, by)
    assert res.metrics["tfdata_has_prefetch"] is True  # the rules' figure is unchanged
    assert _panel(render_html(res)) == words and _panel(render_markdown(res)) == words
    if words.startswith("injected"):  # the stage tf.data injected is autotuned, as its stats say
        t = res.tables["tfdata_stages"]
        rows = t[t["kind"].astype(str).str.startswith("Prefetch")]
        assert rows["name"].astype(str).str.startswith("inject/").all() and (rows["autotune"] == "true").all()


def test_prefetch_without_dataset_names_stays_yes():
    """A SYNTHETIC trace's stages carry no dataset names: who made the Prefetch stage is unknown, the panel says yes."""
    res = tfadvisor.analyze(SAMPLES / "synthetic_gpu_fp32")
    assert res.metrics["tfdata_prefetch_stage"] == "Prefetch" and res.metrics["tfdata_prefetch_by"] is None
    assert _panel(render_html(res)) == "yes"
