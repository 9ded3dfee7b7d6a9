/* yard-eve's checker (check.c): the scoped symbol table (hash chains,
 * newest first, and a stack to close scopes) and the members of classes,
 * hashed by class and name. */
#include "check_int.h"

#include <string.h>

/* ---- the symbol table -------------------------------------------------------------- */

static size_t hash(const char *s)
{
    size_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

eve_sym_t *chk_lookup(chk_t *c, const char *name)
{
    if (!c->buckets)
        return NULL;
    for (eve_sym_t *s = c->buckets[hash(name) & (c->nbuckets - 1)]; s; s = s->next)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

static void grow_table(chk_t *c)
{
    size_t n = c->nbuckets ? c->nbuckets * 2 : 256;
    eve_sym_t **b = chk_alloc(c, n * sizeof *b);
    if (!b)
        return;
    /* Re-link in stack order, oldest first, so each chain stays newest first. */
    for (size_t i = 0; i < c->nstack; i++) {
        eve_sym_t *s = c->stack[i];
        size_t h = hash(s->name) & (n - 1);
        s->next = b[h];
        b[h] = s;
    }
    c->buckets = b;
    c->nbuckets = n;
}

/* Makes s visible in the current scope. False when out of memory. */
bool chk_bind(chk_t *c, eve_sym_t *s)
{
    if (c->nstack == c->capstack) {
        size_t cap = c->capstack ? c->capstack * 2 : 256;
        eve_sym_t **st = chk_alloc(c, cap * sizeof *st);
        if (!st)
            return false;
        if (c->nstack)
            memcpy(st, c->stack, c->nstack * sizeof *st);
        c->stack = st;
        c->capstack = cap;
    }
    c->stack[c->nstack++] = s;
    s->depth = c->depth;
    if (c->nstack > c->nbuckets * 2 || !c->buckets) {
        grow_table(c); /* links s too */
        if (!c->buckets)
            return false;
        return true;
    }
    size_t h = hash(s->name) & (c->nbuckets - 1);
    s->next = c->buckets[h];
    c->buckets[h] = s;
    return true;
}

void chk_open_scope(chk_t *c)
{
    c->depth++;
}

void chk_close_scope(chk_t *c)
{
    while (c->nstack && c->stack[c->nstack - 1]->depth == c->depth) {
        eve_sym_t *s = c->stack[--c->nstack];
        size_t h = hash(s->name) & (c->nbuckets - 1);
        /* s is the head of its chain: scopes close in the order they opened. */
        if (c->buckets[h] == s)
            c->buckets[h] = s->next;
    }
    c->depth--;
}

/* A new symbol in the current scope; reports a second declaration of the
 * same name in the same scope. NULL when out of memory. */
eve_sym_t *chk_declare(chk_t *c, const char *name, eve_sym_kind_t kind, eve_pos_t pos)
{
    eve_sym_t *old = chk_lookup(c, name);
    if (old && old->depth == c->depth)
        chk_err(c, pos, "'%s' is already declared in this scope (at %u:%u)", name,
            (unsigned)old->pos.line, (unsigned)old->pos.col);
    eve_sym_t *s = chk_alloc(c, sizeof *s);
    if (!s)
        return NULL;
    s->name = name;
    s->kind = kind;
    s->pos = pos;
    s->ty = c->t_err;
    s->owner = c->ps;
    s->own = H_FULL;
    if (!chk_bind(c, s))
        return NULL;
    return s;
}

/* ---- members ---------------------------------------------------------------------- */

static size_t mhash(const eve_class_t *cls, const char *name)
{
    return (hash(name) ^ ((size_t)(uintptr_t)cls >> 4) * 31u);
}

void chk_add_member(chk_t *c, eve_class_t *cls, eve_member_t *m)
{
    m->next = cls->members;
    cls->members = m;
    memnode_t *mn = chk_alloc(c, sizeof *mn);
    if (!mn)
        return;
    size_t h = mhash(cls, m->name) & (c->nmbuckets - 1);
    mn->cls = cls;
    mn->m = m;
    mn->next = c->mbuckets[h];
    c->mbuckets[h] = mn;
}

/* events: want EVE_MEM_EVENT (a user class's emitter fields count); others:
 * fields, methods and statics. */
eve_member_t *chk_find_member(chk_t *c, const eve_class_t *cls, const char *name, bool events)
{
    if (!cls || !c->mbuckets)
        return NULL;
    for (memnode_t *mn = c->mbuckets[mhash(cls, name) & (c->nmbuckets - 1)]; mn; mn = mn->next) {
        if (mn->cls != cls || strcmp(mn->m->name, name) != 0)
            continue;
        eve_member_t *m = mn->m;
        bool is_event = m->kind == EVE_MEM_EVENT ||
                        (m->kind == EVE_MEM_FIELD && m->ty->kind == EVE_TY_EMITTER);
        if (events ? is_event : m->kind != EVE_MEM_EVENT)
            return m;
    }
    return NULL;
}

eve_class_t *chk_lib_class(chk_t *c, const char *name)
{
    for (size_t i = 0; i < c->nlibcls; i++)
        if (strcmp(c->libcls[i]->name, name) == 0)
            return c->libcls[i];
    return NULL;
}

/* The class holding the members of a type (the library's for string and the
 * containers), or NULL. */
eve_class_t *chk_class_of(chk_t *c, const eve_ty_t *t)
{
    if (t->kind == EVE_TY_CLASS)
        return t->cls;
    return c->kind_cls[t->kind];
}
