/* hostlib's compiled kernels: the per-value passes of a float call's data path.
 *
 * Section 10 of docs/protocol.md defines them; hostlib/numerics.py states each rule and
 * calls these (the module hostlib._kernels). Each is one pass over a batch's rows, where
 * numpy took three to five passes through float64 temporaries (docs/hostlib.md, "How the
 * data path works"):
 *
 *   quantize:   out = (uint32)(int32)rint(x * scale[row]) + bias, in the wire's byte order
 *               or the host's, x float32 or float64 (the product in float64, rounded
 *               half to even: the current rounding mode, never changed by hostlib);
 *   unbias:     out = (int32)(in - bias) modulo 2^32, `in` in either byte order: the N
 *               ranks' packed biases taken off a RESULT's lane sums;
 *   dequantize: out = (dtype)((double)sum / divisor[row]), sum int32 in either byte
 *               order, out float32 or float64: the float64 quotient, rounded to the
 *               tensor's dtype.
 *
 * Rows are `rows` runs of `k` contiguous values, `*_row` bytes apart (a view of a ring's
 * frames, of evenly spaced tensor blocks). Built with -ffp-contract=off and without
 * -ffast-math: each result is the one IEEE operation stated above, bit for bit what
 * tests/hostlib/test_kernels.py computes in Python's own numbers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define ROW(base, stride, r) ((char *)(base) + (ptrdiff_t)(r) * (stride))

/* Each kernel in versions for wider vector units, picked when the library loads by what
 * the CPU has (GCC's target_clones): a wheel built on one x86-64 machine runs on any
 * other, at the speed of the one it runs on (rint over a vector needs SSE4.1). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define CLONES __attribute__((target_clones("avx2", "sse4.1", "default")))
#else
#define CLONES
#endif

static inline uint32_t swapped(uint32_t v) { return __builtin_bswap32(v); }
static inline uint32_t as_is(uint32_t v) { return v; }

#define QUANTIZE(NAME, T, ORDER)                                                            \
    CLONES static void NAME(const char *x, ptrdiff_t x_row, const double *scale, int64_t rows,     \
                     int64_t k, uint32_t bias, char *out, ptrdiff_t out_row) {              \
        for (int64_t r = 0; r < rows; r++) {                                                \
            const T *src = (const T *)ROW(x, x_row, r);                                     \
            uint32_t *dst = (uint32_t *)ROW(out, out_row, r);                               \
            const double s = scale[r];                                                      \
            for (int64_t i = 0; i < k; i++)                                                 \
                dst[i] = ORDER((uint32_t)(int32_t)rint((double)src[i] * s) + bias);         \
        }                                                                                   \
    }

QUANTIZE(quantize_f32_swap, float, swapped)
QUANTIZE(quantize_f32, float, as_is)
QUANTIZE(quantize_f64_swap, double, swapped)
QUANTIZE(quantize_f64, double, as_is)

/* x: float32 (itemsize 4) or float64 (8) rows; out: 4-byte lanes, byte-swapped when swap. */
static int p4r_quantize(const char *x, int itemsize, ptrdiff_t x_row, const double *scale,
                 int64_t rows, int64_t k, uint32_t bias, char *out, ptrdiff_t out_row,
                 int swap) {
    if (itemsize == 4)
        (swap ? quantize_f32_swap : quantize_f32)(x, x_row, scale, rows, k, bias, out, out_row);
    else if (itemsize == 8)
        (swap ? quantize_f64_swap : quantize_f64)(x, x_row, scale, rows, k, bias, out, out_row);
    else
        return -1;
    return 0;
}

#define UNBIAS(NAME, ORDER)                                                                 \
    CLONES static void NAME(const char *in, ptrdiff_t in_row, int64_t rows, int64_t k,             \
                     uint32_t bias, char *out, ptrdiff_t out_row) {                         \
        for (int64_t r = 0; r < rows; r++) {                                                \
            const uint32_t *src = (const uint32_t *)ROW(in, in_row, r);                     \
            uint32_t *dst = (uint32_t *)ROW(out, out_row, r);                               \
            for (int64_t i = 0; i < k; i++)                                                 \
                dst[i] = ORDER(src[i]) - bias;                                              \
        }                                                                                   \
    }

UNBIAS(unbias_swap, swapped)
UNBIAS(unbias_native, as_is)

static void p4r_unbias(const char *in, ptrdiff_t in_row, int64_t rows, int64_t k, uint32_t bias,
                char *out, ptrdiff_t out_row, int swap) {
    (swap ? unbias_swap : unbias_native)(in, in_row, rows, k, bias, out, out_row);
}

#define DEQUANTIZE(NAME, T, ORDER)                                                          \
    CLONES static void NAME(const char *sums, ptrdiff_t s_row, const double *divisor,              \
                     int64_t rows, int64_t k, char *out, ptrdiff_t out_row) {               \
        for (int64_t r = 0; r < rows; r++) {                                                \
            const uint32_t *src = (const uint32_t *)ROW(sums, s_row, r);                    \
            T *dst = (T *)ROW(out, out_row, r);                                             \
            const double d = divisor[r];                                                    \
            for (int64_t i = 0; i < k; i++)                                                 \
                dst[i] = (T)((double)(int32_t)ORDER(src[i]) / d);                           \
        }                                                                                   \
    }

DEQUANTIZE(dequantize_f32_swap, float, swapped)
DEQUANTIZE(dequantize_f32, float, as_is)
DEQUANTIZE(dequantize_f64_swap, double, swapped)
DEQUANTIZE(dequantize_f64, double, as_is)

/* sums: 4-byte lanes, byte-swapped when swap; out: float32 (itemsize 4) or float64 (8). */
static int p4r_dequantize(const char *sums, ptrdiff_t s_row, const double *divisor, int64_t rows,
                   int64_t k, char *out, int itemsize, ptrdiff_t out_row, int swap) {
    if (itemsize == 4)
        (swap ? dequantize_f32_swap : dequantize_f32)(sums, s_row, divisor, rows, k, out, out_row);
    else if (itemsize == 8)
        (swap ? dequantize_f64_swap : dequantize_f64)(sums, s_row, divisor, rows, k, out, out_row);
    else
        return -1;
    return 0;
}

/* -- Python: numpy arrays (any object with the buffer protocol) in, checked ------------ */

/* A buffer's element: its kind ('f' float, 'i' signed, 'u' unsigned), size, and whether
 * it is in the other byte order than the host's (a '>' or '<' format that is not the
 * host's; '=', '@', '!' and none as the struct module reads them). */
typedef struct {
    char kind;
    int size;
    int swap;
} element;

static int element_of(const Py_buffer *b, element *e) {
    const char *f = b->format ? b->format : "B";
    int little = 1;
    little = *(const char *)&little;
    e->swap = 0;
    if (*f == '<' || *f == '>' || *f == '!' || *f == '=' || *f == '@') {
        if (*f == '<')
            e->swap = !little;
        else if (*f == '>' || *f == '!')
            e->swap = little;
        f++;
    }
    if (f[0] == '\0' || f[1] != '\0')
        return -1;
    switch (*f) {
    case 'f': e->kind = 'f'; break;
    case 'd': e->kind = 'f'; break;
    case 'i': case 'l': case 'h': case 'b': case 'q': e->kind = 'i'; break;
    case 'I': case 'L': case 'H': case 'B': case 'Q': e->kind = 'u'; break;
    default: return -1;
    }
    e->size = (int)b->itemsize;
    return 0;
}

/* `b` as (rows, k) of contiguous rows: 2-D, the shape of `like` when given. */
static int rows_of(const char *what, Py_buffer *b, const Py_buffer *like, element *e) {
    if (element_of(b, e) < 0) {
        PyErr_Format(PyExc_ValueError, "%s: unsupported element format '%s'", what,
                     b->format ? b->format : "B");
        return -1;
    }
    if (b->ndim != 2) {
        PyErr_Format(PyExc_ValueError, "%s: %d dimensions, expected 2 (rows, values)", what,
                     b->ndim);
        return -1;
    }
    if (like && (b->shape[0] != like->shape[0] || b->shape[1] != like->shape[1])) {
        PyErr_Format(PyExc_ValueError, "%s: shape (%zd, %zd), expected (%zd, %zd)", what,
                     b->shape[0], b->shape[1], like->shape[0], like->shape[1]);
        return -1;
    }
    if (b->shape[1] > 1 && b->strides[1] != b->itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: a row's values are %zd bytes apart, not contiguous",
                     what, b->strides[1]);
        return -1;
    }
    return 0;
}

/* `b` as `rows` contiguous float64 (one number per row). */
static int per_row(const char *what, Py_buffer *b, Py_ssize_t rows) {
    element e;
    if (element_of(b, &e) < 0 || e.kind != 'f' || e.size != 8 || e.swap || b->ndim != 1 ||
        b->shape[0] != rows || (rows > 1 && b->strides[0] != 8)) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd contiguous native float64", what, rows);
        return -1;
    }
    return 0;
}

/* Kernels over at least this many values run with the GIL released (other threads of the
 * process -- a torch backend's, a test's switch -- go on meanwhile); for fewer, releasing
 * and taking it back again costs more than it frees. */
#define UNLOCKED_VALUES 16384
#define RUN(rows, k, call)                                                                  \
    do {                                                                                    \
        if ((rows) * (k) >= UNLOCKED_VALUES) {                                              \
            Py_BEGIN_ALLOW_THREADS call; Py_END_ALLOW_THREADS                               \
        } else {                                                                            \
            call;                                                                           \
        }                                                                                   \
    } while (0)

#define GET(obj, view, flags)                                                               \
    (PyObject_GetBuffer((obj), (view), (flags)) < 0 ? -1 : 0)
#define READ (PyBUF_RECORDS_RO)
#define WRITE (PyBUF_RECORDS)

static PyObject *py_quantize(PyObject *self, PyObject *args) {
    PyObject *xo, *so, *oo;
    unsigned long bias;
    Py_buffer x = {0}, s = {0}, o = {0};
    element ex, eo;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOkO:quantize", &xo, &so, &bias, &oo))
        return NULL;
    if (GET(xo, &x, READ) < 0)
        return NULL;
    if (GET(so, &s, READ) < 0)
        goto fail;
    if (GET(oo, &o, WRITE) < 0)
        goto fail;
    if (rows_of("quantize: values", &x, NULL, &ex) < 0 || rows_of("quantize: out", &o, &x, &eo) < 0 ||
        per_row("quantize: scale", &s, x.shape[0]) < 0)
        goto fail;
    if (ex.kind != 'f' || ex.swap || eo.kind == 'f' || eo.size != 4) {
        PyErr_SetString(PyExc_ValueError,
                        "quantize: expected native float32/float64 values into 32-bit integers");
        goto fail;
    }
    RUN(x.shape[0], x.shape[1],
        p4r_quantize(x.buf, ex.size, x.strides[0], s.buf, x.shape[0], x.shape[1],
                     (uint32_t)bias, o.buf, o.strides[0], eo.swap));
    PyBuffer_Release(&x);
    PyBuffer_Release(&s);
    PyBuffer_Release(&o);
    Py_RETURN_NONE;
fail:
    if (x.obj) PyBuffer_Release(&x);
    if (s.obj) PyBuffer_Release(&s);
    if (o.obj) PyBuffer_Release(&o);
    return NULL;
}

static PyObject *py_unbias(PyObject *self, PyObject *args) {
    PyObject *io, *oo;
    unsigned long bias;
    Py_buffer in = {0}, o = {0};
    element ei, eo;
    (void)self;
    if (!PyArg_ParseTuple(args, "OkO:unbias", &io, &bias, &oo))
        return NULL;
    if (GET(io, &in, READ) < 0)
        return NULL;
    if (GET(oo, &o, WRITE) < 0)
        goto fail;
    if (rows_of("unbias: sums", &in, NULL, &ei) < 0 || rows_of("unbias: out", &o, &in, &eo) < 0)
        goto fail;
    if (ei.kind == 'f' || ei.size != 4 || eo.kind == 'f' || eo.size != 4 || eo.swap) {
        PyErr_SetString(PyExc_ValueError,
                        "unbias: expected 32-bit integers into native 32-bit integers");
        goto fail;
    }
    RUN(in.shape[0], in.shape[1],
        p4r_unbias(in.buf, in.strides[0], in.shape[0], in.shape[1], (uint32_t)bias, o.buf,
                   o.strides[0], ei.swap));
    PyBuffer_Release(&in);
    PyBuffer_Release(&o);
    Py_RETURN_NONE;
fail:
    if (in.obj) PyBuffer_Release(&in);
    if (o.obj) PyBuffer_Release(&o);
    return NULL;
}

static PyObject *py_dequantize(PyObject *self, PyObject *args) {
    PyObject *io, *dobj, *oo;
    Py_buffer in = {0}, d = {0}, o = {0};
    element ei, eo;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO:dequantize", &io, &dobj, &oo))
        return NULL;
    if (GET(io, &in, READ) < 0)
        return NULL;
    if (GET(dobj, &d, READ) < 0)
        goto fail;
    if (GET(oo, &o, WRITE) < 0)
        goto fail;
    if (rows_of("dequantize: sums", &in, NULL, &ei) < 0 ||
        rows_of("dequantize: out", &o, &in, &eo) < 0 ||
        per_row("dequantize: divisor", &d, in.shape[0]) < 0)
        goto fail;
    if (ei.kind != 'i' || ei.size != 4 || eo.kind != 'f' || eo.swap) {
        PyErr_SetString(PyExc_ValueError,
                        "dequantize: expected int32 sums into native float32/float64");
        goto fail;
    }
    RUN(in.shape[0], in.shape[1],
        p4r_dequantize(in.buf, in.strides[0], d.buf, in.shape[0], in.shape[1], o.buf, eo.size,
                       o.strides[0], ei.swap));
    PyBuffer_Release(&in);
    PyBuffer_Release(&d);
    PyBuffer_Release(&o);
    Py_RETURN_NONE;
fail:
    if (in.obj) PyBuffer_Release(&in);
    if (d.obj) PyBuffer_Release(&d);
    if (o.obj) PyBuffer_Release(&o);
    return NULL;
}

static PyMethodDef methods[] = {
    {"quantize", py_quantize, METH_VARARGS,
     "quantize(values, scale, bias, out): out = (uint32)(int32)rint(values * scale[row]) + bias"},
    {"unbias", py_unbias, METH_VARARGS, "unbias(sums, bias, out): out = sums - bias (mod 2^32)"},
    {"dequantize", py_dequantize, METH_VARARGS,
     "dequantize(sums, divisor, out): out = (double)sums / divisor[row], rounded to out's dtype"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "hostlib._kernels",
    "hostlib's compiled kernels: the per-value passes of numerics (hostlib/_kernels.c).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
