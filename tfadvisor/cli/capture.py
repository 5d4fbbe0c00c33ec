"""``tfadvisor capture``: get a profile, then analyse it.

* ``tfadvisor capture service HOST:PORT[,HOST:PORT...] --logdir DIR --duration-ms N``
  asks a running program's profiler server (``tf.profiler.experimental.server.start``)
  for a trace.
* ``tfadvisor capture run --logdir DIR [--start-step N --steps M | --start-after-s S
  --duration-s D] -- python train.py ARGS`` runs a training script with the profiler
  armed, passes its output and exit code through, then analyses the capture. It also samples
  CPU, memory, disk, network and GPU use during the window (``--no-system`` to skip).

Problems are one line on stderr and exit code 2 (a failing script's own exit code is
passed through instead). Output is best-effort: stdout or stderr on a full disk or a closed
pipe changes neither the capture nor the exit code.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from tfadvisor.capture.base import say, say_err
from tfadvisor.cli.capture_vertex import register as register_vertex
from tfadvisor.cli.common import Command, choice, one_of, typer_app
from tfadvisor.errors import fail

app = typer_app(help="Capture a profile: from a running program's profiler server, or by running a training script.",
                no_args_is_help=True)


HOST_LEVEL_HELP = "Host (CPU) tracer level: 1 critical, 2 info, 3 verbose."
DEVICE_LEVEL_HELP = "Device (GPU/TPU) tracer level: 0 off, 1 on."
PYTHON_LEVEL_HELP = "Python tracer level: 1 traces Python function calls (slow), 0 off."
BACKENDS = ("auto", "xprof", "tf")

HostLevel = Annotated[int | None, typer.Option(metavar="LEVEL", help=HOST_LEVEL_HELP)]
DeviceLevel = Annotated[int | None, typer.Option(metavar="LEVEL", help=DEVICE_LEVEL_HELP)]
PythonLevel = Annotated[int | None, typer.Option(metavar="LEVEL", help=PYTHON_LEVEL_HELP)]
Analyze = Annotated[bool, typer.Option("--analyze/--no-analyze", help="Analyse the capture and print the result.")]


def _levels(host: int | None, device: int | None, python: int | None, delay_ms: int | None = None):
    from tfadvisor.capture.options import profiler_options

    for name, value, lo, hi in (("--host-tracer-level", host, 1, 3), ("--device-tracer-level", device, 0, 1),
                                ("--python-tracer-level", python, 0, 1)):
        if value is not None and not lo <= value <= hi:
            fail(f"{name} must be between {lo} and {hi}, got {value}")
    return profiler_options(host_tracer_level=host, device_tracer_level=device, python_tracer_level=python,
                            delay_ms=delay_ms)


def _report(run_dir: str, logdir: str, *, analyze: bool, no_steps: str | None = None) -> None:
    """Say where the profile is; analyse it and print the result (or fail when it has no steps)."""
    say(f"tfadvisor: profile written to {run_dir}")
    if not analyze:
        say(f"tfadvisor: analyse it with: tfadvisor analyze {logdir}")
        return
    import tfadvisor.api as api

    try:
        result = api.analyze(run_dir)
    except Exception as err:  # noqa: BLE001 - the capture itself worked: keep it, say why
        say_err(f"tfadvisor: analysis failed ({type(err).__name__}: {err}); the profile is kept: "
                f"tfadvisor analyze {logdir}")
        return
    if no_steps and result.metrics.get("steps_count") == 0:
        fail(no_steps)
    from tfadvisor.capture.analysis import capture_console
    from tfadvisor.report.terminal import print_result

    try:
        print_result(result, capture_console())
    except (OSError, ValueError):  # stdout that cannot be written: the profile is there all the same
        pass
    say(f"tfadvisor: analyse it again with: tfadvisor analyze {logdir}")


@app.command("service", cls=Command, short_help="Capture from a running program's profiler server(s).")
def service(
    address: Annotated[str, typer.Argument(metavar="HOST:PORT[,HOST:PORT...]", show_default=False,
                                           help="Profiler server(s) of the running program (grpc:// optional).")],
    logdir: Annotated[str, typer.Option(metavar="DIR", show_default=False, help="Where to write the profile (the "
                                        "server writes it too: use shared storage such as gs:// for remote hosts).")],
    duration_ms: Annotated[int, typer.Option(metavar="MS", help="How long to trace, in milliseconds.")] = 2000,
    retries: Annotated[int, typer.Option(metavar="N", help="Tries again this many times when nothing was traced.")]
    = 2,
    host_tracer_level: HostLevel = None,
    device_tracer_level: DeviceLevel = None,
    python_tracer_level: PythonLevel = None,
    delay_ms: Annotated[int | None, typer.Option(metavar="MS", help="Start tracing this much later (all hosts).")]
    = None,
    backend: Annotated[str, typer.Option(parser=one_of("backend", BACKENDS), metavar=choice(*BACKENDS),
                                         help="Client: xprof (passes tracer levels on) or tf; auto prefers xprof.")]
    = "auto",
    analyze: Analyze = True,
) -> None:
    """Capture DURATION ms from a program that runs tf.profiler.experimental.server.start(PORT).

    Memory events on the CPU need the program itself to run with TF_CPU_ALLOCATOR_USE_BFC=true.
    """
    from tfadvisor.capture.service import CaptureError, capture_service

    if retries < 0:
        fail(f"--retries must be >= 0, got {retries}")
    opts = _levels(host_tracer_level, device_tracer_level, python_tracer_level, delay_ms)
    try:
        got = capture_service(address, logdir, duration_ms, retries=retries, options=opts, backend=backend)
    except CaptureError as err:
        fail(str(err))
        return
    joined = ",".join(got.addresses)
    say(f"tfadvisor: captured {duration_ms} ms from {joined} ({got.backend})")
    _report(got.run_dir, logdir, analyze=analyze,
            no_steps=f"no training steps ran during the {duration_ms} ms capture of {joined} (the profile is kept in "
                     f"{got.run_dir}): capture while the program trains, or use a longer --duration-ms")


#: How a custom training loop marks its steps, as ``capture run --help`` shows it.
STEP_MARKER = "with tfadvisor.step(i): train_step(batch)"
RAW_STEP_MARKER = "with tf.profiler.experimental.Trace('train', step_num=i, _r=1): ..."


@app.command("run", cls=Command, context_settings={"allow_interspersed_args": False},
             short_help="Run a training script with the profiler armed, then analyse.")
def run(
    command: Annotated[list[str], typer.Argument(metavar="-- COMMAND [ARGS]...", show_default=False,
                                                 help="The training command, e.g. python train.py --epochs 3.")],
    logdir: Annotated[str, typer.Option(metavar="DIR", show_default=False, help="Where the profiler writes.")],
    start_step: Annotated[int | None, typer.Option(metavar="N", help="First profiled step (global, from 0; default "
                                                   "10): of keras Model.fit, or of the loop's step markers.")] = None,
    steps: Annotated[int | None, typer.Option(metavar="N", help="How many steps to profile (default 10).")] = None,
    start_after_s: Annotated[float | None, typer.Option(metavar="S", help="Time mode: start the profiler this many "
                                                        "seconds after the script starts (any TensorFlow program, no "
                                                        "step markers needed).")] = None,
    duration_s: Annotated[float | None, typer.Option(metavar="S", help="Time mode: profile this long (default 5).")]
    = None,
    host_tracer_level: HostLevel = None,
    device_tracer_level: DeviceLevel = None,
    python_tracer_level: PythonLevel = None,
    memory: Annotated[bool, typer.Option("--memory", help="Record CPU memory events "
                                         "(TF_CPU_ALLOCATOR_USE_BFC=true).")] = False,
    system: Annotated[bool, typer.Option("--system/--no-system", help="Sample CPU, memory, disk, network and GPU use "
                                         "during the window (tfadvisor_system.<host>.npz beside the profile).")]
    = True,
    system_hz: Annotated[float, typer.Option(metavar="HZ", help="System sampling rate, samples per second (1-50).")]
    = 10.0,
    analyze: Analyze = True,
) -> None:
    """Run a training script with the profiler armed, then analyse what it captured.

    Step mode (default) profiles steps START..START+STEPS-1 of keras Model.fit, or of a custom training loop that
    marks its steps:

    \b
        for i, batch in enumerate(ds):
            with tfadvisor.step(i):
                train_step(batch)

    (tfadvisor.step records tf.profiler.experimental.Trace('train', step_num=i, _r=1), which marks a step too).
    A script that neither calls fit nor marks a step within 30 s gets a warning while it runs.

    Time mode (--start-after-s/--duration-s) profiles a stretch of wall time of any TensorFlow program.

    The script's output is shown as it runs and its exit code is passed through.
    """
    from tfadvisor.capture.runner import capture_config, explain_no_profile, lost_window, run_script
    from tfadvisor.capture.service import CaptureError, check_logdir

    if not command:
        fail("no command given: tfadvisor capture run --logdir DIR -- python train.py")
    opts = _levels(host_tracer_level, device_tracer_level, python_tracer_level)
    if not 1 <= system_hz <= 50:
        fail(f"--system-hz must be between 1 and 50, got {system_hz:g}")
    try:
        cfg = capture_config(logdir, start_step=start_step, steps=steps, start_after_s=start_after_s,
                             duration_s=duration_s, options=opts)
        check_logdir(logdir)
    except (ValueError, CaptureError) as err:
        fail(str(err))
        return
    try:
        done = run_script(list(command), cfg, memory=memory, system_hz=system_hz if system else None)
    except FileNotFoundError:
        fail(f"cannot run {command[0]!r}: no such program")
        return
    except PermissionError:
        fail(f"cannot run {command[0]!r}: permission denied")
        return
    run_dir = (done.status or {}).get("run_dir")
    if done.signal is not None:
        _terminated(done, run_dir)
    if done.returncode != 0:
        lost = lost_window(done)
        where = f"; what it captured is in {run_dir}" if run_dir else f"; {lost}" if lost else ""
        say_err(f"tfadvisor: the script exited with code {done.returncode}{where}")
        raise typer.Exit(done.returncode if done.returncode > 0 else 128 - done.returncode)
    if not run_dir:
        fail(explain_no_profile(done))
        return
    _report(run_dir, logdir, analyze=analyze)


def _terminated(done, run_dir: str | None) -> None:
    """This process got SIGTERM (passed on to the script): say what is kept, then end as SIGTERM does."""
    import signal

    kept = f"; what it captured is in {run_dir} (tfadvisor analyze {run_dir})" if run_dir else "; no profile"
    say_err(f"tfadvisor: got SIGTERM and passed it on to the script, which exited with code "
            f"{done.returncode}{kept}")
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
    raise typer.Exit(143)


def register(root: typer.Typer) -> None:
    """Add ``capture`` (service, run, vertex) to the root command."""
    root.add_typer(app, name="capture", short_help="Capture a profile: from a profiler server, or run a script.")


# ``capture vertex``'s options are in their own module; the Vertex AI SDK is imported only when that command runs.
register_vertex(app)
