"""ControlledShutdown (API key 7), versions 0-3: a broker about to stop asks the controller to
move its leaderships to other ISR members and take it out of the ISRs, so no client sees the
leader vanish (inter-broker; served only on a broker of a ZooKeeper cluster).

- Sent to a broker that is not the controller: NOT_CONTROLLER (the sender finds the controller
  again and retries).
- The answer lists the partitions the broker still leads because no other ISR member was live
  (the sender retries ``controlled.shutdown.max.retries`` times, then stops anyway).
"""
from ...errors import NotControllerError
from ...protocol.api_table import ApiKey
from ...protocol.messages.controlled_shutdown_response import ControlledShutdownResponse, RemainingPartition
from ..authorization import CLUSTER_ACTION, require_cluster

API_KEY = ApiKey.CONTROLLED_SHUTDOWN
VERSIONS = (0, 3)
CLUSTER_ONLY = True


async def _answer(controller, req, v):
    try:
        remaining = await controller.controlled_shutdown(req.broker_id, req.broker_epoch if v >= 2 else -1)
    except Exception as e:  # noqa: BLE001 - the shutting-down broker retries
        return ControlledShutdownResponse(error_code=NotControllerError.code if "controller" in str(e) else -1,
                                          remaining_partitions=[])
    return ControlledShutdownResponse(error_code=0, remaining_partitions=[
        RemainingPartition(topic_name=t, partition_index=p) for t, p in remaining])


def handle(ctx, req):
    require_cluster(ctx, CLUSTER_ACTION)
    controller = ctx.broker.cluster.controller
    if not controller.active:
        return ControlledShutdownResponse(error_code=NotControllerError.code, remaining_partitions=[])
    return _answer(controller, req, ctx.api_version)


def error_response(req, version, code):
    return ControlledShutdownResponse(error_code=code, remaining_partitions=[])
