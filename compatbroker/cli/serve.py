"""`compatbroker serve ...`: run the broker (`--nodes N`: a test cluster of N brokers in this process;
`--dev-tls`: with an SSL listener and a generated CA, `compatbroker.toolkit.dev_tls`; `--metrics-listen`: a
Prometheus endpoint, `compatbroker.metrics.exporter`).

It prints `compatbroker listening on HOST:PORT` once it accepts connections and exits 0 on SIGTERM/SIGINT; a bad
configuration is one line on stderr and exit 2, a failure to start exit 1. It wires the testing toolkit (version
emulation, the control endpoint) into the server, which never imports it; a plain `serve` loads none of it.
"""
from __future__ import annotations

import logging
import sys
from types import SimpleNamespace

import click

EXIT_BAD_CONFIG = 2
EXIT_STARTUP_FAILED = 1


def _at_least_one(ctx, param, value: int) -> int:
    if value < 1:
        raise click.BadParameter("must be at least 1")
    return value


def _node_ids(ctx, param, text):
    if text is None:
        return None
    try:
        ids = [int(item) for item in text.split(",")]
    except ValueError:
        raise click.BadParameter(f"expected node ids like 1,2,3, got {text!r}") from None
    if min(ids) < 0 or len(set(ids)) != len(ids):
        raise click.BadParameter(f"node ids must be distinct and not negative, got {text!r}")
    return ids


def _racks(ctx, param, text):
    return None if text is None else [rack.strip() or None for rack in text.split(",")]


@click.command("serve", help="Run the broker until SIGTERM or SIGINT. Settings use Kafka's names.",
               short_help="run the broker")
@click.option("--listen", metavar="HOST:PORT", multiple=True,
              help="where to accept clients (listeners; default localhost:9092 on IPv4 and IPv6; port 0 picks a "
                   "free port). With --nodes N: once for every node (ports counting up from it; port 0: a free one "
                   "each) or N times, one per node")
@click.option("--advertised-listener", metavar="HOST:PORT",
              help="the address clients are told to use (advertised.listeners; default: the listener)")
@click.option("--data-dir", metavar="DIR",
              help="where the logs live (log.dirs; default $XDG_DATA_HOME/compatbroker or "
                   "~/.local/share/compatbroker)")
@click.option("--config", metavar="FILE", help="a server.properties file")
@click.option("--set", "set_", metavar="NAME=VALUE", multiple=True,
              help="one setting by its Kafka name, e.g. --set num.partitions=3 (repeatable)")
@click.option("--log-level", default="INFO", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
              help="how much the broker logs on stderr (default INFO)")
@click.option("--control-listen", metavar="HOST:PORT",
              help="also serve the HTTP/JSON control API for tests (fault injection, down/up, topics, records, "
                   "committed offsets, request log) on this address, port 0 for a free one; its URL is printed "
                   "as a second stdout line, 'compatbroker control on URL'")
@click.option("--metrics-listen", metavar="HOST:PORT",
              help="also serve Prometheus metrics at http://HOST:PORT/metrics (port 0 for a free one); its URL "
                   "is printed on stdout, 'compatbroker metrics on URL'")
@click.option("--dev-tls", is_flag=True,
              help="serve TLS with a generated CA and broker certificate (kept in DATA_DIR/dev-tls/): adds an SSL "
                   "listener (the first listener's port + 1) unless there is one, and prints where the CA "
                   "certificate clients must trust is")
@click.option("--emulate", metavar="RELEASE",
              help="advertise and serve the API versions of this Apache Kafka release (e.g. 3.9)")
@click.option("--nodes", metavar="N", type=int, default=1, callback=_at_least_one,
              help="run a test cluster of N brokers in this process, node ids 0..N-1, each with its own listener "
                   "and its logs in DATA_DIR/node-ID/ (default 1: a single broker)")
@click.option("--node-ids", metavar="ID,ID,...", callback=_node_ids,
              help="the nodes' ids instead of 0..N-1 (their count is the node count)")
@click.option("--racks", metavar="RACK,RACK,...", callback=_racks,
              help="each node's broker.rack, one per node (an empty one: no rack)")
def serve(**params) -> int:
    params["listen"], params["set"] = list(params["listen"]), list(params.pop("set_"))
    return run_serve(SimpleNamespace(**params))


def run_serve(args) -> int:
    from ..config import BrokerConfig, ConfigError

    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        overrides = list(args.set)
        if args.node_ids is not None:
            if args.nodes not in (1, len(args.node_ids)):
                raise ConfigError(f"--node-ids: {len(args.node_ids)} ids for --nodes {args.nodes}")
            args.nodes = len(args.node_ids)
        if args.racks is not None:
            if len(args.racks) != args.nodes:
                raise ConfigError(f"--racks: one rack per node ({args.nodes}), got {len(args.racks)}")
            if args.nodes == 1:  # a single broker's rack is its broker.rack
                overrides.append(f"broker.rack={args.racks[0] or ''}")
        config = BrokerConfig.from_sources(config_file=args.config, overrides=overrides,
                                           listen=args.listen[0] if args.listen else None,
                                           advertised_listener=args.advertised_listener, data_dir=args.data_dir)
        if args.dev_tls:
            config = _with_dev_tls(args, config, overrides)
        options = _cluster_options(args, config)
        services = _metrics_services(args)
    except ConfigError as exc:
        print(f"compatbroker: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    from ..server import StartupError, run
    if args.emulate is not None or args.control_listen is not None:
        from ..toolkit.runtime import toolkit_for
        try:
            options.update(toolkit_for(emulate=args.emulate, control_listen=args.control_listen).runtime_options())
        except StartupError as exc:
            print(f"compatbroker: {exc}", file=sys.stderr)
            return EXIT_STARTUP_FAILED
    if args.dev_tls:
        from ..toolkit.dev_tls import DevTlsNotice, ca_file_of
        services.insert(0, DevTlsNotice(ca_file_of(config)))
    if services:
        options["services"] = [*options.get("services", []), *services]
    return run(config, **options)


def _metrics_services(args) -> list:
    """The Prometheus exporter of --metrics-listen (ConfigError for a bad address)."""
    if args.metrics_listen is None:
        return []
    from ..metrics.exporter import MetricsExporter
    try:
        return [MetricsExporter(args.metrics_listen)]
    except ValueError as exc:
        from ..config import ConfigError
        raise ConfigError(f"--metrics-listen: {exc}") from None


def _with_dev_tls(args, config, overrides: list[str]):
    """The configuration with --dev-tls's SSL listener and generated keystore (compatbroker.toolkit.dev_tls)."""
    from ..config import BrokerConfig, ConfigError
    from ..toolkit.dev_tls import dev_tls_overrides

    if len(args.listen) > 1:
        raise ConfigError("--dev-tls: give the SSL listeners of each node in --listen yourself, or one --listen")
    try:
        added = dev_tls_overrides(config, args.nodes)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--dev-tls: cannot make the certificates: {exc}") from None
    # `listeners` now comes from the overrides, which already hold the --listen address
    return BrokerConfig.from_sources(config_file=args.config, overrides=[*overrides, *added],
                                     listen=None if any(item.startswith("listeners=") for item in added)
                                     else (args.listen[0] if args.listen else None),
                                     advertised_listener=args.advertised_listener, data_dir=args.data_dir)


def _cluster_options(args, config) -> dict:
    """The runtime's node count, racks and per-node listeners from --nodes, --racks and --listen (ConfigError)."""
    from ..config import ConfigError
    from ..server.run import cluster_listeners

    if args.nodes == 1 and args.node_ids is None:
        if len(args.listen) > 1:
            raise ConfigError(f"--listen: one address for a single broker, got {len(args.listen)} (see --nodes)")
        return {}
    if args.advertised_listener is not None:
        raise ConfigError("--advertised-listener names one broker's address; with --nodes each node advertises "
                          "its own listener")
    return {"nodes": args.nodes, "node_ids": args.node_ids, "racks": args.racks,
            "node_listeners": cluster_listeners(config, args.nodes, args.listen)}
