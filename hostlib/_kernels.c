/* hostlib's compiled kernels: the per-value passes of a float call's data path.
 *
 * Section 10 of docs/protocol.md defines them; hostlib/numerics.py states each rule and
 * calls these (the module hostlib._kernels). Each is one pass over a batch's rows, where
 * numpy would make three to five through float64 temporaries (docs/hostlib.md, "How the
 * data path works"):
 *
 *   quantize:   out = (uint32)(int32)rint(x * scale[row]) + bias, in the wire's byte order
 *               or the host's, x float32 or float64 (the product in float64, rounded
 *               half to even: the current rounding mode, never changed by hostlib);
 *   unbias:     out = (int32)(in - bias) modulo 2^32, `in` in either byte order: the N
 *               ranks' packed biases taken off a RESULT's lane sums;
 *   dequantize: out = (dtype)((double)sum / divisor[row]), sum = (int32)(in - bias)
 *               modulo 2^32, `in` in either byte order (bias 0, or a packed RESULT's
 *               lane sums with the N ranks' biases still in: unbias in the same pass),
 *               out float32 or float64: the float64 quotient, rounded to the tensor's
 *               dtype;
 *   max_abs:    out[row] = max |x| over the row, x float32 or float64: the largest of the
 *               values' bits with the sign bit cleared, as unsigned integers. IEEE
 *               floats of one sign order as their bits do, and every NaN's bits lie
 *               above Inf's: so a NaN in a row gives a NaN (its sign cleared), an Inf
 *               with no NaN gives Inf, -0 gives +0 -- np.abs(row).max(), in one pass
 *               of integer maxima, whatever the row's width.
 *   numbers:    out[j][r] = (BE(frame r's bytes at columns[..] of number j) >> shift[j])
 *               & mask[j]: the big-endian numbers a received frame's headers state, each
 *               of up to 8 bytes (hostlib/framing.py's table says which bytes, which
 *               shift and mask), for a whole batch in one call.
 *   header:     the other way for a batch to send: each row's header fields packed
 *               into its 32-bit words (field f at word[f], shifted left by shift[f]) and
 *               stored big-endian into the row's frame at `offset`, every field first
 *               checked against its limit (none is written if one is out of range).
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

/* The element types the kernels read and write through: any address (a frame's values
 * start where its headers end; a user's array may be a view at any byte offset), and any
 * object's memory (numpy's bytes, seen as lanes). */
typedef uint32_t lane __attribute__((aligned(1), may_alias));
typedef float f32 __attribute__((aligned(1), may_alias));
typedef double f64 __attribute__((aligned(1), may_alias));
typedef uint64_t lane64 __attribute__((aligned(1), may_alias));

static inline uint32_t swapped(uint32_t v) { return __builtin_bswap32(v); }
static inline uint32_t as_is(uint32_t v) { return v; }

#define QUANTIZE(NAME, T, ORDER)                                                            \
    CLONES static void NAME(const char *x, ptrdiff_t x_row, const double *scale,            \
                            int64_t rows, int64_t k, uint32_t bias, char *out,              \
                            ptrdiff_t out_row) {                                            \
        for (int64_t r = 0; r < rows; r++) {                                                \
            const T *src = (const T *)ROW(x, x_row, r);                                     \
            lane *dst = (lane *)ROW(out, out_row, r);                                       \
            const double s = scale[r];                                                      \
            for (int64_t i = 0; i < k; i++)                                                 \
                dst[i] = ORDER((uint32_t)(int32_t)rint((double)src[i] * s) + bias);         \
        }                                                                                   \
    }

QUANTIZE(quantize_f32_swap, f32, swapped)
QUANTIZE(quantize_f32, f32, as_is)
QUANTIZE(quantize_f64_swap, f64, swapped)
QUANTIZE(quantize_f64, f64, as_is)

/* x: float32 (itemsize 4) or else float64 rows; out: 4-byte lanes, byte-swapped when swap. */
static void p4r_quantize(const char *x, int itemsize, ptrdiff_t x_row, const double *scale,
                         int64_t rows, int64_t k, uint32_t bias, char *out, ptrdiff_t out_row,
                         int swap) {
    if (itemsize == 4)
        (swap ? quantize_f32_swap : quantize_f32)(x, x_row, scale, rows, k, bias, out, out_row);
    else
        (swap ? quantize_f64_swap : quantize_f64)(x, x_row, scale, rows, k, bias, out, out_row);
}

#define UNBIAS(NAME, ORDER)                                                                 \
    CLONES static void NAME(const char *in, ptrdiff_t in_row, int64_t rows, int64_t k,      \
                            uint32_t bias, char *out, ptrdiff_t out_row) {                  \
        for (int64_t r = 0; r < rows; r++) {                                                \
            const lane *src = (const lane *)ROW(in, in_row, r);                             \
            lane *dst = (lane *)ROW(out, out_row, r);                                       \
            for (int64_t i = 0; i < k; i++)                                                 \
                dst[i] = ORDER(src[i]) - bias;                                              \
        }                                                                                   \
    }

UNBIAS(unbias_swap, swapped)
UNBIAS(unbias_native, as_is)

static void p4r_unbias(const char *in, ptrdiff_t in_row, int64_t rows, int64_t k,
                       uint32_t bias, char *out, ptrdiff_t out_row, int swap) {
    (swap ? unbias_swap : unbias_native)(in, in_row, rows, k, bias, out, out_row);
}

#define DEQUANTIZE(NAME, T, ORDER)                                                          \
    CLONES static void NAME(const char *sums, ptrdiff_t s_row, const double *divisor,       \
                            int64_t rows, int64_t k, uint32_t bias, char *out,              \
                            ptrdiff_t out_row) {                                            \
        for (int64_t r = 0; r < rows; r++) {                                                \
            const lane *src = (const lane *)ROW(sums, s_row, r);                            \
            T *dst = (T *)ROW(out, out_row, r);                                             \
            const double d = divisor[r];                                                    \
            for (int64_t i = 0; i < k; i++)                                                 \
                dst[i] = (T)((double)(int32_t)(ORDER(src[i]) - bias) / d);                  \
        }                                                                                   \
    }

DEQUANTIZE(dequantize_f32_swap, f32, swapped)
DEQUANTIZE(dequantize_f32, f32, as_is)
DEQUANTIZE(dequantize_f64_swap, f64, swapped)
DEQUANTIZE(dequantize_f64, f64, as_is)

/* sums: 4-byte lanes, byte-swapped when swap, `bias` subtracted from each; out: float32
 * (itemsize 4) or else float64. */
static void p4r_dequantize(const char *sums, ptrdiff_t s_row, const double *divisor,
                           int64_t rows, int64_t k, uint32_t bias, char *out, int itemsize,
                           ptrdiff_t out_row, int swap) {
    if (itemsize == 4)
        (swap ? dequantize_f32_swap : dequantize_f32)(sums, s_row, divisor, rows, k, bias, out,
                                                      out_row);
    else
        (swap ? dequantize_f64_swap : dequantize_f64)(sums, s_row, divisor, rows, k, bias, out,
                                                      out_row);
}

#define MAX_ABS(NAME, U, SIGN)                                                              \
    CLONES static void NAME(const char *x, ptrdiff_t x_row, int64_t rows, int64_t k,       \
                            char *out) {                                                    \
        for (int64_t r = 0; r < rows; r++) {                                                \
            const U *src = (const U *)ROW(x, x_row, r);                                     \
            U m = 0;                                                                        \
            for (int64_t i = 0; i < k; i++) {                                               \
                U v = src[i] & ~(U)(SIGN);                                                  \
                m = v > m ? v : m;                                                          \
            }                                                                               \
            ((U *)out)[r] = m;                                                              \
        }                                                                                   \
    }

MAX_ABS(max_abs_f32, lane, UINT32_C(1) << 31)
MAX_ABS(max_abs_f64, lane64, UINT64_C(1) << 63)

/* x: float32 (itemsize 4) or else float64 rows; out: one float of x's type per row. */
static void p4r_max_abs(const char *x, int itemsize, ptrdiff_t x_row, int64_t rows, int64_t k,
                        char *out) {
    (itemsize == 4 ? max_abs_f32 : max_abs_f64)(x, x_row, rows, k, out);
}

static void p4r_numbers(const uint8_t *frames, ptrdiff_t f_row, int64_t rows,
                        const Py_ssize_t *columns, const int64_t *widths, const int64_t *shift,
                        const int64_t *mask, int64_t numbers, int64_t *out) {
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *f = frames + (ptrdiff_t)r * f_row;
        const Py_ssize_t *c = columns;
        for (int64_t j = 0; j < numbers; j++) {
            uint64_t v = 0;
            for (int64_t i = 0; i < widths[j]; i++)
                v = v << 8 | f[*c++];
            out[j * rows + r] = (int64_t)(v >> shift[j]) & mask[j];
        }
    }
}

#define HEADER_WORDS_MAX 8

/* The first field (its index) whose value in some row is outside 0..limit[f], else -1;
 * only with none are the rows' header words written. fields: (nfields, rows) int64. */
static Py_ssize_t p4r_header(const int64_t *fields, Py_ssize_t nfields, Py_ssize_t rows,
                             const int64_t *word, const int64_t *shift, const int64_t *limit,
                             Py_ssize_t words, uint8_t *frames, ptrdiff_t f_row,
                             Py_ssize_t offset) {
    for (Py_ssize_t f = 0; f < nfields; f++)
        for (Py_ssize_t r = 0; r < rows; r++)
            if ((uint64_t)fields[f * rows + r] > (uint64_t)limit[f])
                return f;
    for (Py_ssize_t r = 0; r < rows; r++) {
        uint64_t packed[HEADER_WORDS_MAX] = {0};
        for (Py_ssize_t f = 0; f < nfields; f++)
            packed[word[f]] |= (uint64_t)fields[f * rows + r] << shift[f];
        uint8_t *dst = frames + (ptrdiff_t)r * f_row + offset;
        for (Py_ssize_t w = 0; w < words; w++) {
            uint32_t v = (uint32_t)packed[w];
            dst[4 * w] = (uint8_t)(v >> 24);
            dst[4 * w + 1] = (uint8_t)(v >> 16);
            dst[4 * w + 2] = (uint8_t)(v >> 8);
            dst[4 * w + 3] = (uint8_t)v;
        }
    }
    return -1;
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
    case 'f': case 'd': e->kind = 'f'; break; /* float32, float64: the only floats */
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

/* The call's arrays as buffers, the last one to be written: all of them held, or none
 * (and the exporter's error set). */
static int hold(PyObject **objs, Py_buffer *views, int n) {
    for (int i = 0; i < n; i++) {
        int flags = i == n - 1 ? PyBUF_RECORDS : PyBUF_RECORDS_RO;
        if (PyObject_GetBuffer(objs[i], &views[i], flags) < 0) {
            while (i--)
                PyBuffer_Release(&views[i]);
            return -1;
        }
    }
    return 0;
}

/* Let the arrays go; NULL, for a refusal's return (its error already set). */
static PyObject *let_go(Py_buffer *views, int n) {
    for (int i = 0; i < n; i++)
        PyBuffer_Release(&views[i]);
    return NULL;
}

static PyObject *refuse(Py_buffer *views, int n, const char *why) {
    PyErr_SetString(PyExc_ValueError, why);
    return let_go(views, n);
}

/* A kernel's three arrays -- rows in, one float64 per row, rows out of the same shape --
 * held and checked (`names`: each one's, for the refusal); on failure none is held. */
static int hold_per_row(PyObject **objs, Py_buffer *v, const char *const names[3],
                        element *in, element *out) {
    if (hold(objs, v, 3) < 0)
        return -1;
    if (rows_of(names[0], &v[0], NULL, in) < 0 || rows_of(names[2], &v[2], &v[0], out) < 0 ||
        per_row(names[1], &v[1], v[0].shape[0]) < 0) {
        let_go(v, 3);
        return -1;
    }
    return 0;
}

/* quantize(values, scale, bias, out) */
static PyObject *py_quantize(PyObject *self, PyObject *args) {
    static const char *const names[3] = {"quantize: values", "quantize: scale", "quantize: out"};
    PyObject *objs[3];
    unsigned long bias;
    Py_buffer v[3]; /* values, scale, out */
    element ex, eo;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOkO:quantize", &objs[0], &objs[1], &bias, &objs[2]) ||
        hold_per_row(objs, v, names, &ex, &eo) < 0)
        return NULL;
    if (ex.kind != 'f' || ex.swap || eo.kind == 'f' || eo.size != 4)
        return refuse(v, 3,
                      "quantize: expected native float32/float64 values into 32-bit integers");
    RUN(v[0].shape[0], v[0].shape[1],
        p4r_quantize(v[0].buf, ex.size, v[0].strides[0], v[1].buf, v[0].shape[0], v[0].shape[1],
                     (uint32_t)bias, v[2].buf, v[2].strides[0], eo.swap));
    let_go(v, 3);
    Py_RETURN_NONE;
}

/* unbias(sums, bias, out) */
static PyObject *py_unbias(PyObject *self, PyObject *args) {
    PyObject *objs[2];
    unsigned long bias;
    Py_buffer v[2]; /* sums, out */
    element ei, eo;
    (void)self;
    if (!PyArg_ParseTuple(args, "OkO:unbias", &objs[0], &bias, &objs[1]) || hold(objs, v, 2) < 0)
        return NULL;
    if (rows_of("unbias: sums", &v[0], NULL, &ei) < 0 ||
        rows_of("unbias: out", &v[1], &v[0], &eo) < 0)
        return let_go(v, 2);
    if (ei.kind == 'f' || ei.size != 4 || eo.kind == 'f' || eo.size != 4 || eo.swap)
        return refuse(v, 2, "unbias: expected 32-bit integers into native 32-bit integers");
    RUN(v[0].shape[0], v[0].shape[1],
        p4r_unbias(v[0].buf, v[0].strides[0], v[0].shape[0], v[0].shape[1], (uint32_t)bias,
                   v[1].buf, v[1].strides[0], ei.swap));
    let_go(v, 2);
    Py_RETURN_NONE;
}

/* dequantize(sums, divisor, out[, bias]) */
static PyObject *py_dequantize(PyObject *self, PyObject *args) {
    static const char *const names[3] = {"dequantize: sums", "dequantize: divisor",
                                         "dequantize: out"};
    PyObject *objs[3];
    Py_buffer v[3]; /* sums, divisor, out */
    element ei, eo;
    unsigned long bias = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO|k:dequantize", &objs[0], &objs[1], &objs[2], &bias) ||
        hold_per_row(objs, v, names, &ei, &eo) < 0)
        return NULL;
    if (ei.kind != 'i' || ei.size != 4 || eo.kind != 'f' || eo.swap)
        return refuse(v, 3, "dequantize: expected int32 sums into native float32/float64");
    RUN(v[0].shape[0], v[0].shape[1],
        p4r_dequantize(v[0].buf, v[0].strides[0], v[1].buf, v[0].shape[0], v[0].shape[1],
                       (uint32_t)bias, v[2].buf, eo.size, v[2].strides[0], ei.swap));
    let_go(v, 3);
    Py_RETURN_NONE;
}

/* max_abs(values, out) */
static PyObject *py_max_abs(PyObject *self, PyObject *args) {
    PyObject *objs[2];
    Py_buffer v[2]; /* values, out */
    element ex, eo;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO:max_abs", &objs[0], &objs[1]) || hold(objs, v, 2) < 0)
        return NULL;
    if (rows_of("max_abs: values", &v[0], NULL, &ex) < 0)
        return let_go(v, 2);
    if (ex.kind != 'f' || ex.swap)
        return refuse(v, 2, "max_abs: expected native float32/float64 values");
    if (element_of(&v[1], &eo) < 0 || eo.kind != 'f' || eo.swap || eo.size != ex.size ||
        v[1].ndim != 1 || v[1].shape[0] != v[0].shape[0] ||
        (v[1].shape[0] > 1 && v[1].strides[0] != v[1].itemsize))
        return refuse(v, 2, "max_abs: out: expected one contiguous native float of the "
                            "values' type per row");
    RUN(v[0].shape[0], v[0].shape[1],
        p4r_max_abs(v[0].buf, ex.size, v[0].strides[0], v[0].shape[0], v[0].shape[1],
                    v[1].buf));
    let_go(v, 2);
    Py_RETURN_NONE;
}

/* `b` as `n` contiguous native 8-byte integers (Py_ssize_t: numpy's intp on the machines
 * this builds on, int64). */
static int integers(const char *what, Py_buffer *b, Py_ssize_t n) {
    element e;
    if (element_of(b, &e) < 0 || e.kind == 'f' || e.size != 8 || e.swap || b->ndim != 1 ||
        (n >= 0 && b->shape[0] != n) || (b->shape[0] > 1 && b->strides[0] != 8)) {
        PyErr_Format(PyExc_ValueError, "%s: expected contiguous native 8-byte integers", what);
        return -1;
    }
    return 0;
}

/* `b` as `rows` frames (any number when -1), uint8 rows any distance apart, each row's
 * bytes contiguous: a batch of frames, or a view of a ring's. */
static int frame_rows(const char *what, Py_buffer *b, Py_ssize_t rows) {
    if (b->ndim != 2 || b->itemsize != 1 || (rows >= 0 && b->shape[0] != rows) ||
        (b->shape[1] > 1 && b->strides[1] != 1)) {
        PyErr_Format(PyExc_ValueError, "%s: expected one uint8 row per frame, each contiguous",
                     what);
        return -1;
    }
    return 0;
}

/* `b` as a C-contiguous (rows, cols) matrix of native int64 (any number of columns when
 * cols is -1). */
static int int64_matrix(const char *what, Py_buffer *b, Py_ssize_t rows, Py_ssize_t cols) {
    element e;
    if (element_of(b, &e) < 0 || e.kind != 'i' || e.size != 8 || e.swap || b->ndim != 2 ||
        (rows >= 0 && b->shape[0] != rows) || (cols >= 0 && b->shape[1] != cols) ||
        !PyBuffer_IsContiguous(b, 'C')) {
        PyErr_Format(PyExc_ValueError, "%s: expected a C-contiguous matrix of native int64",
                     what);
        return -1;
    }
    return 0;
}

/* numbers(frames, columns, widths, shift, mask, out) */
static PyObject *py_numbers(PyObject *self, PyObject *args) {
    PyObject *objs[6];
    Py_buffer v[6]; /* frames, columns, widths, shift, mask, out */
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOO:numbers", &objs[0], &objs[1], &objs[2], &objs[3],
                          &objs[4], &objs[5]) ||
        hold(objs, v, 6) < 0)
        return NULL;
    if (frame_rows("numbers: frames", &v[0], -1) < 0)
        return let_go(v, 6);
    Py_ssize_t rows = v[0].shape[0], numbers = v[2].shape[0];
    if (integers("numbers: columns", &v[1], -1) < 0 || integers("numbers: widths", &v[2], -1) < 0 ||
        integers("numbers: shift", &v[3], numbers) < 0 ||
        integers("numbers: mask", &v[4], numbers) < 0)
        return let_go(v, 6);
    const Py_ssize_t *columns = v[1].buf;
    const int64_t *widths = v[2].buf;
    int64_t used = 0;
    for (Py_ssize_t j = 0; j < numbers; j++) {
        if (widths[j] < 1 || widths[j] > 8 || ((const int64_t *)v[3].buf)[j] < 0 ||
            ((const int64_t *)v[3].buf)[j] > 63)
            return refuse(v, 6, "numbers: a number is 1 to 8 bytes, shifted by 0 to 63 bits");
        used += widths[j];
    }
    if (used != v[1].shape[0])
        return refuse(v, 6, "numbers: the widths do not add up to the columns");
    for (Py_ssize_t i = 0; i < v[1].shape[0]; i++)
        if (columns[i] < 0 || columns[i] >= v[0].shape[1])
            return refuse(v, 6, "numbers: a column lies outside the frames' rows");
    if (int64_matrix("numbers: out (one row per number, a column per frame)", &v[5], numbers,
                     rows) < 0)
        return let_go(v, 6);
    p4r_numbers(v[0].buf, v[0].strides[0], rows, columns, widths, v[3].buf, v[4].buf, numbers,
                v[5].buf);
    let_go(v, 6);
    Py_RETURN_NONE;
}

/* header(fields, word, shift, limit, frames, offset) -> the first field out of range, or -1 */
static PyObject *py_header(PyObject *self, PyObject *args) {
    PyObject *objs[5];
    Py_buffer v[5]; /* fields, word, shift, limit, frames */
    Py_ssize_t offset;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOOn:header", &objs[0], &objs[1], &objs[2], &objs[3],
                          &objs[4], &offset) ||
        hold(objs, v, 5) < 0)
        return NULL;
    if (int64_matrix("header: fields (one row per field, a column per header)", &v[0], -1,
                     -1) < 0)
        return let_go(v, 5);
    Py_ssize_t nfields = v[0].shape[0], rows = v[0].shape[1];
    if (integers("header: word", &v[1], nfields) < 0 ||
        integers("header: shift", &v[2], nfields) < 0 ||
        integers("header: limit", &v[3], nfields) < 0)
        return let_go(v, 5);
    const int64_t *word = v[1].buf, *shift = v[2].buf, *limit = v[3].buf;
    for (Py_ssize_t f = 0; f < nfields; f++)
        if (word[f] < 0 || word[f] >= HEADER_WORDS_MAX || shift[f] < 0 || shift[f] > 31 ||
            limit[f] < 0 || (uint64_t)limit[f] << shift[f] > UINT32_MAX)
            return refuse(v, 5, "header: a field lies outside its 32-bit word");
    if (frame_rows("header: frames (one per header)", &v[4], rows) < 0)
        return let_go(v, 5);
    Py_ssize_t words = 0;
    for (Py_ssize_t f = 0; f < nfields; f++)
        words = word[f] + 1 > words ? word[f] + 1 : words;
    if (offset < 0 || offset + 4 * words > v[4].shape[1])
        return refuse(v, 5, "header: the header words lie outside the frames' rows");
    Py_ssize_t bad = p4r_header(v[0].buf, nfields, rows, word, shift, limit, words, v[4].buf,
                                v[4].strides[0], offset);
    let_go(v, 5);
    return PyLong_FromSsize_t(bad);
}

static PyMethodDef methods[] = {
    {"quantize", py_quantize, METH_VARARGS,
     "quantize(values, scale, bias, out): out = (uint32)(int32)rint(values * scale[row]) + bias"},
    {"unbias", py_unbias, METH_VARARGS, "unbias(sums, bias, out): out = sums - bias (mod 2^32)"},
    {"dequantize", py_dequantize, METH_VARARGS,
     "dequantize(sums, divisor, out, bias=0): out = (double)(int32)(sums - bias) / divisor[row], "
     "rounded to out's dtype"},
    {"numbers", py_numbers, METH_VARARGS,
     "numbers(frames, columns, widths, shift, mask, out): out[j][r] = (the big-endian "
     "number of widths[j] bytes at frame r's next columns >> shift[j]) & mask[j]"},
    {"header", py_header, METH_VARARGS,
     "header(fields, word, shift, limit, frames, offset) -> the first field out of 0..limit "
     "(nothing written), or -1: each row's fields packed into big-endian 32-bit words at "
     "frames[row, offset:]"},
    {"max_abs", py_max_abs, METH_VARARGS,
     "max_abs(values, out): out[row] = max |values[row]| (NaN over Inf over the rest)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "hostlib._kernels",
    .m_doc = "hostlib's compiled kernels: the per-value passes of numerics (hostlib/_kernels.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
