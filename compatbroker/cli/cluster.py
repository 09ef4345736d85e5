"""`compatbroker cluster info`: the cluster id, the controller, the brokers with their racks (DescribeCluster, or
Metadata on older brokers) and the finalized feature levels (ApiVersions, KIP-584), as kafka-cluster.sh,
kafka-metadata-quorum.sh and kafka-features.sh show them.

`--format json`: `{"cluster_id", "controller_id", "brokers": [{"node_id", "host", "port", "rack"}],
"features": [{"name", "min_version_level", "max_version_level"}], "features_epoch"}` (-1: not reported).
"""
from __future__ import annotations

import click

from .errors import EXIT_CODES_HELP, kafka_errors
from .options import client_options, make_admin
from .output import Fields, Table, emit


@click.group("cluster", epilog=EXIT_CODES_HELP)
def cluster():
    """The cluster: id, controller, brokers, features."""


@cluster.command("info", epilog=EXIT_CODES_HELP)
@client_options
@click.pass_context
def info(ctx):
    """Show the cluster id, the controller, the brokers (host, port, rack) and the finalized features."""
    admin = make_admin(ctx)
    with kafka_errors("cluster info"):
        found = admin.cluster_info()
        epoch = admin.client.api_versions().finalized_features_epoch
    brokers = [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in found.brokers]
    features = [{"name": name, "min_version_level": levels["min"], "max_version_level": levels["max"]}
                for name, levels in sorted(found.finalized_features.items())]
    document = {"cluster_id": found.cluster_id, "controller_id": found.controller_id, "brokers": brokers,
                "features": features, "features_epoch": epoch}
    views = [Fields({"Cluster id": found.cluster_id, "Controller": found.controller_id}),
             Table([("node_id", "ID"), ("host", "HOST"), ("port", "PORT"), ("rack", "RACK")], brokers,
                   title="Brokers")]
    if features:
        views.append(Table([("name", "FEATURE"), ("min_version_level", "MIN-LEVEL"),
                            ("max_version_level", "LEVEL")], features, title="Finalized features"))
    emit(ctx, document, *views)
