"""``dpcausal serve`` / ``dpcausal stop``: the options and what they print; the stack itself
(servers, work pool, deployments, worker, process groups) is deploy/servers.py."""

from __future__ import annotations

import time
from typing import Any

import click

from deploy import servers
from deploy.servers import ServiceError


@click.command()
@click.option("--prefect-port", default=4200, show_default=True, type=int)
@click.option("--mlflow-port", default=5000, show_default=True, type=int)
@click.option("--backend-store-uri", default=None, metavar="URI",
              help="MLflow backend store (default sqlite:///<data>/mlflow.db), e.g. "
                   "postgresql+psycopg://user:pw@host/mlflow")
@click.option("--auth", default=None, metavar="USER:PASS",
              help="The administrator's credentials on both servers (Prefect's API auth string, "
                   "MLflow's basic-auth app), stored in the private folder for the worker, the "
                   "gateway and the CLI. Without it: the stored ones, else new ones generated.")
@click.option("--gateway-port", default=8400, show_default=True, type=int,
              help="Port of the analysts' gateway (its page and JSON API).")
@click.option("--no-deploy", is_flag=True, help="Start the servers only (no gateway).")
@click.option("--timeout", default=180.0, show_default=True, help="Seconds to wait per stage.")
def serve(prefect_port: int, mlflow_port: int, backend_store_uri: str | None, auth: str | None,
          gateway_port: int, no_deploy: bool, timeout: float) -> None:
    """Start Prefect + MLflow on 127.0.0.1 (both with auth), create the work pool, deploy, start
    a worker and the analysts' gateway."""
    from deploy.service_auth import parse_auth

    t0 = time.monotonic()
    if auth is not None:
        try:
            parse_auth(auth)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--auth") from None
    try:
        servers.check_can_start()
        try:
            stack = servers.start_stack(prefect_port, mlflow_port, backend_store_uri, auth,
                                        not no_deploy, timeout, t0, gateway_port)
        except BaseException:
            click.echo("start-up failed: stopping what was started", err=True)
            _stop(grace=10)
            raise
    except ServiceError as exc:
        raise click.ClickException(str(exc)) from None
    made = "generated now" if stack["generated"] else "given" if auth else "reused"
    click.echo(f"Prefect UI : {stack['prefect_ui']}\nMLflow UI  : {stack['mlflow_ui']}\n"
               f"Sign-in    : user {stack['user']}, password in {stack['credentials']} "
               f"({made}; the curator's only)\n"
               f"(servers healthy after {stack['servers_s']:.1f} s, stack ready after "
               f"{stack['startup_s']:.1f} s; logs in {servers.services_dir() / 'logs'})")
    if "gateway" in stack:
        click.echo(f"gateway: {stack['gateway']}")
        click.echo("  (analysts ask there with a token: dpcausal analyst add NAME --datasets A)")
    if not no_deploy:
        click.echo("Trigger a release: Prefect UI > Deployments > release_from_config/demo > "
                   f"Run, or\n  {servers.trigger_command(stack['prefect_api'])}\nor, for a "
                   "config of yours: dpcausal run --submit CONFIG")
    click.echo("Stop everything: dpcausal stop")


@click.command()
@click.option("--grace", default=15.0, show_default=True,
              help="Seconds before a service that ignored SIGTERM gets SIGKILL.")
def stop(grace: float) -> None:
    """Stop the services `dpcausal serve` started (by their recorded process groups)."""
    try:
        recs = _stop(grace)
    except ServiceError as exc:
        raise click.ClickException(str(exc)) from None
    if recs:
        click.echo("stopped: " + ", ".join(f"{n} (pgid {r['pgid']})" for n, r in recs.items()))


def _stop(grace: float) -> dict[str, dict[str, Any]]:
    recs = servers.stop_recorded(grace)
    if not recs:
        click.echo(f"nothing recorded in {servers.services_dir()}: no services to stop")
    return recs
