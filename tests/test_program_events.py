"""The program's own structure from the logdir (issue 52, point 3): the TensorBoard event files beside a profile
(tfadvisor.io.events: the Keras model's config, the scalars' tags, the graph's function library), the model's facts
in tfadvisor_run.json (the Keras callback), and the components table naming the layers in the program's words.

One real capture for the module (tests/program_capture.py: a Keras ``fit`` with ``keras.callbacks.TensorBoard(...,
profile_batch=(3, 6), write_graph=True)`` and tfadvisor's callback, and a custom loop whose graph is exported); what
the tests expect comes from Keras's own objects (expected.json), not from the files read."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLES, capture_env

import tfadvisor
from tfadvisor.analyses.components import DIFFERENTIATED, STEP
from tfadvisor.io.events import MAX_FILE_BYTES, crc32c_many, masked, read_events, records
from tfadvisor.io.runmeta import keras_facts
from tfadvisor.model.program import EventFacts

TF = pytest.mark.skipif(__import__("importlib").util.find_spec("tensorflow") is None,
                        reason="the capture needs TensorFlow (pip install 'tfadvisor[tf-cpu]')")


@pytest.fixture(scope="module")
def cap(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("program")
    p = subprocess.run([sys.executable, str(ROOT / "tests" / "program_capture.py"), str(out)], env=capture_env(),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def expected(cap: Path) -> dict:
    return json.loads((cap / "expected.json").read_text())


def run_dir(logdir: Path) -> Path:
    return next(logdir.rglob("*.xplane.pb")).parent


def dense_labels(layers: list[dict]) -> dict[str, str]:
    """The label each Dense layer should have, from Keras's objects: ``layer block/inner_dense (Dense, 24 units)``."""
    return {"/".join(x["path"]): f"layer {'/'.join(x['path'])} (Dense, {x['units']} units)"
            for x in layers if x["class"] == "Dense"}


# --------------------------------------------------------------------------- CRC-32C and framing, no TensorFlow


def test_crc32c_known_values_and_every_length():
    """The check value of CRC-32C ("123456789" -> 0xE3069283, RFC 3720) and the vectorised rows against a byte loop
    for every length up to three rows (the rows' boundaries, segments shorter than four bytes)."""
    assert crc32c_many(b"123456789", [(0, 9)]).tolist() == [0xE3069283]
    assert crc32c_many(b"", [(0, 0)]).tolist() == [0]
    data = random.Random(1).randbytes(3 * 1024 + 40)

    def slow(b: bytes) -> int:
        c = 0xFFFFFFFF
        for x in b:
            c ^= x
            for _ in range(8):
                c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        return c ^ 0xFFFFFFFF

    segs = [(n % 7, n) for n in range(0, 3 * 1024 + 30, 7)] + [(3, 1025), (0, 2049), (5, 1027)]
    assert crc32c_many(data, segs).tolist() == [slow(data[o:o + n]) for o, n in segs]


def _record(data: bytes) -> bytes:
    n = struct.pack("<Q", len(data))
    return (n + struct.pack("<I", masked(crc32c_many(n, [(0, 8)])[0])) + data
            + struct.pack("<I", masked(crc32c_many(data, [(0, len(data))])[0])))


def test_framing_notes_bad_records_and_keeps_the_good_ones():
    good = [_record(bytes([i]) * (i * 37)) for i in range(1, 6)]
    notes: list[str] = []
    assert len(records(b"".join(good), "f", notes)) == 5 and notes == []
    bad = bytearray(b"".join(good))
    bad[len(good[0]) + 20] ^= 0x01  # in the second record's data
    notes = []
    assert len(records(bytes(bad), "f", notes)) == 4
    assert "wrong data CRC" in notes[0]
    notes = []
    cut = b"".join(good)[:-5]
    assert len(records(cut, "f", notes)) == 4 and "cut short" in notes[0]
    notes = []
    assert records(b"\xff" * 40, "f", notes) == [] and "length's CRC is wrong" in notes[0]


# --------------------------------------------------------------------------- the real capture


@TF
@pytest.mark.slow
def test_the_event_files_give_the_model_config_and_the_metric_tags(cap):
    want = expected(cap)
    facts = read_events(str(run_dir(cap / "tb")))
    assert facts.notes == []  # TensorFlow's own records: every CRC checks
    assert [f.split("/")[0] for f in facts.files] == ["train", "validation"]
    cfg = facts.model_config
    assert cfg["class_name"] == "Functional" and cfg["config"]["name"] == want["model"]
    top = [(x["config"]["name"], x["class_name"]) for x in cfg["config"]["layers"] if x["class_name"] != "InputLayer"]
    assert top == [(x["path"][0], x["class"]) for x in want["layers"] if len(x["path"]) == 1]
    for m in want["metrics"]:
        assert f"epoch_{m}" in facts.scalar_tags["train"] and f"epoch_{m}" in facts.scalar_tags["validation"]
    assert "epoch_loss" in facts.scalar_tags["train"]


@TF
@pytest.mark.slow
def test_the_components_table_names_the_layers_with_their_classes(cap):
    """Every Dense layer of the model is a row labelled with its config name, class and units; the row whose
    forward ops hold the Softmax is the layer Keras says has the softmax activation (the uniquified scopes
    ``dense_1`` / ``dense_1_2`` matched to the right layers); the names say where they came from."""
    want = expected(cap)
    res = tfadvisor.analyze(cap / "tb")
    t = res.tables["components"]
    layers = t[t["kind"] == "layer"]
    labels = dense_labels(want["layers"])
    assert set(layers["component"]) == set(labels)
    for _, row in layers.iterrows():
        assert row["label"].startswith(labels[row["component"]]), row["label"]
        assert row["layer_class"] == "Dense" and row["names_from"].startswith("the model config in train/events.")
    softmax = next(x for x in want["layers"] if x["activation"] == "softmax")
    fwd = layers[(layers["role"] == "forward") & layers["types"].str.contains("Softmax")]
    assert list(fwd["component"]) == ["/".join(softmax["path"])]
    assert any(n.startswith("components: names of the program's parts from the model config") for n in res.notes)


@TF
@pytest.mark.slow
def test_the_run_file_holds_the_models_facts_and_names_the_layers(cap):
    """tfadvisor_run.json (the callback) lists every layer with its class and parameter count as Keras counts them,
    the optimizer, the compiled loss and metrics; analysed alone (no event file beside it) it names the layers too,
    with their parameters."""
    want = expected(cap)
    rd = Path(want["adv_run"])
    md = json.loads((rd / "tfadvisor_run.json").read_text())
    k, notes = keras_facts(md)
    assert notes == []
    rows = {tuple(r["path"]): r for r in k["layers"]}
    for x in want["layers"]:
        r = rows[tuple(x["path"])]
        assert (r["class"], r["params"]) == (x["class"], x["params"])
        if x["units"]:
            assert r["units"] == x["units"] and r["output_shape"][-1] == x["units"]
    assert k["optimizer"]["class"] == "Adam" and k["loss"] == ["sparse_categorical_crossentropy"]
    assert k["metrics"] == want["metrics"] and k["steps_per_execution"] == 1
    res = tfadvisor.analyze(rd)
    t = res.tables["components"]
    layers = t[t["kind"] == "layer"]
    labels = dense_labels(want["layers"])
    assert set(layers["component"]) == set(labels)
    params = {"/".join(x["path"]): x["params"] for x in want["layers"]}
    for _, row in layers.iterrows():
        assert row["label"].startswith(labels[row["component"]])
        assert row["params"] == params[row["component"]] and row["names_from"] == "tfadvisor_run.json"


@TF
@pytest.mark.slow
def test_the_function_library_says_which_function_made_the_ops(cap):
    """The custom loop's step calls ``grads_of`` (a tf.function): the ops under ``StatefulPartitionedCall/`` in the
    trace come from it (its name from TensorFlow itself), the optimizer's ops, outside the call, from none."""
    want = expected(cap)
    facts = read_events(str(run_dir(cap / "loop")))
    assert want["loop_function"] in facts.calls["StatefulPartitionedCall"]
    assert facts.function_of("StatefulPartitionedCall/gradient_tape/x/MatMul") in (None, want["loop_function"])
    t = tfadvisor.analyze(cap / "loop").tables["components"]
    layers = t[t["kind"] == "layer"]
    assert len(layers) and set(layers["function"]) == {want["loop_function"]}
    assert set(t[t["kind"] == "optimizer"]["function"]) == {""}


# --------------------------------------------------------------------------- bad event files: a note, exit 0


def _copy(cap: Path, tmp: Path) -> tuple[Path, Path]:
    dst = tmp / "tb"
    shutil.copytree(cap / "tb", dst)
    return dst, next((dst / "train").glob("events.out.tfevents.*"))


@TF
@pytest.mark.slow
@pytest.mark.parametrize("how", ["truncated", "bad_crc", "garbage", "empty", "bad_length"])
def test_a_bad_event_file_is_a_load_note_and_the_analysis_goes_on(cap, tmp_path, how):
    logdir, ev = _copy(cap, tmp_path)
    raw = bytearray(ev.read_bytes())
    if how == "truncated":
        raw = raw[: len(raw) // 2]
    elif how == "bad_crc":
        raw[len(raw) // 2] ^= 0x40
    elif how == "garbage":
        raw = bytearray(random.Random(3).randbytes(5000))
    elif how == "empty":
        raw = bytearray()
    else:
        raw[0] ^= 0x01  # the first record's length
    ev.write_bytes(bytes(raw))
    p = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(logdir), "--format", "json"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0, p.stderr[-2000:]
    notes = json.loads(p.stdout)["notes"]
    said = [n for n in notes if n.startswith("load: events: train/")]
    if how == "empty":
        assert said == []  # nothing to read is nothing wrong
    else:
        assert said, notes
    if how in ("garbage", "bad_length"):
        assert "length's CRC is wrong" in said[0]


@TF
@pytest.mark.slow
def test_every_corruption_of_a_real_event_file_is_noticed_and_never_raises(cap, tmp_path):
    """Fuzz: 300 single-byte changes and 100 cuts of the real train event file, read directly. A changed byte is
    always noticed (CRC-32C catches every error burst of up to 32 bits); a cut is noticed unless it falls on a
    record's end; nothing raises."""
    ev = next((cap / "tb" / "train").glob("events.out.tfevents.*"))
    raw = ev.read_bytes()
    ends, pos = {0}, 0
    while pos < len(raw):
        pos += 16 + struct.unpack_from("<Q", raw, pos)[0]
        ends.add(pos)
    rng = random.Random(7)
    for i in range(400):
        b = bytearray(raw)
        if i < 300:
            b[rng.randrange(len(b))] ^= rng.randrange(1, 256)
        else:
            b = b[: rng.randrange(len(b))]
        facts = _read_bytes(bytes(b), tmp_path)
        assert facts.notes or (i >= 300 and len(b) in ends), (i, len(b))


def _read_bytes(data: bytes, work: Path):
    """read_events on a run whose train directory holds one event file of ``data``."""
    rd = work / "train" / "plugins" / "profile" / "r"
    rd.mkdir(parents=True, exist_ok=True)
    (work / "train" / "events.out.tfevents.1.h.1.0.v2").write_bytes(data)
    return read_events(str(rd))


def test_no_event_file_changes_nothing():
    """A sample without event files: no facts, no notes, the scopes' own names (the samples' reports are kept by
    tests/outputs.py)."""
    trace = tfadvisor.load(SAMPLES / "ops_fit_fp32")
    assert not trace.events and trace.events.notes == []
    t = tfadvisor.analyze(SAMPLES / "ops_fit_fp32").tables["components"]
    assert set(t["names_from"]) == {"its name scope"} and set(t["layer_class"]) == {""}


def test_the_reader_is_bounded(tmp_path):
    """A file past the cap is read up to it, with a note; the logdir is not written."""
    rd = tmp_path / "train" / "plugins" / "profile" / "r"
    rd.mkdir(parents=True)
    ev = tmp_path / "train" / "events.out.tfevents.1.h.1.0.v2"
    rec = _record(b"\x1a\x80\x80\x40" + b"x" * (1 << 20))  # an Event whose file_version (field 3) is 1 MiB
    with open(ev, "wb") as fh:
        for _ in range(MAX_FILE_BYTES // len(rec) + 2):
            fh.write(rec)
    before = sorted(os.listdir(tmp_path / "train"))
    facts = read_events(str(rd))
    assert any(f"only its first {MAX_FILE_BYTES >> 20} MiB read" in n for n in facts.notes)
    assert sorted(os.listdir(tmp_path / "train")) == before


@TF
@pytest.mark.slow
def test_the_reports_name_the_layers_with_their_classes(cap, tmp_path):
    """"By part of your program" in the terminal, Markdown and HTML reports: the largest Dense layer's row with its
    class and units, and where the names came from."""
    from typer.testing import CliRunner

    from tfadvisor.cli.app import app

    want = expected(cap)
    t = tfadvisor.analyze(cap / "tb").tables["components"]
    top = t[t["kind"] == "layer"].iloc[0]["component"]
    label = dense_labels(want["layers"])[top]
    html = tmp_path / "r.html"
    for args in (["--format", "text"], ["--format", "markdown"], ["--html", str(html)]):
        got = CliRunner().invoke(app, ["analyze", str(cap / "tb"), *args])
        assert got.exit_code == 0, got.output[-2000:]
        text = html.read_text() if "--html" in args else got.stdout
        section = text[text.index("By part of your program"):]
        assert label in section and "from the model config in train/events.out.tfevents." in section.replace(
            "\n  ", " "), args


def test_scopes_are_matched_to_the_layers_one_to_one():
    """Keras 3 under TF writes each scope once more inside the step: ``dense`` -> ``dense_1``, ``dense_1`` ->
    ``dense_1_2``. ``dense_1`` can be either layer; ``dense_1_2`` only ``dense_1``: so ``dense_1`` is ``dense``."""
    from tfadvisor.analyses.program import match

    names = ["dense", "hidden", "dense_1"]
    assert match(["dense_1", "hidden_1", "dense_1_2"], names, True) == {
        "dense_1": "dense", "hidden_1": "hidden", "dense_1_2": "dense_1"}
    assert match(["dense", "dense_1"], names, False) == {"dense": "dense", "dense_1": "dense_1"}
    assert match(["conv_3"], names, True) == {}


def test_metric_scopes_take_the_compiled_metrics_names():
    """A metric's scope (``compile_metrics/auc_1``) and a scope named as a compiled metric that no pattern knows
    (``f2_score_1``) are that metric; without a program the scopes' own names stay."""
    from tfadvisor.analyses.components import component
    from tfadvisor.analyses.program import Names, Program

    ops = ["StatefulPartitionedCall/compile_metrics/auc_1/Cumsum", "StatefulPartitionedCall/f2_score_1/Sum"]
    named = Names(Program(metrics=["auc", "f2_score"], sources={"metrics": "tfadvisor_run.json"}), ops, component)
    assert named(ops[0], "Cumsum") == ("auc", "metric", "forward")
    assert named(ops[1], "Sum") == ("f2_score", "metric", "forward")
    assert named.names_from(("auc", "metric", "forward")) == "tfadvisor_run.json"
    plain = Names(None, ops, component)
    assert [plain(o, "Sum") for o in ops] == [component(o, "Sum") for o in ops]


ODD = [math.nan, math.inf, -1, 0, 10**30, 2**63, 1.5, "abc", "", [], {}, [1, 2], {"a": 1}, True, None, "\x00",
       list(range(1000)), 1e308, [None], [[["x"]]], {"path": "x"}]
FIELDS = ["keras", "keras.model", "keras.layers", "keras.layers.0", "keras.layers.0.path", "keras.layers.0.params",
          "keras.layers.0.output_shape", "keras.layers.0.class", "keras.layers.0.units", "keras.metrics", "keras.loss",
          "keras.optimizer", "keras.optimizer.config", "keras.steps_per_execution", "keras.dtype_policy"]


def _hostile(field: str, value) -> dict:
    md = {"keras": {"model": "functional", "layers": [{"path": ["dense_1"], "class": "Dense", "params": 10, "units": 4,
                                                       "output_shape": [None, 4]}],
                    "metrics": ["auc"], "loss": ["mse"], "optimizer": {"class": "Adam", "config": {"lr": 0.1}},
                    "steps_per_execution": 1}}
    parts = field.split(".")
    at = md
    for p in parts[:-1]:
        at = at[int(p)] if isinstance(at, list) else at[p]
    if isinstance(at, list):
        at[int(parts[-1])] = value
    else:
        at[parts[-1]] = value
    return md


def test_odd_keras_facts_in_the_run_file_are_ignored_with_a_note():
    """Other tools write tfadvisor_run.json: every odd value of every ``keras`` field is left out (a note where the
    field cannot be used), never a crash, and the parts are still named from the rest."""
    from tfadvisor.analyses.base import Context
    from tfadvisor.analyses.components import component
    from tfadvisor.analyses.program import Names, program

    trace = tfadvisor.load(SAMPLES / "ops_fit_fp32")
    ops = sorted({n.partition(":")[0] for p in trace.host_planes for n in set(p.names_of(range(p.n_events)).tolist())
                  if ":" in n and "/" in n})
    for field in FIELDS:
        for value in ODD:
            md = _hostile(field, value)
            facts, notes = keras_facts(md)
            assert isinstance(facts, dict) and all(isinstance(n, str) for n in notes)
            trace.run_metadata = md
            named = Names(program(trace, Context()), ops, component)
            for o in ops:
                named(o, "")
            json.dumps(facts)  # what is kept is plain JSON
    trace.run_metadata = _hostile("keras.layers.0.params", math.nan)
    assert keras_facts(trace.run_metadata)[0]["layers"][0].get("params") is None
    for value in ODD:  # a model config of odd JSON (an event file another writer made)
        cfg = {"class_name": value, "config": {"name": value, "layers": [value, {"class_name": value, "config": {
            "name": "d", "units": value, "filters": value, "kernel_size": value, "output_dim": value,
            "dtype": value, "layers": value}}]}}
        trace.events = EventFacts(model_config=cfg, scalar_tags={"train": ["epoch_" + str(value)[:9]]})
        named = Names(program(trace, Context()), ops, component)
        for o in ops:
            named.about(named(o, ""))


@TF
@pytest.mark.slow
def test_a_hostile_run_file_keeps_the_analysis(cap, tmp_path):
    dst = tmp_path / "adv"
    shutil.copytree(Path(expected(cap)["adv_run"]), dst)
    md = json.loads((dst / "tfadvisor_run.json").read_text())
    md["keras"]["layers"] = [{"path": 5}, "x", {"path": ["dense"], "params": -3, "class": 7}]
    md["keras"]["metrics"] = [1, 2]
    (dst / "tfadvisor_run.json").write_text(json.dumps(md))
    p = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(dst), "--format", "json"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0, p.stderr[-2000:]
    notes = json.loads(p.stdout)["notes"]
    assert any("2 of the 3 keras.layers entries" in n for n in notes), notes
    assert any("keras.metrics = [1, 2] is not a list of names" in n for n in notes), notes


@TF
def test_a_custom_loops_loss_without_a_scope_is_the_ops_the_gradient_goes_through(cap):
    """A custom loop writing its loss and accuracy inline (tests/program_capture.py ``plain``): the loss's gradient
    ops and the forward ops they are scoped by (``gradient_tape/Abs/Sign``: ``Abs``) are the loss; the accuracy's
    ops (``ArgMax``, ``Equal``: no gradient) stay the step's own; the second model's optimizer scope ``sgd_1_1`` is
    the optimizer. One term of the loss opened a scope of its own (``logistic_loss``, TF's): the unscoped terms are
    still the loss's (ablation seed 613: a custom loop's costly penalty beside a library cross-entropy read 0 ms)."""
    t = tfadvisor.analyze(cap / "plain").tables["components"]
    rows = {(str(c), str(k), str(r)): (float(ms), str(ty)) for c, k, r, ms, ty in
            zip(t["component"], t["kind"], t["role"], t["ms_per_step"], t["types"])}
    loss = DIFFERENTIATED
    assert rows[(loss, "loss", "gradient")][0] > 0, rows
    assert "Abs" in rows[(loss, "loss", "forward")][1], rows
    assert any(k == "loss" and c.startswith("logistic_loss") for c, k, _ in rows), rows
    assert rows[(STEP, "step", "forward")][0] > 0, rows  # the accuracy's ops, the one-hot, the loss's other ops
    loss_types = {x for (_, k, _), (_, ty) in rows.items() if k == "loss" for x in ty.split(", ")}
    assert not loss_types & {"ArgMax", "Equal"}, rows  # (logistic_loss's GreaterEqual is the loss's)
    assert any(k == "optimizer" and c.startswith("sgd") for c, k, _ in rows), rows
    assert not any(k == "step" and c.startswith("sgd") for c, k, _ in rows), rows
    labels = [str(x) for x in t["label"]]
    assert any(x.startswith("the loss (no scope") for x in labels), labels
