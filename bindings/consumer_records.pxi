# The consumer's record decoder (included by records.pyx). Its pure-Python twin is
# kafkacore/client/records_py.py.


# Not tracked by the cyclic GC: a poll makes ~100k of these, and tracked objects would trigger
# collections that walk every live container of the application (3x the cost of a poll on a
# big heap). A record holds only str/bytes/ints and its own headers list, so it takes part in
# no cycle unless code puts the record inside its own headers.
@cython.no_gc
@cython.freelist(4096)
cdef class ConsumerRecord:
    """One consumed record: topic, partition, offset, timestamp_ms, timestamp_type, key,
    value, headers (a list of (str, bytes-or-None))."""
    cdef readonly object topic
    cdef readonly int partition
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp_ms
    cdef readonly int timestamp_type
    cdef readonly object key
    cdef readonly object value
    cdef object _headers

    @property
    def headers(self):
        return [] if self._headers is None else self._headers

    def __eq__(self, other):
        if not isinstance(other, ConsumerRecord):
            return NotImplemented
        return (self.topic, self.partition, self.offset, self.timestamp_ms, self.key, self.value, self.headers) == (
            other.topic, other.partition, other.offset, other.timestamp_ms, other.key, other.value, other.headers)

    __hash__ = None

    def __repr__(self):
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
                f"timestamp_ms={self.timestamp_ms}, key={self.key!r}, value={self.value!r}, headers={self.headers!r})")


def decode_records(buf, topic, int partition, long long min_offset=0, check_crcs=True, aborted=None):
    """decode_records(buf, topic, partition, min_offset=0, check_crcs=True, aborted=None) -> (records, next_offset, error)

    Every record at ``min_offset`` or later in a fetched buffer of batches, as ConsumerRecord
    objects in offset order. Control batches are skipped; a truncated final batch (a fetch
    cut at max bytes) ends the input. ``next_offset`` is the offset after the last whole
    batch (-1 when there was none). A bad CRC or a malformed record is a CorruptRecordError
    naming the topic, partition and the batch's base offset: raised when it is in the first
    batch, else returned as ``error`` with the records of the batches before it (as Kafka's
    consumer hands out the good records first and fails at the bad one).

    ``aborted`` reads committed (Kafka's CompletedFetch): the Fetch response's aborted
    transactions, (producer_id, first_offset) pairs or objects with those attributes; the
    batches of aborted transactions are dropped after their CRC check, never decompressed,
    and ``next_offset`` still moves past them. None reads uncommitted."""
    cdef _BufferRef ref = _BufferRef(buf)
    cdef _AbortedState txn = _aborted_state(aborted)
    cdef Py_ssize_t pos = 0
    cdef bint check = bool(check_crcs)
    cdef list out = []
    cdef long long next_offset = -1
    cdef Py_ssize_t good = 0
    try:
        while pos < <Py_ssize_t>ref.length:
            good = len(out)
            pos, next_offset = _decode_one_batch(ref, pos, out, topic, partition, min_offset, check, next_offset,
                                                 txn)
            if pos < 0:
                break
    except CorruptRecordError as e:
        if good == 0:
            raise
        del out[good:]  # the bad batch's records, if it got that far
        return out, next_offset, e
    return out, next_offset, None


cdef tuple _decode_one_batch(_BufferRef ref, Py_ssize_t pos, list out, topic, int partition, long long min_offset,
                             bint check, long long next_offset, _AbortedState txn):
    """Decodes the batch at pos into out; (position after it or -1 at a truncated tail, next offset)."""
    cdef size_t total
    cdef kc_batch_header h
    cdef const char *err = NULL
    cdef int st
    cdef uint32_t computed
    cdef bytes data
    cdef const uint8_t *p
    cdef int verdict = KC_TXN_KEEP
    st = kc_batch_frame(ref.data + pos, ref.length - pos, &h, &total, &err)
    if st == KC_TRUNCATED:
        return -1, next_offset
    if st != KC_OK:
        raise CorruptRecordError(f"{topic}-{partition}: malformed batch after offset {next_offset}: "
                                 f"{err.decode()}", <Py_ssize_t>pos)
    p = ref.data + pos
    if txn is not None:
        verdict = kc_aborted_batch(&txn.a, &h)
        if verdict == KC_TXN_MARKER:
            # Read even before min_offset: an ABORT marker ends its producer's aborted range.
            if check:
                computed = _batch_crc(p, total)
                if computed != h.crc:
                    raise CorruptRecordError(f"{topic}-{partition} offset {h.base_offset}: "
                                             f"{_crc_mismatch(h.crc, computed)}", <Py_ssize_t>pos)
            try:
                if _marker_type(ref, <size_t>pos, total, &h) == KC_CONTROL_ABORT:
                    kc_aborted_end(&txn.a, h.producer_id)
            except CorruptRecordError as e:
                raise CorruptRecordError(f"{topic}-{partition} offset {h.base_offset}: {e.reason}",
                                         e.position) from None
            return pos + <Py_ssize_t>total, _wrap_add(h.base_offset, <int64_t>h.last_offset_delta + 1)
    if _wrap_add(h.base_offset, <int64_t>h.last_offset_delta + 1) <= min_offset:
        # wholly before the position (a seek, or a compressed batch's head)
        return pos + <Py_ssize_t>total, _wrap_add(h.base_offset, <int64_t>h.last_offset_delta + 1)
    if check:
        computed = _batch_crc(p, total)
        if computed != h.crc:
            raise CorruptRecordError(f"{topic}-{partition} offset {h.base_offset}: "
                                     f"{_crc_mismatch(h.crc, computed)}", <Py_ssize_t>pos)
    if not h.attributes & KC_ATTR_CONTROL and h.records_count > 0 and verdict != KC_TXN_ABORTED:
        if h.attributes & 0x07:
            if (h.attributes & 0x07) not in _CODEC_NAMES:
                raise CorruptRecordError(f"{topic}-{partition} offset {h.base_offset}: unknown compression "
                                         f"codec id {h.attributes & 0x07}", <Py_ssize_t>pos)
            data = codecs.decompress(h.attributes & 0x07,
                                     ref.section(pos + KC_RECORD_BATCH_OVERHEAD, pos + total), <Py_ssize_t>pos)
            _decode_into(out, topic, partition, &h, <const uint8_t *>PyBytes_AS_STRING(data),
                         <const uint8_t *>PyBytes_AS_STRING(data) + PyBytes_GET_SIZE(data), min_offset)
        else:
            _decode_into(out, topic, partition, &h, p + KC_RECORD_BATCH_OVERHEAD, p + total, min_offset)
    return pos + <Py_ssize_t>total, _wrap_add(h.base_offset, <int64_t>h.last_offset_delta + 1)


cdef int _decode_into(list out, object topic, int partition, const kc_batch_header *h,
                      const uint8_t *p, const uint8_t *end, long long min_offset) except -1:
    cdef kc_record r
    cdef const char *err = NULL
    cdef const uint8_t *hp
    cdef const uint8_t *hk
    cdef const uint8_t *hv
    cdef int32_t hkl, hvl, j, i
    cdef ConsumerRecord rec
    cdef list headers
    cdef int64_t offset
    cdef bint log_append = (h.attributes & KC_ATTR_TIMESTAMP_TYPE) != 0
    for i in range(h.records_count):
        if p >= end or kc_record_parse_inline(p, end, &r, &err) != KC_OK:
            raise CorruptRecordError(f"{topic}-{partition} offset {h.base_offset}: "
                                     f"{err.decode() if err != NULL else 'batch holds fewer records than its count'}",
                                     -1)
        offset = _wrap_add(h.base_offset, r.offset_delta)
        p = r.end
        if offset < min_offset:
            continue
        rec = ConsumerRecord.__new__(ConsumerRecord)
        rec.topic = topic
        rec.partition = partition
        rec.offset = offset
        rec.timestamp_type = 1 if log_append else 0
        rec.timestamp_ms = h.max_timestamp if log_append else _wrap_add(h.base_timestamp, r.timestamp_delta)
        rec.key = None if r.key == NULL else PyBytes_FromStringAndSize(<const char *>r.key, r.key_len)
        rec.value = None if r.value == NULL else PyBytes_FromStringAndSize(<const char *>r.value, r.value_len)
        if r.headers_count:
            headers = []
            hp = r.headers
            for j in range(r.headers_count):
                if kc_header_next_inline(&hp, r.end, &hk, &hkl, &hv, &hvl, &err) != KC_OK:
                    raise CorruptRecordError(f"{topic}-{partition} offset {offset}: {err.decode()}", -1)
                headers.append((PyUnicode_DecodeUTF8(<const char *>hk, hkl, "replace"),
                                None if hv == NULL else PyBytes_FromStringAndSize(<const char *>hv, hvl)))
            rec._headers = headers
        out.append(rec)
    if p != end:
        raise CorruptRecordError(f"{topic}-{partition} offset {h.base_offset}: batch has bytes left after its "
                                 f"last record", -1)
    return 0
