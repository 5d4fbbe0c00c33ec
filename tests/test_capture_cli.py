"""`tfadvisor capture` errors and plumbing that need no TensorFlow (fast)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import free_port
from typer.testing import CliRunner

from tfadvisor.capture import runner, service
from tfadvisor.capture.keras import parse_window
from tfadvisor.capture.options import profiler_options
from tfadvisor.cli.capture import app

ROOT = Path(__file__).resolve().parent.parent


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _stderr(result) -> str:
    try:
        return result.stderr
    except ValueError:  # older click: mixed output only
        return result.output




def test_unreachable_port_is_one_line_exit_2(tmp_path):
    port = free_port()
    res = _invoke("service", f"localhost:{port}", "--duration-ms", "500", "--logdir", str(tmp_path))
    assert res.exit_code == 2
    lines = _stderr(res).strip().splitlines()
    assert len(lines) == 1
    assert f"nothing is listening on localhost:{port}" in lines[0]
    assert f"tf.profiler.experimental.server.start({port})" in lines[0]
    assert not (tmp_path / "plugins").exists()


def test_unreachable_port_from_the_command_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "tfadvisor", "capture", "service", f"127.0.0.1:{free_port()}",
                           "--logdir", str(tmp_path)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "nothing is listening" in proc.stderr


@pytest.mark.parametrize("spec, message", [
    ("localhost", "expected HOST:PORT"),
    ("localhost:http", "is not a number"),
    ("localhost:70000", "out of range"),
    (",", "no address given"),
])
def test_bad_addresses(tmp_path, spec, message):
    res = _invoke("service", spec, "--logdir", str(tmp_path))
    assert res.exit_code == 2 and message in _stderr(res)


def test_parse_addresses():
    assert service.parse_addresses("grpc://a:1, b:2,[::1]:3") == [("a", 1), ("b", 2), ("::1", 3)]


def test_logdir_not_writable(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with socket.socket() as srv:  # something listens, so the logdir check is reached
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        res = _invoke("service", f"127.0.0.1:{port}", "--logdir", str(blocker / "log"))
    assert res.exit_code == 2
    assert "cannot write to logdir" in _stderr(res) and len(_stderr(res).strip().splitlines()) == 1


def test_bad_tracer_level(tmp_path):
    res = _invoke("service", "localhost:1", "--logdir", str(tmp_path), "--host-tracer-level", "7")
    assert res.exit_code == 2 and "--host-tracer-level must be between 1 and 3" in _stderr(res)


def test_run_modes_are_exclusive(tmp_path):
    res = _invoke("run", "--logdir", str(tmp_path), "--start-step", "3", "--start-after-s", "1", "--",
                  sys.executable, "-c", "pass")
    assert res.exit_code == 2 and "not both" in _stderr(res)


def test_run_missing_program(tmp_path):
    res = _invoke("run", "--logdir", str(tmp_path), "--", "tfadvisor-no-such-program-xyz")
    assert res.exit_code == 2 and "no such program" in _stderr(res)


def test_run_script_failure_passes_exit_code(tmp_path):
    res = _invoke("run", "--logdir", str(tmp_path), "--", sys.executable, "-c", "import sys; sys.exit(5)")
    assert res.exit_code == 5
    assert "the script exited with code 5" in _stderr(res)


def test_run_script_without_fit_explains(tmp_path):
    res = _invoke("run", "--logdir", str(tmp_path), "--", sys.executable, "-c", "print('no training here')")
    assert res.exit_code == 2
    assert "neither called keras Model.fit nor marked steps" in _stderr(res)


def test_run_warns_while_the_script_runs_without_fit_or_step_markers(tmp_path, capfd):
    """Step mode on a loop that neither calls fit nor marks steps: the hook says so while the script runs (after
    ``no_steps_warn_s``, 30 s by default; 0.3 s here), not only when it ends; a script done
    before then hears nothing."""
    script = "import sys, time; time.sleep(2.5); sys.stderr.write('script done\\n')"
    cfg = runner.capture_config(str(tmp_path / "log"), no_steps_warn_s=0.3)
    assert runner.run_script([sys.executable, "-c", script], cfg, system_hz=None).returncode == 0
    err = capfd.readouterr().err
    warned = [i for i, line in enumerate(err.splitlines()) if "neither keras Model.fit nor a step marker" in line]
    assert len(warned) == 1 and err.splitlines().index("script done") > warned[0], err
    line = err.splitlines()[warned[0]]
    assert "0.3 s" in line and "tfadvisor.step(i)" in line and "--start-after-s" in line
    cfg = runner.capture_config(str(tmp_path / "log"), no_steps_warn_s=5)
    assert runner.run_script([sys.executable, "-c", "pass"], cfg, system_hz=None).returncode == 0
    assert "step marker" not in capfd.readouterr().err


def test_run_help_shows_the_custom_loop_step_marker():
    res = _invoke("run", "--help")
    assert res.exit_code == 0
    out = " ".join(res.stdout.split())
    assert "keras Model.fit" in out and "with tfadvisor.step(i):" in out and "train_step(batch)" in out
    assert "tf.profiler.experimental.Trace('train', step_num=i, _r=1)" in out
    assert "30 s" in out  # the warning while it runs


def test_run_hook_disarms_children_and_chains_sitecustomize(tmp_path):
    """The hook takes itself out of the environment and still runs a sitecustomize it shadows."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['OTHER_SITECUSTOMIZE_RAN'] = 'yes'\n")
    probe = tmp_path / "probe.py"
    out = tmp_path / "out.txt"
    probe.write_text(textwrap.dedent(f"""
        import os, sys
        with open({str(out)!r}, "w") as fh:
            fh.write(os.environ.get("OTHER_SITECUSTOMIZE_RAN", "no") + "\\n")
            fh.write(str(os.environ.get("TFADVISOR_CAPTURE")) + "\\n")
            fh.write(os.environ.get("PYTHONPATH", "") + "\\n")
            fh.write(str("tensorflow" in sys.modules) + "\\n")
    """))
    cfg = runner.capture_config(str(tmp_path / "log"))
    done = runner.run_script([sys.executable, str(probe)], cfg, env=dict(os.environ, PYTHONPATH=str(other)))
    assert done.returncode == 0
    ran, leaked, pythonpath, tf_loaded = out.read_text().splitlines()
    assert ran == "yes"  # the shadowed sitecustomize ran
    assert leaked == "None"  # grandchildren are not armed
    assert pythonpath == str(other)  # and see the original PYTHONPATH
    assert tf_loaded == "False"  # the hook imports nothing heavy at start-up
    assert done.status is not None and done.status["fit_calls"] == 0


def test_capture_config():
    assert runner.capture_config("d") == {"logdir": "d", "options": {}, "mode": "steps", "start_step": 10,
                                          "steps": 10, "no_steps_warn_s": 30.0}
    cfg = runner.capture_config("d", start_after_s=2, options={"host_tracer_level": 3, "delay_ms": None})
    assert cfg["mode"] == "time" and cfg["start_after_s"] == 2.0 and cfg["duration_s"] == 5.0
    assert cfg["options"] == {"host_tracer_level": 3}
    with pytest.raises(ValueError):
        runner.capture_config("d", steps=0)


def test_parse_window_and_options():
    assert parse_window((10, 20)) == (10, 20)
    assert parse_window("3,8") == (3, 8)
    assert parse_window(None) is None
    for bad in ((5, 5), (-1, 3), "x", (1, 2, 3)):
        with pytest.raises(ValueError):
            parse_window(bad)
    assert profiler_options(host_tracer_level=3)["host_tracer_level"] == 3
    assert profiler_options({"python_tracer_level": 1}, python_tracer_level=0)["python_tracer_level"] == 0
    with pytest.raises(ValueError):
        profiler_options({"nope": 1})


def test_import_is_light():
    code = ("import sys, tfadvisor, tfadvisor.keras, tfadvisor.cli.capture; "
            "print('tensorflow' in sys.modules, 'keras' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert proc.stdout.split() == ["False", "False"], proc.stderr


def test_service_without_tensorflow_or_xprof(tmp_path, monkeypatch):
    from tfadvisor.capture import base

    def no_tf():
        raise base.TensorFlowMissing("No module named 'tensorflow'")

    monkeypatch.setattr(base, "import_tf", no_tf)
    monkeypatch.setitem(sys.modules, "xprof.convert", None)  # makes the import fail
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        res = _invoke("service", f"127.0.0.1:{port}", "--logdir", str(tmp_path))
        res_tf = _invoke("service", f"127.0.0.1:{port}", "--logdir", str(tmp_path), "--backend", "tf")
    assert res.exit_code == 2 and "pip install 'tfadvisor[tf]'" in _stderr(res)
    assert res_tf.exit_code == 2 and "TensorFlow is not installed: pip install 'tfadvisor[tf]'" in _stderr(res_tf)
