"""Capture from a running program's profiler server (``tfadvisor capture service``).

The training program starts a server with ``tf.profiler.experimental.server.start(PORT)``;
this asks it for a trace of ``duration_ms`` over gRPC. Two clients can do that:

* xprof's ``xprof.convert._pywrap_profiler_plugin.trace`` (no TensorFlow needed, starts
  in a fraction of a second, and passes tracer levels through to the server);
* TensorFlow's ``tf.profiler.experimental.client.trace`` (TF 2.21 drops the tracer levels
  on the way: the capture uses the server's defaults).

``backend="auto"`` uses xprof when it is installed, else TensorFlow.

Before tracing, each address is checked for what answers there: nothing (connection refused),
a server that says nothing, an HTTP/1 server, or an HTTP/2 (gRPC) server as a profiler server
is. A trace that fails is checked again, so that a server that went away during the capture is
named as such. The whole capture takes at most the attempts' durations plus
:data:`MARGIN_S`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from tfadvisor._version import __version__
from tfadvisor.capture import base
from tfadvisor.capture.options import DEFAULT_LEVELS, profiler_options, tf_options
from tfadvisor.capture.rundirs import list_names, new_run_dirs, snapshot_runs
from tfadvisor.capture.runfacts import write_run_metadata

#: Seconds a capture may take beyond the durations asked for (connecting, the server writing the files).
MARGIN_S = 10.0
#: Seconds a server has to answer the HTTP/2 greeting.
PROBE_TIMEOUT_S = 3.0
#: The HTTP/2 client connection preface and an empty SETTINGS frame (RFC 9113, 3.4 and 6.5).
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_H2_SETTINGS = 0x04


class CaptureError(Exception):
    """A capture that cannot be done; the CLI prints it as one line and exits with 2."""


@dataclass
class ServiceCapture:
    run_dir: str
    run_dirs: list[str] = field(default_factory=list)
    backend: str = ""
    addresses: list[str] = field(default_factory=list)


def parse_addresses(spec: str) -> list[tuple[str, int]]:
    """``"host:port,host2:port2"`` (``grpc://`` allowed) -> [(host, port), ...]."""
    out = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        if item.startswith("grpc://"):
            item = item[len("grpc://"):]
        host, sep, port = item.rpartition(":")
        if not sep or not host:
            raise CaptureError(f"bad address {raw.strip()!r}: expected HOST:PORT, e.g. localhost:6009")
        host = host.strip("[]")
        try:
            port_n = int(port)
        except ValueError:
            raise CaptureError(f"bad address {raw.strip()!r}: port {port!r} is not a number") from None
        if not 0 < port_n < 65536:
            raise CaptureError(f"bad address {raw.strip()!r}: port {port_n} is out of range")
        out.append((host, port_n))
    if not out:
        raise CaptureError("no address given: expected HOST:PORT[,HOST:PORT...]")
    return out


def check_listening(addresses: list[tuple[str, int]], timeout: float = 3.0) -> None:
    """A clear error when nothing accepts connections on an address."""
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                pass
        except OSError as err:
            why = err.strerror or type(err).__name__
            if isinstance(err, socket.timeout):
                why = f"no answer in {timeout:g} s"
            raise CaptureError(
                f"nothing is listening on {host}:{port} ({why}); start a profiler server in the training "
                f"program with tf.profiler.experimental.server.start({port})"
            ) from None


def probe(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when an HTTP/2 server (as gRPC profiler servers are) answers at ``host:port``; else why not, in words."""
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as err:
        if isinstance(err, socket.timeout):
            return f"no answer to a connection in {timeout:g} s"
        return (err.strerror or type(err).__name__).lower()
    with sock:
        try:
            sock.sendall(_H2_PREFACE)
            sock.settimeout(timeout)
            got = sock.recv(64)
        except TimeoutError:
            return f"it accepted the connection but said nothing in {timeout:g} s: not a profiler server"
        except OSError as err:
            return f"it dropped the connection ({err.strerror or type(err).__name__}): not a profiler server"
    if not got:
        return "it closed the connection without answering: not a profiler server"
    if got.startswith(b"HTTP/"):
        status = got.split(b"\r\n", 1)[0].decode("latin-1", "replace")
        return f"an HTTP/1 server answered ({status}): not a profiler server"
    if len(got) >= 4 and got[3] == _H2_SETTINGS:
        return None
    return f"it answered {got[:16]!r}, which is not HTTP/2: not a profiler server"


def check_servers(addresses: list[tuple[str, int]], timeout: float = PROBE_TIMEOUT_S) -> None:
    """A clear error unless each address answers as a gRPC (HTTP/2) server does."""
    for host, port in addresses:
        why = probe(host, port, timeout)
        if why is None:
            continue
        if "refused" in why or "no answer to a connection" in why:
            raise CaptureError(f"nothing is listening on {host}:{port} ({why}); start a profiler server in the "
                               f"training program with tf.profiler.experimental.server.start({port})")
        raise CaptureError(f"{host}:{port}: {why} (a profiler server, tf.profiler.experimental.server.start({port}), "
                           "speaks gRPC over HTTP/2): check the port")


def check_logdir(logdir: str) -> None:
    """Create a local logdir and make sure it can be written; remote ones are left to the writer."""
    if "://" in logdir and not logdir.startswith("file://"):
        return
    path = logdir[len("file://"):] if logdir.startswith("file://") else logdir
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".tfadvisor_write_test_"):
            pass
    except OSError as err:
        raise CaptureError(f"cannot write to logdir {logdir}: {err.strerror or err}") from None


def _backend(name: str):
    """("xprof"|"tf", trace function)."""
    errors = []
    if name in ("auto", "xprof"):
        try:
            from xprof.convert import _pywrap_profiler_plugin

            return "xprof", _pywrap_profiler_plugin.trace
        except Exception as err:  # noqa: BLE001 - ImportError, or its C library failing to load
            errors.append(f"xprof: {err}")
            if name == "xprof":
                raise CaptureError(f"xprof is not usable ({err}): pip install 'tfadvisor[xprof]'") from None
    try:
        tf = base.import_tf()
    except base.TensorFlowMissing:
        if name == "tf":
            raise CaptureError(base.TF_INSTALL_HINT) from None
        raise CaptureError(
            "capturing from a profiler server needs TensorFlow or xprof: pip install 'tfadvisor[tf]' "
            "(or 'tfadvisor[xprof]')"
        ) from None
    return "tf", tf


def capture_service(
    spec: str,
    logdir: str,
    duration_ms: int,
    *,
    retries: int = 2,
    options: dict | None = None,
    backend: str = "auto",
    check_timeout: float = 3.0,
) -> ServiceCapture:
    """Trace every address for ``duration_ms`` into ``logdir``; the new run directory."""
    if duration_ms <= 0:
        raise CaptureError(f"--duration-ms must be > 0, got {duration_ms}")
    addresses = parse_addresses(spec)
    check_listening(addresses, timeout=check_timeout)
    check_logdir(logdir)
    opts = {k: int(v) for k, v in (options or profiler_options()).items() if v is not None}
    joined = ",".join(f"{h}:{p}" for h, p in addresses)
    with _listing(logdir):
        before = snapshot_runs(logdir)
    kind, impl = _backend(backend)
    check_servers(addresses, timeout=check_timeout)  # after the local checks: what this machine lacks comes first
    attempts = max(1, retries + 1)
    limit = attempts * duration_ms / 1000 + MARGIN_S
    try:
        with _quiet_native_output():
            _bounded(limit, _trace, kind, impl, addresses, joined, logdir, duration_ms, retries, opts)
    except TimeoutError:
        raise CaptureError(f"the capture from {joined} did not finish in {limit:g} s ({attempts} attempt(s) of "
                           f"{duration_ms} ms plus {MARGIN_S:g} s): the server stopped answering") from None
    except Exception as err:  # noqa: BLE001 - gRPC and C errors arrive as many types
        text = " ".join(str(err).split()) or type(err).__name__
        gone = [f"{h}:{p} ({why})" for h, p in addresses if (why := probe(h, p)) is not None]
        if gone:
            raise CaptureError(f"the profiler server went away during the capture: {', '.join(gone)} now; did the "
                               f"training program end or crash? (the client said: {text[:200]})") from None
        if "No trace event" in text or "no trace event" in text.lower():
            raise CaptureError(
                f"no trace events were collected from {joined} in {duration_ms} ms "
                f"({max(1, retries + 1)} attempt(s)): the program ran nothing TensorFlow traces in the window; "
                "capture while it trains, or use a longer --duration-ms"
            ) from None
        raise CaptureError(f"capture from {joined} failed: {text}") from None
    with _listing(logdir):
        dirs = new_run_dirs(logdir, before)
    if not dirs:
        raise CaptureError(
            f"the profiler server at {joined} wrote no profile under {logdir}/plugins/profile "
            "(the server writes the files itself: the logdir must be reachable from the training host)"
        )
    run_dir = dirs[-1]
    facts = {
        "tfadvisor_version": __version__,
        "hosts": len(addresses),
        "host_names": _host_names(run_dir) or [f"{h}:{p}" for h, p in addresses],
        "capture": {"by": "tfadvisor capture service", "backend": kind, "service_addr": joined,
                    "duration_ms": int(duration_ms), "options": opts},
    }
    write_run_metadata(run_dir, facts)
    return ServiceCapture(run_dir=run_dir, run_dirs=dirs, backend=kind, addresses=[f"{h}:{p}" for h, p in addresses])


@contextlib.contextmanager
def _listing(logdir: str) -> Iterator[None]:
    """A listing of ``logdir`` that fails (no fsspec/gcsfs for a remote logdir, no access) is a CaptureError."""
    try:
        yield
    except Exception as err:  # noqa: BLE001 - fsspec and its file systems raise many types
        raise CaptureError(f"cannot list {logdir}: {' '.join(str(err).split()) or type(err).__name__}") from None


def _host_names(run_dir: str) -> list[str]:
    from tfadvisor.io.discovery import XPLANE_SUFFIX

    if "://" in run_dir:
        return sorted(f[: -len(XPLANE_SUFFIX)] for f in list_names(run_dir) if f.endswith(XPLANE_SUFFIX))
    try:
        return sorted(f[: -len(XPLANE_SUFFIX)] for f in os.listdir(run_dir) if f.endswith(XPLANE_SUFFIX))
    except OSError:
        return []


def _bounded(limit_s: float, fn, *args) -> None:
    """``fn(*args)`` in a daemon thread; its exception re-raised, ``TimeoutError`` after ``limit_s`` (a native
    client blocked on a server that stopped answering cannot be interrupted: it is left behind)."""
    box: list[BaseException] = []

    def run() -> None:
        try:
            fn(*args)
        except BaseException as err:  # noqa: BLE001 - handed to the caller
            box.append(err)

    t = threading.Thread(target=run, name="tfadvisor-capture-service", daemon=True)
    t.start()
    t.join(limit_s)
    if t.is_alive():
        raise TimeoutError(limit_s)
    if box:
        raise box[0]


def _trace(kind, impl, addresses, joined, logdir, duration_ms, retries, opts) -> None:
    attempts = max(1, retries + 1)
    if kind == "xprof":
        impl(joined, logdir, "", True, int(duration_ms), attempts, opts)
        return
    tf = impl
    tf_opts = tf_options(tf, {**DEFAULT_LEVELS, "delay_ms": None, **opts}, local=False)
    tf.profiler.experimental.client.trace(",".join(f"grpc://{h}:{p}" for h, p in addresses), logdir,
                                          int(duration_ms), num_tracing_attempts=attempts, options=tf_opts)


@contextlib.contextmanager
def _quiet_native_output():
    """Hide what the native profiler client prints on fds 1 and 2 (its errors come back as exceptions)."""
    if os.environ.get("TFADVISOR_DEBUG"):
        yield
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = (os.dup(1), os.dup(2))
    except (OSError, ValueError, AttributeError):
        yield
        return
    sink = tempfile.TemporaryFile()
    try:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        sink.close()
