"""Kafka's FetchMetadata (KIP-227): the session id and epoch every Fetch carries, shared by the
broker's session cache and the followers' fetchers."""

INVALID_SESSION_ID = 0  # "no session", in requests and responses
INITIAL_EPOCH = 0  # full fetch: close the named session (if any) and try to create one
FINAL_EPOCH = -1  # full fetch: close the named session (if any), create none
_INT32_MAX = (1 << 31) - 1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's FetchMetadata.nextEpoch: wraps to 1, never to 0)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1
