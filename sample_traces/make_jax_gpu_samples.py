"""Capture real JAX profiles in problem/twin pairs, with wall-clock truth (run on a GPU machine).

Each case trains a small model with ``jax.profiler`` recording ``--steps`` steps, each marked with
``jax.profiler.StepTraceAnnotation`` (what JAX users write), after ``--warmup`` unprofiled steps that
compile. The script times every step with its own clock (start of one step to the start of the next, the
data and the ``float(loss)`` logging included) and writes that truth beside the profile:

- ``mlp_fp32`` / ``mlp_bf16``: a 4-layer MLP whose step is matrix work, in float32 (JAX's default
  precision) and its twin with bfloat16 parameters and activations (the precision fix).
- ``input_numpy`` / ``input_prefetch``: the same kind of MLP fed by a host-side numpy augmentation
  that takes longer than the step; the twin produces batches in 8 background threads and keeps 2 on
  the device ahead of the step (the prefetch fix).
- ``eager_ops`` / ``eager_jit``: an optimizer step written op by op without ``jax.jit`` (every
  operation dispatched from Python), and its twin with the step under ``jax.jit``.

Usage: ``python make_jax_gpu_samples.py OUT [--cases a,b] [--small]``; ``OUT/<case>/`` gets the logdir and
``OUT/<case>/measured.json``. ``--small`` shrinks the models so the script can be tried on a CPU.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


def mlp_init(key, sizes, dtype):
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        key, k = jax.random.split(key)
        scale = float(1.0 / np.sqrt(m))  # a Python float: a numpy scalar would promote bfloat16 to float32
        params.append((jax.random.normal(k, (m, n), dtype) * scale, jnp.zeros((n,), dtype)))
    return params


def mlp_loss(params, x, y):
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    out = (h @ w + b).astype(jnp.float32)
    return jnp.mean((out - y) ** 2)


def sgd(params, grads, lr=1e-3):
    return jax.tree_util.tree_map(lambda p, g: p - lr * g.astype(p.dtype), params, grads)


def jit_step():
    @jax.jit
    def step(params, x, y):
        loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
        return sgd(params, grads), loss
    return step


def augment(rng: np.random.Generator, batch: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """A host-side batch: noise, a per-row sort (a stand-in for decoding/augmenting) and a target."""
    x = rng.standard_normal((batch, width), dtype=np.float32)
    x = np.sort(x, axis=1)[:, ::-1] + rng.standard_normal((batch, width), dtype=np.float32) * 0.1
    y = x[:, :16].mean(axis=1, keepdims=True).repeat(16, axis=1)
    return np.ascontiguousarray(x), np.ascontiguousarray(y)


class Case:
    """Builds the state and one ``step(i) -> loss`` callable for a case."""

    def __init__(self, name: str, small: bool):
        self.name = name
        s = 8 if small else 1
        key = jax.random.PRNGKey(0)
        if name in ("mlp_fp32", "mlp_bf16"):
            dtype = jnp.bfloat16 if name == "mlp_bf16" else jnp.float32
            b, w = 4096 // s, 4096 // s
            self.params = mlp_init(key, [w, w, w, w, 16], dtype)
            self.x = jax.random.normal(key, (b, w), dtype)
            self.y = jnp.zeros((b, 16), jnp.float32)
            self.fn = jit_step()
            self.batch = b
            self.describe = (f"4-layer MLP {w}-{w}-{w}-{w}-16, batch {b}, "
                             f"{'bfloat16' if dtype == jnp.bfloat16 else 'float32 (JAX default matmul precision)'}"
                             " parameters and activations, loss in float32, SGD under jax.jit; data resident on "
                             "the device")
        elif name in ("input_numpy", "input_prefetch"):
            b, w = 2048 // s, 1024 // s
            self.params = mlp_init(key, [w, 2048 // s, 2048 // s, 16], jnp.float32)
            self.fn = jit_step()
            self.batch, self.width = b, w
            self.rng = np.random.default_rng(0)
            if name == "input_prefetch":
                self.pool = ThreadPoolExecutor(8)
                self.rngs = [np.random.default_rng(i) for i in range(64)]
                self.q: queue.Queue = queue.Queue()
                self.next_i = 0
                for _ in range(16):
                    self._submit()
                self.ready: list = []
            self.describe = (f"MLP {w}-{2048 // s}-{2048 // s}-16, batch {b}, float32 under jax.jit, fed by a numpy "
                             "augmentation on the host (normal noise, a per-row sort, a second noise) and "
                             "jax.device_put each step" + (
                                 "; the twin runs the augmentation in 8 background threads (16 batches queued) "
                                 "and keeps 2 batches on the device ahead of the step" if name == "input_prefetch"
                                 else ", in the training thread"))
        elif name in ("eager_ops", "eager_jit"):
            b, w = 256 // max(1, s // 4), 512 // max(1, s // 4)
            self.params = mlp_init(key, [w, w, w, w, 16], jnp.float32)
            self.x = jax.random.normal(key, (b, w), jnp.float32)
            self.y = jnp.zeros((b, 16), jnp.float32)
            self.batch = b
            if name == "eager_jit":
                self.fn = jit_step()
            else:
                def step(params, x, y):
                    loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
                    return sgd(params, grads), loss
                self.fn = step
            self.describe = (f"4-layer MLP {w}-{w}-{w}-{w}-16, batch {b}, float32, SGD; "
                             + ("the step runs op by op from Python (no jax.jit)" if name == "eager_ops"
                                else "the step under jax.jit"))
        else:
            raise SystemExit(f"unknown case {name}")

    def _submit(self):
        i = self.next_i
        self.next_i += 1
        self.q.put(self.pool.submit(augment, self.rngs[i % 64], self.batch, self.width))

    def batch_for_step(self):
        if self.name == "input_numpy":
            x, y = augment(self.rng, self.batch, self.width)
            return jax.device_put(x), jax.device_put(y)
        while len(self.ready) < 2:
            x, y = self.q.get().result()
            self._submit()
            self.ready.append((jax.device_put(x), jax.device_put(y)))
        return self.ready.pop(0)

    def step(self, i: int) -> float:
        if self.name.startswith("input_"):
            x, y = self.batch_for_step()
        else:
            x, y = self.x, self.y
        self.params, loss = self.fn(self.params, x, y)
        return float(loss)  # the logging every training loop does: waits for the step


def run_case(name: str, out: Path, warmup: int, steps: int, small: bool) -> dict:
    case = Case(name, small)
    for i in range(warmup):
        case.step(i)
    logdir = out / name
    starts: list[float] = []
    jax.profiler.start_trace(str(logdir))
    t_start = time.perf_counter()
    for i in range(warmup, warmup + steps):
        starts.append(time.perf_counter())
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            case.step(i)
    t_end = time.perf_counter()
    jax.profiler.stop_trace()
    ends = starts[1:] + [t_end]
    per_step = [(b - a) * 1e3 for a, b in zip(starts, ends)]
    dev = jax.devices()[0]
    host = next(logdir.glob("plugins/profile/*/*.xplane.pb")).name.split(".xplane.pb")[0]
    truth = {
        "case": name,
        "capture_api": "jax_profiler",
        "original_files": {host: "plugins/profile/<run>/" + host + ".xplane.pb"},
        "measured_step_ms": [round(v, 4) for v in per_step],
        "description": case.describe,
        "jax_version": jax.__version__,
        "device": f"{dev.platform}:{getattr(dev, 'device_kind', '')}",
        "host": platform.node(),
        "batch_size": case.batch,
        "first_step": warmup,
        "steps": steps,
        "step_wall_ms": [round(v, 4) for v in per_step],
        "step_wall_mean_ms": round(float(np.mean(per_step)), 4),
        "step_wall_median_ms": round(float(np.median(per_step)), 4),
        "window_wall_ms": round((t_end - t_start) * 1e3, 4),
        "step_clock": "wall",  # start to the next start: wall clock per step
        "clock": "time.perf_counter at the start of each step (before the data), the last step ends after its "
                 "float(loss)",
    }
    (logdir / "measured.json").write_text(json.dumps(truth, indent=1) + "\n")
    if name == "input_prefetch":
        case.pool.shutdown(wait=False, cancel_futures=True)
    return truth


#: problem -> twin: each twin applies the fix tfadvisor prints for its problem.
PAIRS = {"mlp_fp32": "mlp_bf16", "input_numpy": "input_prefetch", "eager_ops": "eager_jit"}


def pair_truth(problem: dict, twin: dict, prefix: str = "gpu_jax_") -> dict:
    """measured.json's ``pair``: the two programs' mean wall-clock step times and the planted cost (their
    difference), the steps the statistics use (first and last left out)."""
    def mean(t):
        x = t["measured_step_ms"]
        return float(np.mean(x[1:-1] if len(x) > 5 else x))
    a, b = mean(problem), mean(twin)
    return {"closed": True, "problem": prefix + problem["case"], "twin": prefix + twin["case"],
            "problem_step_ms": round(a, 4), "twin_step_ms": round(b, 4),
            "planted_cost_ms": round(a - b, 4), "planted_cost_pct": round(100 * (a - b) / a, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--cases", default="mlp_fp32,mlp_bf16,input_numpy,input_prefetch,eager_ops,eager_jit")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--small", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    done = {}
    for name in a.cases.split(","):
        t = done[name] = run_case(name, a.out, a.warmup, a.steps, a.small)
        print(f"{name}: {t['device']} mean {t['step_wall_mean_ms']:.2f} ms/step "
              f"(median {t['step_wall_median_ms']:.2f}) over {t['steps']} steps", flush=True)
    for problem, twin in PAIRS.items():
        if problem in done and twin in done:
            done[problem]["pair"] = pair_truth(done[problem], done[twin])
            (a.out / problem / "measured.json").write_text(json.dumps(done[problem], indent=1) + "\n")


if __name__ == "__main__":
    main()
