/* The Eve runtime: vector, set and map. Containers are objects; the
 * permissions of the program keep two tasks from changing one at the same
 * time, so there is no lock here. Strings and objects in them are held
 * with a reference, released when they leave. */
#include "rt_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static bool counted(eve_kind_t k)
{
    return k == EVE_K_STR || k == EVE_K_OBJ;
}

static void val_retain(eve_kind_t k, eve_val_t x)
{
    if (counted(k))
        eve_retain(x.p);
}

static void val_release(eve_kind_t k, eve_val_t x)
{
    if (counted(k))
        eve_release(x.p);
}

static bool val_eq(eve_kind_t k, eve_val_t a, eve_val_t b)
{
    switch (k) {
    case EVE_K_INT:
        return a.i == b.i;
    case EVE_K_FLOAT:
        return a.f == b.f;
    case EVE_K_BOOL:
        return a.b == b.b;
    case EVE_K_CHAR:
        return a.c == b.c;
    case EVE_K_STR:
        return eve_str_eq(a.p, b.p);
    case EVE_K_OBJ:
        return a.p == b.p;
    }
    return false;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static uint64_t val_hash(eve_kind_t k, eve_val_t x)
{
    switch (k) {
    case EVE_K_INT:
        return mix((uint64_t)x.i);
    case EVE_K_FLOAT: {
        double f = x.f == 0 ? 0.0 : x.f; /* -0.0 == 0.0 */
        uint64_t u;
        memcpy(&u, &f, sizeof u);
        return mix(u);
    }
    case EVE_K_BOOL:
        return mix(x.b ? 1 : 0);
    case EVE_K_CHAR:
        return mix(x.c);
    case EVE_K_STR: {
        const eve_str_t *s = x.p;
        uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
        for (size_t i = 0; i < s->len; i++) {
            h ^= (unsigned char)s->bytes[i];
            h *= 0x100000001b3ull;
        }
        return mix(h);
    }
    case EVE_K_OBJ:
        return mix((uint64_t)(uintptr_t)x.p);
    }
    return 0;
}

/* ---- vector ----------------------------------------------------------------------------------- */

struct eve_vec {
    eve_obj_t h;
    eve_kind_t k;
    size_t n, cap;
    eve_val_t *a;
};

static void vec_dtor(eve_obj_t *o)
{
    eve_vec_t *v = (eve_vec_t *)o;
    eve_vec_clear(v);
    free(v->a);
}

eve_vec_t *eve_vec_new(eve_kind_t k)
{
    eve_vec_t *v = eve_obj_new(sizeof *v, vec_dtor);
    v->k = k;
    return v;
}

int64_t eve_vec_size(const eve_vec_t *v)
{
    return (int64_t)v->n;
}

static void vec_index(const eve_vec_t *v, int64_t i, const char *pos)
{
    if (i < 0 || (uint64_t)i >= v->n)
        eve_fail(pos, "index %" PRId64 " out of range for a vector of size %zu", i, v->n);
}

eve_val_t eve_vec_get(const eve_vec_t *v, int64_t i, const char *pos)
{
    vec_index(v, i, pos);
    return v->a[i];
}

void eve_vec_set(eve_vec_t *v, int64_t i, eve_val_t x, const char *pos)
{
    vec_index(v, i, pos);
    val_retain(v->k, x);
    eve_val_t old = v->a[i];
    v->a[i] = x;
    val_release(v->k, old);
}

void eve_vec_push(eve_vec_t *v, eve_val_t x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        if (cap > SIZE_MAX / sizeof *v->a)
            rt_oom();
        v->a = rt_realloc(v->a, cap * sizeof *v->a);
        v->cap = cap;
    }
    val_retain(v->k, x);
    v->a[v->n++] = x;
}

eve_val_t eve_vec_pop(eve_vec_t *v, const char *pos)
{
    if (v->n == 0)
        eve_fail(pos, "pop from an empty vector");
    return v->a[--v->n]; /* the vector's reference becomes the caller's */
}

bool eve_vec_contains(const eve_vec_t *v, eve_val_t x)
{
    for (size_t i = 0; i < v->n; i++)
        if (val_eq(v->k, v->a[i], x))
            return true;
    return false;
}

void eve_vec_remove(eve_vec_t *v, eve_val_t x)
{
    /* x may be an element itself: compare with a reference of our own. */
    val_retain(v->k, x);
    size_t j = 0;
    for (size_t i = 0; i < v->n; i++) {
        if (val_eq(v->k, v->a[i], x))
            val_release(v->k, v->a[i]);
        else
            v->a[j++] = v->a[i];
    }
    v->n = j;
    val_release(v->k, x);
}

void eve_vec_clear(eve_vec_t *v)
{
    size_t n = v->n;
    v->n = 0; /* a dtor that looks at the vector sees it empty */
    for (size_t i = 0; i < n; i++)
        val_release(v->k, v->a[i]);
}

eve_vec_t *eve_range(int64_t from, int64_t to)
{
    eve_vec_t *v = eve_vec_new(EVE_K_INT);
    if (to <= from)
        return v;
    uint64_t n = (uint64_t)to - (uint64_t)from;
    if (n > SIZE_MAX / sizeof(eve_val_t))
        rt_oom();
    v->a = rt_malloc((size_t)n * sizeof *v->a);
    v->cap = v->n = (size_t)n;
    for (uint64_t i = 0; i < n; i++)
        v->a[i].i = (int64_t)((uint64_t)from + i);
    return v;
}

/* ---- an insertion-ordered hash table (set and map) ----------------------------------------------- */

/* Entries in insertion order in a dense array; removal leaves a hole
 * (live false) so that an iteration in progress keeps its place. An open-
 * addressed index (linear probing) holds entry numbers + 1. The holes are
 * squeezed out when the array is full and at least half of it is holes,
 * which keeps memory bounded under churn; an iteration that adds elements
 * while others were removed may then see some elements twice or not at all
 * (it also may or may not see the added ones). */
struct ent {
    eve_val_t k, v;
    uint64_t hash;
    bool live;
};

struct otab {
    eve_kind_t kk, vk;
    size_t n, live, cap; /* entries used (holes too), live ones, room */
    struct ent *e;
    uint32_t *idx;
    size_t mask; /* index size - 1 (a power of two, at least 2 * cap) */
};

static void ot_reindex(struct otab *t)
{
    memset(t->idx, 0, (t->mask + 1) * sizeof *t->idx);
    for (size_t i = 0; i < t->n; i++) {
        size_t j = t->e[i].hash & t->mask;
        while (t->idx[j])
            j = (j + 1) & t->mask;
        t->idx[j] = (uint32_t)(i + 1);
    }
}

/* Makes room for one more entry. */
static void ot_room(struct otab *t)
{
    if (t->n < t->cap)
        return;
    if (t->live <= t->n / 2 && t->n > 0) {
        size_t j = 0;
        for (size_t i = 0; i < t->n; i++)
            if (t->e[i].live)
                t->e[j++] = t->e[i];
        t->n = j;
        ot_reindex(t);
        if (t->n < t->cap)
            return;
    }
    size_t cap = t->cap ? t->cap * 2 : 8;
    if (cap > UINT32_MAX / 4 || cap > SIZE_MAX / sizeof(struct ent) / 4)
        rt_oom();
    t->e = rt_realloc(t->e, cap * sizeof *t->e);
    t->cap = cap;
    free(t->idx);
    t->mask = cap * 2 - 1;
    t->idx = rt_malloc((t->mask + 1) * sizeof *t->idx);
    ot_reindex(t);
}

static struct ent *ot_find(const struct otab *t, eve_val_t k, uint64_t h)
{
    if (!t->idx)
        return NULL;
    for (size_t j = h & t->mask;; j = (j + 1) & t->mask) {
        uint32_t x = t->idx[j];
        if (!x)
            return NULL;
        struct ent *e = &t->e[x - 1];
        if (e->live && e->hash == h && val_eq(t->kk, e->k, k))
            return e;
    }
}

/* The entry of k, made (key retained, value zero) if absent. */
static struct ent *ot_insert(struct otab *t, eve_val_t k, bool *fresh)
{
    uint64_t h = val_hash(t->kk, k);
    struct ent *e = ot_find(t, k, h);
    *fresh = !e;
    if (e)
        return e;
    ot_room(t);
    size_t i = t->n++;
    e = &t->e[i];
    val_retain(t->kk, k);
    e->k = k;
    e->v = (eve_val_t){.i = 0};
    e->hash = h;
    e->live = true;
    t->live++;
    size_t j = h & t->mask;
    while (t->idx[j])
        j = (j + 1) & t->mask;
    t->idx[j] = (uint32_t)(i + 1);
    return e;
}

static void ot_remove(struct otab *t, eve_val_t k, bool has_values)
{
    struct ent *e = ot_find(t, k, val_hash(t->kk, k));
    if (!e)
        return;
    e->live = false; /* the index keeps pointing at it: probing goes past */
    t->live--;
    eve_val_t key = e->k, val = e->v;
    if (t->live == 0) { /* all holes: start over (nothing left to iterate over) */
        t->n = 0;
        memset(t->idx, 0, (t->mask + 1) * sizeof *t->idx);
    }
    val_release(t->kk, key);
    if (has_values)
        val_release(t->vk, val);
}

static void ot_clear(struct otab *t, bool has_values)
{
    size_t n = t->n;
    struct ent *e = t->e;
    /* Emptied before anything is released: a dtor may look at it. */
    t->e = NULL;
    t->n = t->live = t->cap = 0;
    free(t->idx);
    t->idx = NULL;
    t->mask = 0;
    for (size_t i = 0; i < n; i++) {
        if (!e[i].live)
            continue;
        val_release(t->kk, e[i].k);
        if (has_values)
            val_release(t->vk, e[i].v);
    }
    free(e);
}

static bool ot_next(const struct otab *t, size_t *it, eve_val_t *out)
{
    while (*it < t->n) {
        const struct ent *e = &t->e[(*it)++];
        if (e->live) {
            *out = e->k;
            return true;
        }
    }
    return false;
}

/* ---- set --------------------------------------------------------------------------------------------- */

struct eve_set {
    eve_obj_t h;
    struct otab t;
};

static void set_dtor(eve_obj_t *o)
{
    ot_clear(&((eve_set_t *)o)->t, false);
}

eve_set_t *eve_set_new(eve_kind_t k)
{
    eve_set_t *s = eve_obj_new(sizeof *s, set_dtor);
    s->t.kk = k;
    return s;
}

int64_t eve_set_size(const eve_set_t *s)
{
    return (int64_t)s->t.live;
}

bool eve_set_contains(const eve_set_t *s, eve_val_t x)
{
    return ot_find(&s->t, x, val_hash(s->t.kk, x)) != NULL;
}

void eve_set_add(eve_set_t *s, eve_val_t x)
{
    bool fresh;
    ot_insert(&s->t, x, &fresh);
}

void eve_set_remove(eve_set_t *s, eve_val_t x)
{
    ot_remove(&s->t, x, false);
}

void eve_set_clear(eve_set_t *s)
{
    ot_clear(&s->t, false);
}

bool eve_set_next(const eve_set_t *s, size_t *it, eve_val_t *out)
{
    return ot_next(&s->t, it, out);
}

/* ---- map ----------------------------------------------------------------------------------------------- */

struct eve_map {
    eve_obj_t h;
    struct otab t;
};

static void map_dtor(eve_obj_t *o)
{
    ot_clear(&((eve_map_t *)o)->t, true);
}

eve_map_t *eve_map_new(eve_kind_t key, eve_kind_t value)
{
    eve_map_t *m = eve_obj_new(sizeof *m, map_dtor);
    m->t.kk = key;
    m->t.vk = value;
    return m;
}

int64_t eve_map_size(const eve_map_t *m)
{
    return (int64_t)m->t.live;
}

bool eve_map_contains(const eve_map_t *m, eve_val_t key)
{
    return ot_find(&m->t, key, val_hash(m->t.kk, key)) != NULL;
}

eve_val_t eve_map_get(const eve_map_t *m, eve_val_t key, const char *pos)
{
    struct ent *e = ot_find(&m->t, key, val_hash(m->t.kk, key));
    if (!e) {
        switch (m->t.kk) {
        case EVE_K_INT:
            eve_fail(pos, "the map has no key %" PRId64, key.i);
        case EVE_K_STR: {
            const eve_str_t *s = key.p;
            eve_fail(pos, "the map has no key \"%.*s\"", s->len > 60 ? 60 : (int)s->len, s->bytes);
        }
        default:
            eve_fail(pos, "the map has no such key");
        }
    }
    return e->v;
}

void eve_map_put(eve_map_t *m, eve_val_t key, eve_val_t value)
{
    bool fresh;
    val_retain(m->t.vk, value);
    struct ent *e = ot_insert(&m->t, key, &fresh);
    eve_val_t old = e->v;
    e->v = value;
    if (!fresh)
        val_release(m->t.vk, old);
}

void eve_map_remove(eve_map_t *m, eve_val_t key)
{
    ot_remove(&m->t, key, true);
}

void eve_map_clear(eve_map_t *m)
{
    ot_clear(&m->t, true);
}

bool eve_map_next(const eve_map_t *m, size_t *it, eve_val_t *key_out)
{
    return ot_next(&m->t, it, key_out);
}
