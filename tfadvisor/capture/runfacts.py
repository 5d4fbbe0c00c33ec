"""``tfadvisor_run.json``, the run's facts file beside the profile: what the trace cannot tell (model,
batch size, devices, replicas, strategy, versions, steps, how it was captured)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from typing import Any

from tfadvisor._version import __version__
from tfadvisor.capture.base import warn
from tfadvisor.io.discovery import RUN_METADATA_FILE, filesystem, is_remote

#: Model facts registered by a Keras callback, used by any session that lacks them.
MODEL_INFO: dict[str, Any] = {}

#: Start-up milestones of this process (the Keras callback fills them; ``tfadvisor_run.json`` "startup").
STARTUP: dict[str, Any] = {}


def model_facts(model: Any = None, batch_size: int | None = None) -> dict[str, Any]:
    """Parameter count and batch size of a Keras model, where known."""
    out: dict[str, Any] = {}
    if model is not None:
        try:
            out["param_count"] = int(model.count_params())
        except Exception:  # noqa: BLE001 - an unbuilt model has no parameters yet
            pass
        try:
            out["model"] = str(getattr(model, "name", type(model).__name__))
        except Exception:  # noqa: BLE001
            pass
    if batch_size is not None:
        out["batch_size"] = int(batch_size)
    if model is not None:
        try:
            out["keras"] = keras_facts(model)
        except Exception:  # noqa: BLE001 - a fact, never a reason to fail a capture
            pass
    return out


#: At most this many layers are listed (nested models' included), at most this deep.
MAX_LAYERS = 2000
MAX_DEPTH = 4
#: Layer config entries that say its size (``units``, ``filters``, ...), copied where a layer has them.
SIZE_KEYS = ("units", "filters", "kernel_size", "input_dim", "output_dim", "num_heads", "key_dim", "rate")


def _plain(value: Any) -> Any:
    """A JSON scalar or list of them (shapes, sizes), else None."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and len(value) <= 16:
        items = [_plain(v) for v in value]
        return items if all(v is None or isinstance(v, (bool, int, float, str, list)) for v in items) else None
    try:
        return int(value)  # a numpy or TF integer
    except (TypeError, ValueError):
        return None


def _layer_rows(model: Any, path: list[str], rows: list[dict[str, Any]], depth: int) -> None:
    for layer in getattr(model, "layers", None) or []:
        if len(rows) >= MAX_LAYERS:
            return
        name = str(getattr(layer, "name", ""))
        row: dict[str, Any] = {"path": [*path, name], "class": type(layer).__name__}
        with contextlib.suppress(Exception):
            row["params"] = int(layer.count_params())
        with contextlib.suppress(Exception):
            row["output_shape"] = _plain(list(layer.output.shape))
        with contextlib.suppress(Exception):
            row["dtype_policy"] = str(layer.dtype_policy.name)
        with contextlib.suppress(Exception):
            cfg = layer.get_config()
            row.update({k: _plain(cfg[k]) for k in SIZE_KEYS if k in cfg and _plain(cfg[k]) is not None})
        rows.append(row)
        if depth < MAX_DEPTH and getattr(layer, "layers", None):
            _layer_rows(layer, [*path, name], rows, depth + 1)


def _name_of(obj: Any) -> str | None:
    """A loss's or metric's name as ``compile`` was given it: a string, or the object's name or class."""
    if obj is None:
        return None
    if isinstance(obj, str):
        return obj
    return str(getattr(obj, "name", None) or getattr(obj, "__name__", None) or type(obj).__name__)


def keras_facts(model: Any) -> dict[str, Any]:
    """What the Keras model is (``tfadvisor_run.json`` ``keras``): its layers (path of names below the model, class,
    parameters, output shape, dtype policy, size), dtype policy, optimizer (class and scalar config), the compiled
    loss and metrics, ``steps_per_execution`` and ``jit_compile``. Each fact where Keras tells it."""
    out: dict[str, Any] = {"model": str(getattr(model, "name", "")), "class": type(model).__name__}
    rows: list[dict[str, Any]] = []
    _layer_rows(model, [], rows, 0)
    out["layers"] = rows
    with contextlib.suppress(Exception):
        out["dtype_policy"] = str(model.dtype_policy.name)
    opt = getattr(model, "optimizer", None)
    if opt is not None:
        o: dict[str, Any] = {"class": type(opt).__name__}
        with contextlib.suppress(Exception):
            o["config"] = {k: v for k, v in opt.get_config().items()
                           if v is None or isinstance(v, (bool, int, float, str))}
        out["optimizer"] = o
    with contextlib.suppress(Exception):
        loss = model.loss
        names = [_name_of(x) for x in (loss.values() if isinstance(loss, dict) else
                                       loss if isinstance(loss, (list, tuple)) else [loss])]
        out["loss"] = [n for n in names if n]
    metrics: list[str] = []
    with contextlib.suppress(Exception):
        for m in model.metrics:
            inner = getattr(m, "metrics", None)
            if inner:
                metrics.extend(str(x.name) for x in inner)
            elif m.name != "loss":
                metrics.append(str(m.name))
    out["metrics"] = metrics
    with contextlib.suppress(Exception):
        out["steps_per_execution"] = int(model.steps_per_execution)
    with contextlib.suppress(Exception):
        jit = model.jit_compile
        out["jit_compile"] = jit if isinstance(jit, bool) else str(jit)
    return out


#: CPU features the advice depends on (``/proc/cpuinfo`` flags): fast bfloat16 (AMX, AVX512-BF16), float16.
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")


def cpu_facts() -> dict[str, Any]:
    """The CPU's model, core count and the :data:`CPU_FLAGS` it has (Linux: ``/proc/cpuinfo``; else {})."""
    out: dict[str, Any] = {"cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 20)
    except OSError:
        return out
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and "model" not in out:
            out["model"] = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    out["flags"] = [f for f in CPU_FLAGS if f in flags]
    return out


def environment_facts(strategy: Any = None) -> dict[str, Any]:
    """Versions, CPU, devices, tf.distribute strategy, replicas and hosts of this process."""
    out: dict[str, Any] = {"tfadvisor_version": __version__, "host_names": [socket.gethostname()]}
    try:
        out["cpu"] = cpu_facts()
    except Exception:  # noqa: BLE001 - a fact, never a reason to fail a capture
        pass
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return out
    out["tf_version"] = getattr(tf, "__version__", None)
    keras = sys.modules.get("keras")
    if keras is not None and getattr(keras, "__version__", None):
        out["keras_version"] = keras.__version__
    try:
        out["devices"] = [d.name for d in tf.config.list_logical_devices()]
    except Exception:  # noqa: BLE001
        pass
    try:
        if strategy is None:
            strategy = tf.distribute.get_strategy()
        out["strategy"] = type(strategy).__name__
        out["replicas"] = int(strategy.num_replicas_in_sync)
        hosts = 1
        resolver = getattr(strategy, "cluster_resolver", None)
        if resolver is not None:
            spec = resolver.cluster_spec()
            jobs = spec.jobs if spec is not None else []
            n = sum(spec.num_tasks(j) for j in jobs if j in ("chief", "worker"))
            hosts = max(1, n)
        out["hosts"] = hosts
    except Exception:  # noqa: BLE001
        pass
    return out


def _merge(old: Any, facts: dict[str, Any]) -> dict[str, Any]:
    """``facts`` over what the file held; host names of both, ``hosts`` at least their count."""
    merged = dict(old) if isinstance(old, dict) else {}
    names = list(merged.get("host_names") or [])
    merged.update({k: v for k, v in facts.items() if v is not None})
    for n in facts.get("host_names") or []:
        if n not in names:
            names.append(n)
    if names:
        merged["host_names"] = names
        merged["hosts"] = max(int(merged.get("hosts") or 1), len(names))
    return merged


def write_run_metadata(run_dir: str, facts: dict[str, Any]) -> str | None:
    """Write (merge into) ``<run_dir>/tfadvisor_run.json``; the path, or None after a warning.

    A file already there that cannot be read (cut short by a full disk or a killed writer) is replaced, with a
    warning. Locally the file is written whole or not at all: a temporary file renamed over it, removed when
    the write fails (a full disk leaves nothing behind).
    """
    path = f"{run_dir.rstrip('/')}/{RUN_METADATA_FILE}"
    try:
        if is_remote(run_dir):
            fs = filesystem(path)
            old = _old_facts(path, fs.cat_file(path) if fs.exists(path) else b"")
            with fs.open(path, "w") as fh:
                fh.write(json.dumps(_merge(old, facts), indent=2, sort_keys=True, default=str) + "\n")
            return path
        raw = b""
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                raw = fh.read()
        text = json.dumps(_merge(_old_facts(path, raw), facts), indent=2, sort_keys=True, default=str) + "\n"
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise
        return path
    except Exception as err:  # noqa: BLE001
        warn(f"could not write {path}: {type(err).__name__}: {err}")
        return None


def _old_facts(path: str, raw: bytes) -> dict[str, Any]:
    """What an existing facts file holds; {} (with a warning) when it is not a readable JSON object."""
    if not raw:
        return {}
    try:
        old = json.loads(raw)
    except (ValueError, RecursionError) as err:
        warn(f"{path} could not be read ({type(err).__name__}: {err}): replaced")
        return {}
    return old if isinstance(old, dict) else {}
