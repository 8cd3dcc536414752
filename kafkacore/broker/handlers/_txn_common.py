"""What the transaction handlers share: the coordinator of this broker and the translation of
PRODUCER_FENCED for request versions older than the one that introduced it (Kafka's KafkaApis
does the same per API)."""
from ...errors import CoordinatorNotAvailableError, InvalidProducerEpochError, ProducerFencedError


def transaction_coordinator(ctx):
    """The broker's transaction coordinator, or None when it does not serve transactions here
    (a cluster, until docs/transactions.md plan step 13)."""
    tc = getattr(ctx.broker, "transaction_coordinator", None)
    return tc if tc is not None and tc.available else None


def fenced_for(code, version, first_version_with_producer_fenced):
    if code == ProducerFencedError.code and version < first_version_with_producer_fenced:
        return InvalidProducerEpochError.code
    return code


NOT_AVAILABLE = CoordinatorNotAvailableError.code
