/* The consumer's hottest step in C: the records of one record batch body (v2, already
 * decompressed) into Python objects. Optional: setup.py builds it when a compiler is there;
 * without it records/batch.py's pure-Python loop does the same work and must give the same
 * results (tests/unit/test_client_consumer_fetch.py runs both).
 *
 * Every read is bounded by the record's own length, and a record must end exactly where its
 * length said: a corrupt batch raises ValueError (the caller turns it into Kafka's
 * CORRUPT_MESSAGE), never reads past the body.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    const unsigned char *buf;
    Py_ssize_t pos;
    Py_ssize_t end; /* of the current record, or of the body while reading a length */
} Reader;

static int corrupt(const char *why) {
    PyErr_SetString(PyExc_ValueError, why);
    return -1;
}

/* A zigzag varint of at most 10 bytes (a signed 64-bit value), as Kafka's ByteUtils.readVarlong. */
static inline int read_varint(Reader *r, int64_t *out) {
    const unsigned char *buf = r->buf;
    Py_ssize_t pos = r->pos;
    if (pos < r->end && buf[pos] < 0x80) { /* one byte: most lengths and deltas */
        uint64_t raw = buf[pos];
        *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
        r->pos = pos + 1;
        return 0;
    }
    uint64_t raw = 0;
    int shift = 0;
    for (;;) {
        if (pos >= r->end) return corrupt("truncated varint");
        unsigned char b = buf[pos++];
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
        if (shift > 63) return corrupt("varint too long");
    }
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    r->pos = pos;
    return 0;
}

/* A varint-length byte string: None for length -1 (any negative length, as the Python path). */
static PyObject *read_bytes(Reader *r) {
    int64_t n;
    if (read_varint(r, &n) < 0) return NULL;
    if (n < 0) Py_RETURN_NONE;
    if (n > r->end - r->pos) {
        corrupt("record field runs past the record");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize((const char *)r->buf + r->pos, (Py_ssize_t)n);
    r->pos += (Py_ssize_t)n;
    return out;
}

static PyObject *read_headers(Reader *r) {
    int64_t n;
    if (read_varint(r, &n) < 0) return NULL;
    if (n <= 0) return PyTuple_New(0); /* the shared empty tuple */
    if (n > r->end - r->pos) {
        corrupt("more headers than bytes in the record");
        return NULL;
    }
    PyObject *headers = PyTuple_New((Py_ssize_t)n);
    if (headers == NULL) return NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
        int64_t klen;
        if (read_varint(r, &klen) < 0) goto fail;
        if (klen > r->end - r->pos) {
            corrupt("record field runs past the record");
            goto fail;
        }
        PyObject *key;
        if (klen < 0) {
            key = PyUnicode_FromStringAndSize("", 0);
        } else {
            key = PyUnicode_DecodeUTF8((const char *)r->buf + r->pos, (Py_ssize_t)klen, "replace");
            r->pos += (Py_ssize_t)klen;
        }
        if (key == NULL) goto fail;
        PyObject *value = read_bytes(r);
        if (value == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        PyObject *pair = PyTuple_Pack(2, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (pair == NULL) goto fail;
        PyObject_GC_UnTrack(pair); /* see make_item */
        PyTuple_SET_ITEM(headers, i, pair);
    }
    return headers;
fail:
    Py_DECREF(headers);
    return NULL;
}

typedef struct {
    int64_t offset;
    int64_t timestamp;
    PyObject *key;
    PyObject *value;
    PyObject *headers;
} Fields;

/* One record at r->pos (r->end: the body's end); on return r->pos is after it. */
static int read_record(Reader *r, Py_ssize_t body_end, int64_t base_offset, int64_t base_timestamp, Fields *f) {
    int64_t length, ts_delta, off_delta;
    r->end = body_end;
    if (read_varint(r, &length) < 0) return -1;
    if (length < 0 || length > body_end - r->pos) return corrupt("record length out of bounds");
    r->end = r->pos + (Py_ssize_t)length;
    if (r->pos >= r->end) return corrupt("record runs past the batch");
    r->pos += 1; /* record attributes, unused */
    if (read_varint(r, &ts_delta) < 0 || read_varint(r, &off_delta) < 0) return -1;
    f->key = f->value = f->headers = NULL;
    if ((f->key = read_bytes(r)) == NULL) return -1;
    if ((f->value = read_bytes(r)) == NULL) goto fail;
    if ((f->headers = read_headers(r)) == NULL) goto fail;
    if (r->pos != r->end) {
        corrupt("record length does not match its fields");
        goto fail;
    }
    /* Unsigned: a corrupt delta wraps instead of being undefined behaviour. */
    f->offset = (int64_t)((uint64_t)base_offset + (uint64_t)off_delta);
    f->timestamp = (int64_t)((uint64_t)base_timestamp + (uint64_t)ts_delta);
    return 0;
fail:
    Py_XDECREF(f->key);
    Py_XDECREF(f->value);
    Py_XDECREF(f->headers);
    return -1;
}

/* What one decoded record becomes: a 5-tuple of fields (type NULL), or an instance of a tuple
 * subclass of 9 fields (ConsumerRecord) for the records at or after min_offset. */
typedef struct {
    PyTypeObject *type;
    PyObject *topic, *partition, *ts_type, *epoch, *batch_ts;
    long long min_offset;
} Target;

static PyObject *make_item(const Target *t, Fields *f) {
    if (t->type == NULL)
        return Py_BuildValue("(LLNNN)", (long long)f->offset, (long long)f->timestamp, f->key, f->value, f->headers);
    PyObject *offset = PyLong_FromLongLong(f->offset);
    PyObject *ts = t->batch_ts == Py_None ? PyLong_FromLongLong(f->timestamp) : Py_NewRef(t->batch_ts);
    PyObject *rec = t->type->tp_alloc(t->type, 9);
    if (offset == NULL || ts == NULL || rec == NULL) {
        Py_XDECREF(offset);
        Py_XDECREF(ts);
        Py_XDECREF(rec);
        Py_DECREF(f->key);
        Py_DECREF(f->value);
        Py_DECREF(f->headers);
        return NULL;
    }
    PyTuple_SET_ITEM(rec, 0, Py_NewRef(t->topic));
    PyTuple_SET_ITEM(rec, 1, Py_NewRef(t->partition));
    PyTuple_SET_ITEM(rec, 2, offset);
    PyTuple_SET_ITEM(rec, 3, ts);
    PyTuple_SET_ITEM(rec, 4, Py_NewRef(t->ts_type));
    PyTuple_SET_ITEM(rec, 5, f->key);
    PyTuple_SET_ITEM(rec, 6, f->value);
    PyTuple_SET_ITEM(rec, 7, f->headers);
    PyTuple_SET_ITEM(rec, 8, Py_NewRef(t->epoch));
    /* A record holds only ints, str, bytes, None and tuples of those: it can be part of no
     * reference cycle, so the cyclic GC need not track it (CPython untracks such tuples itself,
     * but only when a collection gets to them). Half a million records a second would
     * otherwise be traversed by every collection while they are alive. */
    if (PyTuple_GET_SIZE(f->headers) > 0) PyObject_GC_UnTrack(f->headers);
    PyObject_GC_UnTrack(rec);
    return rec;
}

static PyObject *decode(PyObject *obj, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count, long long base_offset,
                        long long base_timestamp, const Target *t) {
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *out = NULL;
    if (start < 0 || end < start || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "batch body out of the buffer");
        goto done;
    }
    if ((out = PyList_New(0)) == NULL) goto done;
    Reader r = {(const unsigned char *)view.buf, start, end};
    for (Py_ssize_t i = 0; i < count; i++) {
        Fields f;
        if (read_record(&r, end, base_offset, base_timestamp, &f) < 0) goto fail;
        if (t->type != NULL && f.offset < t->min_offset) { /* before the fetch position */
            Py_DECREF(f.key);
            Py_DECREF(f.value);
            Py_DECREF(f.headers);
            continue;
        }
        PyObject *item = make_item(t, &f); /* owns f's objects, also on failure */
        if (item == NULL) goto fail;
        int rc = PyList_Append(out, item);
        Py_DECREF(item);
        if (rc < 0) goto fail;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&view);
    return out;
}

/* decode_fields(body, start, end, count, base_offset, base_timestamp)
 *   -> [(offset, timestamp, key, value, headers), ...] */
static PyObject *decode_fields(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t start, end, count;
    long long base_offset, base_timestamp;
    if (!PyArg_ParseTuple(args, "OnnnLL", &obj, &start, &end, &count, &base_offset, &base_timestamp)) return NULL;
    Target t = {NULL, NULL, NULL, NULL, NULL, NULL, 0};
    return decode(obj, start, end, count, base_offset, base_timestamp, &t);
}

/* decode_consumer_records(body, start, end, count, base_offset, base_timestamp, min_offset,
 *                         record_type, topic, partition, timestamp_type, leader_epoch, batch_timestamp)
 *   -> [record_type(topic, partition, offset, timestamp, timestamp_type, key, value, headers,
 *       leader_epoch), ...] for the records at or after min_offset; record_type is a tuple
 *   subclass of 9 fields (ConsumerRecord); batch_timestamp, when not None, replaces every
 *   record's timestamp (LogAppendTime). */
static PyObject *decode_consumer_records(PyObject *self, PyObject *args) {
    PyObject *obj, *type_obj;
    Py_ssize_t start, end, count;
    long long base_offset, base_timestamp;
    Target t;
    if (!PyArg_ParseTuple(args, "OnnnLLLOOOOOO", &obj, &start, &end, &count, &base_offset, &base_timestamp,
                          &t.min_offset, &type_obj, &t.topic, &t.partition, &t.ts_type, &t.epoch, &t.batch_ts))
        return NULL;
    if (!PyType_Check(type_obj) || !PyType_IsSubtype((PyTypeObject *)type_obj, &PyTuple_Type) ||
        ((PyTypeObject *)type_obj)->tp_basicsize != PyTuple_Type.tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "record_type must be a tuple subclass without instance attributes");
        return NULL;
    }
    t.type = (PyTypeObject *)type_obj;
    return decode(obj, start, end, count, base_offset, base_timestamp, &t);
}

static PyMethodDef methods[] = {
    {"decode_fields", decode_fields, METH_VARARGS, "The records of a batch body as field tuples."},
    {"decode_consumer_records", decode_consumer_records, METH_VARARGS,
     "The records of a batch body as consumer records."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
