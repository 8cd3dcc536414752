"""DescribeCluster (API key 60), versions 0-1.

On a single node the cluster is this node: the response lists it (advertised host and port, no
rack), the cluster id from meta.properties, and this node as the controller. On a broker of a
ZooKeeper cluster it answers from the metadata cache, as Kafka's brokers do: every live broker
(host, port, rack) and the controller the last UpdateMetadata named (-1 while unknown); the
cluster id is ZooKeeper's /cluster/id (which the data directory must agree with). With
include_cluster_authorized_operations the operations are every cluster operation (there are no
ACLs here; Metadata reports the same set); otherwise Kafka's "not requested" value.

Version notes: v1 adds ``endpoint_type`` (KIP-919): 1 (brokers) is answered; 2 (controllers) is
MISMATCHED_ENDPOINT_TYPE and any other value UNSUPPORTED_ENDPOINT_TYPE, each with Kafka's
message (this node is a broker endpoint). v0 has no endpoint type and always means brokers.
"""
from ...protocol.api_table import ApiKey
from ...protocol.messages.describe_cluster_response import DescribeClusterBroker, DescribeClusterResponse
from .metadata import CLUSTER_OPERATIONS, UNSET_OPERATIONS

API_KEY = ApiKey.DESCRIBE_CLUSTER
VERSIONS = (0, 1)
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE = 114, 115


def handle(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    endpoint = req.endpoint_type if v >= 1 else BROKER_ENDPOINT
    if endpoint == CONTROLLER_ENDPOINT:
        return DescribeClusterResponse(
            error_code=MISMATCHED_ENDPOINT_TYPE,
            error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                          "CONTROLLER")
    if endpoint != BROKER_ENDPOINT:
        return DescribeClusterResponse(error_code=UNSUPPORTED_ENDPOINT_TYPE,
                                       error_message=f"Unsupported endpoint type {endpoint}")
    cache = broker.metadata_cache
    controller_id = cache.controller_id
    brokers = [DescribeClusterBroker(broker_id=node_id, host=host, port=port, rack=rack)
               for node_id, host, port, rack in cache.live_brokers_on(ctx.answering_listener)]
    return DescribeClusterResponse(
        endpoint_type=BROKER_ENDPOINT, cluster_id=broker.cluster_id, controller_id=controller_id, brokers=brokers,
        cluster_authorized_operations=CLUSTER_OPERATIONS if req.include_cluster_authorized_operations
        else UNSET_OPERATIONS)


def error_response(req, version, code):
    return DescribeClusterResponse(error_code=code)
