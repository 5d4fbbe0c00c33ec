/* tfadvisor._native: the compiled kernels of tfadvisor (protobuf wire decoding of XPlane lines,
 * string hashing, interval arithmetic), built ahead of time by `pip install` (setup.py).
 *
 * The input files are untrusted: every read of the file buffer is checked against the end of the
 * record being decoded, and every record end is checked against the buffer's length on entry; every
 * write into a caller's array is checked against that array's length. A malformed buffer gives an
 * error code and byte offset (wire.ERROR_TEXT), never an out-of-bounds access.
 *
 * The semantics (outputs and dtypes) are those of tfadvisor/io/wire.py, tfadvisor/model/trace.py and
 * tfadvisor/analyses/steps.py, which call these functions; see the docstrings there.
 */
#define PY_SSIZE_T_CLEAN
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
#include <string.h>

#ifndef _WIN32
#include <pthread.h>
#include <sys/mman.h>
#include <sched.h>
#include <unistd.h>
#define HAVE_THREADS 1
#else
#define HAVE_THREADS 0
#endif

/* ------------------------------------------------------------------------------------------ */
/* Constants                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* Defined here only: the module exports each under its C name (add_constants, at import) and the
 * Python side takes them from there (tfadvisor/io/wire.py: OK, ERR_*, L_*, N_LINE_COLS,
 * START_OVERFLOW, MAX_TS_NS; tfadvisor/model/kinds.py: KIND_*), so the two cannot drift apart. */
enum { KIND_NONE = 0, KIND_DOUBLE = 1, KIND_UINT64 = 2, KIND_INT64 = 3, KIND_STR = 4, KIND_BYTES = 5,
       KIND_REF = 6, KIND_GZIP = 8 };
enum { OK = 0, ERR_TRUNCATED = 1, ERR_WIRE_TYPE = 2, ERR_VARINT = 3, ERR_FIELD = 4 };
enum { L_ID = 0, L_DISPLAY_ID, L_TS_NS, L_DUR_PS, L_NAME_OFF, L_NAME_LEN, L_DNAME_OFF, L_DNAME_LEN,
       L_FIRST_EVENT, L_N_EVENTS, N_LINE_COLS };

#define I64_MAX INT64_MAX
#define START_OVERFLOW INT64_MIN
#define MAX_TS_NS (INT64_MAX / 1000)

/* ------------------------------------------------------------------------------------------ */
/* Array arguments                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* A 1-D array read as `typenum` (converted when it is another dtype that casts safely). New reference. */
static PyArrayObject *in_arr(PyObject *obj, int typenum, const char *name)
{
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(obj, typenum, 1, 1, NPY_ARRAY_IN_ARRAY);
    if (a == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected a 1-D array castable to %s", name,
                     typenum == NPY_INT64 ? "int64" : (typenum == NPY_INT32 ? "int32" : "uint8"));
    }
    return a;
}

/* An array the kernel writes into: exactly `typenum`, `ndim` dims, C-contiguous, writeable. New reference. */
static PyArrayObject *out_arr(PyObject *obj, int typenum, int ndim, const char *name)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a numpy array", name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    if (PyArray_TYPE(a) != typenum || PyArray_NDIM(a) != ndim || !PyArray_IS_C_CONTIGUOUS(a)
        || !PyArray_ISWRITEABLE(a) || !PyArray_ISNOTSWAPPED(a)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a writeable C-contiguous %d-D array of the right dtype", name,
                     ndim);
        return NULL;
    }
    Py_INCREF(a);
    return a;
}

/* An integer index array kept as it is when int8, int16, int32 or int64 (no copy), else converted to int64: event
 * rows, and a plane's index columns (ev_line, ev_meta, st_stat), which the reader narrows to the fewest bytes their
 * values need. */
typedef struct {
    PyArrayObject *arr;
    const void *data;
    int width; /* bytes per item: 1, 2, 4 or 8, all signed */
    npy_intp n;
} IdxArr;

static int idx_width(PyArrayObject *a)
{
    switch (PyArray_TYPE(a)) {
    case NPY_INT8: return 1;
    case NPY_INT16: return 2;
    case NPY_INT32: return 4;
    case NPY_INT64: return 8;
    default: return 0;
    }
}

static int idx_arr(PyObject *obj, IdxArr *out, const char *name)
{
    PyArrayObject *a = NULL;
    int w = PyArray_Check(obj) ? idx_width((PyArrayObject *)obj) : 0;
    if (w && PyArray_NDIM((PyArrayObject *)obj) == 1 && PyArray_IS_C_CONTIGUOUS((PyArrayObject *)obj)
        && PyArray_ISNOTSWAPPED((PyArrayObject *)obj) && PyArray_ITEMSIZE((PyArrayObject *)obj) == w) {
        a = (PyArrayObject *)obj;
        Py_INCREF(a);
    } else {
        a = in_arr(obj, NPY_INT64, name);
        if (a == NULL)
            return -1;
        w = 8;
    }
    out->arr = a;
    out->data = PyArray_DATA(a);
    out->width = w;
    out->n = PyArray_DIM(a, 0);
    return 0;
}

static inline int64_t idx_get(const IdxArr *a, npy_intp i)
{
    switch (a->width) {
    case 1: return ((const int8_t *)a->data)[i];
    case 2: return ((const int16_t *)a->data)[i];
    case 4: return ((const int32_t *)a->data)[i];
    default: return ((const int64_t *)a->data)[i];
    }
}

#define I64P(a) ((int64_t *)PyArray_DATA(a))
#define I32P(a) ((int32_t *)PyArray_DATA(a))
#define U8P(a) ((uint8_t *)PyArray_DATA(a))
#define LEN(a) ((int64_t)PyArray_DIM(a, 0))

static PyArrayObject *new_i64(npy_intp n)
{
    return (PyArrayObject *)PyArray_EMPTY(1, &n, NPY_INT64, 0);
}

/* A fresh array of k event rows of a plane of n events: int32 where every row fits (half the memory of int64; the
 * planes' row arrays are int32, see tfadvisor/analyses/intervals.py), else int64. Written with rows_put. */
typedef struct {
    PyArrayObject *arr;
    int32_t *d32;
    int64_t *d64;
} RowsOut;

static int rows_new(RowsOut *r, npy_intp k, int64_t n)
{
    int narrow = n <= (int64_t)INT32_MAX;
    r->arr = (PyArrayObject *)PyArray_EMPTY(1, &k, narrow ? NPY_INT32 : NPY_INT64, 0);
    if (!r->arr)
        return -1;
    r->d32 = narrow ? I32P(r->arr) : NULL;
    r->d64 = narrow ? NULL : I64P(r->arr);
    return 0;
}

static inline void rows_put(const RowsOut *r, int64_t at, int64_t row)
{
    if (r->d32)
        r->d32[at] = (int32_t)row; /* row < n <= INT32_MAX (rows_new) */
    else
        r->d64[at] = row;
}

/* Binary searches in a[lo:hi), ascending there: the first index with a[i] > t, and with a[i] >= t (hi if none). */
static inline int64_t first_above(const int64_t *a, int64_t lo, int64_t hi, int64_t t)
{
    while (lo < hi) {
        int64_t m = lo + (hi - lo) / 2;
        if (a[m] <= t)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

static inline int64_t first_at_or_above(const int64_t *a, int64_t lo, int64_t hi, int64_t t)
{
    while (lo < hi) {
        int64_t m = lo + (hi - lo) / 2;
        if (a[m] < t)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}


/* Shrink a fresh 1-D array to its first k items (in place; the memory beyond is given back). */
static int shrink(PyArrayObject *a, npy_intp k)
{
    if (PyArray_DIM(a, 0) == k)
        return 0;
    PyArray_Dims d = {&k, 1};
    PyObject *r = PyArray_Resize(a, &d, 0, NPY_CORDER);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Threads: work items handed out one at a time (dynamic scheduling) to up to N threads.      */
/* ------------------------------------------------------------------------------------------ */

static int g_threads = 0; /* 0: the CPUs this process may run on */

static int cpu_count(void)
{
#if HAVE_THREADS
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
#else
    return 1;
#endif
}

static int threads_now(void)
{
    return g_threads > 0 ? g_threads : cpu_count();
}

typedef void (*item_fn)(void *ctx, int64_t i);

typedef struct {
    item_fn fn;
    void *ctx;
    int64_t n;
    int64_t next; /* atomic */
} Pool;

static void *pool_worker(void *arg)
{
    Pool *p = (Pool *)arg;
    for (;;) {
#if HAVE_THREADS
        int64_t i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
#else
        int64_t i = p->next++;
#endif
        if (i >= p->n)
            break;
        p->fn(p->ctx, i);
    }
    return NULL;
}

/* Run fn(ctx, i) for i in [0, n): in this thread when nthreads <= 1, else on up to nthreads threads
 * (this one included). Called without the GIL. */
static void run_items(item_fn fn, void *ctx, int64_t n, int nthreads)
{
    Pool p = {fn, ctx, n, 0};
#if HAVE_THREADS
    if (nthreads > n)
        nthreads = (int)n;
    if (nthreads > 1) {
        pthread_t tids[256];
        int started = 0;
        if (nthreads > 256)
            nthreads = 256;
        for (int t = 0; t < nthreads - 1; t++) {
            if (pthread_create(&tids[started], NULL, pool_worker, &p) == 0)
                started++;
        }
        pool_worker(&p); /* this thread works too: all items get done even if no thread started */
        for (int t = 0; t < started; t++)
            pthread_join(tids[t], NULL);
        return;
    }
#else
    (void)nthreads;
#endif
    pool_worker(&p);
}

/* ------------------------------------------------------------------------------------------ */
/* Wire format                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* Read a varint from buf[pos:end]; return the new position, or -1 on error. */
static inline int64_t varint(const uint8_t *buf, int64_t pos, int64_t end, uint64_t *out)
{
    if (pos < end && buf[pos] < 0x80) { /* one byte (tags, field numbers, small values): most varints */
        *out = buf[pos];
        return pos + 1;
    }
    uint64_t result = 0;
    int shift = 0;
    while (pos < end) {
        uint8_t b = buf[pos];
        pos += 1;
        result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = result;
            return pos;
        }
        shift += 7;
        if (shift >= 70) {
            *out = result;
            return -1;
        }
    }
    *out = result;
    return -1;
}

/* Skip one field value of wire type wt; the new position, -1 (truncated/bad varint) or -2 (bad wire type). */
static inline int64_t skip(const uint8_t *buf, int64_t pos, int64_t end, int64_t wt)
{
    uint64_t n;
    if (wt == 0)
        return varint(buf, pos, end, &n);
    if (wt == 1)
        return pos + 8 <= end ? pos + 8 : -1;
    if (wt == 2) {
        pos = varint(buf, pos, end, &n);
        if (pos < 0 || n > (uint64_t)(end - pos))
            return -1;
        return pos + (int64_t)n;
    }
    if (wt == 5)
        return pos + 4 <= end ? pos + 4 : -1;
    return -2;
}

static inline uint64_t fixed64(const uint8_t *buf, int64_t pos)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)buf[pos + i] << (8 * i);
    return v;
}

/* scan_fields(buf, start, end, out_field, out_wt, out_off, out_len, out_at) -> (count, error, error position) */
static PyObject *py_scan_fields(PyObject *self, PyObject *args)
{
    PyObject *obuf, *of, *ow, *oo, *ol, *ot;
    long long start, end;
    if (!PyArg_ParseTuple(args, "OLLOOOOO", &obuf, &start, &end, &of, &ow, &oo, &ol, &ot))
        return NULL;
    PyArrayObject *buf = in_arr(obuf, NPY_UINT8, "buf");
    PyArrayObject *a_f = buf ? out_arr(of, NPY_INT64, 1, "out_field") : NULL;
    PyArrayObject *a_w = a_f ? out_arr(ow, NPY_INT64, 1, "out_wt") : NULL;
    PyArrayObject *a_o = a_w ? out_arr(oo, NPY_INT64, 1, "out_off") : NULL;
    PyArrayObject *a_l = a_o ? out_arr(ol, NPY_INT64, 1, "out_len") : NULL;
    PyArrayObject *a_t = a_l ? out_arr(ot, NPY_INT64, 1, "out_at") : NULL;
    PyObject *res = NULL;
    if (a_t == NULL)
        goto done;
    if (start < 0 || end < start || end > LEN(buf)) {
        PyErr_SetString(PyExc_ValueError, "scan_fields: [start, end) is not inside the buffer");
        goto done;
    }
    {
        const uint8_t *b = U8P(buf);
        int64_t *f_out = I64P(a_f), *w_out = I64P(a_w), *o_out = I64P(a_o), *l_out = I64P(a_l), *t_out = I64P(a_t);
        int64_t cap = LEN(a_f);
        if (LEN(a_t) < cap) cap = LEN(a_t);
        if (LEN(a_w) < cap) cap = LEN(a_w);
        if (LEN(a_o) < cap) cap = LEN(a_o);
        if (LEN(a_l) < cap) cap = LEN(a_l);
        int64_t pos = start, n = 0, err = OK, err_at = 0;
        Py_BEGIN_ALLOW_THREADS
        while (pos < end) {
            int64_t tag_at = pos;
            uint64_t tag;
            pos = varint(b, pos, end, &tag);
            if (pos < 0) { err = ERR_VARINT; err_at = tag_at; break; }
            int64_t field = (int64_t)(tag >> 3);
            int64_t wt = (int64_t)(tag & 7);
            if (field == 0) { err = ERR_FIELD; err_at = tag_at; break; }
            int64_t value_at = pos, length = 0;
            if (wt == 2) {
                uint64_t ln;
                pos = varint(b, pos, end, &ln);
                if (pos < 0 || ln > (uint64_t)(end - pos)) { err = ERR_TRUNCATED; err_at = tag_at; break; }
                value_at = pos;
                length = (int64_t)ln;
                pos += length;
            } else if (wt == 0) {
                uint64_t v;
                pos = varint(b, pos, end, &v);
                if (pos < 0) { err = ERR_TRUNCATED; err_at = tag_at; break; }
                length = (int64_t)v;
            } else {
                pos = skip(b, pos, end, wt);
                if (pos == -2) { err = ERR_WIRE_TYPE; err_at = tag_at; break; }
                if (pos < 0) { err = ERR_TRUNCATED; err_at = tag_at; break; }
                length = pos - value_at;
            }
            if (n < cap) {
                f_out[n] = field;
                w_out[n] = wt;
                o_out[n] = value_at;
                l_out[n] = length;
                t_out[n] = tag_at;
            }
            n++;
        }
        Py_END_ALLOW_THREADS
        res = Py_BuildValue("LLL", (long long)n, (long long)err, (long long)err_at);
    }
done:
    Py_XDECREF(buf); Py_XDECREF(a_f); Py_XDECREF(a_w); Py_XDECREF(a_o); Py_XDECREF(a_l); Py_XDECREF(a_t);
    return res;
}

/* Map a metadata id to its dense index (-1 when unknown). */
static inline int32_t dense(const int32_t *lookup, int64_t n_lookup, const int64_t *sorted, int64_t n_sorted,
                            int64_t key)
{
    if (key >= 0 && key < n_lookup)
        return lookup[key];
    int64_t lo = first_at_or_above(sorted, 0, n_sorted, key); /* searchsorted, side="left" */
    if (lo < n_sorted && sorted[lo] == key)
        return (int32_t)lo; /* lo < n_sorted <= INT32_MAX (fill_chunks checks) */
    return -1;
}

/* A decode's index column written in the fewest bytes its values need (ev_line, ev_meta, st_stat: the reader
 * allocates each as index_type gives it, so no int32 column is written only to be narrowed): signed 1, 2 or 4 bytes
 * an item. */
typedef struct {
    void *data;
    int width;
} IdxOut;

static inline void idx_put(const IdxOut *o, int64_t i, int64_t v)
{
    switch (o->width) {
    case 1: ((int8_t *)o->data)[i] = (int8_t)v; break;
    case 2: ((int16_t *)o->data)[i] = (int16_t)v; break;
    default: ((int32_t *)o->data)[i] = (int32_t)v; break;
    }
}

/* An index column to write (int8, int16 or int32, writeable, C-contiguous, 1-D), or NULL with TypeError set. */
static PyArrayObject *out_idx(PyObject *obj, const char *name, IdxOut *o)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a numpy array", name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    int ty = PyArray_TYPE(a);
    if ((ty != NPY_INT8 && ty != NPY_INT16 && ty != NPY_INT32) || PyArray_NDIM(a) != 1
        || !PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISWRITEABLE(a) || !PyArray_ISNOTSWAPPED(a)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a writeable C-contiguous 1-D int8, int16 or int32 array", name);
        return NULL;
    }
    o->data = PyArray_DATA(a);
    o->width = (int)PyArray_ITEMSIZE(a);
    Py_INCREF(a);
    return a;
}

/* Whether the index column holds every value in [-1, n); else 0 with OverflowError set (`fn`: the decode). */
static int idx_holds(const char *fn, const char *name, const IdxOut *o, int64_t n)
{
    int64_t top = o->width == 1 ? INT8_MAX : o->width == 2 ? INT16_MAX : INT32_MAX;
    if (n - 1 > top) {
        PyErr_Format(PyExc_OverflowError, "%s: %s in %d bytes cannot hold the indexes up to %lld", fn, name,
                     o->width, (long long)(n - 1));
        return 0;
    }
    return 1;
}

/* The stats a plane's decode keeps: every stat (keep == NULL), else those whose metadata id's dense index `d`
 * has keep[d] != 0; a stat naming no id or an id not in the metadata takes the mask's last entry. */
typedef struct {
    const uint8_t *keep;
    int64_t n_keep;
    const int32_t *lookup;
    int64_t n_lookup;
    const int64_t *sorted;
    int64_t n_sorted;
} StatKeep;

static inline int stat_kept(const StatKeep *k, int has_meta, int64_t meta)
{
    if (!k->keep)
        return 1;
    int64_t d = has_meta ? dense(k->lookup, k->n_lookup, k->sorted, k->n_sorted, meta) : -1;
    int64_t i = d < 0 ? k->n_keep - 1 : d;
    return i >= 0 && i < k->n_keep && k->keep[i] != 0;
}

/* Where read_stat writes a stat: the plane's stat and string columns, and the stat metadata lookup. */
typedef struct {
    IdxOut st_stat;
    uint8_t *st_kind;
    int64_t *st_value;
    int64_t *str_off, *str_len;
    int64_t n_str;
    const int32_t *st_lookup;
    int64_t n_st_lookup;
    const int64_t *st_sorted;
    int64_t n_st_sorted;
} StatOut;

/* Read one XStat in buf[q:s_end], the one reading of a stat both passes share. With `o` it is written as stat row
 * `out` (its dense metadata id, kind and value; its string values take the string slots from *ki on); with NULL
 * nothing is written. Either way the same checks in the same order, its string-valued fields counted into *n_strs
 * and its metadata id (the last one wins; *has_meta 0 without one). Returns the error code. */
static int read_stat(const uint8_t *buf, int64_t q, int64_t s_end, const StatOut *o, int64_t out, int64_t *ki,
                     int64_t *n_strs, int64_t *meta, int *has_meta, int64_t *err_at)
{
    *has_meta = 0;
    *n_strs = 0;
    if (o) {
        idx_put(&o->st_stat, out, -1);
        o->st_kind[out] = KIND_NONE;
        o->st_value[out] = 0;
    }
    while (q < s_end) {
        int64_t u_at = q;
        uint64_t u;
        q = varint(buf, q, s_end, &u);
        if (q < 0) { *err_at = u_at; return ERR_VARINT; }
        int64_t g = (int64_t)(u >> 3);
        int64_t x = (int64_t)(u & 7);
        if (x == 0) {
            uint64_t v;
            q = varint(buf, q, s_end, &v);
            if (q < 0) { *err_at = u_at; return ERR_TRUNCATED; }
            if (g == 1) {
                *meta = (int64_t)v;
                *has_meta = 1;
            }
            if (!o)
                continue;
            if (g == 1) {
                idx_put(&o->st_stat, out, dense(o->st_lookup, o->n_st_lookup, o->st_sorted, o->n_st_sorted, (int64_t)v));
            } else if (g == 3) {
                o->st_kind[out] = KIND_UINT64;
                o->st_value[out] = (int64_t)v;
            } else if (g == 4) {
                o->st_kind[out] = KIND_INT64;
                o->st_value[out] = (int64_t)v;
            } else if (g == 7) {
                o->st_kind[out] = KIND_REF;
                o->st_value[out] = dense(o->st_lookup, o->n_st_lookup, o->st_sorted, o->n_st_sorted, (int64_t)v);
            }
        } else if (x == 1) {
            if (q + 8 > s_end) { *err_at = u_at; return ERR_TRUNCATED; }
            if (o && g == 2) {
                o->st_kind[out] = KIND_DOUBLE;
                o->st_value[out] = (int64_t)fixed64(buf, q);
            }
            q += 8;
        } else if (x == 2) {
            uint64_t vl;
            q = varint(buf, q, s_end, &vl);
            if (q < 0 || vl > (uint64_t)(s_end - q)) { *err_at = u_at; return ERR_TRUNCATED; }
            if (g == 5 || g == 6 || g == 8) { /* a string value: it needs a slot in the plane's string table */
                (*n_strs)++;
                if (o) {
                    if (*ki >= o->n_str) { *err_at = u_at; return ERR_TRUNCATED; }
                    o->st_kind[out] = g == 5 ? KIND_STR : (g == 6 ? KIND_BYTES : KIND_GZIP);
                    o->str_off[*ki] = q;
                    o->str_len[*ki] = (int64_t)vl;
                    o->st_value[out] = *ki;
                    (*ki)++;
                }
            }
            q += (int64_t)vl;
        } else {
            q = skip(buf, q, s_end, x);
            if (q == -2) { *err_at = u_at; return ERR_WIRE_TYPE; }
            if (q < 0) { *err_at = u_at; return ERR_TRUNCATED; }
        }
    }
    return OK;
}

/* Count the stats of one XEvent in buf[pos:end] (those `keep` keeps, and all of them); returns the error code. */
static int count_event(const StatKeep *keep, const uint8_t *buf, int64_t pos, int64_t end, int64_t *n_stats_out,
                       int64_t *n_strs_out, int64_t *n_all_out, int64_t *err_at)
{
    int64_t n_stats = 0, n_strs = 0, n_all = 0;
    while (pos < end) {
        int64_t tag_at = pos;
        uint64_t tag;
        pos = varint(buf, pos, end, &tag);
        if (pos < 0) { *err_at = tag_at; return ERR_VARINT; }
        uint64_t field = tag >> 3;
        int64_t wt = (int64_t)(tag & 7);
        if (field == 4 && wt == 2) {
            uint64_t ln;
            pos = varint(buf, pos, end, &ln);
            if (pos < 0 || ln > (uint64_t)(end - pos)) { *err_at = tag_at; return ERR_TRUNCATED; }
            int64_t stat_end = pos + (int64_t)ln;
            n_all++;
            int64_t strs = 0, meta = 0, no_slot = 0;
            int has_meta = 0;
            int err = read_stat(buf, pos, stat_end, NULL, -1, &no_slot, &strs, &meta, &has_meta, err_at);
            if (err != OK)
                return err;
            if (stat_kept(keep, has_meta, meta)) {
                n_stats++;
                n_strs += strs;
            }
            pos = stat_end;
        } else {
            pos = skip(buf, pos, end, wt);
            if (pos == -2) { *err_at = tag_at; return ERR_WIRE_TYPE; }
            if (pos < 0) { *err_at = tag_at; return ERR_TRUNCATED; }
        }
    }
    *n_stats_out = n_stats;
    *n_strs_out = n_strs;
    *n_all_out = n_all;
    return OK;
}

/* Give back the whole pages inside buf[a, b) that this process holds. Only for a buffer mapped read-only from a
 * file (the decode's `release` argument): such pages are read again from the file where touched later; the pages of
 * any other memory would be lost. */
static void drop_pages(const uint8_t *buf, int64_t a, int64_t b)
{
#ifdef MADV_DONTNEED
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || b <= a)
        return;
    uintptr_t lo = ((uintptr_t)(buf + a) + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t hi = (uintptr_t)(buf + b) & ~((uintptr_t)page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
    (void)buf; (void)a; (void)b;
#endif
}

typedef struct {
    const uint8_t *buf;
    int64_t buf_len;
    const int64_t *line_off, *line_len;
    int64_t *lines; /* n_lines x N_LINE_COLS */
    int64_t n_lines_rows;
    int64_t chunk_bytes;
    int64_t *ch_pos, *ch_ev, *ch_st, *ch_str;
    int64_t ch_len;
    const int64_t *ch_base;
    int64_t *out_chunks, *out_stats, *out_strs, *out_err, *out_err_at;
    StatKeep keep;
    int64_t *out_all; /* per line: every stat, kept or not (NULL: not asked) */
    int release;      /* buf is a read-only file mapping: its pages are given back as each chunk is counted */
} CountCtx;

/* A line's own scalar field (wire type 0) into its row of the line matrix (other fields: nothing). */
static inline void line_scalar(int64_t *row, int64_t field, uint64_t v)
{
    if (field == 1)
        row[L_ID] = (int64_t)v;
    else if (field == 10)
        row[L_DISPLAY_ID] = (int64_t)v;
    else if (field == 3)
        row[L_TS_NS] = (int64_t)v;
    else if (field == 9)
        row[L_DUR_PS] = (int64_t)v;
}

/* A line's name or display name (wire type 2, its bytes at buf[pos:pos + ln]) into its row (others: nothing). */
static inline void line_text(int64_t *row, int64_t field, int64_t pos, uint64_t ln)
{
    if (field == 2) {
        row[L_NAME_OFF] = pos;
        row[L_NAME_LEN] = (int64_t)ln;
    } else if (field == 11) {
        row[L_DNAME_OFF] = pos;
        row[L_DNAME_LEN] = (int64_t)ln;
    }
}

/* Pass 1 for one line: its scalar fields, its event/stat/string counts and chunk marks. */
static int count_line(const CountCtx *c, int64_t li, int64_t pos, int64_t end, int64_t cb, int64_t *chunks_out,
                      int64_t *stats_out, int64_t *strs_out, int64_t *all_out, int64_t *err_at)
{
    const uint8_t *buf = c->buf;
    int64_t *row = c->lines + li * N_LINE_COLS;
    int64_t n_events = 0, n_stats = 0, n_strs = 0, n_all = 0, n_chunks = 1;
    int64_t chunk_bytes = c->chunk_bytes;
    if (cb < 0 || cb >= c->ch_len) { *err_at = pos; return ERR_TRUNCATED; }
    c->ch_pos[cb] = pos;
    c->ch_ev[cb] = 0;
    c->ch_st[cb] = 0;
    c->ch_str[cb] = 0;
    int64_t next_mark = pos + chunk_bytes;
    while (pos < end) {
        int64_t tag_at = pos;
        uint64_t tag;
        pos = varint(buf, pos, end, &tag);
        if (pos < 0) { *err_at = tag_at; return ERR_VARINT; }
        int64_t field = (int64_t)(tag >> 3);
        int64_t wt = (int64_t)(tag & 7);
        if (wt == 0) {
            uint64_t v;
            pos = varint(buf, pos, end, &v);
            if (pos < 0) { *err_at = tag_at; return ERR_TRUNCATED; }
            line_scalar(row, field, v);
            continue;
        }
        if (wt != 2) {
            pos = skip(buf, pos, end, wt);
            if (pos == -2) { *err_at = tag_at; return ERR_WIRE_TYPE; }
            if (pos < 0) { *err_at = tag_at; return ERR_TRUNCATED; }
            continue;
        }
        uint64_t ln;
        pos = varint(buf, pos, end, &ln);
        if (pos < 0 || ln > (uint64_t)(end - pos)) { *err_at = tag_at; return ERR_TRUNCATED; }
        int64_t sub_end = pos + (int64_t)ln;
        if (field == 4) {
            if (tag_at >= next_mark) {
                int64_t ci = cb + n_chunks;
                if (ci >= c->ch_len) { *err_at = tag_at; return ERR_TRUNCATED; }
                if (c->release)
                    drop_pages(buf, c->ch_pos[ci - 1], tag_at);
                c->ch_pos[ci] = tag_at;
                c->ch_ev[ci] = n_events;
                c->ch_st[ci] = n_stats;
                c->ch_str[ci] = n_strs;
                n_chunks++;
                next_mark = tag_at + chunk_bytes;
            }
            int64_t s = 0, k = 0, a = 0;
            int err = count_event(&c->keep, buf, pos, sub_end, &s, &k, &a, err_at);
            if (err != OK)
                return err;
            n_events++;
            n_stats += s;
            n_strs += k;
            n_all += a;
        } else {
            line_text(row, field, pos, ln);
        }
        pos = sub_end;
    }
    row[L_N_EVENTS] = n_events;
    if (c->release)
        drop_pages(buf, c->ch_pos[cb + n_chunks - 1], end);
    *chunks_out = n_chunks;
    *stats_out = n_stats;
    *strs_out = n_strs;
    *all_out = n_all;
    return OK;
}

static void count_one(void *ctx, int64_t li)
{
    const CountCtx *c = (const CountCtx *)ctx;
    int64_t pos = c->line_off[li], ln = c->line_len[li];
    int64_t chunks = 0, stats = 0, strs = 0, all = 0, at = 0;
    int err;
    if (pos < 0 || ln < 0 || ln > c->buf_len - pos) {
        err = ERR_TRUNCATED; /* a line outside the buffer (the caller's offsets come from scan_fields) */
        at = pos;
    } else {
        err = count_line(c, li, pos, pos + ln, c->ch_base[li], &chunks, &stats, &strs, &all, &at);
    }
    if (err != OK) {
        chunks = stats = strs = all = 0;
    } else {
        at = 0;
    }
    c->out_chunks[li] = chunks;
    c->out_stats[li] = stats;
    c->out_strs[li] = strs;
    if (c->out_all)
        c->out_all[li] = all;
    c->out_err[li] = err;
    c->out_err_at[li] = at;
}

/* Drop the references an argument-parsing block holds (NULL entries skipped). */
static void release_arrays(PyArrayObject **a, int n)
{
    for (int i = 0; i < n; i++)
        Py_XDECREF(a[i]);
}

/* The optional stat filter of a pass (st_lookup, st_sorted, keep; keep None: every stat) into `k`, holding the
 * arrays in `held` (new references, NULL where not given); 0 on error (an exception set). */
static int stat_keep_args(PyObject *o_lookup, PyObject *o_sorted, PyObject *o_keep, StatKeep *k, PyArrayObject **held)
{
    StatKeep none = {NULL, 0, NULL, 0, NULL, 0};
    *k = none;
    if (o_keep == NULL || o_keep == Py_None)
        return 1;
    if (!(held[0] = in_arr(o_lookup, NPY_INT32, "st_lookup"))) return 0;
    if (!(held[1] = in_arr(o_sorted, NPY_INT64, "st_sorted"))) return 0;
    if (!(held[2] = in_arr(o_keep, NPY_UINT8, "keep"))) return 0;
    if (LEN(held[1]) > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "stat filter: more stat metadata ids than the int32 columns hold");
        return 0;
    }
    StatKeep got = {U8P(held[2]), LEN(held[2]), I32P(held[0]), LEN(held[0]), I64P(held[1]), LEN(held[1])};
    *k = got;
    return 1;
}

static PyObject *count_lines_impl(PyObject *args, int parallel)
{
    PyObject *o[19] = {NULL};
    int release = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOO|OOOOp", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &o[15], &o[16], &o[17], &o[18],
                          &release))
        return NULL;
    long long chunk_bytes = PyLong_AsLongLong(o[4]);
    if (chunk_bytes == -1 && PyErr_Occurred())
        return NULL;
    PyArrayObject *a[15] = {NULL};
    PyArrayObject *held[4] = {NULL}; /* st_lookup, st_sorted, keep, out_all */
    static const char *names[15] = {"buf", "line_off", "line_len", "lines", "chunk_bytes", "ch_pos", "ch_ev",
                                    "ch_st", "ch_str", "ch_base", "out_chunks", "out_stats", "out_strs",
                                    "out_err", "out_err_at"};
    PyObject *res = NULL;
    StatKeep keep;
    if (!stat_keep_args(o[15], o[16], o[17], &keep, held)) goto done;
    if (o[18] != NULL && o[18] != Py_None && !(held[3] = out_arr(o[18], NPY_INT64, 1, "out_all"))) goto done;
    a[0] = in_arr(o[0], NPY_UINT8, names[0]);
    if (!a[0]) goto done;
    for (int i = 1; i <= 2; i++)
        if (!(a[i] = in_arr(o[i], NPY_INT64, names[i]))) goto done;
    if (!(a[3] = out_arr(o[3], NPY_INT64, 2, names[3]))) goto done;
    for (int i = 5; i <= 8; i++)
        if (!(a[i] = out_arr(o[i], NPY_INT64, 1, names[i]))) goto done;
    if (!(a[9] = in_arr(o[9], NPY_INT64, names[9]))) goto done;
    for (int i = 10; i <= 14; i++)
        if (!(a[i] = out_arr(o[i], NPY_INT64, 1, names[i]))) goto done;
    {
        int64_t n = LEN(a[1]);
        int ok = LEN(a[2]) >= n && LEN(a[9]) >= n && PyArray_DIM(a[3], 0) >= n
                 && PyArray_DIM(a[3], 1) == N_LINE_COLS && chunk_bytes > 0;
        for (int i = 10; i <= 14; i++)
            ok = ok && LEN(a[i]) >= n;
        ok = ok && (held[3] == NULL || LEN(held[3]) >= n);
        int64_t ch_len = LEN(a[5]);
        for (int i = 6; i <= 8; i++)
            if (LEN(a[i]) < ch_len) ch_len = LEN(a[i]);
        if (!ok) {
            PyErr_SetString(PyExc_ValueError, "count_lines: arrays of inconsistent lengths");
            goto done;
        }
        CountCtx c = {U8P(a[0]), LEN(a[0]), I64P(a[1]), I64P(a[2]), I64P(a[3]), PyArray_DIM(a[3], 0),
                      (int64_t)chunk_bytes, I64P(a[5]), I64P(a[6]), I64P(a[7]), I64P(a[8]), ch_len, I64P(a[9]),
                      I64P(a[10]), I64P(a[11]), I64P(a[12]), I64P(a[13]), I64P(a[14]), keep,
                      held[3] ? I64P(held[3]) : NULL, release};
        int nt = parallel ? threads_now() : 1;
        Py_BEGIN_ALLOW_THREADS
        run_items(count_one, &c, n, nt);
        Py_END_ALLOW_THREADS
        Py_INCREF(Py_None);
        res = Py_None;
    }
done:
    release_arrays(a, 15);
    release_arrays(held, 4);
    return res;
}

static PyObject *py_count_lines(PyObject *self, PyObject *args) { return count_lines_impl(args, 1); }
static PyObject *py_count_lines_serial(PyObject *self, PyObject *args) { return count_lines_impl(args, 0); }

typedef struct {
    const uint8_t *buf;
    int64_t buf_len;
    const int64_t *ch_line, *ch_start, *ch_end, *ch_ev, *ch_st, *ch_str, *line_ts;
    int64_t n_lines;
    const int32_t *ev_lookup;
    int64_t n_ev_lookup;
    const int64_t *ev_sorted;
    int64_t n_ev_sorted;
    const int32_t *st_lookup;
    int64_t n_st_lookup;
    const int64_t *st_sorted;
    int64_t n_st_sorted;
    IdxOut ev_line, ev_meta;
    int64_t *ev_start, *ev_dur;
    int64_t n_ev;
    int32_t *st_event;
    IdxOut st_stat;
    uint8_t *st_kind;
    int64_t *st_value;
    int64_t n_st;
    int64_t *str_off, *str_len;
    int64_t n_str;
    int64_t *out_err, *out_err_at;
    StatKeep keep;
    int release; /* buf is a read-only file mapping: its pages are given back as each chunk is filled */
} FillCtx;

static inline int64_t start_ps(int base_ok, int64_t base, int64_t offset)
{
    if (!base_ok)
        return START_OVERFLOW;
    if (offset > 0 && base > I64_MAX - offset)
        return START_OVERFLOW;
    if (offset < 0 && base < -I64_MAX - offset)
        return START_OVERFLOW;
    return base + offset;
}

/* Pass 2 for one chunk of a line: decode its events and their stats. Returns the error code. */
static int fill_chunk(const FillCtx *c, int64_t pos, int64_t end, int64_t li, int64_t ts_ns, int64_t ei,
                      int64_t si, int64_t ki, int64_t *err_at, int64_t *ends)
{
    int64_t n_all = 0; /* every stat read, kept or not (ends[3]) */
    const uint8_t *buf = c->buf;
    int base_ok = -MAX_TS_NS <= ts_ns && ts_ns <= MAX_TS_NS;
    int64_t base = base_ok ? ts_ns * 1000 : 0;
    const int64_t n_ev = c->n_ev, n_st = c->n_st;
    const StatOut out = {c->st_stat, c->st_kind, c->st_value, c->str_off, c->str_len, c->n_str,
                         c->st_lookup, c->n_st_lookup, c->st_sorted, c->n_st_sorted};
    if (ei < 0 || si < 0 || ki < 0) { *err_at = pos; return ERR_TRUNCATED; }
    while (pos < end) {
        int64_t tag_at = pos;
        uint64_t tag;
        pos = varint(buf, pos, end, &tag);
        if (pos < 0) { *err_at = tag_at; return ERR_VARINT; }
        int64_t field = (int64_t)(tag >> 3);
        int64_t wt = (int64_t)(tag & 7);
        if (!(field == 4 && wt == 2)) {
            pos = skip(buf, pos, end, wt);
            if (pos == -2) { *err_at = tag_at; return ERR_WIRE_TYPE; }
            if (pos < 0) { *err_at = tag_at; return ERR_TRUNCATED; }
            continue;
        }
        uint64_t ln;
        pos = varint(buf, pos, end, &ln);
        if (pos < 0 || ln > (uint64_t)(end - pos)) { *err_at = tag_at; return ERR_TRUNCATED; }
        int64_t sub_end = pos + (int64_t)ln;
        if (ei >= n_ev) { *err_at = tag_at; return ERR_TRUNCATED; }
        int64_t meta = 0, offset = 0, dur = 0;
        int64_t p = pos;
        while (p < sub_end) {
            int64_t t_at = p;
            uint64_t t;
            p = varint(buf, p, sub_end, &t);
            if (p < 0) { *err_at = t_at; return ERR_VARINT; }
            int64_t f = (int64_t)(t >> 3);
            int64_t w = (int64_t)(t & 7);
            if (w == 0) {
                uint64_t v;
                p = varint(buf, p, sub_end, &v);
                if (p < 0) { *err_at = t_at; return ERR_TRUNCATED; }
                if (f == 1)
                    meta = (int64_t)v;
                else if (f == 2)
                    offset = (int64_t)v;
                else if (f == 3)
                    dur = (int64_t)v;
                continue;
            }
            if (f == 4 && w == 2) {
                uint64_t sl;
                p = varint(buf, p, sub_end, &sl);
                if (p < 0 || sl > (uint64_t)(sub_end - p)) { *err_at = t_at; return ERR_TRUNCATED; }
                int64_t s_end = p + (int64_t)sl;
                int64_t meta_id = 0, strs = 0;
                int has_meta = 0, err;
                n_all++;
                if (c->keep.keep) { /* a stat not kept is checked as it would be decoded, and not written */
                    err = read_stat(buf, p, s_end, NULL, -1, &ki, &strs, &meta_id, &has_meta, err_at);
                    if (err != OK)
                        return err;
                    if (!stat_kept(&c->keep, has_meta, meta_id)) {
                        p = s_end;
                        continue;
                    }
                }
                if (si >= n_st) { *err_at = t_at; return ERR_TRUNCATED; }
                c->st_event[si] = (int32_t)ei; /* ei < n_ev <= INT32_MAX (fill_chunks checks) */
                err = read_stat(buf, p, s_end, &out, si, &ki, &strs, &meta_id, &has_meta, err_at);
                if (err != OK)
                    return err;
                si++;
                p = s_end;
                continue;
            }
            p = skip(buf, p, sub_end, w);
            if (p == -2) { *err_at = t_at; return ERR_WIRE_TYPE; }
            if (p < 0) { *err_at = t_at; return ERR_TRUNCATED; }
        }
        idx_put(&c->ev_line, ei, li); /* li < n_lines: the column holds it (the decodes check) */
        idx_put(&c->ev_meta, ei, dense(c->ev_lookup, c->n_ev_lookup, c->ev_sorted, c->n_ev_sorted, meta));
        c->ev_start[ei] = start_ps(base_ok, base, offset);
        c->ev_dur[ei] = dur;
        ei++;
        pos = sub_end;
    }
    if (ends) { /* where the chunk's rows end: events, stats, strings, and every stat read */
        ends[0] = ei;
        ends[1] = si;
        ends[2] = ki;
        ends[3] = n_all;
    }
    return OK;
}

static void fill_one(void *ctx, int64_t ci)
{
    const FillCtx *c = (const FillCtx *)ctx;
    int64_t li = c->ch_line[ci], s = c->ch_start[ci], e = c->ch_end[ci], at = 0;
    int err;
    if (li < 0 || li >= c->n_lines || s < 0 || e < s || e > c->buf_len) {
        err = ERR_TRUNCATED; /* a chunk outside the buffer or of no line (the caller's marks come from pass 1) */
        at = s;
    } else {
        err = fill_chunk(c, s, e, li, c->line_ts[li], c->ch_ev[ci], c->ch_st[ci], c->ch_str[ci], &at, NULL);
        if (err == OK)
            at = 0;
        if (c->release)
            drop_pages(c->buf, s, e);
    }
    c->out_err[ci] = err;
    c->out_err_at[ci] = at;
}

/* The rows the ten output columns of a decode can take, given in this order from `col`: the events' (ev_line,
 * ev_meta, ev_start, ev_dur), the stats' (st_event, st_stat, st_kind, st_value) and the strings' (str_off,
 * str_len): the shortest column of each kind. */
static void column_rows(PyArrayObject **col, int64_t *n_ev, int64_t *n_st, int64_t *n_str)
{
    *n_ev = LEN(col[0]);
    for (int i = 1; i <= 3; i++)
        if (LEN(col[i]) < *n_ev) *n_ev = LEN(col[i]);
    *n_st = LEN(col[4]);
    for (int i = 5; i <= 7; i++)
        if (LEN(col[i]) < *n_st) *n_st = LEN(col[i]);
    *n_str = LEN(col[8]) < LEN(col[9]) ? LEN(col[8]) : LEN(col[9]);
}

/* The int32 columns hold indexes below these counts (every write checks the index against its count): an event
 * row (st_event), a line row (ev_line), a position in ev_sorted / st_sorted (ev_meta, st_stat, from dense()).
 * Checked once per call of a decode (`fn`), so that no index is ever narrowed to int32 with wrapping; 0 with an
 * OverflowError set where a count is above INT32_MAX. */
static int index_columns_fit(const char *fn, int64_t n_ev, int64_t n_lines, int64_t n_ev_sorted, int64_t n_st_sorted)
{
    const struct { const char *what; int64_t n; } counts[] = {
        {"events (the rows of ev_line, ev_meta, ev_start, ev_dur)", n_ev},
        {"lines (the rows of line_ts)", n_lines},
        {"event metadata ids (ev_sorted)", n_ev_sorted},
        {"stat metadata ids (st_sorted)", n_st_sorted},
    };
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        if (counts[i].n > INT32_MAX) {
            PyErr_Format(PyExc_OverflowError, "%s: %lld %s do not fit the int32 index columns (at most %lld)", fn,
                         (long long)counts[i].n, counts[i].what, (long long)INT32_MAX);
            return 0;
        }
    }
    return 1;
}

static PyObject *fill_chunks_impl(PyObject *args, int parallel)
{
    enum { N = 24 };
    PyObject *o[N];
    PyObject *o_keep = NULL;
    int release = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOOOOOOOOOO|Op", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &o[15], &o[16], &o[17],
                          &o[18], &o[19], &o[20], &o[21], &o[22], &o[23], &o_keep, &release))
        return NULL;
    PyArrayObject *held[4] = {NULL};
    static const char *names[N] = {"buf", "ch_line", "ch_start", "ch_end", "ch_ev", "ch_st", "ch_str", "line_ts",
                                   "ev_lookup", "ev_sorted", "st_lookup", "st_sorted", "ev_line", "ev_meta",
                                   "ev_start", "ev_dur", "st_event", "st_stat", "st_kind", "st_value", "str_off",
                                   "str_len", "out_err", "out_err_at"};
    /* dtype per argument; inputs (0-11) converted, outputs (12-23) exact */
    static const int types[N] = {NPY_UINT8, NPY_INT64, NPY_INT64, NPY_INT64, NPY_INT64, NPY_INT64, NPY_INT64,
                                 NPY_INT64, NPY_INT32, NPY_INT64, NPY_INT32, NPY_INT64, NPY_INT32, NPY_INT32,
                                 NPY_INT64, NPY_INT64, NPY_INT32, NPY_INT32, NPY_UINT8, NPY_INT64, NPY_INT64,
                                 NPY_INT64, NPY_INT64, NPY_INT64};
    PyArrayObject *a[N] = {NULL};
    PyObject *res = NULL;
    IdxOut ix[N]; /* ev_line, ev_meta, st_stat (12, 13, 17): in the width the caller gave */
    for (int i = 0; i < N; i++) {
        if (i == 12 || i == 13 || i == 17)
            a[i] = out_idx(o[i], names[i], &ix[i]);
        else
            a[i] = i < 12 ? in_arr(o[i], types[i], names[i]) : out_arr(o[i], types[i], 1, names[i]);
        if (!a[i]) goto done;
    }
    {
        int64_t n = LEN(a[1]);
        int ok = 1;
        for (int i = 2; i <= 6; i++)
            ok = ok && LEN(a[i]) >= n;
        ok = ok && LEN(a[22]) >= n && LEN(a[23]) >= n;
        int64_t n_ev, n_st, n_str;
        column_rows(a + 12, &n_ev, &n_st, &n_str);
        if (!ok) {
            PyErr_SetString(PyExc_ValueError, "fill_chunks: arrays of inconsistent lengths");
            goto done;
        }
        if (!index_columns_fit("fill_chunks", n_ev, LEN(a[7]), LEN(a[9]), LEN(a[11]))
            || !idx_holds("fill_chunks", "ev_line", &ix[12], LEN(a[7]))
            || !idx_holds("fill_chunks", "ev_meta", &ix[13], LEN(a[9]))
            || !idx_holds("fill_chunks", "st_stat", &ix[17], LEN(a[11])))
            goto done;
        StatKeep keep; /* the stat filter, on the same stat lookup as the decode (st_lookup, st_sorted) */
        if (!stat_keep_args(o[10], o[11], o_keep, &keep, held))
            goto done;
        FillCtx c = {U8P(a[0]), LEN(a[0]), I64P(a[1]), I64P(a[2]), I64P(a[3]), I64P(a[4]), I64P(a[5]), I64P(a[6]),
                     I64P(a[7]), LEN(a[7]), I32P(a[8]), LEN(a[8]), I64P(a[9]), LEN(a[9]), I32P(a[10]), LEN(a[10]),
                     I64P(a[11]), LEN(a[11]), ix[12], ix[13], I64P(a[14]), I64P(a[15]), n_ev,
                     I32P(a[16]), ix[17], U8P(a[18]), I64P(a[19]), n_st, I64P(a[20]), I64P(a[21]), n_str,
                     I64P(a[22]), I64P(a[23]), keep, release};
        int nt = parallel ? threads_now() : 1;
        Py_BEGIN_ALLOW_THREADS
        run_items(fill_one, &c, n, nt);
        Py_END_ALLOW_THREADS
        Py_INCREF(Py_None);
        res = Py_None;
    }
done:
    release_arrays(a, N);
    release_arrays(held, 4);
    return res;
}

static PyObject *py_fill_chunks(PyObject *self, PyObject *args) { return fill_chunks_impl(args, 1); }
static PyObject *py_fill_chunks_serial(PyObject *self, PyObject *args) { return fill_chunks_impl(args, 0); }

/* One line's own fields for decode_serial (pass 1 without its per-stat count): its scalars and names into `row`,
 * its events counted and skipped. Returns the error code (any error: the caller decodes again in two passes,
 * which reports it). */
static int scan_line(const uint8_t *buf, int64_t pos, int64_t end, int64_t *row)
{
    int64_t n_events = 0;
    while (pos < end) {
        uint64_t tag;
        pos = varint(buf, pos, end, &tag);
        if (pos < 0) return ERR_VARINT;
        int64_t field = (int64_t)(tag >> 3);
        int64_t wt = (int64_t)(tag & 7);
        if (wt == 0) {
            uint64_t v;
            pos = varint(buf, pos, end, &v);
            if (pos < 0) return ERR_TRUNCATED;
            line_scalar(row, field, v);
            continue;
        }
        if (wt != 2) {
            pos = skip(buf, pos, end, wt);
            if (pos < 0) return ERR_TRUNCATED;
            continue;
        }
        uint64_t ln;
        pos = varint(buf, pos, end, &ln);
        if (pos < 0 || ln > (uint64_t)(end - pos)) return ERR_TRUNCATED;
        if (field == 4)
            n_events++;
        else
            line_text(row, field, pos, ln);
        pos += (int64_t)ln;
    }
    row[L_N_EVENTS] = n_events;
    return OK;
}

/* decode_serial(buf, line_off, line_len, lines, ev_lookup, ev_sorted, st_lookup, st_sorted, ev_line, ev_meta,
 * ev_start, ev_dur, st_event, st_stat, st_kind, st_value, str_off, str_len[, keep]) -> (events, stats, strings,
 * stats read) or None: a small plane's lines decoded in one pass in this thread, into columns of a capacity no
 * plane can exceed (the caller's: a sub-message takes two bytes at least), each line's fields scanned first (its
 * timestamp may follow its events). None on any error in the bytes or any capacity exceeded: the caller then
 * decodes in two passes (count_lines, fill_chunks), which report the error as they always did. */
static PyObject *py_decode_serial(PyObject *self, PyObject *args)
{
    enum { N = 18 };
    PyObject *o[N];
    PyObject *o_keep = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOOOO|O", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &o[15], &o[16], &o[17], &o_keep))
        return NULL;
    static const char *names[N] = {"buf", "line_off", "line_len", "lines", "ev_lookup", "ev_sorted", "st_lookup",
                                   "st_sorted", "ev_line", "ev_meta", "ev_start", "ev_dur", "st_event", "st_stat",
                                   "st_kind", "st_value", "str_off", "str_len"};
    static const int types[N] = {NPY_UINT8, NPY_INT64, NPY_INT64, NPY_INT64, NPY_INT32, NPY_INT64, NPY_INT32,
                                 NPY_INT64, NPY_INT32, NPY_INT32, NPY_INT64, NPY_INT64, NPY_INT32, NPY_INT32,
                                 NPY_UINT8, NPY_INT64, NPY_INT64, NPY_INT64};
    PyArrayObject *a[N] = {NULL};
    PyArrayObject *held[4] = {NULL};
    PyObject *res = NULL;
    IdxOut ix[N]; /* ev_line, ev_meta, st_stat (8, 9, 13): in the width the caller gave */
    for (int i = 0; i < N; i++) {
        if (i == 3)
            a[i] = out_arr(o[i], NPY_INT64, 2, names[i]);
        else if (i == 8 || i == 9 || i == 13)
            a[i] = out_idx(o[i], names[i], &ix[i]);
        else
            a[i] = (i < 8) ? in_arr(o[i], types[i], names[i]) : out_arr(o[i], types[i], 1, names[i]);
        if (!a[i]) goto done;
    }
    {
        int64_t n_lines = LEN(a[1]);
        if (LEN(a[2]) < n_lines || PyArray_DIM(a[3], 0) < n_lines || PyArray_DIM(a[3], 1) != N_LINE_COLS) {
            PyErr_SetString(PyExc_ValueError, "decode_serial: arrays of inconsistent lengths");
            goto done;
        }
        int64_t n_ev, n_st, n_str;
        column_rows(a + 8, &n_ev, &n_st, &n_str);
        if (!index_columns_fit("decode_serial", n_ev, n_lines, LEN(a[5]), LEN(a[7]))
            || !idx_holds("decode_serial", "ev_line", &ix[8], n_lines)
            || !idx_holds("decode_serial", "ev_meta", &ix[9], LEN(a[5]))
            || !idx_holds("decode_serial", "st_stat", &ix[13], LEN(a[7])))
            goto done;
        StatKeep keep;
        if (!stat_keep_args(o[6], o[7], o_keep, &keep, held))
            goto done;
        FillCtx c = {U8P(a[0]), LEN(a[0]), NULL, NULL, NULL, NULL, NULL, NULL, NULL, n_lines, I32P(a[4]), LEN(a[4]),
                     I64P(a[5]), LEN(a[5]), I32P(a[6]), LEN(a[6]), I64P(a[7]), LEN(a[7]), ix[8], ix[9],
                     I64P(a[10]), I64P(a[11]), n_ev, I32P(a[12]), ix[13], U8P(a[14]), I64P(a[15]), n_st,
                     I64P(a[16]), I64P(a[17]), n_str, NULL, NULL, keep};
        const int64_t *off = I64P(a[1]), *len = I64P(a[2]);
        int64_t *lines = I64P(a[3]);
        int64_t ei = 0, si = 0, ki = 0, n_all = 0;
        int failed = 0;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t li = 0; li < n_lines; li++) {
            int64_t pos = off[li], ln = len[li], ends[4] = {0, 0, 0, 0}, at = 0;
            int64_t *row = lines + li * N_LINE_COLS;
            if (pos < 0 || ln < 0 || ln > c.buf_len - pos || scan_line(c.buf, pos, pos + ln, row) != OK
                || row[L_N_EVENTS] > n_ev - ei) {
                failed = 1;
                break;
            }
            if (fill_chunk(&c, pos, pos + ln, li, row[L_TS_NS], ei, si, ki, &at, ends) != OK
                || ends[0] - ei != row[L_N_EVENTS]) {
                failed = 1;
                break;
            }
            ei = ends[0];
            si = ends[1];
            ki = ends[2];
            n_all += ends[3];
        }
        Py_END_ALLOW_THREADS
        if (failed) {
            Py_INCREF(Py_None);
            res = Py_None;
        } else {
            res = Py_BuildValue("(LLLL)", (long long)ei, (long long)si, (long long)ki, (long long)n_all);
        }
    }
done:
    release_arrays(a, N);
    release_arrays(held, 4);
    return res;
}

/* gather_strings(buf, str_off, str_len, pool) -> bytes used: copies the values into the pool, rewrites str_off. */
static PyObject *py_gather_strings(PyObject *self, PyObject *args)
{
    PyObject *ob, *oo, *ol, *op;
    if (!PyArg_ParseTuple(args, "OOOO", &ob, &oo, &ol, &op))
        return NULL;
    PyArrayObject *buf = in_arr(ob, NPY_UINT8, "buf");
    PyArrayObject *off = buf ? out_arr(oo, NPY_INT64, 1, "str_off") : NULL;
    PyArrayObject *len = off ? in_arr(ol, NPY_INT64, "str_len") : NULL;
    PyArrayObject *pool = len ? out_arr(op, NPY_UINT8, 1, "pool") : NULL;
    PyObject *res = NULL;
    if (!pool)
        goto done;
    {
        const uint8_t *b = U8P(buf);
        uint8_t *dst = U8P(pool);
        int64_t *so = I64P(off);
        const int64_t *sl = I64P(len);
        int64_t n = LEN(off) < LEN(len) ? LEN(off) : LEN(len);
        int64_t nb = LEN(buf), np_ = LEN(pool), p = 0, bad = -1;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < n; i++) {
            int64_t k = sl[i], o = so[i];
            if (k < 0 || o < 0 || k > nb - o || k > np_ - p) {
                bad = i;
                break;
            }
            memcpy(dst + p, b + o, (size_t)k);
            so[i] = p;
            p += k;
        }
        Py_END_ALLOW_THREADS
        if (bad >= 0)
            PyErr_Format(PyExc_IndexError, "gather_strings: string %lld lies outside the buffer or the pool",
                         (long long)bad);
        else
            res = PyLong_FromLongLong(p);
    }
done:
    Py_XDECREF(buf); Py_XDECREF(off); Py_XDECREF(len); Py_XDECREF(pool);
    return res;
}

/* fnv1a(pool, off, ln) -> int64 array: the 64-bit FNV-1a hash of each string pool[off[i]:off[i] + ln[i]]. */
static PyObject *py_fnv1a(PyObject *self, PyObject *args)
{
    PyObject *op, *oo, *ol;
    if (!PyArg_ParseTuple(args, "OOO", &op, &oo, &ol))
        return NULL;
    PyArrayObject *pool = in_arr(op, NPY_UINT8, "pool");
    PyArrayObject *off = pool ? in_arr(oo, NPY_INT64, "off") : NULL;
    PyArrayObject *len = off ? in_arr(ol, NPY_INT64, "ln") : NULL;
    PyArrayObject *out = NULL;
    if (!len)
        goto fail;
    {
        int64_t n = LEN(off);
        if (LEN(len) < n) {
            PyErr_SetString(PyExc_ValueError, "fnv1a: off and ln of different lengths");
            goto fail;
        }
        out = new_i64(n);
        if (!out)
            goto fail;
        const uint8_t *b = U8P(pool);
        const int64_t *so = I64P(off), *sl = I64P(len);
        int64_t *h_out = I64P(out), np_ = LEN(pool), bad = -1;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < n; i++) {
            uint64_t h = 1469598103934665603ULL;
            int64_t o = so[i], k = sl[i];
            if (k > 0 && (o < 0 || k > np_ - o)) {
                bad = i;
                break;
            }
            for (int64_t j = 0; j < k; j++)
                h = (h ^ (uint64_t)b[o + j]) * 1099511628211ULL;
            h_out[i] = (int64_t)h;
        }
        Py_END_ALLOW_THREADS
        if (bad >= 0) {
            PyErr_Format(PyExc_IndexError, "fnv1a: string %lld lies outside the pool", (long long)bad);
            goto fail;
        }
    }
    Py_DECREF(pool); Py_DECREF(off); Py_DECREF(len);
    return (PyObject *)out;
fail:
    Py_XDECREF(pool); Py_XDECREF(off); Py_XDECREF(len); Py_XDECREF(out);
    return NULL;
}

/* The slots of str_groups' open-addressing table: a string's hash and its group (-1: empty). */
typedef struct {
    uint64_t h;
    int64_t k;
} StrSlot;

static inline uint64_t mix64(uint64_t h) /* the finalizer of MurmurHash3: spreads the hash over the slots */
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* Replace the table by one of twice the slots, its entries re-inserted: 0, or -1 when out of memory (the
 * table then left as it was). Called without the GIL (PyMem_Raw*). */
static int str_table_grow(StrSlot **tab, int64_t *mask)
{
    int64_t cap = (*mask + 1) * 2;
    StrSlot *old = *tab, *t = (StrSlot *)PyMem_RawMalloc((size_t)cap * sizeof(StrSlot));
    if (t == NULL)
        return -1;
    for (int64_t s = 0; s < cap; s++)
        t[s].k = -1;
    for (int64_t s = 0; s <= *mask; s++) {
        if (old[s].k < 0)
            continue;
        int64_t x = (int64_t)(mix64(old[s].h) & (uint64_t)(cap - 1));
        while (t[x].k >= 0)
            x = (x + 1) & (cap - 1);
        t[x] = old[s];
    }
    PyMem_RawFree(old);
    *tab = t;
    *mask = cap - 1;
    return 0;
}

/* str_groups(pool, off, ln, hashes) -> (codes, first): the strings pool[off[i]:off[i] + ln[i]] (a length <= 0:
 * the empty string, as fnv1a reads it) grouped by their bytes. codes[i] numbers the distinct strings by first
 * appearance (as pandas.factorize); first[k] is the index of the first string of code k (ascending).
 * hashes[i] (fnv1a's, or any function of the bytes) only picks where string i is looked up: strings of
 * equal hashes are compared byte for byte, so a hash collision never merges two different strings. The
 * table holds one slot per distinct string (at most half full, grown by doubling). */
static PyObject *py_str_groups(PyObject *self, PyObject *args)
{
    PyObject *op, *oo, *ol, *oh;
    if (!PyArg_ParseTuple(args, "OOOO", &op, &oo, &ol, &oh))
        return NULL;
    PyArrayObject *pool = in_arr(op, NPY_UINT8, "pool");
    PyArrayObject *off = pool ? in_arr(oo, NPY_INT64, "off") : NULL;
    PyArrayObject *len = off ? in_arr(ol, NPY_INT64, "ln") : NULL;
    PyArrayObject *hsh = len ? in_arr(oh, NPY_INT64, "hashes") : NULL;
    PyArrayObject *codes = NULL, *first = NULL;
    PyObject *res = NULL;
    if (!hsh)
        goto done;
    {
        int64_t n = LEN(off);
        if (LEN(len) != n || LEN(hsh) != n) {
            PyErr_SetString(PyExc_ValueError, "str_groups: off, ln and hashes of different lengths");
            goto done;
        }
        codes = new_i64(n);
        first = new_i64(n);
        if (!codes || !first)
            goto done;
        int64_t mask = 15, nk = 0, bad = -1;
        int nomem = 0;
        StrSlot *tab = (StrSlot *)PyMem_RawMalloc((size_t)(mask + 1) * sizeof(StrSlot));
        if (tab == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (int64_t s = 0; s <= mask; s++)
            tab[s].k = -1;
        const uint8_t *b = U8P(pool);
        const int64_t *so = I64P(off), *sl = I64P(len), *hh = I64P(hsh);
        int64_t *cd = I64P(codes), *fi = I64P(first), np_ = LEN(pool);
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < n; i++) {
            int64_t o = so[i], k = sl[i] > 0 ? sl[i] : 0;
            if (k > 0 && (o < 0 || k > np_ - o)) {
                bad = i;
                break;
            }
            uint64_t h = (uint64_t)hh[i];
            int64_t x = (int64_t)(mix64(h) & (uint64_t)mask), code = -1;
            while (tab[x].k >= 0) {
                if (tab[x].h == h) {
                    int64_t j = fi[tab[x].k], kj = sl[j] > 0 ? sl[j] : 0;
                    if (kj == k && (k == 0 || memcmp(b + so[j], b + o, (size_t)k) == 0)) {
                        code = tab[x].k;
                        break;
                    }
                }
                x = (x + 1) & mask;
            }
            if (code < 0) { /* a new string: a new group, in the empty slot the probe ended at */
                code = nk++;
                fi[code] = i;
                tab[x].h = h;
                tab[x].k = code;
                if (2 * nk > mask + 1 && str_table_grow(&tab, &mask) < 0) {
                    nomem = 1;
                    break;
                }
            }
            cd[i] = code;
        }
        PyMem_RawFree(tab);
        Py_END_ALLOW_THREADS
        if (nomem) {
            PyErr_NoMemory();
            goto done;
        }
        if (bad >= 0) {
            PyErr_Format(PyExc_IndexError, "str_groups: string %lld lies outside the pool", (long long)bad);
            goto done;
        }
        if (shrink(first, nk) < 0)
            goto done;
        res = Py_BuildValue("OO", codes, first);
    }
done:
    Py_XDECREF(pool); Py_XDECREF(off); Py_XDECREF(len); Py_XDECREF(hsh);
    Py_XDECREF(codes); Py_XDECREF(first);
    return res;
}

/* ------------------------------------------------------------------------------------------ */
/* Interval kernels (intervals are [start, end) in ps, int64)                                 */
/* ------------------------------------------------------------------------------------------ */

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Parse `count` int64 arrays. */
static int parse_i64(PyObject *args, int count, PyArrayObject **a, const char *fn)
{
    PyObject *o[4];
    if (!PyArg_UnpackTuple(args, fn, count, count, &o[0], &o[1], &o[2], &o[3]))
        return -1;
    for (int i = 0; i < count; i++) {
        a[i] = in_arr(o[i], NPY_INT64, fn);
        if (!a[i]) {
            for (int j = 0; j < i; j++)
                Py_CLEAR(a[j]);
            return -1;
        }
    }
    return 0;
}

static void release(PyArrayObject **a, int count)
{
    for (int i = 0; i < count; i++)
        Py_XDECREF(a[i]);
}

/* One interval [x, y), taken in order of start, into the union built so far (k intervals in ps, pe): joined to the
 * last one where it starts inside or at its end, else appended. Returns the new count. */
static inline int64_t join_or_append(int64_t *ps, int64_t *pe, int64_t k, int64_t x, int64_t y)
{
    if (k > 0 && x <= pe[k - 1]) {
        if (y > pe[k - 1])
            pe[k - 1] = y;
        return k;
    }
    ps[k] = x;
    pe[k] = y;
    return k + 1;
}

/* _merge_sorted(s, e) -> (starts, ends, ok): union of start-sorted intervals; ok False when not sorted. */
static PyObject *py_merge_sorted(PyObject *self, PyObject *args)
{
    PyArrayObject *a[2] = {NULL};
    if (parse_i64(args, 2, a, "_merge_sorted") < 0)
        return NULL;
    const int64_t *s = I64P(a[0]), *e = I64P(a[1]);
    int64_t n = min64(LEN(a[0]), LEN(a[1]));
    PyArrayObject *os_ = new_i64(n), *oe = new_i64(n);
    PyObject *res = NULL;
    if (!os_ || !oe)
        goto done;
    {
        int64_t *ps = I64P(os_), *pe = I64P(oe), k = 0;
        int ok = 1;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < n; i++) {
            int64_t x = s[i], y = e[i];
            if (i > 0 && x < s[i - 1]) {
                ok = 0;
                break;
            }
            if (y <= x)
                continue;
            k = join_or_append(ps, pe, k, x, y);
        }
        Py_END_ALLOW_THREADS
        if (shrink(os_, k) < 0 || shrink(oe, k) < 0)
            goto done;
        res = Py_BuildValue("OOO", os_, oe, ok ? Py_True : Py_False);
    }
done:
    Py_XDECREF(os_); Py_XDECREF(oe);
    release(a, 2);
    return res;
}

/* _union2_linear(s1, e1, s2, e2) -> (starts, ends): union of two sets of disjoint sorted intervals. */
static PyObject *py_union2_linear(PyObject *self, PyObject *args)
{
    PyArrayObject *a[4] = {NULL};
    if (parse_i64(args, 4, a, "_union2_linear") < 0)
        return NULL;
    const int64_t *s1 = I64P(a[0]), *e1 = I64P(a[1]), *s2 = I64P(a[2]), *e2 = I64P(a[3]);
    int64_t n1 = min64(LEN(a[0]), LEN(a[1])), n2 = min64(LEN(a[2]), LEN(a[3]));
    PyArrayObject *os_ = new_i64(n1 + n2), *oe = new_i64(n1 + n2);
    PyObject *res = NULL;
    if (!os_ || !oe)
        goto done;
    {
        int64_t *ps = I64P(os_), *pe = I64P(oe), i = 0, j = 0, k = 0;
        Py_BEGIN_ALLOW_THREADS
        while (i < n1 || j < n2) {
            int64_t x, y;
            if (j >= n2 || (i < n1 && s1[i] <= s2[j])) {
                x = s1[i];
                y = e1[i];
                i++;
            } else {
                x = s2[j];
                y = e2[j];
                j++;
            }
            k = join_or_append(ps, pe, k, x, y);
        }
        Py_END_ALLOW_THREADS
        if (shrink(os_, k) < 0 || shrink(oe, k) < 0)
            goto done;
        res = Py_BuildValue("OO", os_, oe);
    }
done:
    Py_XDECREF(os_); Py_XDECREF(oe);
    release(a, 4);
    return res;
}

/* _union_small(bs, be, ss, se) -> (starts, ends): union of a big and a small set of disjoint sorted
 * intervals; the big set is copied in blocks, only the neighbourhood of each small interval is merged. */
static PyObject *py_union_small(PyObject *self, PyObject *args)
{
    PyArrayObject *a[4] = {NULL};
    if (parse_i64(args, 4, a, "_union_small") < 0)
        return NULL;
    const int64_t *bs = I64P(a[0]), *be = I64P(a[1]), *ss = I64P(a[2]), *se = I64P(a[3]);
    int64_t nb = min64(LEN(a[0]), LEN(a[1])), ns = min64(LEN(a[2]), LEN(a[3]));
    PyArrayObject *os_ = new_i64(nb + ns), *oe = new_i64(nb + ns);
    PyObject *res = NULL;
    if (!os_ || !oe)
        goto done;
    {
        int64_t *ps = I64P(os_), *pe = I64P(oe), i = 0, k = 0;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t j = 0; j < ns; j++) {
            int64_t x = ss[j], y = se[j];
            /* big intervals wholly before this one (ending before it starts) are copied as they are */
            int64_t lo = i, hi = nb;
            while (lo < hi) {
                int64_t mid = (lo + hi) >> 1;
                if (be[mid] < x)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo > i) {
                memcpy(ps + k, bs + i, (size_t)(lo - i) * sizeof(int64_t));
                memcpy(pe + k, be + i, (size_t)(lo - i) * sizeof(int64_t));
                k += lo - i;
                i = lo;
            }
            if (k > 0 && x <= pe[k - 1]) {
                k--;
                x = ps[k];
                if (pe[k] > y)
                    y = pe[k];
            }
            while (i < nb && bs[i] <= y) {
                if (bs[i] < x)
                    x = bs[i];
                if (be[i] > y)
                    y = be[i];
                i++;
            }
            ps[k] = x;
            pe[k] = y;
            k++;
        }
        if (i < nb) {
            memcpy(ps + k, bs + i, (size_t)(nb - i) * sizeof(int64_t));
            memcpy(pe + k, be + i, (size_t)(nb - i) * sizeof(int64_t));
            k += nb - i;
        }
        Py_END_ALLOW_THREADS
        if (shrink(os_, k) < 0 || shrink(oe, k) < 0)
            goto done;
        res = Py_BuildValue("OO", os_, oe);
    }
done:
    Py_XDECREF(os_); Py_XDECREF(oe);
    release(a, 4);
    return res;
}

/* _prefix_lengths(s, e) -> int64 array of n + 1 running sums of e - s. */
static PyObject *py_prefix_lengths(PyObject *self, PyObject *args)
{
    PyArrayObject *a[2] = {NULL};
    if (parse_i64(args, 2, a, "_prefix_lengths") < 0)
        return NULL;
    const int64_t *s = I64P(a[0]), *e = I64P(a[1]);
    int64_t n = min64(LEN(a[0]), LEN(a[1]));
    PyArrayObject *out = new_i64(n + 1);
    if (out) {
        int64_t *o = I64P(out), acc = 0;
        o[0] = 0;
        for (int64_t i = 0; i < n; i++) {
            acc += e[i] - s[i];
            o[i + 1] = acc;
        }
    }
    release(a, 2);
    return (PyObject *)out;
}

/* _cover_sorted(s, e, t) -> covered length of disjoint sorted intervals in (-inf, t] per ascending t. */
static PyObject *py_cover_sorted(PyObject *self, PyObject *args)
{
    PyArrayObject *a[3] = {NULL};
    if (parse_i64(args, 3, a, "_cover_sorted") < 0)
        return NULL;
    const int64_t *s = I64P(a[0]), *e = I64P(a[1]), *t = I64P(a[2]);
    int64_t n = min64(LEN(a[0]), LEN(a[1])), q = LEN(a[2]);
    PyArrayObject *out = new_i64(q);
    if (out) {
        int64_t *o = I64P(out), i = 0, acc = 0;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t j = 0; j < q; j++) {
            int64_t tj = t[j];
            while (i < n && e[i] <= tj) {
                acc += e[i] - s[i];
                i++;
            }
            if (i < n && s[i] < tj)
                o[j] = acc + (tj - s[i]);
            else
                o[j] = acc;
        }
        Py_END_ALLOW_THREADS
    }
    release(a, 3);
    return (PyObject *)out;
}

/* _intersect(s1, e1, s2, e2, with_index=True) -> (starts, ends[, index into set 2]): pieces of set 1
 * inside set 2. */
static PyObject *py_intersect(PyObject *self, PyObject *args)
{
    PyArrayObject *a[4] = {NULL};
    int with_index = 1;
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs == 5) {
        with_index = PyObject_IsTrue(PyTuple_GET_ITEM(args, 4));
        if (with_index < 0)
            return NULL;
        args = PyTuple_GetSlice(args, 0, 4);
    } else {
        Py_INCREF(args);
    }
    if (args == NULL)
        return NULL;
    int rc = parse_i64(args, 4, a, "_intersect");
    Py_DECREF(args);
    if (rc < 0)
        return NULL;
    const int64_t *s1 = I64P(a[0]), *e1 = I64P(a[1]), *s2 = I64P(a[2]), *e2 = I64P(a[3]);
    int64_t n1 = min64(LEN(a[0]), LEN(a[1])), n2 = min64(LEN(a[2]), LEN(a[3]));
    PyArrayObject *ps_ = new_i64(n1 + n2), *pe_ = new_i64(n1 + n2), *pw_ = new_i64(with_index ? n1 + n2 : 0);
    PyObject *res = NULL;
    if (!ps_ || !pe_ || !pw_)
        goto done;
    {
        int64_t *ps = I64P(ps_), *pe = I64P(pe_), *pw = I64P(pw_), i = 0, j = 0, k = 0;
        Py_BEGIN_ALLOW_THREADS
        while (i < n1 && j < n2) {
            int64_t x = max64(s1[i], s2[j]), y = min64(e1[i], e2[j]);
            if (x < y) {
                ps[k] = x;
                pe[k] = y;
                if (with_index)
                    pw[k] = j;
                k++;
            }
            if (e1[i] <= e2[j])
                i++;
            else
                j++;
        }
        Py_END_ALLOW_THREADS
        if (shrink(ps_, k) < 0 || shrink(pe_, k) < 0 || (with_index && shrink(pw_, k) < 0))
            goto done;
        res = with_index ? Py_BuildValue("OOO", ps_, pe_, pw_) : Py_BuildValue("OO", ps_, pe_);
    }
done:
    Py_XDECREF(ps_); Py_XDECREF(pe_); Py_XDECREF(pw_);
    release(a, 4);
    return res;
}

/* The union of a few disjoint sorted sets, walked run by run without being built (a k-way merge). */
#define SWEEP_MAX_SETS 64
typedef struct {
    int k;
    const int64_t *s[SWEEP_MAX_SETS], *e[SWEEP_MAX_SETS];
    int64_t n[SWEEP_MAX_SETS], i[SWEEP_MAX_SETS];
    int64_t head[SWEEP_MAX_SETS]; /* the start of each set's next interval, INT64_MAX when none is left */
    int fast;                     /* -1, or a set whose next intervals are runs of their own while they end... */
    int64_t limit;                /* ... before this: the earliest next start of the other sets */
    PyArrayObject *arr[2 * SWEEP_MAX_SETS];
} Sweep;

static void sweep_release(Sweep *w)
{
    for (int j = 0; j < 2 * w->k; j++)
        Py_XDECREF(w->arr[j]);
}

/* Parse a sequence (s0, e0, s1, e1, ...) of int64 arrays, each pair a disjoint set sorted by start (raises
 * ValueError otherwise: the union would be wrong). */
static int sweep_parse(Sweep *w, PyObject *parts, const char *fn)
{
    memset(w, 0, sizeof(*w));
    PyObject *seq = PySequence_Fast(parts, "expected a sequence of arrays");
    if (!seq)
        return -1;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
    if (m % 2 || m / 2 > SWEEP_MAX_SETS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s: expected up to %d (starts, ends) pairs", fn, SWEEP_MAX_SETS);
        return -1;
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        w->arr[j] = in_arr(PySequence_Fast_GET_ITEM(seq, j), NPY_INT64, fn);
        w->k = (int)(j / 2) + 1;
        if (!w->arr[j]) {
            Py_DECREF(seq);
            sweep_release(w);
            return -1;
        }
    }
    Py_DECREF(seq);
    w->k = (int)(m / 2);
    w->fast = -1;
    for (int j = 0; j < w->k; j++) {
        w->s[j] = I64P(w->arr[2 * j]);
        w->e[j] = I64P(w->arr[2 * j + 1]);
        w->n[j] = min64(LEN(w->arr[2 * j]), LEN(w->arr[2 * j + 1]));
        for (int64_t i = 0; i < w->n[j]; i++) {
            if (w->e[j][i] <= w->s[j][i] || (i > 0 && w->s[j][i] < w->e[j][i - 1])) {
                PyErr_Format(PyExc_ValueError, "%s: set %d is not disjoint and sorted at %lld", fn, j, (long long)i);
                sweep_release(w);
                return -1;
            }
        }
        w->head[j] = w->n[j] ? w->s[j][0] : INT64_MAX;
    }
    return 0;
}

/* The next run of the union (touching intervals joined): 0 when there is none. */
static int sweep_next(Sweep *w, int64_t *rs, int64_t *re)
{
    int64_t *h = w->head;
    if (w->k == 1) { /* one set: its intervals as runs (two that touch leave no hole between them, as one would) */
        if (h[0] == INT64_MAX)
            return 0;
        int64_t i = w->i[0]++;
        *rs = h[0];
        *re = w->e[0][i];
        h[0] = i + 1 < w->n[0] ? w->s[0][i + 1] : INT64_MAX;
        return 1;
    }
    if (w->k == 0)
        return 0;
    int best = w->fast;
    if (best < 0 || h[best] >= w->limit || w->e[best][w->i[best]] >= w->limit) {
        /* the set with the earliest next start, and the earliest start of the others */
        best = 0;
        for (int j = 1; j < w->k; j++)
            if (h[j] < h[best])
                best = j;
        if (h[best] == INT64_MAX)
            return 0;
        w->limit = INT64_MAX;
        for (int j = 0; j < w->k; j++)
            if (j != best && h[j] < w->limit)
                w->limit = h[j];
    }
    if (w->e[best][w->i[best]] < w->limit) {
        /* no other set reaches this interval: it is a run; so are the next ones of its set up to that limit */
        int64_t i = w->i[best]++;
        *rs = h[best];
        *re = w->e[best][i];
        h[best] = i + 1 < w->n[best] ? w->s[best][i + 1] : INT64_MAX;
        w->fast = best;
        return 1;
    }
    w->fast = -1;
    int64_t cs = h[best], ce = cs;
    for (int grew = 1; grew;) { /* every interval starting inside or at the end of the run joins it */
        grew = 0;
        for (int j = 0; j < w->k; j++) {
            if (h[j] > ce)
                continue;
            const int64_t *s = w->s[j], *e = w->e[j];
            int64_t i = w->i[j], n = w->n[j];
            while (i < n && s[i] <= ce) {
                if (e[i] > ce)
                    ce = e[i];
                i++;
            }
            w->i[j] = i;
            h[j] = i < n ? s[i] : INT64_MAX;
            grew = 1;
        }
    }
    *rs = cs;
    *re = ce;
    return 1;
}

/* union_length(parts) -> int: the length of the union of the disjoint sorted sets parts = (s0, e0, s1, e1, ...),
 * without building it. */
static PyObject *py_union_length(PyObject *self, PyObject *parts)
{
    Sweep w;
    if (sweep_parse(&w, parts, "union_length") < 0)
        return NULL;
    int64_t total = 0, rs, re;
    Py_BEGIN_ALLOW_THREADS
    if (w.k == 1) { /* one set: already its own union; summed in a loop the compiler vectorises (sweep_next's one
                     * interval a call is ~4x slower) */
        for (int64_t i = 0; i < w.n[0]; i++)
            total += w.e[0][i] - w.s[0][i];
    } else {
        while (sweep_next(&w, &rs, &re))
            total += re - rs;
    }
    Py_END_ALLOW_THREADS
    sweep_release(&w);
    return PyLong_FromLongLong((long long)total);
}

/* union_holes(parts, ws, we) -> (starts, ends): the holes of the union of the disjoint sorted sets
 * parts = (s0, e0, s1, e1, ...) inside the disjoint sorted windows [ws, we), without building the union: what
 * intersect(complement(union), windows) gives, in memory the size of the answer. */
static PyObject *py_union_holes(PyObject *self, PyObject *args)
{
    PyObject *parts, *ows, *owe;
    if (!PyArg_ParseTuple(args, "OOO", &parts, &ows, &owe))
        return NULL;
    Sweep w;
    if (sweep_parse(&w, parts, "union_holes") < 0)
        return NULL;
    PyArrayObject *wa = in_arr(ows, NPY_INT64, "union_holes"), *wb = wa ? in_arr(owe, NPY_INT64, "union_holes") : NULL;
    PyObject *res = NULL;
    PyArrayObject *ps_ = NULL, *pe_ = NULL;
    if (!wb)
        goto done;
    {
        const int64_t *ws = I64P(wa), *we = I64P(wb);
        int64_t nw = min64(LEN(wa), LEN(wb)), cap = nw + 1;
        for (int j = 0; j < w.k; j++)
            cap += w.n[j];
        ps_ = new_i64(cap);
        pe_ = new_i64(cap);
        if (!ps_ || !pe_)
            goto done;
        int64_t *ps = I64P(ps_), *pe = I64P(pe_), k = 0, jw = 0, prev = INT64_MIN, rs, re;
        Py_BEGIN_ALLOW_THREADS
        for (int more = 1; more && jw < nw;) {
            more = sweep_next(&w, &rs, &re);
            int64_t hs = prev, he = more ? rs : INT64_MAX; /* the hole before this run (after the last one) */
            while (jw < nw && we[jw] <= hs)
                jw++;
            for (int64_t j = jw; j < nw && ws[j] < he; j++) {
                int64_t x = max64(hs, ws[j]), y = min64(he, we[j]);
                if (x < y && k < cap) {
                    ps[k] = x;
                    pe[k] = y;
                    k++;
                }
            }
            prev = more ? re : INT64_MAX;
        }
        Py_END_ALLOW_THREADS
        if (shrink(ps_, k) < 0 || shrink(pe_, k) < 0)
            goto done;
        res = Py_BuildValue("OO", ps_, pe_);
    }
done:
    Py_XDECREF(ps_); Py_XDECREF(pe_); Py_XDECREF(wa); Py_XDECREF(wb);
    sweep_release(&w);
    return res;
}

/* The end of an event: start + duration, wrapping as numpy's int64 addition does (no undefined overflow). */
static inline int64_t end_of(int64_t start, int64_t dur)
{
    return (int64_t)((uint64_t)start + (uint64_t)dur);
}

/* _union_rows(start, dur, rows) -> (starts, ends): the union of the intervals [start[i], start[i] + dur[i]) of the
 * event rows (any order; empty intervals left out, touching ones joined), sorted. Rows outside the columns raise
 * IndexError. For a few rows at a time: the intervals are sorted (a merge of the runs already in order: O(n log r) for
 * r runs). */
typedef struct {
    int64_t s, e;
} Span;

/* Sort spans by start, merging the runs already sorted (event rows in ascending order are one run per line: a
 * device's few streams, a host's threads). ``tmp`` holds m spans; returns where the sorted spans are (sp or tmp).
 * O(m log r) for r runs; the order of equal starts is not specified (the union does not depend on it). */
static Span *sort_spans(Span *sp, Span *tmp, int64_t m)
{
    Span *src = sp, *dst = tmp;
    for (;;) {
        int64_t i = 0, runs = 0;
        while (i < m) {
            /* the next two runs: [i, j) and [j, k), each ascending by start */
            int64_t j = i + 1;
            while (j < m && src[j].s >= src[j - 1].s)
                j++;
            int64_t k = j < m ? j + 1 : m;
            while (k < m && src[k].s >= src[k - 1].s)
                k++;
            runs++;
            int64_t a = i, b = j, o = i;
            while (a < j && b < k)
                dst[o++] = src[b].s < src[a].s ? src[b++] : src[a++];
            while (a < j)
                dst[o++] = src[a++];
            while (b < k)
                dst[o++] = src[b++];
            i = k;
        }
        Span *t = src;
        src = dst;
        dst = t;
        if (runs <= 1)
            return src;
    }
}

static PyObject *py_union_rows(PyObject *self, PyObject *args)
{
    PyObject *ost, *odu, *orw;
    if (!PyArg_UnpackTuple(args, "_union_rows", 3, 3, &ost, &odu, &orw))
        return NULL;
    PyArrayObject *a[2] = {NULL};
    IdxArr rows = {0};
    PyArrayObject *os_ = NULL, *oe = NULL;
    PyObject *res = NULL;
    Span *sp = NULL;
    if (!(a[0] = in_arr(ost, NPY_INT64, "_union_rows")) || !(a[1] = in_arr(odu, NPY_INT64, "_union_rows"))
        || idx_arr(orw, &rows, "_union_rows") < 0)
        goto done;
    const int64_t *st = I64P(a[0]), *du = I64P(a[1]);
    int64_t nev = min64(LEN(a[0]), LEN(a[1])), n = (int64_t)rows.n, m = 0, cap = n > 0 ? n : 1;
    sp = PyMem_Malloc(sizeof(Span) * 2 * (size_t)cap); /* the spans, then the merge's scratch */
    if (!sp) {
        PyErr_NoMemory();
        goto done;
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t i = idx_get(&rows, j);
        if (i < 0 || i >= nev) {
            PyErr_Format(PyExc_IndexError, "_union_rows: row %lld outside [0, %lld)", (long long)i, (long long)nev);
            goto done;
        }
        int64_t e = end_of(st[i], du[i]);
        if (e > st[i]) {
            sp[m].s = st[i];
            sp[m].e = e;
            m++;
        }
    }
    const Span *so = sort_spans(sp, sp + cap, m);
    os_ = new_i64(m);
    oe = new_i64(m);
    if (!os_ || !oe)
        goto done;
    {
        int64_t *ps = I64P(os_), *pe = I64P(oe), k = 0;
        for (int64_t j = 0; j < m; j++) {
            if (k > 0 && so[j].s <= pe[k - 1]) {
                if (so[j].e > pe[k - 1])
                    pe[k - 1] = so[j].e;
            } else {
                ps[k] = so[j].s;
                pe[k] = so[j].e;
                k++;
            }
        }
        if (shrink(os_, k) < 0 || shrink(oe, k) < 0)
            goto done;
        res = Py_BuildValue("OO", os_, oe);
    }
done:
    PyMem_Free(sp);
    Py_XDECREF(os_); Py_XDECREF(oe);
    release(a, 2);
    Py_XDECREF(rows.arr);
    return res;
}

/* A binary min-heap of (time, layer) pairs for _priority_cover. */
static void heap_push(int64_t *ht, int32_t *hl, int64_t *n, int64_t t, int32_t l)
{
    int64_t i = (*n)++;
    while (i > 0) {
        int64_t p = (i - 1) >> 1;
        if (ht[p] <= t)
            break;
        ht[i] = ht[p];
        hl[i] = hl[p];
        i = p;
    }
    ht[i] = t;
    hl[i] = l;
}

static void heap_pop(int64_t *ht, int32_t *hl, int64_t *n)
{
    int64_t last_t = ht[--(*n)];
    int32_t last_l = hl[*n];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && ht[c + 1] < ht[c])
            c++;
        if (ht[c] >= last_t)
            break;
        ht[i] = ht[c];
        hl[i] = hl[c];
        i = c;
    }
    ht[i] = last_t;
    hl[i] = last_l;
}

/* The first index i >= from with e[i] > t (len if none), e ascending: a gallop from ``from``, then a binary search. */
static int64_t first_end_after(const int64_t *e, int64_t from, int64_t len, int64_t t)
{
    if (from >= len || e[from] > t)
        return from;
    int64_t lo = from, hi = len, step = 1; /* e[lo] <= t; e[hi] > t, or hi == len */
    while (lo + step < len) {
        if (e[lo + step] > t) {
            hi = lo + step;
            break;
        }
        lo += step;
        step <<= 1;
    }
    return first_above(e, lo + 1, hi, t);
}

/* Add [from, to) to winner layer ``win``'s time in each window it overlaps (out[win * W + q]); the windows have
 * ascending starts and ends, and *j (the first window not yet ended, kept between calls) only moves forward. */
static inline void credit_span(int64_t *out, int64_t win, int64_t from, int64_t to, const int64_t *wa,
                               const int64_t *wb, int64_t W, int64_t *j)
{
    while (*j < W && wb[*j] <= from)
        (*j)++;
    for (int64_t q = *j; q < W && wa[q] < to; q++) {
        int64_t x = max64(from, wa[q]), y = min64(to, wb[q]);
        if (y > x)
            out[win * W + q] += y - x;
    }
}

/* Up to this many layers _priority_cover sweeps with cover_skip (a scan of the layers per boundary), above it
 * with a heap of every layer's next boundary. */
#define COVER_SKIP_LAYERS 32

/* Layer k's state at time t for cover_skip, from pos[k] on: inside its first interval that ends after t if that
 * one has begun (bit k of *inside), its next boundary in nb[k]; a layer with none left leaves *live. */
static inline void cover_place(int64_t k, int64_t t, const int64_t **sp, const int64_t **ep, const int64_t *len,
                               int64_t *pos, int64_t *nb, uint64_t *inside, uint64_t *live)
{
    uint64_t bit = (uint64_t)1 << k;
    int64_t i = first_end_after(ep[k], pos[k], len[k], t);
    pos[k] = i;
    if (i >= len[k]) {
        *live &= ~bit;
        *inside &= ~bit;
        nb[k] = INT64_MAX;
    } else if (sp[k][i] <= t) {
        *live |= bit;
        *inside |= bit;
        nb[k] = ep[k][i];
    } else {
        *live |= bit;
        *inside &= ~bit;
        nb[k] = sp[k][i];
    }
}

/* _priority_cover's sweep for up to COVER_SKIP_LAYERS layers (see there), skipping what cannot change the answer:
 * while layer w holds the time, only the boundaries of layers 0..w can end its hold, so the next stop is the
 * earliest of those; the later layers jump to it (a gallop in their ends) instead of stepping through each of
 * their boundaries. The sweep starts at the first window's start and ends at the last window's end. */
static void cover_skip(int64_t K, const int64_t **sp, const int64_t **ep, const int64_t *len, const int64_t *wa,
                       const int64_t *wb, int64_t W, int64_t *op, int64_t *pos, int64_t *nb)
{
    if (W == 0)
        return;
    uint64_t inside = 0, live = 0; /* bit k: layer k holds the time now; layer k has boundaries left */
    int64_t t = wa[0], stop = wb[W - 1], j = 0;
    for (int64_t k = 0; k < K; k++) {
        pos[k] = 0;
        cover_place(k, t, sp, ep, len, pos, nb, &inside, &live);
    }
    while (t < stop) {
        int64_t win = inside ? (int64_t)__builtin_ctzll(inside) : -1;
        int64_t lim = win >= 0 ? win + 1 : K;
        if (!(live & (lim >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << lim) - 1)))
            break;
        int64_t next = INT64_MAX; /* the layers with none left have INT64_MAX as next boundary */
        for (int64_t k = 0; k < lim; k++)
            next = nb[k] < next ? nb[k] : next;
        if (win >= 0) /* [t, next) is the winner's */
            credit_span(op, win, t, next, wa, wb, W, &j);
        t = next;
        for (int64_t k = 0; k < K; k++)
            if (nb[k] <= t && (live >> k & 1))
                cover_place(k, t, sp, ep, len, pos, nb, &inside, &live);
    }
}

/* _priority_cover's sweep for more than COVER_SKIP_LAYERS layers (see there): every layer's boundaries in time
 * order, from a heap of each layer's next one. */
static void cover_heap(int64_t K, const int64_t **sp, const int64_t **ep, const int64_t *len, const int64_t *wa,
                       const int64_t *wb, int64_t W, int64_t *op, int64_t *pos, int64_t *ht, int32_t *hl,
                       uint64_t *inside, int64_t nwords)
{
    int64_t nh = 0;
    for (int64_t k = 0; k < K; k++) {
        pos[k] = 0;
        if (pos[k] < len[k])
            heap_push(ht, hl, &nh, sp[k][0], (int32_t)k);
    }
    int64_t prev = 0, j = 0;
    int64_t win = -1;
    while (nh > 0) {
        int64_t t = ht[0];
        if (win >= 0 && t > prev) /* [prev, t) is the winner's */
            credit_span(op, win, prev, t, wa, wb, W, &j);
        while (nh > 0 && ht[0] == t) {
            int32_t k = hl[0];
            uint64_t bit = (uint64_t)1 << (k & 63);
            heap_pop(ht, hl, &nh);
            if (inside[k >> 6] & bit) {
                inside[k >> 6] &= ~bit;
                pos[k]++;
                if (pos[k] < len[k])
                    heap_push(ht, hl, &nh, sp[k][pos[k]], k);
            } else {
                inside[k >> 6] |= bit;
                heap_push(ht, hl, &nh, ep[k][pos[k]], k);
            }
        }
        win = -1;
        for (int64_t w = 0; w < nwords; w++)
            if (inside[w]) {
                win = w * 64 + __builtin_ctzll(inside[w]);
                break;
            }
        prev = t;
    }
}

/* From this many intervals over all layers on, cover_split runs cover_skip on parts of the time in parallel. */
#define COVER_PARALLEL_MIN 262144

/* One part of cover_split: the time [lo, hi), the windows j0.. that overlap it clipped to it (wa, wb: W of them),
 * its own output (K x W) and scratch (pos, nb). */
typedef struct {
    int64_t lo, hi, j0, W;
    int64_t *wa, *wb, *op, *pos, *nb;
} CoverPart;

typedef struct {
    int64_t K;
    const int64_t **sp, **ep;
    const int64_t *len;
    CoverPart *parts;
} CoverSplit;

static void cover_part(void *ctx, int64_t i)
{
    const CoverSplit *c = (const CoverSplit *)ctx;
    CoverPart *p = &c->parts[i];
    cover_skip(c->K, c->sp, c->ep, c->len, p->wa, p->wb, p->W, p->op, p->pos, p->nb);
}

/* How many intervals of all layers start at or before t. */
static int64_t starts_upto(int64_t K, const int64_t **sp, const int64_t *len, int64_t t)
{
    int64_t n = 0;
    for (int64_t k = 0; k < K; k++)
        n += first_above(sp[k], 0, len[k], t);
    return n;
}

/* The earliest t in [lo, hi] by which at least `want` intervals have started (hi if none). */
static int64_t time_of_count(int64_t K, const int64_t **sp, const int64_t *len, int64_t lo, int64_t hi, int64_t want)
{
    while (lo < hi) {
        int64_t m = lo + (int64_t)(((uint64_t)hi - (uint64_t)lo) / 2);
        if (starts_upto(K, sp, len, m) >= want)
            hi = m;
        else
            lo = m + 1;
    }
    return lo;
}

/* cover_skip on T parts of the sweep's time at once, each on a thread: the time from the first window's start to
 * the last window's end is cut where about as many intervals have started in each part; each part sweeps the
 * windows clipped to it (their starts and ends stay ascending), and a window cut in two gets both parts' time.
 * The same answer as one sweep: a layer's time inside a window is the sum of its time in the window's pieces.
 * Returns 0 when out of memory (nothing written). */
static int cover_split(int64_t K, const int64_t **sp, const int64_t **ep, const int64_t *len, const int64_t *wa,
                       const int64_t *wb, int64_t W, int64_t *op, int T)
{
    CoverPart *parts = calloc((size_t)T, sizeof(CoverPart));
    int64_t *scratch = NULL;
    if (!parts)
        return 0;
    int64_t lo = wa[0], hi = wb[W - 1];
    int64_t base = starts_upto(K, sp, len, lo), top = starts_upto(K, sp, len, hi);
    int64_t need = 0;
    for (int i = 0; i < T; i++) {
        CoverPart *p = &parts[i];
        p->lo = i == 0 ? lo : parts[i - 1].hi;
        p->hi = i == T - 1 ? hi : time_of_count(K, sp, len, p->lo, hi, base + (top - base) / T * (i + 1));
        p->j0 = first_above(wb, 0, W, p->lo); /* the first window ending after the part's start */
        p->W = p->hi > p->lo ? first_at_or_above(wa, p->j0, W, p->hi) - p->j0 : 0;
        need += 2 * p->W + K * p->W + 2 * K;
    }
    scratch = calloc((size_t)need + 1, sizeof(int64_t));
    if (!scratch) {
        free(parts);
        return 0;
    }
    int64_t *at = scratch;
    for (int i = 0; i < T; i++) {
        CoverPart *p = &parts[i];
        p->wa = at; at += p->W;
        p->wb = at; at += p->W;
        p->op = at; at += K * p->W;
        p->pos = at; at += K;
        p->nb = at; at += K;
        for (int64_t q = 0; q < p->W; q++) {
            p->wa[q] = max64(wa[p->j0 + q], p->lo);
            p->wb[q] = min64(wb[p->j0 + q], p->hi);
        }
    }
    CoverSplit c = {K, sp, ep, len, parts};
    run_items(cover_part, &c, T, T);
    for (int i = 0; i < T; i++) {
        const CoverPart *p = &parts[i];
        for (int64_t k = 0; k < K; k++)
            for (int64_t q = 0; q < p->W; q++)
                op[k * W + p->j0 + q] += p->op[k * p->W + q];
    }
    free(scratch);
    free(parts);
    return 1;
}

/* _priority_cover(starts, ends, a, b) -> int64 array of K * W, or None.
 *
 * Layer k is the intervals [starts[k][i], ends[k][i]) (two sequences of K int64 arrays), sorted and disjoint;
 * the windows [a[j], b[j]) have ascending starts and ascending ends (disjoint, or steps whose device work runs
 * past the next step's start: each counts the time inside it). out[k * W + j] is the time inside window j
 * that layer k covers and no earlier layer does (the first layer wins overlaps). One sweep over every
 * layer's boundaries at once (cover_skip, or cover_heap above COVER_SKIP_LAYERS layers; from COVER_PARALLEL_MIN
 * intervals on, cover_split: parts of the time on the decoder's threads); the layers are read where they are
 * (no joined copy of them all) and nothing but the output is allocated per interval. None when an input is
 * not as described (the caller then takes the general path). */
static PyObject *py_priority_cover(PyObject *self, PyObject *args)
{
    PyObject *o[4];
    if (!PyArg_UnpackTuple(args, "_priority_cover", 4, 4, &o[0], &o[1], &o[2], &o[3]))
        return NULL;
    PyArrayObject *a[2] = {NULL}, **ls = NULL, **le = NULL;
    PyObject *fs = NULL, *fe = NULL, *res = NULL;
    PyArrayObject *out = NULL;
    int64_t *pos = NULL, *ht = NULL, *len = NULL, *nb = NULL, K = 0;
    const int64_t **sp = NULL, **ep = NULL;
    int32_t *hl = NULL;
    uint64_t *inside = NULL; /* one bit per layer: the lowest set bit is the winner */
    if (!(fs = PySequence_Fast(o[0], "_priority_cover: starts must be a sequence of arrays")) ||
        !(fe = PySequence_Fast(o[1], "_priority_cover: ends must be a sequence of arrays")))
        goto done;
    K = PySequence_Fast_GET_SIZE(fs);
    if (PySequence_Fast_GET_SIZE(fe) != K || K >= (1 << 30)) {
        PyErr_SetString(PyExc_ValueError, "_priority_cover: as many ends as starts (and fewer than 2**30 layers)");
        goto done;
    }
    ls = PyMem_Calloc((size_t)K + 1, sizeof(PyArrayObject *));
    le = PyMem_Calloc((size_t)K + 1, sizeof(PyArrayObject *));
    sp = PyMem_Calloc((size_t)K + 1, sizeof(int64_t *));
    ep = PyMem_Calloc((size_t)K + 1, sizeof(int64_t *));
    len = PyMem_Calloc((size_t)K + 1, sizeof(int64_t));
    if (!ls || !le || !sp || !ep || !len) {
        PyErr_NoMemory();
        goto done;
    }
    for (int64_t k = 0; k < K; k++) {
        if (!(ls[k] = in_arr(PySequence_Fast_GET_ITEM(fs, k), NPY_INT64, "_priority_cover")) ||
            !(le[k] = in_arr(PySequence_Fast_GET_ITEM(fe, k), NPY_INT64, "_priority_cover")))
            goto done;
        sp[k] = I64P(ls[k]);
        ep[k] = I64P(le[k]);
        len[k] = min64(LEN(ls[k]), LEN(le[k]));
    }
    for (int i = 0; i < 2; i++) {
        if (!(a[i] = in_arr(o[i + 2], NPY_INT64, "_priority_cover")))
            goto done;
    }
    {
        const int64_t *wa = I64P(a[0]), *wb = I64P(a[1]);
        int64_t W = min64(LEN(a[0]), LEN(a[1]));
        int ok = 1;
        for (int64_t k = 0; ok && k < K; k++) {
            const int64_t *s = sp[k], *e = ep[k];
            for (int64_t i = 0; ok && i < len[k]; i++)
                if (e[i] < s[i] || (i > 0 && s[i] < e[i - 1]))
                    ok = 0;
        }
        for (int64_t j = 0; ok && j < W; j++)
            if (wb[j] < wa[j] || (j > 0 && (wa[j] < wa[j - 1] || wb[j] < wb[j - 1])))
                ok = 0;
        if (!ok) {
            res = Py_None;
            Py_INCREF(res);
            goto done;
        }
        out = (PyArrayObject *)PyArray_ZEROS(1, (npy_intp[]){(npy_intp)(K * W)}, NPY_INT64, 0);
        pos = PyMem_Malloc(sizeof(int64_t) * (size_t)(K + 1));
        ht = PyMem_Malloc(sizeof(int64_t) * (size_t)(K + 1));
        hl = PyMem_Malloc(sizeof(int32_t) * (size_t)(K + 1));
        nb = PyMem_Malloc(sizeof(int64_t) * (size_t)(K + 1));
        int64_t nwords = K / 64 + 1;
        inside = PyMem_Calloc((size_t)nwords, sizeof(uint64_t));
        if (!out || !pos || !ht || !hl || !nb || !inside) {
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            goto done;
        }
        int64_t *op = I64P(out);
        int64_t total = 0;
        for (int64_t k = 0; k < K; k++)
            total += len[k];
        int nt = threads_now();
        int split = K <= COVER_SKIP_LAYERS && W > 0 && total >= COVER_PARALLEL_MIN && nt > 1;
        Py_BEGIN_ALLOW_THREADS
        if (!(split && cover_split(K, sp, ep, len, wa, wb, W, op, nt > 64 ? 64 : nt))) { /* one sweep */
            if (K <= COVER_SKIP_LAYERS)
                cover_skip(K, sp, ep, len, wa, wb, W, op, pos, nb);
            else
                cover_heap(K, sp, ep, len, wa, wb, W, op, pos, ht, hl, inside, nwords);
        }
        Py_END_ALLOW_THREADS
        res = (PyObject *)out;
        out = NULL;
    }
done:
    Py_XDECREF(out);
    PyMem_Free(pos);
    PyMem_Free(ht);
    PyMem_Free(hl);
    PyMem_Free(nb);
    PyMem_Free(inside);
    for (int64_t k = 0; ls && le && k < K; k++) {
        Py_XDECREF(ls[k]);
        Py_XDECREF(le[k]);
    }
    PyMem_Free(ls);
    PyMem_Free(le);
    PyMem_Free((void *)sp);
    PyMem_Free((void *)ep);
    PyMem_Free(len);
    Py_XDECREF(fs);
    Py_XDECREF(fe);
    release(a, 2);
    return res;
}

/* An event's bucket code: in [0, ncodes) by the checks of _bucket_kernel; the overflow bucket ncodes for a line
 * of no class. */
static inline int64_t bucket_code(const IdxArr *line, const IdxArr *meta, int64_t i, const int64_t *lcl, int64_t nl,
                                  const int64_t *mcl, int64_t nm, int64_t stride, int64_t unknown, int64_t ncodes)
{
    int64_t ln = idx_get(line, i), m = idx_get(meta, i);
    int64_t mcv = (0 <= m && m < nm) ? mcl[m] : unknown;
    return (0 <= ln && ln < nl) ? lcl[ln] * stride + mcv : ncodes;
}

/* _bucket_kernel(ev_line, ev_meta, line_cls, meta_cls, unknown, stride, ncodes) -> (order, counts).
 *
 * An event's code is line_cls[line] * stride + (meta_cls[meta], or `unknown` when meta is outside
 * meta_cls); an event whose line is outside line_cls goes to the overflow bucket ncodes. The classes
 * are checked once, before any event: every metadata class and `unknown` in [0, stride), every line
 * class in [0, ncodes / stride) (so that each code lies in [0, ncodes) and the arithmetic cannot
 * overflow); a class outside its range raises ValueError (nothing is written). `order`: the rows, int32 where
 * every row fits, else int64. */
static PyObject *py_bucket_kernel(PyObject *self, PyObject *args)
{
    PyObject *ol, *om, *olc, *omc;
    long long unknown, stride, ncodes;
    if (!PyArg_ParseTuple(args, "OOOOLLL", &ol, &om, &olc, &omc, &unknown, &stride, &ncodes))
        return NULL;
    if (ncodes < 0 || ncodes > (long long)NPY_MAX_INTP - 2) {
        PyErr_Format(PyExc_ValueError, "_bucket_kernel: ncodes %lld outside [0, %lld]", ncodes,
                     (long long)NPY_MAX_INTP - 2);
        return NULL;
    }
    if (stride < 1) {
        PyErr_Format(PyExc_ValueError, "_bucket_kernel: stride %lld < 1", stride);
        return NULL;
    }
    if (unknown < 0 || unknown >= stride) {
        PyErr_Format(PyExc_ValueError, "_bucket_kernel: unknown metadata class %lld outside [0, stride=%lld)",
                     unknown, stride);
        return NULL;
    }
    IdxArr line = {0}, meta = {0};
    PyArrayObject *lc = NULL, *mc = NULL, *counts = NULL, *pos = NULL;
    RowsOut order = {NULL, NULL, NULL};
    PyObject *res = NULL;
    if (idx_arr(ol, &line, "ev_line") < 0 || idx_arr(om, &meta, "ev_meta") < 0)
        goto done;
    if (!(lc = in_arr(olc, NPY_INT64, "line_cls")) || !(mc = in_arr(omc, NPY_INT64, "meta_cls")))
        goto done;
    {
        int64_t n = min64(line.n, meta.n), nl = LEN(lc), nm = LEN(mc);
        const int64_t *lcl = I64P(lc), *mcl = I64P(mc);
        const int64_t n_line_cls = ncodes / stride; /* line class c: codes [c * stride, (c + 1) * stride) */
        for (int64_t i = 0; i < nl; i++) {
            if (lcl[i] < 0 || lcl[i] >= n_line_cls) {
                PyErr_Format(PyExc_ValueError,
                             "_bucket_kernel: line class %lld (line_cls[%lld]) outside [0, %lld): its codes would "
                             "fall outside [0, ncodes=%lld)", (long long)lcl[i], (long long)i,
                             (long long)n_line_cls, ncodes);
                goto done;
            }
        }
        for (int64_t i = 0; i < nm; i++) {
            if (mcl[i] < 0 || mcl[i] >= stride) {
                PyErr_Format(PyExc_ValueError,
                             "_bucket_kernel: metadata class %lld (meta_cls[%lld]) outside [0, stride=%lld)",
                             (long long)mcl[i], (long long)i, stride);
                goto done;
            }
        }
        counts = (PyArrayObject *)PyArray_ZEROS(1, (npy_intp[]){(npy_intp)(ncodes + 2)}, NPY_INT64, 0);
        pos = new_i64(ncodes + 1);
        if (!counts || !pos || rows_new(&order, (npy_intp)n, n) < 0) /* a big host's rows, held for the whole run */
            goto done;
        int64_t *ct = I64P(counts), *ps = I64P(pos);
        Py_BEGIN_ALLOW_THREADS
        /* each event's code worked out in both passes (a column of every event's code would cost 8 bytes per
         * event) */
        for (int64_t i = 0; i < n; i++)
            ct[bucket_code(&line, &meta, i, lcl, nl, mcl, nm, stride, unknown, ncodes) + 1]++;
        for (int64_t c = 0; c < ncodes + 1; c++)
            ct[c + 1] += ct[c];
        memcpy(ps, ct, (size_t)(ncodes + 1) * sizeof(int64_t));
        for (int64_t i = 0; i < n; i++)
            rows_put(&order, ps[bucket_code(&line, &meta, i, lcl, nl, mcl, nm, stride, unknown, ncodes)]++, i);
        Py_END_ALLOW_THREADS
        res = Py_BuildValue("OO", order.arr, counts);
    }
done:
    Py_XDECREF(line.arr); Py_XDECREF(meta.arr); Py_XDECREF(lc); Py_XDECREF(mc);
    Py_XDECREF(order.arr); Py_XDECREF(counts); Py_XDECREF(pos);
    return res;
}

/* _merge_rows(start, dur, line, rows) -> (starts, ends, bounds, ok): per-thread union of event rows (event i:
 * [start[i], start[i] + dur[i])). */
static PyObject *py_merge_rows(PyObject *self, PyObject *args)
{
    PyObject *os, *oe, *ol, *orw;
    if (!PyArg_UnpackTuple(args, "_merge_rows", 4, 4, &os, &oe, &ol, &orw))
        return NULL;
    PyArrayObject *st = NULL, *en = NULL, *o_s = NULL, *o_e = NULL, *bnd = NULL;
    IdxArr line = {0}, rw = {0};
    PyObject *res = NULL;
    if (!(st = in_arr(os, NPY_INT64, "start")) || !(en = in_arr(oe, NPY_INT64, "dur")))
        goto done;
    if (idx_arr(ol, &line, "line") < 0 || idx_arr(orw, &rw, "rows") < 0)
        goto done;
    {
        int64_t n = (int64_t)rw.n, nev = min64(min64(LEN(st), LEN(en)), line.n);
        o_s = new_i64(n);
        o_e = new_i64(n);
        bnd = new_i64(n + 2);
        if (!o_s || !o_e || !bnd)
            goto done;
        const int64_t *s = I64P(st), *d = I64P(en);
        int64_t *ps = I64P(o_s), *pe = I64P(o_e), *bounds = I64P(bnd);
        int64_t nb = 0, k = 0, cur_line = -1, run_start = 0, prev = 0;
        int ok = 1;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t j = 0; j < n; j++) {
            int64_t i = idx_get(&rw, j);
            if (i < 0 || i >= nev) {
                ok = 0;
                continue;
            }
            int64_t x = s[i], y = end_of(s[i], d[i]), ln = idx_get(&line, i);
            if (ln != cur_line) {
                if (ln < cur_line)
                    ok = 0;
                bounds[nb] = k;
                nb++;
                cur_line = ln;
                run_start = k;
            } else if (x < prev) {
                ok = 0;
            }
            prev = x;
            if (y <= x)
                continue;
            if (k > run_start && x <= pe[k - 1]) {
                if (y > pe[k - 1])
                    pe[k - 1] = y;
            } else {
                ps[k] = x;
                pe[k] = y;
                k++;
            }
        }
        bounds[nb] = k;
        nb++;
        Py_END_ALLOW_THREADS
        if (shrink(o_s, k) < 0 || shrink(o_e, k) < 0 || shrink(bnd, nb) < 0)
            goto done;
        res = Py_BuildValue("OOOO", o_s, o_e, bnd, ok ? Py_True : Py_False);
    }
done:
    Py_XDECREF(st); Py_XDECREF(en); Py_XDECREF(rw.arr); Py_XDECREF(line.arr);
    Py_XDECREF(o_s); Py_XDECREF(o_e); Py_XDECREF(bnd);
    return res;
}

/* _merge_rows_all(start, dur, line, rows) -> (starts, ends, ok): the union over every thread of the intervals of
 * event rows, as _merge_rows would give it per thread and a union of those sets after it (empty intervals left
 * out, touching ones joined): the threads' rows merged by start in one pass (a heap of the threads' next rows),
 * with no per-thread sets in between. ok is False (and the result empty) unless the rows are in the columns,
 * grouped by thread in ascending order and ascending by start within each. */
static void heap_down(int64_t *heap, int64_t n, int64_t at, const int64_t *key)
{
    for (;;) {
        int64_t l = 2 * at + 1, r = l + 1, m = at;
        if (l < n && key[heap[l]] < key[heap[m]])
            m = l;
        if (r < n && key[heap[r]] < key[heap[m]])
            m = r;
        if (m == at)
            return;
        int64_t t = heap[at];
        heap[at] = heap[m];
        heap[m] = t;
        at = m;
    }
}

/* The union of the intervals of the event rows at the positions [pos[g], end[g]) of each range g, one thread's each,
 * ascending by start in each (empty intervals left out, touching ones joined), merged by start in one pass: the
 * range with the earliest next start runs on while its starts are no later than the other ranges' next (the smaller
 * of the heap's two children). Position p is row p (rw NULL) or rw[p]; with cd (a code per position) only the
 * positions whose code is `code`. Written into ps/pe; returns their count, or -1 for a row outside [0, nev) or a
 * range's starts out of order. pos is used up; key and heap are scratch, ng each. */
static int64_t merge_ranges(const int64_t *s, const int64_t *d, int64_t nev, const IdxArr *rw, const IdxArr *cd,
                            int64_t code, int64_t *pos, const int64_t *end, int64_t ng, int64_t *key, int64_t *heap,
                            int64_t *ps, int64_t *pe)
{
    int64_t k = 0, nh = 0;
    /* each range's next row (of its code): its start is the heap's key */
    for (int64_t g = 0; g < ng; g++) {
        int64_t p = pos[g];
        while (p < end[g] && cd && idx_get(cd, p) != code)
            p++;
        pos[g] = p;
        if (p < end[g]) {
            int64_t i = rw ? idx_get(rw, p) : p;
            if (i < 0 || i >= nev)
                return -1;
            key[g] = s[i];
            heap[nh++] = g;
        }
    }
    for (int64_t h = nh / 2 - 1; h >= 0; h--)
        heap_down(heap, nh, h, key);
    while (nh > 0) {
        int64_t g = heap[0], lim = INT64_MAX, p = pos[g], stop = end[g], prev = INT64_MIN, x = 0;
        if (nh > 1)
            lim = key[heap[1]];
        if (nh > 2 && key[heap[2]] < lim)
            lim = key[heap[2]];
        for (;;) {
            int64_t i = rw ? idx_get(rw, p) : p;
            if (i < 0 || i >= nev || s[i] < prev)
                return -1;
            x = s[i];
            prev = x;
            int64_t y = end_of(x, d[i]);
            if (y > x)
                k = join_or_append(ps, pe, k, x, y);
            do
                p++;
            while (p < stop && cd && idx_get(cd, p) != code);
            if (p >= stop)
                break;
            i = rw ? idx_get(rw, p) : p;
            if (i < 0 || i >= nev)
                return -1;
            if (s[i] > lim) {
                x = s[i];
                break;
            }
        }
        pos[g] = p;
        if (p < stop) {
            if (x < prev) /* the range's next start before its last: not ascending */
                return -1;
            key[g] = x;
        } else {
            heap[0] = heap[--nh];
        }
        heap_down(heap, nh, 0, key);
    }
    return k;
}

/* (starts, ends, ok) of a merge_ranges that wrote k intervals into o_s/o_e: cut to size, empty and ok False where it
 * refused the rows (k < 0); NULL with the error set where cutting failed. */
static PyObject *merged(PyArrayObject *o_s, PyArrayObject *o_e, int64_t k)
{
    int ok = k >= 0;
    if (shrink(o_s, ok ? k : 0) < 0 || shrink(o_e, ok ? k : 0) < 0)
        return NULL;
    return Py_BuildValue("OOO", o_s, o_e, ok ? Py_True : Py_False);
}

/* _union_row_ranges(start, dur, rows, lo, hi, codes, code) -> (starts, ends, ok): the union of the intervals of the
 * event rows rows[lo[g]:hi[g]] for each range g, every range one thread's rows ascending by start (empty intervals
 * left out, touching ones joined), merged by start in one pass (the range with the earliest next start runs on while
 * its starts are no later than the other ranges' next); with codes (one per entry of rows; None for all) only the
 * rows whose code is `code`. ok is False (and the result empty) for a row outside the columns or starts out of
 * order. rows None: the positions are the plane's rows themselves (whole lines). A RowSet's chunk: its threads' ranges
 * found by binary search, no check pass, no grouping. */
static PyObject *py_union_row_ranges(PyObject *self, PyObject *args)
{
    PyObject *os, *od, *orw, *olo, *ohi, *oc;
    long long code;
    if (!PyArg_ParseTuple(args, "OOOOOOL", &os, &od, &orw, &olo, &ohi, &oc, &code))
        return NULL;
    PyArrayObject *st = NULL, *du = NULL, *alo = NULL, *ahi = NULL, *o_s = NULL, *o_e = NULL;
    IdxArr rw = {0}, cd = {0};
    int64_t *grp = NULL;
    PyObject *res = NULL;
    if (!(st = in_arr(os, NPY_INT64, "start")) || !(du = in_arr(od, NPY_INT64, "dur")) ||
        !(alo = in_arr(olo, NPY_INT64, "lo")) || !(ahi = in_arr(ohi, NPY_INT64, "hi")))
        goto done;
    int ident = orw == Py_None; /* rows None: the positions are the plane's rows */
    if ((!ident && idx_arr(orw, &rw, "rows") < 0) || (oc != Py_None && idx_arr(oc, &cd, "codes") < 0))
        goto done;
    {
        int64_t ng = min64(LEN(alo), LEN(ahi)), n = 0, nr = ident ? min64(LEN(st), LEN(du)) : (int64_t)rw.n;
        const int64_t *glo = I64P(alo), *ghi = I64P(ahi);
        int coded = oc != Py_None;
        for (int64_t g = 0; g < ng; g++) {
            if (glo[g] < 0 || ghi[g] > nr || glo[g] > ghi[g] || (coded && ghi[g] > (int64_t)cd.n)) {
                PyErr_Format(PyExc_IndexError, "_union_row_ranges: range %lld [%lld, %lld) outside the %lld rows%s",
                             (long long)g, (long long)glo[g], (long long)ghi[g], (long long)nr,
                             coded ? " (or their codes)" : "");
                goto done;
            }
            n += ghi[g] - glo[g];
        }
        o_s = new_i64(n);
        o_e = new_i64(n);
        grp = PyMem_Malloc((size_t)(3 * ng + 1) * sizeof(int64_t));
        if (!o_s || !o_e || !grp) {
            if (!grp)
                PyErr_NoMemory();
            goto done;
        }
        int64_t *pos = grp, *key = grp + ng, *heap = grp + 2 * ng, k;
        memcpy(pos, glo, (size_t)ng * sizeof(int64_t));
        Py_BEGIN_ALLOW_THREADS
        k = merge_ranges(I64P(st), I64P(du), min64(LEN(st), LEN(du)), ident ? NULL : &rw, coded ? &cd : NULL, code,
                         pos, ghi, ng, key, heap, I64P(o_s), I64P(o_e));
        Py_END_ALLOW_THREADS
        res = merged(o_s, o_e, k);
    }
done:
    PyMem_Free(grp);
    Py_XDECREF(st); Py_XDECREF(du); Py_XDECREF(alo); Py_XDECREF(ahi); Py_XDECREF(rw.arr); Py_XDECREF(cd.arr);
    Py_XDECREF(o_s); Py_XDECREF(o_e);
    return res;
}

static PyObject *py_merge_rows_all(PyObject *self, PyObject *args)
{
    PyObject *os, *oe, *ol, *orw;
    if (!PyArg_UnpackTuple(args, "_merge_rows_all", 4, 4, &os, &oe, &ol, &orw))
        return NULL;
    PyArrayObject *st = NULL, *en = NULL, *o_s = NULL, *o_e = NULL;
    IdxArr line = {0}, rw = {0};
    int64_t *grp = NULL; /* per thread: its next position in rows, its end, its next start; then the heap */
    PyObject *res = NULL;
    if (!(st = in_arr(os, NPY_INT64, "start")) || !(en = in_arr(oe, NPY_INT64, "dur")))
        goto done;
    if (idx_arr(ol, &line, "line") < 0 || idx_arr(orw, &rw, "rows") < 0)
        goto done;
    {
        int64_t n = (int64_t)rw.n, nev = min64(min64(LEN(st), LEN(en)), line.n), ng = 0;
        const int64_t *s = I64P(st), *d = I64P(en);
        int ok = 1;
        for (int64_t j = 0; j < n && ok; j++) { /* check, and count the threads */
            int64_t i = idx_get(&rw, j);
            if (i < 0 || i >= nev) {
                ok = 0;
                break;
            }
            if (j == 0 || idx_get(&line, i) != idx_get(&line, idx_get(&rw, j - 1))) {
                if (j > 0 && idx_get(&line, i) < idx_get(&line, idx_get(&rw, j - 1)))
                    ok = 0;
                ng++;
            } else if (s[i] < s[idx_get(&rw, j - 1)]) {
                ok = 0;
            }
        }
        o_s = new_i64(ok ? n : 0);
        o_e = new_i64(ok ? n : 0);
        if (!o_s || !o_e)
            goto done;
        if (!ok) {
            res = Py_BuildValue("OOO", o_s, o_e, Py_False);
            goto done;
        }
        grp = PyMem_Malloc((size_t)(4 * ng + 1) * sizeof(int64_t));
        if (!grp) {
            PyErr_NoMemory();
            goto done;
        }
        int64_t *pos = grp, *stop = grp + ng, *key = grp + 2 * ng, *heap = grp + 3 * ng;
        int64_t k;
        Py_BEGIN_ALLOW_THREADS
        int64_t g = -1;
        for (int64_t j = 0; j < n; j++) {
            if (j == 0 || idx_get(&line, idx_get(&rw, j)) != idx_get(&line, idx_get(&rw, j - 1))) {
                if (g >= 0)
                    stop[g] = j;
                g++;
                pos[g] = j;
            }
        }
        if (g >= 0)
            stop[g] = n;
        k = merge_ranges(s, d, nev, &rw, NULL, 0, pos, stop, ng, key, heap, I64P(o_s), I64P(o_e));
        Py_END_ALLOW_THREADS
        res = merged(o_s, o_e, k); /* (the rows checked above: ok) */
    }
done:
    PyMem_Free(grp);
    Py_XDECREF(st); Py_XDECREF(en); Py_XDECREF(rw.arr); Py_XDECREF(line.arr);
    Py_XDECREF(o_s); Py_XDECREF(o_e);
    return res;
}

/* The last index i with a[i] <= t in the ascending a[0..n) (-1 if none), as searchsorted(a, t, "right") - 1;
 * tried first at the guess h and the index after it (times in a line mostly ascend: the answer rarely moves). */
static inline int64_t last_at_or_before(const int64_t *a, int64_t n, int64_t t, int64_t h)
{
    if (h >= 0 && h < n && a[h] <= t) {
        if (h + 1 == n || a[h + 1] > t)
            return h;
        if (h + 2 >= n || a[h + 2] > t)
            return h + 1;
    } else if (h == -1 && (n == 0 || a[0] > t)) {
        return -1;
    }
    return first_above(a, 0, n, t) - 1;
}

/* An optional uint8 array argument: NULL (and *arr NULL) for None. 0 on success. */
static int opt_u8(PyObject *obj, PyArrayObject **arr, const char *name)
{
    *arr = NULL;
    if (obj == Py_None)
        return 0;
    *arr = in_arr(obj, NPY_UINT8, name);
    return *arr ? 0 : -1;
}

/* starts_at(ev_start, ev_line, marks, n_lines) -> uint8[n_lines]: 1 for each line (in [0, n_lines)) with an event
 * that starts exactly at one of the ascending times ``marks``. */
static PyObject *py_starts_at(PyObject *self, PyObject *args)
{
    PyObject *os, *ol, *om;
    long long nl;
    if (!PyArg_ParseTuple(args, "OOOL", &os, &ol, &om, &nl))
        return NULL;
    if (nl < 0) {
        PyErr_SetString(PyExc_ValueError, "starts_at: n_lines < 0");
        return NULL;
    }
    IdxArr line = {0};
    PyArrayObject *st = NULL, *mk = NULL, *out = NULL;
    PyObject *res = NULL;
    if (!(st = in_arr(os, NPY_INT64, "ev_start")) || idx_arr(ol, &line, "ev_line") < 0
        || !(mk = in_arr(om, NPY_INT64, "marks")))
        goto done;
    {
        npy_intp dims = (npy_intp)nl;
        if (!(out = (PyArrayObject *)PyArray_ZEROS(1, &dims, NPY_UINT8, 0)))
            goto done;
        const int64_t *s = I64P(st), *m = I64P(mk);
        int64_t n = min64(LEN(st), line.n), nm = LEN(mk), h = -1;
        uint8_t *o = U8P(out);
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < n; i++) {
            h = last_at_or_before(m, nm, s[i], h);
            int64_t l = idx_get(&line, i);
            if (h >= 0 && m[h] == s[i] && l >= 0 && l < nl)
                o[l] = 1;
        }
        Py_END_ALLOW_THREADS
        res = (PyObject *)out;
        out = NULL;
    }
done:
    Py_XDECREF(st); Py_XDECREF(line.arr); Py_XDECREF(mk); Py_XDECREF(out);
    return res;
}

/* step_tally(ev_start, ev_dur, ev_meta, ev_line, a, b, ends, pres_lines, op_meta, op_lines, cnt, tim, aft, ops)
 *
 * Each event whose start lies in a step [a[i], b[i]) (a ascending; the last step starting at or before it) and
 * whose metadata m is in [0, M), M = len(aft), is added up, in event order:
 * - where its line is marked in pres_lines (uint8 per line; None: every line): cnt[m * n + i] += 1,
 *   tim[m * n + i] += duration, and aft[m] += duration where it starts at or after ends[i];
 * - where op_meta[m] and op_lines[its line] are set (uint8; None: every one): ops[i] += duration.
 * Durations as float64; cnt int64[M * n], tim float64[M * n], aft float64[M], ops float64[n], added to in place.
 * A line outside a mask's range is not marked. */
static PyObject *py_step_tally(PyObject *self, PyObject *args)
{
    PyObject *o[14];
    if (!PyArg_UnpackTuple(args, "step_tally", 14, 14, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                           &o[8], &o[9], &o[10], &o[11], &o[12], &o[13]))
        return NULL;
    IdxArr meta = {0}, line = {0};
    PyArrayObject *in[5] = {NULL}, *mask[3] = {NULL}, *out[4] = {NULL};
    PyObject *res = NULL;
    static const char *in_names[5] = {"ev_start", "ev_dur", "a", "b", "ends"};
    static const char *mask_names[3] = {"pres_lines", "op_meta", "op_lines"};
    static const char *out_names[4] = {"cnt", "tim", "aft", "ops"};
    for (int i = 0; i < 5; i++)
        if (!(in[i] = in_arr(o[i < 2 ? i : i + 2], NPY_INT64, in_names[i])))
            goto done;
    if (idx_arr(o[2], &meta, "ev_meta") < 0 || idx_arr(o[3], &line, "ev_line") < 0)
        goto done;
    for (int i = 0; i < 3; i++)
        if (opt_u8(o[7 + i], &mask[i], mask_names[i]) < 0)
            goto done;
    for (int i = 0; i < 4; i++)
        if (!(out[i] = out_arr(o[10 + i], i == 0 ? NPY_INT64 : NPY_FLOAT64, 1, out_names[i])))
            goto done;
    {
        int64_t n = LEN(in[2]), M = LEN(out[2]);
        if (LEN(in[3]) != n || LEN(in[4]) != n || LEN(out[3]) != n || LEN(out[0]) != M * n || LEN(out[1]) != M * n
            || (mask[1] && LEN(mask[1]) < M)) {
            PyErr_SetString(PyExc_ValueError, "step_tally: a, b, ends and ops need one entry per step, cnt and tim "
                                              "len(aft) * steps, op_meta one per metadata");
            goto done;
        }
        const int64_t *s = I64P(in[0]), *d = I64P(in[1]), *wa = I64P(in[2]), *wb = I64P(in[3]), *we = I64P(in[4]);
        const uint8_t *pl = mask[0] ? U8P(mask[0]) : NULL, *om = mask[1] ? U8P(mask[1]) : NULL;
        const uint8_t *ol = mask[2] ? U8P(mask[2]) : NULL;
        int64_t npl = mask[0] ? LEN(mask[0]) : 0, nol = mask[2] ? LEN(mask[2]) : 0;
        int64_t *cnt = I64P(out[0]);
        double *tim = (double *)PyArray_DATA(out[1]), *aft = (double *)PyArray_DATA(out[2]);
        double *ops = (double *)PyArray_DATA(out[3]);
        int64_t ne = min64(min64(LEN(in[0]), LEN(in[1])), min64(meta.n, line.n)), h = -1;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t e = 0; e < ne; e++) {
            int64_t t = s[e];
            h = last_at_or_before(wa, n, t, h);
            if (h < 0 || t >= wb[h])
                continue;
            int64_t m = idx_get(&meta, e), l = idx_get(&line, e);
            if (m < 0 || m >= M)
                continue;
            double dur = (double)d[e];
            if (!pl || (l >= 0 && l < npl && pl[l])) {
                cnt[m * n + h] += 1;
                tim[m * n + h] += dur;
                if (t >= we[h])
                    aft[m] += dur;
            }
            if ((!om || om[m]) && (!ol || (l >= 0 && l < nol && ol[l])))
                ops[h] += dur;
        }
        Py_END_ALLOW_THREADS
        res = Py_None;
        Py_INCREF(res);
    }
done:
    release(in, 5);
    release(mask, 3);
    release(out, 4);
    Py_XDECREF(meta.arr); Py_XDECREF(line.arr);
    return res;
}

/* rows_where(idx, mask) -> rows (int32 where every row of idx fits, else int64): the ascending rows e with idx[e]
 * in [0, len(mask)) and mask[idx[e]] set (np.flatnonzero(np.append(mask, False)[idx]) for idx >= -1, without a
 * mask of every row): two passes, a count, then the rows. */
static PyObject *py_rows_where(PyObject *self, PyObject *args)
{
    PyObject *oi, *om;
    if (!PyArg_ParseTuple(args, "OO", &oi, &om))
        return NULL;
    IdxArr idx = {0};
    PyArrayObject *mk = NULL, *out = NULL;
    PyObject *res = NULL;
    if (idx_arr(oi, &idx, "idx") < 0 || !(mk = in_arr(om, NPY_UINT8, "mask")))
        goto done;
    {
        const uint8_t *m = U8P(mk);
        int64_t nm = LEN(mk), n = idx.n, k = 0;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t e = 0; e < n; e++) {
            int64_t v = idx_get(&idx, e);
            k += (v >= 0 && v < nm && m[v]);
        }
        Py_END_ALLOW_THREADS
        RowsOut rows;
        if (rows_new(&rows, (npy_intp)k, n) < 0)
            goto done;
        out = rows.arr;
        int64_t j = 0;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t e = 0; e < n && j < k; e++) {
            int64_t v = idx_get(&idx, e);
            if (v >= 0 && v < nm && m[v])
                rows_put(&rows, j++, e);
        }
        Py_END_ALLOW_THREADS
        if (j != k) { /* the arrays changed between the passes: no unwritten rows handed back */
            PyErr_SetString(PyExc_RuntimeError, "rows_where: idx or mask changed during the call");
            goto done;
        }
        res = (PyObject *)out;
        out = NULL;
    }
done:
    Py_XDECREF(idx.arr); Py_XDECREF(mk); Py_XDECREF(out);
    return res;
}

/* row_sums(ev_dur, rows, codes, ev_meta, tot, cnt): for each row rows[j] its code, codes[j] (an array with one
 * per row), or with codes None its metadata + 1 where that is known and the duration positive (other rows left
 * out); tot[code] += duration as float64 and cnt[code] += 1, in row order (as np.bincount sums), for codes in
 * [0, len(tot)). Rows outside ev_dur (or ev_meta) are refused. */
static PyObject *py_row_sums(PyObject *self, PyObject *args)
{
    PyObject *od, *orw, *oc, *om, *ot, *on;
    if (!PyArg_ParseTuple(args, "OOOOOO", &od, &orw, &oc, &om, &ot, &on))
        return NULL;
    IdxArr rows = {0}, codes = {0}, meta = {0};
    PyArrayObject *dur = NULL, *tot = NULL, *cnt = NULL;
    PyObject *res = NULL;
    if (!(dur = in_arr(od, NPY_INT64, "ev_dur")) || idx_arr(orw, &rows, "rows") < 0
        || (oc != Py_None && idx_arr(oc, &codes, "codes") < 0) || idx_arr(om, &meta, "ev_meta") < 0
        || !(tot = out_arr(ot, NPY_FLOAT64, 1, "tot")) || !(cnt = out_arr(on, NPY_INT64, 1, "cnt")))
        goto done;
    {
        int64_t nr = rows.n, nd = min64(LEN(dur), meta.n), n = min64(LEN(tot), LEN(cnt));
        int has_codes = oc != Py_None, bad = 0;
        if (has_codes && codes.n < nr) {
            PyErr_SetString(PyExc_ValueError, "row_sums: fewer codes than rows");
            goto done;
        }
        const int64_t *d = I64P(dur);
        double *t = (double *)PyArray_DATA(tot);
        int64_t *c = I64P(cnt);
        Py_BEGIN_ALLOW_THREADS
        for (int64_t j = 0; j < nr; j++) {
            int64_t r = idx_get(&rows, j);
            if (r < 0 || r >= nd) {
                bad = 1;
                break;
            }
            int64_t k, x = d[r];
            if (has_codes) {
                k = idx_get(&codes, j);
            } else {
                int64_t m = idx_get(&meta, r);
                if (m < 0 || x <= 0)
                    continue;
                k = m + 1;
            }
            if (k >= 0 && k < n) {
                t[k] += (double)x;
                c[k]++;
            }
        }
        Py_END_ALLOW_THREADS
        if (bad) {
            PyErr_SetString(PyExc_IndexError, "row_sums: a row outside the event columns");
            goto done;
        }
        res = Py_None;
        Py_INCREF(res);
    }
done:
    Py_XDECREF(dur); Py_XDECREF(rows.arr); Py_XDECREF(codes.arr); Py_XDECREF(meta.arr);
    Py_XDECREF(tot); Py_XDECREF(cnt);
    return res;
}

/* copy_kinds(st_event, st_stat, st_kind, st_value, str_off, str_len, pool, rows, sid, flags) -> bool: what the
 * event-level string value of stat `sid` (memcpy_details) says about each copy row (ascending): flags[j] bit 0: it
 * names the copy's kinds ("kind_src:" or "kind_dst:"), bit 1: host-to-device by them ("kind_dst:device" and not
 * "kind_src:device"), bit 2: from pageable memory ("kind_src:pageable"); 0 where the row has no such value. The
 * stats must be ordered by event (binary search). False, with flags unspecified, where a row has the stat twice or
 * as anything but an inline string, or a string lies outside the pool: the caller then reads the values as any stat
 * (one answer for every plane, the same). Bytes are searched: the needles are ASCII, which UTF-8 decoding (with
 * replacement) never creates nor swallows, so a byte match is a match in the decoded text. */
static int has_bytes(const uint8_t *s, int64_t n, const char *needle)
{
    size_t k = strlen(needle);
    return n >= (int64_t)k && memmem(s, (size_t)n, needle, k) != NULL;
}

static PyObject *py_copy_kinds(PyObject *self, PyObject *args)
{
    PyObject *oe, *os, *ok, *ov, *oo, *ol, *op, *orw, *of;
    long long sid;
    if (!PyArg_ParseTuple(args, "OOOOOOOOLO", &oe, &os, &ok, &ov, &oo, &ol, &op, &orw, &sid, &of))
        return NULL;
    IdxArr ev = {0}, st = {0}, rows = {0}, val = {0}; /* st_value: int64, or int32 where the reader narrowed it */
    PyArrayObject *kind = NULL, *off = NULL, *len = NULL, *pool = NULL, *flags = NULL;
    PyObject *res = NULL;
    if (idx_arr(oe, &ev, "st_event") < 0 || idx_arr(os, &st, "st_stat") < 0
        || !(kind = in_arr(ok, NPY_UINT8, "st_kind")) || idx_arr(ov, &val, "st_value") < 0
        || !(off = in_arr(oo, NPY_INT64, "str_off"))
        || !(len = in_arr(ol, NPY_INT64, "str_len")) || !(pool = in_arr(op, NPY_UINT8, "pool"))
        || idx_arr(orw, &rows, "rows") < 0 || !(flags = out_arr(of, NPY_UINT8, 1, "flags")))
        goto done;
    {
        int64_t n_st = min64(min64(ev.n, st.n), min64(LEN(kind), (int64_t)val.n)), n_str = min64(LEN(off), LEN(len));
        int64_t n_pool = LEN(pool), nr = min64(rows.n, LEN(flags));
        const uint8_t *k = U8P(kind), *text = U8P(pool);
        const int64_t *so = I64P(off), *sl = I64P(len);
        uint8_t *fl = U8P(flags);
        int fine = 1;
        PyThreadState *ts = nr > 4096 ? PyEval_SaveThread() : NULL; /* a few rows: not worth a GIL handoff */
        for (int64_t j = 0; j < nr; j++) {
            int64_t r = idx_get(&rows, j), lo = 0, hi = n_st, found = -1, seen = 0;
            while (lo < hi) { /* the first stat of event r */
                int64_t mid = lo + (hi - lo) / 2;
                if (idx_get(&ev, mid) < r)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            for (int64_t i = lo; i < n_st && idx_get(&ev, i) == r; i++)
                if (idx_get(&st, i) == sid) {
                    found = i;
                    seen++;
                }
            fl[j] = 0;
            if (seen == 0)
                continue;
            if (seen > 1 || (k[found] != KIND_STR && k[found] != KIND_BYTES)) {
                fine = 0;
                break;
            }
            int64_t x = idx_get(&val, found);
            if (x < 0 || x >= n_str || sl[x] < 0 || (sl[x] > 0 && (so[x] < 0 || so[x] > n_pool - sl[x]))) {
                fine = 0;
                break;
            }
            const uint8_t *s = text + (sl[x] > 0 ? so[x] : 0);
            int64_t m = sl[x];
            int known = has_bytes(s, m, "kind_dst:") || has_bytes(s, m, "kind_src:");
            int h2d = has_bytes(s, m, "kind_dst:device") && !has_bytes(s, m, "kind_src:device");
            fl[j] = (uint8_t)(known | (h2d << 1) | (has_bytes(s, m, "kind_src:pageable") << 2));
        }
        if (ts != NULL)
            PyEval_RestoreThread(ts);
        res = PyBool_FromLong(fine);
    }
done:
    Py_XDECREF(ev.arr); Py_XDECREF(st.arr); Py_XDECREF(rows.arr); Py_XDECREF(kind); Py_XDECREF(val.arr);
    Py_XDECREF(off); Py_XDECREF(len); Py_XDECREF(pool); Py_XDECREF(flags);
    return res;
}

/* meta_totals(ev_meta, ev_dur, nm) -> (counts int64[nm], durations float64[nm]): per event metadata in
 * [0, nm), its number of events and the sum of max(duration, 0) as float64 (summed in event order, as
 * np.bincount does); events with metadata outside [0, nm) are left out. */
static PyObject *py_meta_totals(PyObject *self, PyObject *args)
{
    PyObject *om, *od;
    long long nm;
    if (!PyArg_ParseTuple(args, "OOL", &om, &od, &nm))
        return NULL;
    if (nm < 0) {
        PyErr_SetString(PyExc_ValueError, "meta_totals: nm < 0");
        return NULL;
    }
    IdxArr meta = {0};
    PyArrayObject *dur = NULL, *cnt = NULL, *tot = NULL;
    PyObject *res = NULL;
    if (idx_arr(om, &meta, "ev_meta") < 0 || !(dur = in_arr(od, NPY_INT64, "ev_dur")))
        goto done;
    {
        npy_intp dims = (npy_intp)nm;
        cnt = (PyArrayObject *)PyArray_ZEROS(1, &dims, NPY_INT64, 0);
        tot = (PyArrayObject *)PyArray_ZEROS(1, &dims, NPY_FLOAT64, 0);
        if (!cnt || !tot)
            goto done;
        int64_t n = min64(meta.n, LEN(dur));
        int64_t *c = I64P(cnt);
        double *t = (double *)PyArray_DATA(tot);
        const int64_t *d = I64P(dur);
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < n; i++) {
            int64_t m = idx_get(&meta, i);
            if (m >= 0 && m < nm) {
                c[m]++;
                t[m] += (double)(d[i] > 0 ? d[i] : 0);
            }
        }
        Py_END_ALLOW_THREADS
        res = Py_BuildValue("OO", cnt, tot);
    }
done:
    Py_XDECREF(meta.arr); Py_XDECREF(dur); Py_XDECREF(cnt); Py_XDECREF(tot);
    return res;
}

/* time_checks(start, dur) -> (negative durations, lost events): what sanity.py would fix, counted in
 * one pass; lost = a start of START_OVERFLOW, or an end (negative durations as 0) past int64. */
static PyObject *py_time_checks(PyObject *self, PyObject *args)
{
    PyArrayObject *a[2] = {NULL};
    if (parse_i64(args, 2, a, "time_checks") < 0)
        return NULL;
    const int64_t *s = I64P(a[0]), *d = I64P(a[1]);
    int64_t n = min64(LEN(a[0]), LEN(a[1])), neg = 0, lost = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n; i++) {
        int64_t dd = d[i];
        if (dd < 0) {
            neg++;
            dd = 0;
        }
        if (s[i] == START_OVERFLOW || dd > I64_MAX - (s[i] > 0 ? s[i] : 0))
            lost++;
    }
    Py_END_ALLOW_THREADS
    release(a, 2);
    return Py_BuildValue("LL", (long long)neg, (long long)lost);
}

/* window_checks(start, dur, lo, hi, longest, limit, floor) -> (far or too long, late): events starting
 * outside [lo, hi] or lasting more than `longest`, and events with dur > limit - max(start, floor) (in
 * wrapping int64 arithmetic, as numpy computes it). */
static PyObject *py_window_checks(PyObject *self, PyObject *args)
{
    PyObject *os, *od;
    long long lo, hi, longest, limit, floor_;
    if (!PyArg_ParseTuple(args, "OOLLLLL", &os, &od, &lo, &hi, &longest, &limit, &floor_))
        return NULL;
    PyArrayObject *st = in_arr(os, NPY_INT64, "start");
    PyArrayObject *du = st ? in_arr(od, NPY_INT64, "dur") : NULL;
    if (!du) {
        Py_XDECREF(st);
        return NULL;
    }
    const int64_t *s = I64P(st), *d = I64P(du);
    int64_t n = min64(LEN(st), LEN(du)), far = 0, late = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n; i++) {
        int64_t x = s[i];
        if (x < lo || x > hi || d[i] > longest)
            far++;
        int64_t m = x > floor_ ? x : floor_;
        if (d[i] > (int64_t)((uint64_t)limit - (uint64_t)m))
            late++;
    }
    Py_END_ALLOW_THREADS
    Py_DECREF(st);
    Py_DECREF(du);
    return Py_BuildValue("LL", (long long)far, (long long)late);
}

/* ------------------------------------------------------------------------------------------ */
/* Threads knob and module                                                                    */
/* ------------------------------------------------------------------------------------------ */

static PyObject *py_set_num_threads(PyObject *self, PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    g_threads = n > 0 ? (int)(n > 256 ? 256 : n) : 0;
    Py_RETURN_NONE;
}

static PyObject *py_get_num_threads(PyObject *self, PyObject *noargs)
{
    return PyLong_FromLong(threads_now());
}

static PyMethodDef methods[] = {
    {"scan_fields", py_scan_fields, METH_VARARGS, "List the top-level fields of a message (see wire.py)."},
    {"count_lines", py_count_lines, METH_VARARGS, "Pass 1 over every line, lines on threads."},
    {"count_lines_serial", py_count_lines_serial, METH_VARARGS, "Pass 1 over every line, in this thread."},
    {"fill_chunks", py_fill_chunks, METH_VARARGS, "Pass 2 over every chunk, chunks on threads."},
    {"fill_chunks_serial", py_fill_chunks_serial, METH_VARARGS, "Pass 2 over every chunk, in this thread."},
    {"decode_serial", py_decode_serial, METH_VARARGS, "A small plane's lines in one pass, in this thread."},
    {"gather_strings", py_gather_strings, METH_VARARGS, "Copy string values into one pool; rewrite offsets."},
    {"fnv1a", py_fnv1a, METH_VARARGS, "64-bit FNV-1a hash of each string of a pool."},
    {"str_groups", py_str_groups, METH_VARARGS, "Strings of a pool grouped by their bytes (hashed, then compared)."},
    {"merge_sorted", py_merge_sorted, METH_VARARGS, "Union of start-sorted intervals."},
    {"union2_linear", py_union2_linear, METH_VARARGS, "Union of two disjoint sorted interval sets."},
    {"union_small", py_union_small, METH_VARARGS, "Union of a big and a small disjoint sorted interval set."},
    {"prefix_lengths", py_prefix_lengths, METH_VARARGS, "Running sums of interval lengths."},
    {"cover_sorted", py_cover_sorted, METH_VARARGS, "Covered length up to ascending query points."},
    {"intersect", py_intersect, METH_VARARGS, "Pieces of one disjoint sorted set inside another."},
    {"union_length", py_union_length, METH_O, "Length of the union of disjoint sorted sets, not built."},
    {"union_holes", py_union_holes, METH_VARARGS, "Holes of the union of disjoint sorted sets inside windows."},
    {"union_rows", py_union_rows, METH_VARARGS, "Union of the intervals (start, duration) of event rows (few rows)."},
    {"priority_cover", py_priority_cover, METH_VARARGS, "Per layer and window: the time it covers first."},
    {"bucket_kernel", py_bucket_kernel, METH_VARARGS, "Event rows bucketed by class code."},
    {"merge_rows", py_merge_rows, METH_VARARGS, "Per-thread union of the intervals of event rows."},
    {"merge_rows_all", py_merge_rows_all, METH_VARARGS, "Union over every thread of the intervals of event rows."},
    {"union_row_ranges", py_union_row_ranges, METH_VARARGS, "Union of ranges of event rows, one thread's each."},
    {"row_sums", py_row_sums, METH_VARARGS, "Time and count of event rows per code."},
    {"copy_kinds", py_copy_kinds, METH_VARARGS, "What each copy's memcpy_details says of its kinds."},
    {"rows_where", py_rows_where, METH_VARARGS, "Rows whose index is set in a mask."},
    {"starts_at", py_starts_at, METH_VARARGS, "Lines with an event starting at one of the given times."},
    {"step_tally", py_step_tally, METH_VARARGS, "Per step: events by metadata, their time, op time."},
    {"meta_totals", py_meta_totals, METH_VARARGS, "Events and total duration per event metadata."},
    {"time_checks", py_time_checks, METH_VARARGS, "Count negative durations and int64-overflowing events."},
    {"window_checks", py_window_checks, METH_VARARGS, "Count events outside or past the capture window."},
    {"set_num_threads", py_set_num_threads, METH_O, "Threads for the parallel decode (<= 0: all CPUs)."},
    {"get_num_threads", py_get_num_threads, METH_NOARGS, "Threads the parallel decode uses."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_native",
                                       "tfadvisor's compiled kernels (wire decoding, hashing, intervals).", -1,
                                       methods};

/* The constants of the top of this file, exported under their C names (see "Constants"). */
#define CONST(name) {#name, (long long)(name)}
static const struct {
    const char *name;
    long long value;
} constants[] = {
    CONST(KIND_NONE), CONST(KIND_DOUBLE), CONST(KIND_UINT64), CONST(KIND_INT64), CONST(KIND_STR), CONST(KIND_BYTES),
    CONST(KIND_REF), CONST(KIND_GZIP),
    CONST(OK), CONST(ERR_TRUNCATED), CONST(ERR_WIRE_TYPE), CONST(ERR_VARINT), CONST(ERR_FIELD),
    CONST(L_ID), CONST(L_DISPLAY_ID), CONST(L_TS_NS), CONST(L_DUR_PS), CONST(L_NAME_OFF), CONST(L_NAME_LEN),
    CONST(L_DNAME_OFF), CONST(L_DNAME_LEN), CONST(L_FIRST_EVENT), CONST(L_N_EVENTS), CONST(N_LINE_COLS),
    CONST(START_OVERFLOW), CONST(MAX_TS_NS),
};
#undef CONST

static int add_constants(PyObject *m)
{
    for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++) {
        /* PyLong_FromLongLong, not PyModule_AddIntConstant: a C long is 32 bits on Windows */
        PyObject *v = PyLong_FromLongLong(constants[i].value);
        if (v == NULL)
            return -1;
        if (PyModule_AddObject(m, constants[i].name, v) < 0) { /* steals v on success only */
            Py_DECREF(v);
            return -1;
        }
    }
    return 0;
}

PyMODINIT_FUNC PyInit__native(void)
{
    import_array();
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    if (add_constants(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
