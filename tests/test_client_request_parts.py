"""A client's requests leave as a list of buffers: a Produce request's large record batches are
sent from their own buffers (socket.sendmsg), never copied into the frame. The frame on the
wire is byte for byte what encode_request makes, whatever the socket's partial sends."""
import socket
import threading

import pytest

from kafkacore.client.connection import _send_all_parts
from kafkacore.protocol.frames import RECORDS_CHUNK_BYTES, RequestHeader, encode_request, encode_request_parts
from kafkacore.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kafkacore.record import RecordBatchBuilder


def _batch(n, size):
    b = RecordBatchBuilder("none")
    for i in range(n):
        b.append(bytes([i % 251]) * size, b"k%d" % i, 1_700_000_000_000 + i)
    return b.build()


def _produce(batches, version):
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        TopicProduceData(name="t", partition_data=[PartitionProduceData(index=i, records=data)
                                                   for i, data in enumerate(batches)])])


@pytest.mark.parametrize("version", [3, 7, 9])  # before and after the flexible encoding (v9)
def test_big_batches_stay_in_their_own_buffers(version):
    small, big1, big2 = _batch(3, 10), _batch(40, 1000), _batch(300, 500)
    assert len(small) < RECORDS_CHUNK_BYTES <= len(big1) < len(big2)
    header = RequestHeader(0, version, 7, "client")
    parts = encode_request_parts(header, _produce([small, big1, big2], version))
    assert any(p is big1 for p in parts) and any(p is big2 for p in parts)
    assert not any(p is small for p in parts)  # small batches are copied: a buffer each costs more
    frame = b"".join(parts)
    assert frame == encode_request(header, _produce([small, big1, big2], version))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4


def _sent_through_a_socketpair(parts, sndbuf=None) -> bytes:
    a, b = socket.socketpair()
    if sndbuf:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)  # many short sendmsg calls
    want = sum(len(memoryview(p).cast("B")) for p in parts)
    got = bytearray()

    def read():
        while len(got) < want:
            chunk = b.recv(65536)
            if not chunk:
                break
            got.extend(chunk)
    reader = threading.Thread(target=read)
    reader.start()
    try:
        _send_all_parts(a, parts)
        reader.join(10)
    finally:
        a.close()
        b.close()
    return bytes(got)


def test_partial_sends_deliver_every_byte_in_order():
    parts = [bytearray(b"head"), _batch(200, 700), memoryview(b"middle"), b"", _batch(50, 3000), b"tail"]
    assert _sent_through_a_socketpair(parts, sndbuf=4096) == b"".join(bytes(p) for p in parts)


def test_more_buffers_than_iov_max():
    parts = [b"%05d" % i for i in range(3000)]
    assert _sent_through_a_socketpair(parts) == b"".join(parts)
