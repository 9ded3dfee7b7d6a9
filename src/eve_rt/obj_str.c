/* The Eve runtime: reference-counted objects, strings, run-time errors,
 * integer arithmetic and the to_string/to_int/to_float conversions. */
#include "rt_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *rt_prog_name = "eve";

/* ---- memory ------------------------------------------------------------------------- */

_Noreturn void rt_oom(void)
{
    static const char msg[] = ": out of memory\n";
    ssize_t w = write(2, rt_prog_name, strlen(rt_prog_name));
    w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

void *rt_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        rt_oom();
    return p;
}

void *rt_calloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        rt_oom();
    return p;
}

void *rt_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        rt_oom();
    return q;
}

/* ---- objects --------------------------------------------------------------------------- */

void *eve_obj_new(size_t size, eve_dtor_fn dtor)
{
    eve_obj_t *o = rt_calloc(size < sizeof(eve_obj_t) ? sizeof(eve_obj_t) : size);
    atomic_init(&o->rc, 1);
    o->dtor = dtor;
    return o;
}

/* Immortal objects (literals, the library's globals) are shared by every
 * worker: they are only read, so that their cache line is not written back
 * and forth on every use. */
#define IMMORTAL_FLOOR (EVE_RC_IMMORTAL / 2)

void eve_retain(void *p)
{
    eve_obj_t *o = p;
    if (!o || atomic_load_explicit(&o->rc, memory_order_relaxed) >= IMMORTAL_FLOOR)
        return;
    atomic_fetch_add_explicit(&o->rc, 1, memory_order_relaxed);
}

void eve_release(void *p)
{
    eve_obj_t *o = p;
    if (!o || atomic_load_explicit(&o->rc, memory_order_relaxed) >= IMMORTAL_FLOOR)
        return;
    if (atomic_fetch_sub_explicit(&o->rc, 1, memory_order_acq_rel) != 1)
        return;
    if (o->dtor == NULL) {
        free(o);
        return;
    }
    if (rt_wbuf_recycle(o))
        return;
    o->dtor(o);
    free(o);
}

/* ---- run-time errors --------------------------------------------------------------------- */

_Noreturn void eve_fail(const char *pos, const char *fmt, ...)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%s%srun-time error: ", pos ? pos : "", pos ? ": " : "");
    if (n < 0)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    buf[len++] = '\n';
    for (size_t off = 0; off < len;) {
        ssize_t w = write(2, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    _exit(1);
}

/* A string for a message: at most 60 bytes, quoted, with what is not
 * printable ASCII escaped. */
static const char *quote(const eve_str_t *s, char *buf, size_t cap)
{
    size_t o = 0;
    buf[o++] = '"';
    for (size_t i = 0; i < s->len && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)s->bytes[i];
        if (i == 60) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    }
    buf[o++] = '"';
    buf[o] = 0;
    return buf;
}

/* ---- integer arithmetic ---------------------------------------------------------------- */

int64_t eve_div(int64_t a, int64_t b, const char *pos)
{
    if (b == 0)
        eve_fail(pos, "division by zero");
    if (b == -1)
        return (int64_t)(0u - (uint64_t)a); /* INT64_MIN / -1 wraps to INT64_MIN */
    return a / b;
}

int64_t eve_mod(int64_t a, int64_t b, const char *pos)
{
    if (b == 0)
        eve_fail(pos, "division by zero");
    if (b == -1)
        return 0;
    return a % b;
}

int64_t eve_shl(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a << ((uint64_t)b & 63));
}

int64_t eve_shr(int64_t a, int64_t b)
{
    unsigned n = (unsigned)((uint64_t)b & 63);
    /* Arithmetic without relying on how the compiler shifts negatives. */
    return a < 0 ? ~(int64_t)((uint64_t)~a >> n) : (int64_t)((uint64_t)a >> n);
}

/* ---- strings ------------------------------------------------------------------------------ */

eve_str_t eve_str_empty = EVE_STR_LIT("", 0);

/* A string of len bytes to fill in, NUL-terminated, in one block. */
static eve_str_t *str_alloc(size_t len, char **bytes)
{
    if (len > SIZE_MAX - sizeof(eve_str_t) - 1)
        rt_oom();
    eve_str_t *s = rt_malloc(sizeof(eve_str_t) + len + 1);
    atomic_init(&s->h.rc, 1);
    s->h.dtor = NULL; /* the bytes are part of the block */
    memset(&s->h.perm, 0, sizeof s->h.perm);
    s->len = len;
    char *b = (char *)(s + 1);
    b[len] = 0;
    s->bytes = b;
    *bytes = b;
    return s;
}

eve_str_t *eve_str_from(const char *bytes, size_t len)
{
    if (len == 0)
        return &eve_str_empty;
    char *b;
    eve_str_t *s = str_alloc(len, &b);
    memcpy(b, bytes, len);
    return s;
}

eve_str_t *eve_str_concat(const eve_str_t *a, const eve_str_t *b)
{
    if (b->len == 0) {
        eve_retain((void *)a);
        return (eve_str_t *)a;
    }
    if (a->len == 0) {
        eve_retain((void *)b);
        return (eve_str_t *)b;
    }
    if (a->len > SIZE_MAX / 2 || b->len > SIZE_MAX / 2)
        rt_oom();
    char *p;
    eve_str_t *s = str_alloc(a->len + b->len, &p);
    memcpy(p, a->bytes, a->len);
    memcpy(p + a->len, b->bytes, b->len);
    return s;
}

eve_str_t *eve_str_substring(const eve_str_t *s, int64_t from, int64_t to, const char *pos)
{
    if (from < 0 || to < from || (uint64_t)to > s->len)
        eve_fail(pos, "substring(%" PRId64 ", %" PRId64 ") of a string of size %zu", from, to,
                 s->len);
    if (from == 0 && (uint64_t)to == s->len) {
        eve_retain((void *)s);
        return (eve_str_t *)s;
    }
    return eve_str_from(s->bytes + from, (size_t)(to - from));
}

uint8_t eve_str_at(const eve_str_t *s, int64_t i, const char *pos)
{
    if (i < 0 || (uint64_t)i >= s->len)
        eve_fail(pos, "index %" PRId64 " out of range for a string of size %zu", i, s->len);
    return (uint8_t)s->bytes[i];
}

int64_t eve_str_find(const eve_str_t *s, uint8_t c)
{
    const char *p = s->len ? memchr(s->bytes, c, s->len) : NULL;
    return p ? (int64_t)(p - s->bytes) : -1;
}

static bool ascii_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

eve_str_t *eve_str_trim(const eve_str_t *s)
{
    size_t a = 0, b = s->len;
    while (a < b && ascii_space((unsigned char)s->bytes[a]))
        a++;
    while (b > a && ascii_space((unsigned char)s->bytes[b - 1]))
        b--;
    if (a == 0 && b == s->len) {
        eve_retain((void *)s);
        return (eve_str_t *)s;
    }
    return eve_str_from(s->bytes + a, b - a);
}

bool eve_str_eq(const eve_str_t *a, const eve_str_t *b)
{
    return a == b || (a->len == b->len && memcmp(a->bytes, b->bytes, a->len) == 0);
}

int eve_str_cmp(const eve_str_t *a, const eve_str_t *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->bytes, b->bytes, n) : 0;
    if (c)
        return c < 0 ? -1 : 1;
    return a->len < b->len ? -1 : a->len > b->len ? 1 : 0;
}

/* ---- conversions -------------------------------------------------------------------------- */

eve_str_t *eve_str_of_int(int64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%" PRId64, v);
    return eve_str_from(buf, (size_t)n);
}

eve_str_t *eve_str_of_float(double v)
{
    char buf[40];
    if (isnan(v))
        return eve_str_from("nan", 3);
    if (isinf(v))
        return v < 0 ? eve_str_from("-inf", 4) : eve_str_from("inf", 3);
    int n = 0;
    for (int prec = 1; prec <= 17; prec++) {
        n = snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return eve_str_from(buf, (size_t)n);
}

static eve_str_t lit_true = EVE_STR_LIT("true", 4), lit_false = EVE_STR_LIT("false", 5);

eve_str_t *eve_str_of_bool(bool v)
{
    return v ? &lit_true : &lit_false;
}

eve_str_t *eve_str_of_char(uint8_t c)
{
    char b = (char)c;
    return eve_str_from(&b, 1);
}

int64_t eve_str_to_int(const eve_str_t *s, const char *pos)
{
    char q[256];
    size_t i = 0;
    bool neg = false;
    if (i < s->len && s->bytes[i] == '-') {
        neg = true;
        i++;
    }
    if (i == s->len)
        eve_fail(pos, "to_int: %s is not an integer", quote(s, q, sizeof q));
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < s->len; i++) {
        unsigned char c = (unsigned char)s->bytes[i];
        if (c < '0' || c > '9')
            eve_fail(pos, "to_int: %s is not an integer", quote(s, q, sizeof q));
        unsigned d = c - '0';
        if (v > (limit - d) / 10)
            eve_fail(pos, "to_int: %s does not fit in an int", quote(s, q, sizeof q));
        v = v * 10 + d;
    }
    return neg ? (int64_t)(0u - v) : (int64_t)v;
}

double eve_str_to_float(const eve_str_t *s, const char *pos)
{
    char q[256];
    /* strtod's syntax, all of the string: no leading white space (strtod
     * would skip it), no embedded NUL (it would stop there). */
    if (s->len == 0 || ascii_space((unsigned char)s->bytes[0]) ||
        memchr(s->bytes, 0, s->len) != NULL)
        eve_fail(pos, "to_float: %s is not a number", quote(s, q, sizeof q));
    char *end;
    double v = strtod(s->bytes, &end);
    if (end != s->bytes + s->len)
        eve_fail(pos, "to_float: %s is not a number", quote(s, q, sizeof q));
    return v;
}

int64_t eve_float_to_int(double v, const char *pos)
{
    if (!(v >= -0x1p63 && v < 0x1p63))
        eve_fail(pos, "to_int: %g does not fit in an int", v);
    return (int64_t)v;
}

/* ---- boxes ----------------------------------------------------------------------------------- */

static void box_dtor(eve_obj_t *o)
{
    eve_box_t *b = (eve_box_t *)o;
    if (b->str)
        eve_release(b->v.p);
}

eve_box_t *eve_box_new(bool str)
{
    eve_box_t *b = eve_obj_new(sizeof *b, box_dtor);
    b->str = str;
    if (str)
        b->v.p = &eve_str_empty;
    return b;
}
