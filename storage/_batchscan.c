/* rmqkafka.storage._batchscan: the per-record work of an append, in one C pass per batch.
 *
 * scan(plain, tag) walks the records of an uncompressed v2 batch (its 61-byte header
 * followed by the records, the codec bits cleared: what storage.record_batch hands
 * aiokafka's reader) and returns what the append needs of them without building a record
 * object:
 *
 *     (any_headers, all_keyed, min_timestamp, max_timestamp, codes)
 *
 * codes is the list of each record's tag code (storage.tag_code: Java String.hashCode of
 * the value of its first header named ``tag``, 0 when absent, null or empty), or None when
 * no record has a header named ``tag``.
 *
 * Invariant: it answers only for a batch the pure-Python path (aiokafka's reader plus the
 * checks of record_batch.read_produced_records) accepts, with the same results; for anything
 * it does not vouch for (a record that does not frame, a wrong offset delta, a count the body
 * does not hold, bytes left over, a LogAppendTime batch, a value past int64, a base offset
 * whose records' offsets would pass int64, a header name that is not UTF-8) it returns None
 * and raises nothing: the Python path then reads the batch and raises its own error. So it
 * may refuse more than Python does, never less.
 *
 * A batch of RELEASE_GIL_BYTES or more is scanned without the GIL, as the Python path read a
 * large batch a slice at a time so that the event loop's thread could run in between.
 *
 * cq_entries(position, size, codes) builds the consume-queue entries (storage.consume_queue:
 * big-endian int64 position, int32 size, int64 code) of a batch whose offsets carry ``codes``,
 * one bytes object written with one call.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEADER_SIZE 61
#define TIMESTAMP_TYPE_BIT 0x08
/* batches at least this large are scanned without the GIL (a smaller one costs less than
 * handing the GIL over) */
#define RELEASE_GIL_BYTES (64 << 10)

static inline uint64_t be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return v;
}

static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* A zigzag varint of at most ``max_bytes`` bytes whose raw value fits in ``max_bits`` bits;
 * 0 when it does not (truncated, too long or too large). */
static inline int read_varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos,
                              int max_bytes, int max_bits, int64_t *out) {
    uint64_t raw = 0;
    int shift = 0;
    for (int n = 0; n < max_bytes; n++) {
        if (*pos >= end) return 0;
        unsigned char b = buf[(*pos)++];
        if (shift == 63 && (b & 0x7E)) return 0; /* bits past 64 */
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            if (max_bits < 64 && (raw >> max_bits)) return 0;
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 1;
        }
        shift += 7;
    }
    return 0;
}

static inline int is_ascii(const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] & 0x80) return 0;
    return 1;
}

/* Whether ``p[0:n]`` decodes as strict UTF-8 (what aiokafka requires of a header name). The
 * caller may have released the GIL: it is taken for the decoder only. */
static int valid_utf8(const unsigned char *p, Py_ssize_t n) {
    if (is_ascii(p, n)) return 1;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *s = PyUnicode_DecodeUTF8((const char *)p, n, "strict");
    int ok = s != NULL;
    if (s == NULL) PyErr_Clear();
    Py_XDECREF(s);
    PyGILState_Release(gil);
    return ok;
}

/* storage.tag_code.tag_code of a non-empty value: Java's String.hashCode over the UTF-16 code
 * units of the value decoded as UTF-8 with errors replaced. -1 with an exception set on
 * failure (memory). The caller may have released the GIL: it is taken for the decoder. */
static int tag_code(const unsigned char *p, Py_ssize_t n, int32_t *out) {
    uint32_t h = 0;
    if (is_ascii(p, n)) {
        for (Py_ssize_t i = 0; i < n; i++) h = 31 * h + p[i];
        *out = (int32_t)h;
        return 0;
    }
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *s = PyUnicode_DecodeUTF8((const char *)p, n, "replace");
    if (s == NULL) {
        PyGILState_Release(gil);
        return -1;
    }
    Py_ssize_t len = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < len; i++) {
        Py_UCS4 cp = PyUnicode_READ(kind, data, i);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = 31 * h + (0xD800 + (cp >> 10));
            h = 31 * h + (0xDC00 + (cp & 0x3FF));
        } else {
            h = 31 * h + cp;
        }
    }
    Py_DECREF(s);
    PyGILState_Release(gil);
    *out = (int32_t)h;
    return 0;
}

/* The body of scan: 1 = accepted (results filled), 0 = not vouched for, -1 = exception. */
static int scan_records(const unsigned char *buf, Py_ssize_t total, const unsigned char *tag,
                        Py_ssize_t tag_len, int *any_headers, int *all_keyed, int64_t *min_ts,
                        int64_t *max_ts, int32_t *codes, int *tagged) {
    if (total < HEADER_SIZE) return 0;
    if (buf[22] & TIMESTAMP_TYPE_BIT) return 0; /* aiokafka stamps such records itself */
    int64_t base_offset = (int64_t)be64(buf);
    int64_t base_ts = (int64_t)be64(buf + 27);
    int64_t count = (int32_t)be32(buf + 57);
    if (count <= 0) return 0;
    /* aiokafka gives record i offset base + i in int64 arithmetic (it wraps past INT64_MAX)
     * and record_batch compares it with Python's unbounded base + i: a producer's base offset
     * whose last record's offset would wrap is refused there, so it is not vouched for here */
    if (base_offset > INT64_MAX - (count - 1)) return 0;
    Py_ssize_t pos = HEADER_SIZE;
    *any_headers = 0;
    *all_keyed = 1;
    *tagged = 0;
    *min_ts = INT64_MAX;
    *max_ts = INT64_MIN;
    for (int64_t i = 0; i < count; i++) {
        int64_t length, ts_delta, offset_delta, key_len, value_len, header_count;
        if (!read_varint(buf, total, &pos, 5, 32, &length) || length < 0) return 0;
        if (length > total - pos) return 0;
        Py_ssize_t start = pos, end = pos + (Py_ssize_t)length;
        /* attributes: an int8 that aiokafka reads as a varint; one byte below 0x80 reads the
         * same either way */
        if (pos >= end || buf[pos] & 0x80) return 0;
        pos++;
        if (!read_varint(buf, end, &pos, 10, 64, &ts_delta)) return 0;
        int64_t ts;
        if (__builtin_add_overflow(base_ts, ts_delta, &ts)) return 0;
        if (ts < *min_ts) *min_ts = ts;
        if (ts > *max_ts) *max_ts = ts;
        if (!read_varint(buf, end, &pos, 5, 32, &offset_delta) || offset_delta != i) return 0;
        if (!read_varint(buf, end, &pos, 5, 32, &key_len) || key_len < -1) return 0;
        if (key_len >= 0) {
            if (key_len > end - pos) return 0;
            pos += (Py_ssize_t)key_len;
        } else {
            *all_keyed = 0;
        }
        if (!read_varint(buf, end, &pos, 5, 32, &value_len) || value_len < -1) return 0;
        if (value_len > end - pos) return 0;
        if (value_len > 0) pos += (Py_ssize_t)value_len;
        if (!read_varint(buf, end, &pos, 5, 32, &header_count) || header_count < 0) return 0;
        /* each header takes at least two bytes: a count the record cannot hold is refused
         * before it is looped over */
        if (header_count > (end - pos) / 2) return 0;
        int32_t code = 0;
        int found = 0;
        if (header_count) *any_headers = 1;
        for (int64_t h = 0; h < header_count; h++) {
            int64_t name_len, hv_len;
            if (!read_varint(buf, end, &pos, 5, 32, &name_len) || name_len < 0) return 0;
            if (name_len > end - pos) return 0;
            const unsigned char *name = buf + pos;
            pos += (Py_ssize_t)name_len;
            if (!valid_utf8(name, (Py_ssize_t)name_len)) return 0;
            if (!read_varint(buf, end, &pos, 5, 32, &hv_len) || hv_len < -1) return 0;
            if (hv_len > end - pos) return 0;
            if (!found && name_len == tag_len && memcmp(name, tag, (size_t)tag_len) == 0) {
                found = 1;
                *tagged = 1;
                if (hv_len > 0 && tag_code(buf + pos, (Py_ssize_t)hv_len, &code) < 0) return -1;
            }
            if (hv_len > 0) pos += (Py_ssize_t)hv_len;
        }
        if (pos != end || pos - start != length) return 0;
        codes[i] = code;
    }
    return pos == total ? 1 : 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer plain, tag;
    if (!PyArg_ParseTuple(args, "y*y*:scan", &plain, &tag)) return NULL;
    PyObject *result = NULL;
    const unsigned char *buf = plain.buf;
    int64_t count = plain.len >= HEADER_SIZE ? (int32_t)be32(buf + 57) : 0;
    /* every record takes at least 7 bytes: the codes array is bounded by the batch's size */
    if (count <= 0 || count > (plain.len - HEADER_SIZE) / 7) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int32_t *codes = PyMem_Malloc((size_t)count * sizeof(int32_t));
    if (codes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int any_headers, all_keyed, tagged;
    int64_t min_ts, max_ts;
    int ok;
    if (plain.len >= RELEASE_GIL_BYTES) {
        /* A large batch is scanned in the store's worker thread (store.append_async): the event
         * loop's thread runs meanwhile. The buffer stays exported (y*), so it cannot change. */
        Py_BEGIN_ALLOW_THREADS
        ok = scan_records(buf, plain.len, tag.buf, tag.len, &any_headers, &all_keyed, &min_ts,
                          &max_ts, codes, &tagged);
        Py_END_ALLOW_THREADS
    } else {
        ok = scan_records(buf, plain.len, tag.buf, tag.len, &any_headers, &all_keyed, &min_ts,
                          &max_ts, codes, &tagged);
    }
    if (ok < 0) goto free_codes;
    if (ok == 0) {
        result = Py_NewRef(Py_None);
        goto free_codes;
    }
    PyObject *code_list;
    if (tagged) {
        code_list = PyList_New((Py_ssize_t)count);
        if (code_list == NULL) goto free_codes;
        for (int64_t i = 0; i < count; i++) {
            PyObject *c = PyLong_FromLong(codes[i]);
            if (c == NULL) {
                Py_DECREF(code_list);
                goto free_codes;
            }
            PyList_SET_ITEM(code_list, (Py_ssize_t)i, c);
        }
    } else {
        code_list = Py_NewRef(Py_None);
    }
    result = Py_BuildValue("(OOLLN)", any_headers ? Py_True : Py_False,
                           all_keyed ? Py_True : Py_False, (long long)min_ts, (long long)max_ts,
                           code_list);
free_codes:
    PyMem_Free(codes);
done:
    PyBuffer_Release(&plain);
    PyBuffer_Release(&tag);
    return result;
}

static inline void put_be64(unsigned char *p, uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)v;
        v >>= 8;
    }
}

static PyObject *cq_entries(PyObject *self, PyObject *args) {
    long long position;
    int size;
    PyObject *codes;
    if (!PyArg_ParseTuple(args, "LiO!:cq_entries", &position, &size, &PyList_Type, &codes))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(codes);
    if (n > PY_SSIZE_T_MAX / 20) return PyErr_NoMemory();
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 20);
    if (out == NULL) return NULL;
    /* The allocation may have run a collection, and a finalizer may change a list: the loop
     * below runs no Python code (ints only: PyLong_AsLongLong calls no __index__ for them),
     * so a size checked here holds throughout. */
    if (PyList_GET_SIZE(codes) != n) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_RuntimeError, "the tag codes changed while their entries were built");
        return NULL;
    }
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    unsigned char head[12];
    put_be64(head, (uint64_t)position);
    head[8] = (unsigned char)((uint32_t)size >> 24);
    head[9] = (unsigned char)((uint32_t)size >> 16);
    head[10] = (unsigned char)((uint32_t)size >> 8);
    head[11] = (unsigned char)size;
    for (Py_ssize_t i = 0; i < n; i++, p += 20) {
        PyObject *item = PyList_GET_ITEM(codes, i);
        if (!PyLong_Check(item)) {
            Py_DECREF(out);
            PyErr_Format(PyExc_TypeError, "tag code %zd is %.100s, not an int", i, Py_TYPE(item)->tp_name);
            return NULL;
        }
        long long code = PyLong_AsLongLong(item);
        if (code == -1 && PyErr_Occurred()) {
            Py_DECREF(out);
            return NULL;
        }
        memcpy(p, head, 12);
        put_be64(p + 12, (uint64_t)code);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(plain, tag) -> (any_headers, all_keyed, min_ts, max_ts, codes) | None"},
    {"cq_entries", cq_entries, METH_VARARGS,
     "cq_entries(position, size, codes) -> bytes: the consume-queue entries of a batch"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_batchscan",
    "The per-record work of an append in one C pass per batch (see _batchscan.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__batchscan(void) { return PyModule_Create(&module); }
