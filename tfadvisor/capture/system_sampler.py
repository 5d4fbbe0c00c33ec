"""Sample the machine while the profiler runs: CPU, memory, disk, network, GPU (what XPlane lacks).

:class:`SystemSampler` runs a daemon thread that reads, ~10 times a second, CPU busy per
core and of this process, memory (available, swap, this process's RSS), disk and network
byte counters (psutil), and GPU utilisation, memory and power through NVML
(``pip install 'tfadvisor[nvidia]'``, i.e. ``nvidia-ml-py``) or AMD's ``amdsmi`` when one is
installed and finds a GPU. Without either the file says ``no GPU sampler`` and why.
``ProfileSession`` (so ``tfadvisor.profile``, the Keras callback and ``tfadvisor capture
run``) starts one with the profiler and writes ``tfadvisor_system.<host>.npz`` beside the
profile (format: :mod:`tfadvisor.io.system_samples`).

Cost: one tick reads a few ``/proc`` files (about 0.3 ms of one core); the thread's own CPU
time is recorded in the file (``sampler_cpu_s``). ``benchmarks/system_overhead.py``
measures the effect on step time.

Also here: :func:`startup_point`, the process's clock, CPU time and read counters at a
moment of start-up (fit start, first batch, first step), for the start-up split.

Nothing here raises into training: failures become warnings.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

import numpy as np

DEFAULT_HZ = 10.0
MAX_SAMPLES = 400_000  # ~11 h at 10 Hz; later samples are dropped (counted in the file)
ENV = "TFADVISOR_SYSTEM"  # "0"/"off": no sampler; a number: the rate in Hz


def env_hz(default: float = DEFAULT_HZ) -> float | None:
    """The sampling rate ``TFADVISOR_SYSTEM`` asks for: None when it switches sampling off."""
    raw = os.environ.get(ENV, "").strip().lower()
    if not raw:
        return default
    if raw in ("0", "off", "false", "no"):
        return None
    try:
        hz = float(raw)
    except ValueError:
        return default
    return None if hz <= 0 else min(max(hz, 0.5), 50.0)


def process_start_unix_s() -> float | None:
    """When this process started (seconds since the epoch), or None."""
    try:
        import psutil

        return float(psutil.Process().create_time())
    except Exception:  # noqa: BLE001
        return None


def startup_point() -> dict[str, Any]:
    """Now: wall clock, this process's CPU seconds, read syscalls and bytes read so far."""
    out: dict[str, Any] = {"t_unix_s": time.time()}
    try:
        import psutil

        p = psutil.Process()
        ct = p.cpu_times()
        out["cpu_s"] = round(ct.user + ct.system, 4)
        try:
            io = p.io_counters()
            out["read_calls"] = int(io.read_count)
            out["read_bytes"] = int(getattr(io, "read_chars", io.read_bytes))
            out["disk_read_bytes"] = int(io.read_bytes)
        except (AttributeError, NotImplementedError, OSError, psutil.Error):
            pass
    except Exception:  # noqa: BLE001
        pass
    return out


def _mem_limit(total: int) -> int:
    """The cgroup memory limit when lower than the machine's memory."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as fh:
                raw = fh.read().strip()
            if raw.isdigit() and 0 < int(raw) < total:
                return int(raw)
        except OSError:
            continue
    return total


class _Nvml:
    name = "nvml"

    def __init__(self) -> None:
        import pynvml

        pynvml.nvmlInit()
        self.nv = pynvml
        n = pynvml.nvmlDeviceGetCount()
        if n <= 0:
            raise RuntimeError("NVML found no GPU")
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        self.info = []
        for h in self.handles:
            name = pynvml.nvmlDeviceGetName(h)
            entry: dict[str, Any] = {"name": name.decode() if isinstance(name, bytes) else str(name)}
            try:
                entry["memory_total_bytes"] = int(pynvml.nvmlDeviceGetMemoryInfo(h).total)
            except Exception:  # noqa: BLE001
                pass
            try:
                entry["power_limit_w"] = pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0
            except Exception:  # noqa: BLE001
                pass
            self.info.append(entry)

    def read(self) -> tuple[list[float], list[float], list[float]]:
        util, mem, power = [], [], []
        nv = self.nv
        for h in self.handles:
            util.append(_try(lambda h=h: float(nv.nvmlDeviceGetUtilizationRates(h).gpu)))
            mem.append(_try(lambda h=h: float(nv.nvmlDeviceGetMemoryInfo(h).used)))
            power.append(_try(lambda h=h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0))
        return util, mem, power

    def close(self) -> None:
        _try(self.nv.nvmlShutdown)


class _Amd:
    name = "amdsmi"

    def __init__(self) -> None:
        import amdsmi

        amdsmi.amdsmi_init()
        self.amd = amdsmi
        self.handles = list(amdsmi.amdsmi_get_processor_handles())
        if not self.handles:
            raise RuntimeError("amdsmi found no GPU")
        self.info = []
        for h in self.handles:
            entry: dict[str, Any] = {"name": "AMD GPU"}
            try:
                entry["name"] = str(amdsmi.amdsmi_get_gpu_asic_info(h).get("market_name") or "AMD GPU")
            except Exception:  # noqa: BLE001
                pass
            try:
                entry["memory_total_bytes"] = int(amdsmi.amdsmi_get_gpu_vram_usage(h)["vram_total"]) * 2**20
            except Exception:  # noqa: BLE001
                pass
            self.info.append(entry)

    def read(self) -> tuple[list[float], list[float], list[float]]:
        util, mem, power = [], [], []
        amd = self.amd
        for h in self.handles:
            util.append(_try(lambda h=h: float(amd.amdsmi_get_gpu_activity(h)["gfx_activity"])))
            mem.append(_try(lambda h=h: float(amd.amdsmi_get_gpu_vram_usage(h)["vram_used"]) * 2**20))

            def watts(h=h) -> float:
                p = amd.amdsmi_get_power_info(h)
                v = p.get("current_socket_power")
                return float(v if isinstance(v, (int, float)) else p["average_socket_power"])

            power.append(_try(watts))
        return util, mem, power

    def close(self) -> None:
        _try(self.amd.amdsmi_shut_down)


def _try(fn) -> float:
    try:
        return fn()
    except Exception:  # noqa: BLE001 - a reading the device does not give
        return float("nan")


def open_gpu_sampler() -> tuple[Any | None, str]:
    """An NVML or amdsmi reader, or None and why there is none."""
    why = []
    for cls, pkg in ((_Nvml, "nvidia-ml-py"), (_Amd, "amdsmi")):
        try:
            return cls(), ""
        except ImportError:
            why.append(f"{cls.name}: {pkg} is not installed")
        except Exception as err:  # noqa: BLE001 - no driver, no device
            why.append(f"{cls.name}: {type(err).__name__}: {str(err).strip() or 'unavailable'}")
    return None, "no GPU sampler (" + "; ".join(why) + ")"


class SystemSampler:
    """Samples the machine in a background thread between :meth:`start` and :meth:`stop`."""

    def __init__(self, hz: float = DEFAULT_HZ, gpu: bool = True) -> None:
        self.interval = 1.0 / max(0.5, min(float(hz), 50.0))
        self.gpu_wanted = gpu
        self.error: str | None = None
        self.profile_start_unix_s: float | None = None
        self._rows: dict[str, list] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._meta: dict[str, Any] = {}
        self._gpu = None
        self._dropped = 0
        self._cpu_s = 0.0

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> bool:
        """Start sampling; False (with ``error`` set) when psutil is missing or fails."""
        try:
            import psutil
        except ImportError:
            self.error = "psutil is not installed (pip install psutil): no system samples"
            return False
        try:
            self._psutil = psutil
            self._proc = psutil.Process()
            vm = psutil.virtual_memory()
            cores = psutil.cpu_count() or len(psutil.cpu_percent(percpu=True)) or 1
            self._disks = self._disk_names()
            gpu_note = "no GPU sampler (not asked for)"
            if self.gpu_wanted:
                self._gpu, gpu_note = open_gpu_sampler()
            self._meta = {
                "host": socket.gethostname(), "pid": os.getpid(), "hz": round(1.0 / self.interval, 3),
                "cpu_count": int(cores), "mem_total_bytes": int(vm.total), "mem_limit_bytes": _mem_limit(int(vm.total)),
                "swap_total_bytes": int(psutil.swap_memory().total), "disks": list(self._disks),
                "gpu_sampler": self._gpu.name if self._gpu else None, "gpu_note": gpu_note,
                "gpus": list(self._gpu.info) if self._gpu else [], "origin": "captured",
            }
            psutil.cpu_percent(percpu=True)  # prime the since-last-call counters
            self._proc.cpu_percent()
            self._rows = {k: [] for k in ("t", "cpu", "proc_cpu", "rss", "avail", "swap", "sin", "sout", "dr", "dw",
                                          "busy", "pread", "nr", "ns", "gu", "gm", "gp")}
            self._meta["started_unix_s"] = time.time()
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="tfadvisor-system-sampler", daemon=True)
            self._thread.start()
            return True
        except Exception as err:  # noqa: BLE001
            self.error = f"the system sampler did not start: {type(err).__name__}: {err}"
            return False

    def stop(self) -> None:
        """Stop the thread (takes one tick at most)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5.0)
            self._thread = None
            self._meta["stopped_unix_s"] = time.time()
        if self._gpu is not None:
            self._gpu.close()

    @property
    def running(self) -> bool:
        return self._thread is not None

    # --- sampling -------------------------------------------------------------------------------
    def _disk_names(self) -> list[str]:
        try:
            names = sorted(self._psutil.disk_io_counters(perdisk=True) or {})
        except Exception:  # noqa: BLE001
            return []
        skip = ("loop", "ram", "zram", "sr", "fd", "dm-", "md")
        whole = [n for n in names if not n.startswith(skip)]
        # partitions (sda1, nvme0n1p1) double-count their disk
        return [n for n in whole if not any(n != d and n.startswith(d) and n[len(d):].lstrip("p").isdigit()
                                            for d in whole)][:16]

    def _run(self) -> None:
        t0 = time.thread_time()
        nxt = time.perf_counter()
        try:
            while not self._stop.is_set():
                self._tick()
                nxt += self.interval
                delay = nxt - time.perf_counter()
                if delay < 0:  # fell behind (a stalled machine): skip, do not burst
                    nxt = time.perf_counter()
                    delay = 0.0
                if self._stop.wait(delay):
                    break
            self._tick()  # the state at the stop
        except Exception as err:  # noqa: BLE001 - keep what was sampled
            self.error = f"the system sampler failed: {type(err).__name__}: {err}"
        finally:
            self._cpu_s = time.thread_time() - t0

    def _tick(self) -> None:
        r = self._rows
        if len(r["t"]) >= MAX_SAMPLES:
            self._dropped += 1
            return
        ps = self._psutil
        nan = float("nan")
        t = time.time()
        cores = ps.cpu_percent(percpu=True)
        try:
            proc_cpu = self._proc.cpu_percent()
            rss = float(self._proc.memory_info().rss)
        except ps.Error:
            proc_cpu, rss = nan, nan
        try:
            pread = float(getattr(self._proc.io_counters(), "read_chars", nan))
        except (AttributeError, NotImplementedError, OSError, ps.Error):
            pread = nan
        vm = ps.virtual_memory()
        sw = ps.swap_memory()
        try:
            per = ps.disk_io_counters(perdisk=True) or {}
        except Exception:  # noqa: BLE001
            per = {}
        dr = sum(per[d].read_bytes for d in self._disks if d in per) if per else nan
        dw = sum(per[d].write_bytes for d in self._disks if d in per) if per else nan
        busy = [float(getattr(per[d], "busy_time", nan)) if d in per else nan for d in self._disks]
        try:
            nics = ps.net_io_counters(pernic=True) or {}
            nr = float(sum(v.bytes_recv for k, v in nics.items() if k != "lo"))
            ns = float(sum(v.bytes_sent for k, v in nics.items() if k != "lo"))
        except Exception:  # noqa: BLE001
            nr = ns = nan
        r["t"].append(t)
        r["cpu"].append(cores)
        r["proc_cpu"].append(proc_cpu)
        r["rss"].append(rss)
        r["avail"].append(float(vm.available))
        r["swap"].append(float(sw.used))
        r["sin"].append(float(getattr(sw, "sin", nan)))
        r["sout"].append(float(getattr(sw, "sout", nan)))
        r["dr"].append(float(dr))
        r["dw"].append(float(dw))
        r["busy"].append(busy)
        r["pread"].append(pread)
        r["nr"].append(nr)
        r["ns"].append(ns)
        if self._gpu is not None:
            u, m, p = self._gpu.read()
            r["gu"].append(u)
            r["gm"].append(m)
            r["gp"].append(p)

    # --- output ------------------------------------------------------------------------------------
    def columns(self) -> dict[str, np.ndarray]:
        """The samples so far as the file's columns."""
        r = self._rows
        n = len(r.get("t", []))
        cores = np.array(r["cpu"], dtype=np.float32).reshape(n, -1) if n else np.zeros((0, self._meta.get(
            "cpu_count", 1)), np.float32)
        cols = {
            "t_unix_s": np.array(r.get("t", []), dtype=np.float64),
            "cpu_pct": cores.mean(axis=1) if n else np.zeros(0, np.float32),
            "cpu_core_pct": np.clip(cores, 0, 100),
            "proc_cpu_pct": np.array(r.get("proc_cpu", []), np.float32),
            "proc_rss_bytes": np.array(r.get("rss", []), np.float64),
            "mem_available_bytes": np.array(r.get("avail", []), np.float64),
            "swap_used_bytes": np.array(r.get("swap", []), np.float64),
            "swap_in_bytes": np.array(r.get("sin", []), np.float64),
            "swap_out_bytes": np.array(r.get("sout", []), np.float64),
            "disk_read_bytes": np.array(r.get("dr", []), np.float64),
            "disk_write_bytes": np.array(r.get("dw", []), np.float64),
            "disk_busy_ms": np.array(r.get("busy", []), np.float64).reshape(n, len(self._meta.get("disks", []))),
            "proc_read_chars": np.array(r.get("pread", []), np.float64),
            "net_recv_bytes": np.array(r.get("nr", []), np.float64),
            "net_sent_bytes": np.array(r.get("ns", []), np.float64),
        }
        if self._gpu is not None:
            g = len(self._gpu.handles)
            cols["gpu_util_pct"] = np.clip(np.array(r["gu"], np.float32).reshape(n, g), 0, 100)
            cols["gpu_mem_used_bytes"] = np.array(r["gm"], np.float64).reshape(n, g)
            cols["gpu_power_w"] = np.array(r["gp"], np.float32).reshape(n, g)
        return cols

    def meta(self) -> dict[str, Any]:
        out = dict(self._meta, sampler_cpu_s=round(self._cpu_s, 4), samples_dropped=self._dropped)
        if self.profile_start_unix_s is not None:
            out["profile_start_unix_s"] = self.profile_start_unix_s
        if self.error:
            out["sampler_error"] = self.error
        return out

    def write(self, run_dir: str, host: str | None = None) -> str:
        """Write ``tfadvisor_system.<host>.npz`` into ``run_dir``; the path."""
        from tfadvisor.io.system_samples import file_name, write_samples

        name = file_name(host or self._meta.get("host") or socket.gethostname())
        path = f"{run_dir.rstrip('/')}/{name}" if "://" in run_dir else os.path.join(run_dir, name)
        return write_samples(path, self.columns(), self.meta())


__all__ = ["DEFAULT_HZ", "ENV", "SystemSampler", "env_hz", "open_gpu_sampler", "process_start_unix_s",
           "startup_point"]
