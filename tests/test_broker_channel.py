"""kafkacore.replication.broker_channel: the inter-broker connection's frame receiver (small frames
sliced out of a staging buffer, large ones received straight into place) under every way a
stream can be cut into reads, and a BrokerChannel against a real socket server on 127.0.0.1."""
import asyncio
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkacore.replication.broker_channel import MAX_RESPONSE_BYTES, BrokerChannel, BrokerChannelError, FrameReceiver
from kafkacore.protocol.messages.api_versions_request import ApiVersionsRequest
from kafkacore.protocol.messages.api_versions_response import ApiVersionsResponse

STAGING = FrameReceiver.STAGING


def _framed(payloads):
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def _feed(stream, cuts):
    """Delivers stream to a FrameReceiver in reads no larger than each cut (as the event loop
    does: into the buffer get_buffer offers); returns (frames, lost reasons)."""
    frames, lost = [], []
    r = FrameReceiver(lambda _r, f: frames.append(bytes(f)), lambda _r, why: lost.append(why))
    pos, k = 0, 0
    while pos < len(stream) and not lost:
        buf = r.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), cuts[k % len(cuts)], len(stream) - pos)
        buf[:n] = stream[pos:pos + n]
        r.buffer_updated(n)
        pos += n
        k += 1
    return frames, lost


payload_sizes = st.one_of(st.integers(4, 300), st.integers(STAGING - 8, STAGING + 8), st.integers(4, 3 * STAGING))


@settings(max_examples=150, deadline=None)
@given(st.lists(payload_sizes, min_size=1, max_size=12), st.lists(st.integers(1, 5 * STAGING), min_size=1, max_size=8),
       st.randoms(use_true_random=False))
def test_frames_come_out_whole_and_in_order_however_the_stream_is_cut(sizes, cuts, rnd):
    payloads = [bytes(rnd.getrandbits(8) for _ in range(min(n, 64))) * (n // min(n, 64)) + b"x" * (n % min(n, 64))
                for n in sizes]
    frames, lost = _feed(_framed(payloads), cuts)
    assert not lost
    assert frames == payloads


@pytest.mark.parametrize("size", [-1, 0, 3, MAX_RESPONSE_BYTES + 1])
def test_an_impossible_size_prefix_drops_the_connection_with_a_reason(size):
    frames, lost = _feed(_framed([b"abcd"]) + struct.pack(">i", size) + b"\0" * 16, [7])
    assert frames == [b"abcd"]
    assert len(lost) == 1 and f"{size} bytes" in lost[0]


def test_a_large_frame_lands_in_a_writable_buffer_of_its_own():
    big = bytes(range(256)) * (STAGING // 128)  # 2 x STAGING
    got = []
    r = FrameReceiver(lambda _r, f: got.append(f), lambda _r, why: pytest.fail(why))
    stream = _framed([big, b"tail"])
    pos = 0
    while pos < len(stream):
        buf = r.get_buffer(-1)
        n = min(len(buf), len(stream) - pos)
        buf[:n] = stream[pos:pos + n]
        r.buffer_updated(n)
        pos += n
    assert [bytes(f) for f in got] == [big, b"tail"]
    assert isinstance(got[0], bytearray)  # received into place, no further copy


async def _serve_api_versions(reader, writer, big=0):
    """A tiny real server: answers each ApiVersions request (v0) with a response, optionally
    padded with an unknown trailing field region to make it large."""
    try:
        while True:
            head = await reader.readexactly(4)
            frame = await reader.readexactly(struct.unpack(">i", head)[0])
            _key, _ver, cid = struct.unpack_from(">hhi", frame)
            body = struct.pack(">ih", cid, 0) + struct.pack(">i", 1) + struct.pack(">hhh", 18, 0, 3)
            body += b"\0" * big  # bytes after the response, ignored by strict=False
            writer.write(struct.pack(">i", len(body)) + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


@pytest.mark.parametrize("big", [0, 3 * STAGING])
def test_a_channel_calls_a_real_server_and_pipelines(big):
    async def run():
        server = await asyncio.start_server(lambda r, w: _serve_api_versions(r, w, big=big), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        ch = BrokerChannel(7, "127.0.0.1", port, client_id="test")
        try:
            results = await asyncio.gather(*(ch.call(18, 0, ApiVersionsRequest(), 10) for _ in range(20)))
            assert all(isinstance(r, ApiVersionsResponse) and r.error_code == 0 for r in results)
            assert all([(k.api_key, k.max_version) for k in r.api_keys] == [(18, 3)] for r in results)
        finally:
            ch.close()
            server.close()
            await server.wait_closed()

    asyncio.run(run())


def test_a_peer_that_closes_fails_the_calls_in_flight():
    async def run():
        async def hang_up(reader, writer):
            await reader.readexactly(4)
            writer.close()

        server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        ch = BrokerChannel(7, "127.0.0.1", port, client_id="test")
        try:
            with pytest.raises(BrokerChannelError, match="lost"):
                await ch.call(18, 0, ApiVersionsRequest(), 10)
        finally:
            ch.close()
            server.close()
            await server.wait_closed()

    asyncio.run(run())
