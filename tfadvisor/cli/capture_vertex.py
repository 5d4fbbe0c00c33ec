"""``tfadvisor capture vertex``: the command's options; the job (submitting it, following it, fetching its
profile) is :mod:`tfadvisor.capture.vertex_job`, which imports the Vertex AI SDK only when the command runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tfadvisor.capture.vertex import DEFAULT_STEPS
from tfadvisor.capture.vertex_job import CPU_IMAGE, EXTRA_HINT, GPU_IMAGE, LOCAL_BUILD
from tfadvisor.cli.common import Command
from tfadvisor.errors import fail


def vertex(
    ctx: typer.Context,
    project: Annotated[str | None, typer.Option(metavar="PROJECT", envvar="GOOGLE_CLOUD_PROJECT", show_envvar=True,
                                                help="Google Cloud project.")] = None,
    region: Annotated[str | None, typer.Option(metavar="REGION", help="Vertex AI region, e.g. us-central1.")] = None,
    script: Annotated[Path | None, typer.Option(metavar="FILE", exists=True, dir_okay=False,
                                                help="Training script; it calls tfadvisor.vertex.init().")] = None,
    requirements: Annotated[list[str] | None, typer.Option(
        metavar="REQ", show_default=False,
        help="Pip requirement, or a requirements file, for the script (repeatable).")] = None,
    tfadvisor_package: Annotated[str, typer.Option(
        metavar="local|''|REQ", help="How the job gets tfadvisor: 'local' (default) uploads a wheel of this very "
                                     "tfadvisor with the code; '' if the image has it; else a pip requirement.")]
    = LOCAL_BUILD,
    container_uri: Annotated[str | None, typer.Option(
        metavar="URI", help=f"Training image (default: {CPU_IMAGE} as a custom container, {GPU_IMAGE} with an "
                            "accelerator).")] = None,
    tensorboard: Annotated[str | None, typer.Option(
        metavar="ID", help="Vertex AI TensorBoard instance: projects/P/locations/R/tensorboards/ID, or ID.")] = None,
    service_account: Annotated[str | None, typer.Option(
        metavar="EMAIL", help="Service account the job runs as (needs roles/storage.admin and "
                              "roles/aiplatform.user).")] = None,
    staging_bucket: Annotated[str | None, typer.Option(
        metavar="GS_URI", help="gs:// bucket (or folder) for the code and the job's output and profile.")] = None,
    machine_type: Annotated[str, typer.Option(metavar="TYPE", help="Machine type of each replica.")]
    = "n1-standard-4",
    accelerator_type: Annotated[str | None, typer.Option(metavar="TYPE", help="e.g. NVIDIA_TESLA_T4.")] = None,
    accelerator_count: Annotated[int, typer.Option(metavar="N", help="Per replica (default 1 with a type).")] = 0,
    replica_count: Annotated[int, typer.Option(metavar="N", min=1, help="Replicas (chief + workers).")] = 1,
    display_name: Annotated[str | None, typer.Option(
        metavar="NAME", help="Job name, also its output folder (default: tfadvisor-<script>-<time>).")] = None,
    steps: Annotated[str, typer.Option(
        metavar="START,STOP", help="Step window start,stop the job profiles (TFADVISOR_STEPS, read by "
                                   "tfadvisor.vertex.init).")] = f"{DEFAULT_STEPS[0]},{DEFAULT_STEPS[1]}",
    web_access: Annotated[bool, typer.Option("--web-access",
                                             help="Enable interactive shell access to the job.")] = False,
    network: Annotated[str | None, typer.Option(
        metavar="NETWORK", help="VPC network peered with Vertex AI: projects/PROJECT_NUMBER/global/networks/NAME.")]
    = None,
    api_endpoint: Annotated[str | None, typer.Option(
        metavar="URL", help="Vertex AI API endpoint (default: the region's); http://HOST:PORT: a stand-in.")] = None,
    anonymous: Annotated[bool, typer.Option("--anonymous", help="Send no credentials (local stand-ins: with "
                                            "--api-endpoint and STORAGE_EMULATOR_HOST).")] = False,
    job: Annotated[str | None, typer.Option(
        metavar="JOB", help="Analyse this existing job instead (projects/P/locations/R/customJobs/ID, or ID).")]
    = None,
    out: Annotated[Path | None, typer.Option(metavar="DIR", file_okay=False, help="Where to put the profile "
                                             "(default: a new temporary directory).")] = None,
    poll_seconds: Annotated[float, typer.Option(metavar="S", min=0, help="How often to check the job.")] = 30.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the CustomJob as JSON; create nothing.")] = False,
) -> None:
    """Run a training script on Vertex AI with profiling, then analyse the profile it wrote.

    Arguments after `--` go to the script.
    """
    from tfadvisor.capture import vertex_job
    from tfadvisor.capture.keras import parse_window  # not for --help: the callback's module (logging, dataclasses)

    try:
        window = parse_window(steps)
    except ValueError as err:
        fail(f"--steps: {err}")
    try:
        import google.cloud.aiplatform  # noqa: F401
        import google.cloud.storage  # noqa: F401
    except ImportError:
        fail(EXTRA_HINT)
    if job and dry_run:
        fail("--dry-run describes a new job; it does not go with --job")
    if job:
        project, region, job = vertex_job._job_name(job, project, region)
    else:
        request = vertex_job._request(project, region, script, list(requirements or []), tfadvisor_package,
                                      container_uri, tensorboard, service_account, staging_bucket, machine_type,
                                      accelerator_type, accelerator_count, replica_count, display_name, window,
                                      web_access, list(ctx.args), network)
        if dry_run:
            typer.echo(json.dumps(request.describe(), indent=2))
            return
    try:
        vertex_job._run(job or request, project, region, api_endpoint, anonymous, out, poll_seconds)
    except typer.Exit:
        raise
    except Exception as err:  # noqa: BLE001 - Google errors into one line; the rest goes on up
        message = vertex_job._google_error(err)
        if message is None:
            raise
        fail(message)


def register(app: typer.Typer) -> None:
    """Add ``vertex`` to the ``tfadvisor capture`` group."""
    app.command("vertex", cls=Command, context_settings={"allow_extra_args": True},
                short_help="Run a training script on Vertex AI with profiling, then analyse.")(vertex)
