/* yard-eve's static checker (issue 23; the rules are in docs/eve.md, "The
 * checker"): one visitor over the tree that resolves names in a scoped
 * symbol table, computes and checks types, and checks every use of a
 * variable against the permissions of the innermost task, callback,
 * lambda or function it is in.
 *
 * Pure: no I/O, no globals, no longjmp; everything in the context's arena.
 * The tree is at most EVE_MAX_NESTING deep (the parser guarantees it), so the
 * recursive visitor needs no limit of its own; every table that grows with
 * the input is hashed, so no input makes the checker quadratic. */
#include "check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- permission levels and access modes ------------------------------------- */

/* What a scope holds on a variable, weakest first. */
enum {
    H_NONE,     /* nothing: the name may not be used */
    H_NULL,     /* -x: may be passed on, not used */
    H_IMPLICIT, /* a value variable of an outer scope, copied implicitly: read only */
    H_COPY,     /* =x: the scope's own copy, read only */
    H_READ,     /* x */
    H_REF,      /* &x: the variable itself, unchecked (as C++) */
    H_FULL,     /* +x, or the scope's own variable */
};

/* How an expression uses an object. DEFER: a method's receiver, whose mode
 * is known once the method is. */
enum { A_REFER, A_READ, A_WRITE, A_DEFER };

/* One permission a scope holds on a variable (its list's entry). */
typedef struct eve_grant {
    struct pscope *ps;
    eve_perm_kind_t kind;
    const char *path;         /* the dotted path as written ("x", "self.sock") */
    eve_sym_t *sym;
    struct eve_grant *next;   /* on the symbol: the next (outer) grant */
    struct eve_grant *undo;   /* on the scope: the grant pushed before it */
} grant_t;

typedef enum { PS_ROOT, PS_FUNC, PS_METHOD, PS_TASK, PS_PFOR, PS_CALLBACK, PS_LAMBDA } ps_kind_t;

/* A permission scope: the program's top level, a function or method body,
 * a task, a parallel for's body, a callback or a lambda. */
typedef struct pscope {
    struct pscope *parent;    /* the scope that spawned it (tasks); NULL otherwise */
    ps_kind_t kind;
    size_t finish;            /* finish blocks open in its body */
    bool in_finish;           /* a task spawned inside a finish block of parent */
    const eve_ty_t *ret;      /* what 'return' takes; NULL: no return here */
    const char *fname;        /* for messages about returns */
    size_t loops;             /* loops open in its body */
    grant_t *granted;         /* its grants, newest first */
} pscope_t;

/* A permission a function's or method's list asks of its callers. */
typedef struct {
    eve_sym_t *sym;           /* a global, or one of the parameters */
    eve_perm_kind_t kind;
    const char *path;
    long param;               /* index of the parameter, -1: a global, -2: self */
} req_t;

struct eve_fninfo {
    const char *name;
    eve_sym_t **params;
    size_t nparams;
    eve_sym_t *self;          /* methods */
    req_t *reqs;
    size_t nreqs;
    const eve_ty_t *ret;
    const eve_ty_t *type;     /* its function type */
};

typedef struct {
    eve_pos_t pos;
    size_t seq;
    char msg[EVE_MAX_MSG];
} err_t;

#define MAX_ERRS 10000  /* kept for sorting; further ones are counted */

typedef struct memnode {
    const eve_class_t *cls;
    eve_member_t *m;
    struct memnode *next;
} memnode_t;

typedef struct {
    eve_sym_t *sym;
    const char *path;
    eve_pos_t pos;
    bool set;
} pending_t;

typedef struct {
    eve_ctx_t *cx;
    eve_arena_t *ar;
    bool oom;
    /* the symbol table: hash chains, newest first; a stack to close scopes */
    eve_sym_t **buckets;
    size_t nbuckets, nsyms;
    eve_sym_t **stack;
    size_t nstack, capstack;
    size_t depth;
    /* members of classes by (class, name) */
    memnode_t **mbuckets;
    size_t nmbuckets;
    /* errors, sorted at the end */
    err_t *errs;
    size_t nerrs, caperrs, dropped;
    /* where we are */
    pscope_t root;
    pscope_t *ps;
    eve_class_t *cls;          /* the class whose method is being checked */
    bool toplevel;             /* checking top-level statements (not a function) */
    size_t item;               /* the top-level item being checked */
    pending_t pending;         /* a deferred receiver access */
    /* the library */
    eve_class_t **libcls;
    size_t nlibcls;
    eve_class_t *kind_cls[EVE_TY_GENERIC + 1]; /* string, vector, ...: their methods */
    eve_sym_t *exit_sym;
    const eve_ty_t *t_err, *t_void, *t_int, *t_bool, *t_float, *t_char, *t_string;
    const eve_ty_t *t_basic, *t_bytes, *t_generic[2];
    /* a T& may be written here: a parameter's type being resolved */
    bool allow_ref;
    /* the callback being checked: its event's name and its one parameter's
     * (the paper writes `error` for the error handler's parameter `e`) */
    const char *handler_name, *handler_param;
} chk_t;

/* ---- memory and errors ----------------------------------------------------------- */

static void *alloc(chk_t *c, size_t n)
{
    void *p = eve_arena_alloc(c->ar, n);
    if (!p && !c->oom) {
        c->oom = true;
    }
    return p;
}

static void verr(chk_t *c, eve_pos_t pos, const char *fmt, va_list ap)
{
    if (c->nerrs == c->caperrs) {
        if (c->nerrs >= MAX_ERRS) {
            c->dropped++;
            return;
        }
        size_t cap = c->caperrs ? c->caperrs * 2 : 32;
        err_t *e = alloc(c, cap * sizeof *e);
        if (!e) {
            c->dropped++;
            return;
        }
        if (c->nerrs)
            memcpy(e, c->errs, c->nerrs * sizeof *e);
        c->errs = e;
        c->caperrs = cap;
    }
    err_t *e = &c->errs[c->nerrs];
    e->pos = pos;
    e->seq = c->nerrs++;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void err(chk_t *c, eve_pos_t pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verr(c, pos, fmt, ap);
    va_end(ap);
}

static int cmp_err(const void *x, const void *y)
{
    const err_t *a = x, *b = y;
    if (a->pos.line != b->pos.line)
        return a->pos.line < b->pos.line ? -1 : 1;
    if (a->pos.col != b->pos.col)
        return a->pos.col < b->pos.col ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The leftmost position of an expression (binary nodes sit at their operator). */
static eve_pos_t start_pos(const eve_node_t *n)
{
    for (;;) {
        switch (n->kind) {
        case EVE_N_BINARY: n = n->u.binary.lhs; break;
        case EVE_N_CALL: n = n->u.call.callee; break;
        case EVE_N_INDEX: n = n->u.index.obj; break;
        case EVE_N_MEMBER: n = n->u.member.obj; break;
        default: return n->pos;
        }
    }
}

/* ---- types ------------------------------------------------------------------------ */

static const eve_ty_t *mkty(chk_t *c, eve_ty_kind_t k, const eve_ty_t *a, const eve_ty_t *b)
{
    eve_ty_t *t = alloc(c, sizeof *t);
    if (!t)
        return c->t_err;
    t->kind = k;
    t->a = a;
    t->b = b;
    return t;
}

bool eve_ty_is_value(const eve_ty_t *t)
{
    switch (t->kind) {
    case EVE_TY_INT: case EVE_TY_BOOL: case EVE_TY_FLOAT: case EVE_TY_CHAR:
    case EVE_TY_STRING: case EVE_TY_FUNC: case EVE_TY_VOID: case EVE_TY_ERROR:
    case EVE_TY_BASIC:
        return true;
    default:
        return false;
    }
}

static size_t put(char *buf, size_t size, size_t at, const char *s)
{
    size_t n = strlen(s);
    if (at + 1 < size) {
        size_t room = size - 1 - at;
        memcpy(buf + at, s, n < room ? n : room);
        buf[at + (n < room ? n : room)] = 0;
    }
    return at + n;
}

static size_t ty_str(const eve_ty_t *t, char *buf, size_t size, size_t at, int depth)
{
    static const char *const names[] = {
        [EVE_TY_ERROR] = "<error>", [EVE_TY_VOID] = "void", [EVE_TY_INT] = "int",
        [EVE_TY_BOOL] = "bool", [EVE_TY_FLOAT] = "float", [EVE_TY_CHAR] = "char",
        [EVE_TY_STRING] = "string", [EVE_TY_VECTOR] = "vector", [EVE_TY_SET] = "set",
        [EVE_TY_MAP] = "map", [EVE_TY_EMITTER] = "emitter", [EVE_TY_BASIC] = "basic",
        [EVE_TY_BYTES] = "bytes",
    };
    if (depth > 8)
        return put(buf, size, at, "...");
    switch (t->kind) {
    case EVE_TY_CLASS:
        return put(buf, size, at, t->cls->name);
    case EVE_TY_GENERIC:
        return put(buf, size, at, t->index ? "V" : "T");
    case EVE_TY_FUNC:
        at = put(buf, size, at, "(");
        for (size_t i = 0; i < t->nparams; i++) {
            if (i)
                at = put(buf, size, at, ", ");
            at = ty_str(t->params[i], buf, size, at, depth + 1);
        }
        at = put(buf, size, at, ") ");
        return ty_str(t->ret, buf, size, at, depth + 1);
    case EVE_TY_VECTOR: case EVE_TY_SET: case EVE_TY_EMITTER: case EVE_TY_MAP:
        at = put(buf, size, at, names[t->kind]);
        at = put(buf, size, at, "<");
        at = ty_str(t->a, buf, size, at, depth + 1);
        if (t->kind == EVE_TY_MAP) {
            at = put(buf, size, at, ", ");
            at = ty_str(t->b, buf, size, at, depth + 1);
        }
        return put(buf, size, at, ">");
    default:
        return put(buf, size, at, names[t->kind]);
    }
}

const char *eve_ty_name(const eve_ty_t *t, char *buf, size_t size)
{
    if (size)
        buf[0] = 0;
    ty_str(t, buf, size, 0, 0);
    return buf;
}

static const char *tn(const eve_ty_t *t, char *buf)
{
    return eve_ty_name(t, buf, 96);
}

static bool ty_eq(const eve_ty_t *x, const eve_ty_t *y)
{
    if (x == y)
        return true;
    if (x->kind != y->kind)
        return false;
    switch (x->kind) {
    case EVE_TY_VECTOR: case EVE_TY_SET: case EVE_TY_EMITTER:
        return ty_eq(x->a, y->a);
    case EVE_TY_MAP:
        return ty_eq(x->a, y->a) && ty_eq(x->b, y->b);
    case EVE_TY_CLASS:
        return x->cls == y->cls;
    case EVE_TY_GENERIC:
        return x->index == y->index;
    case EVE_TY_FUNC:
        if (x->nparams != y->nparams || !ty_eq(x->ret, y->ret))
            return false;
        for (size_t i = 0; i < x->nparams; i++)
            if (!ty_eq(x->params[i], y->params[i]))
                return false;
        return true;
    default:
        return true;
    }
}

static bool is_err(const eve_ty_t *t)
{
    return t->kind == EVE_TY_ERROR;
}

/* May a value of type from go where type to is expected? */
static bool assignable(const eve_ty_t *to, const eve_ty_t *from)
{
    if (is_err(to) || is_err(from))
        return true;
    if (to->kind == EVE_TY_BASIC)
        return from->kind == EVE_TY_INT || from->kind == EVE_TY_BOOL || from->kind == EVE_TY_FLOAT ||
               from->kind == EVE_TY_CHAR || from->kind == EVE_TY_STRING;
    if (to->kind == EVE_TY_BYTES)
        return from->kind == EVE_TY_STRING ||
               (from->kind == EVE_TY_CLASS && from->cls->lib &&
                (strcmp(from->cls->name, "read_buffer") == 0 ||
                 strcmp(from->cls->name, "write_buffer") == 0));
    return ty_eq(to, from);
}

/* T, K, V of the library's signatures, replaced by the receiver's arguments. */
static const eve_ty_t *subst(chk_t *c, const eve_ty_t *t, const eve_ty_t *recv)
{
    switch (t->kind) {
    case EVE_TY_GENERIC: {
        const eve_ty_t *r = t->index == 0 ? recv->a : recv->b;
        return r ? r : c->t_err;
    }
    case EVE_TY_VECTOR: case EVE_TY_SET: case EVE_TY_EMITTER:
        return mkty(c, t->kind, subst(c, t->a, recv), NULL);
    case EVE_TY_MAP:
        return mkty(c, t->kind, subst(c, t->a, recv), subst(c, t->b, recv));
    default:
        return t;
    }
}

/* ---- the symbol table -------------------------------------------------------------- */

static size_t hash(const char *s)
{
    size_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static eve_sym_t *lookup(chk_t *c, const char *name)
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
    eve_sym_t **b = alloc(c, n * sizeof *b);
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
static bool bind(chk_t *c, eve_sym_t *s)
{
    if (c->nstack == c->capstack) {
        size_t cap = c->capstack ? c->capstack * 2 : 256;
        eve_sym_t **st = alloc(c, cap * sizeof *st);
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

static void open_scope(chk_t *c)
{
    c->depth++;
}

static void close_scope(chk_t *c)
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
static eve_sym_t *declare(chk_t *c, const char *name, eve_sym_kind_t kind, eve_pos_t pos)
{
    eve_sym_t *old = lookup(c, name);
    if (old && old->depth == c->depth)
        err(c, pos, "'%s' is already declared in this scope (at %u:%u)", name,
            (unsigned)old->pos.line, (unsigned)old->pos.col);
    eve_sym_t *s = alloc(c, sizeof *s);
    if (!s)
        return NULL;
    s->name = name;
    s->kind = kind;
    s->pos = pos;
    s->ty = c->t_err;
    s->owner = c->ps;
    s->own = H_FULL;
    if (!bind(c, s))
        return NULL;
    return s;
}

/* ---- members ---------------------------------------------------------------------- */

static size_t mhash(const eve_class_t *cls, const char *name)
{
    return (hash(name) ^ ((size_t)(uintptr_t)cls >> 4) * 31u);
}

static void add_member(chk_t *c, eve_class_t *cls, eve_member_t *m)
{
    m->next = cls->members;
    cls->members = m;
    memnode_t *mn = alloc(c, sizeof *mn);
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
static eve_member_t *find_member(chk_t *c, const eve_class_t *cls, const char *name, bool events)
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

static eve_class_t *lib_class(chk_t *c, const char *name)
{
    for (size_t i = 0; i < c->nlibcls; i++)
        if (strcmp(c->libcls[i]->name, name) == 0)
            return c->libcls[i];
    return NULL;
}

/* The class holding the members of a type (the library's for string and the
 * containers), or NULL. */
static eve_class_t *class_of(chk_t *c, const eve_ty_t *t)
{
    if (t->kind == EVE_TY_CLASS)
        return t->cls;
    return c->kind_cls[t->kind];
}

/* ---- the library --------------------------------------------------------------- */

static const eve_ty_t *basic_kind(chk_t *c, const char *name)
{
    if (strcmp(name, "int") == 0) return c->t_int;
    if (strcmp(name, "bool") == 0) return c->t_bool;
    if (strcmp(name, "float") == 0) return c->t_float;
    if (strcmp(name, "char") == 0) return c->t_char;
    if (strcmp(name, "string") == 0) return c->t_string;
    if (strcmp(name, "void") == 0) return c->t_void;
    return NULL;
}

static int container_kind(const char *name)
{
    if (strcmp(name, "vector") == 0) return EVE_TY_VECTOR;
    if (strcmp(name, "set") == 0) return EVE_TY_SET;
    if (strcmp(name, "map") == 0) return EVE_TY_MAP;
    if (strcmp(name, "emitter") == 0) return EVE_TY_EMITTER;
    return -1;
}

static void skip_ws(const char **s)
{
    while (**s == ' ')
        (*s)++;
}

/* A type in a library signature (trusted text: the table in stdlib.c). */
static const eve_ty_t *lib_type(chk_t *c, const char **s)
{
    skip_ws(s);
    char name[64];
    size_t n = 0;
    while ((**s >= 'a' && **s <= 'z') || (**s >= 'A' && **s <= 'Z') || **s == '_') {
        if (n + 1 < sizeof name)
            name[n++] = **s;
        (*s)++;
    }
    name[n] = 0;
    const eve_ty_t *args[2] = {NULL, NULL};
    size_t nargs = 0;
    skip_ws(s);
    if (**s == '<') {
        (*s)++;
        while (nargs < 2) {
            args[nargs++] = lib_type(c, s);
            skip_ws(s);
            if (**s != ',')
                break;
            (*s)++;
        }
        if (**s == '>')
            (*s)++;
    }
    const eve_ty_t *b = basic_kind(c, name);
    if (b)
        return b;
    if (strcmp(name, "T") == 0 || strcmp(name, "K") == 0) return c->t_generic[0];
    if (strcmp(name, "V") == 0) return c->t_generic[1];
    if (strcmp(name, "basic") == 0) return c->t_basic;
    if (strcmp(name, "bytes") == 0) return c->t_bytes;
    int k = container_kind(name);
    if (k >= 0)
        return mkty(c, (eve_ty_kind_t)k, args[0] ? args[0] : c->t_err,
                    k == EVE_TY_MAP ? (args[1] ? args[1] : c->t_err) : NULL);
    eve_class_t *cls = lib_class(c, name);
    if (!cls)
        return c->t_err; /* a typo in the table: test_eve_check catches it */
    eve_ty_t *t = alloc(c, sizeof *t);
    if (!t)
        return c->t_err;
    t->kind = EVE_TY_CLASS;
    t->cls = cls;
    return t;
}

/* "(a: T, b: int) R" */
static const eve_ty_t *lib_sig(chk_t *c, const char *s)
{
    eve_ty_t *t = alloc(c, sizeof *t);
    const eve_ty_t *params[8];
    size_t n = 0;
    if (!t)
        return c->t_err;
    t->kind = EVE_TY_FUNC;
    skip_ws(&s);
    if (*s == '(')
        s++;
    skip_ws(&s);
    while (*s && *s != ')') {
        while (*s && *s != ':' && *s != ')')
            s++; /* the parameter's name: documentation */
        if (*s != ':')
            break;
        s++;
        if (n < 8)
            params[n++] = lib_type(c, &s);
        skip_ws(&s);
        if (*s == ',')
            s++;
        skip_ws(&s);
    }
    if (*s == ')')
        s++;
    t->ret = lib_type(c, &s);
    t->params = alloc(c, (n ? n : 1) * sizeof *t->params);
    if (!t->params)
        return c->t_err;
    for (size_t i = 0; i < n; i++)
        t->params[i] = params[i];
    t->nparams = n;
    return t;
}

static const eve_ty_t *class_type(chk_t *c, eve_class_t *cls)
{
    eve_ty_t *t = alloc(c, sizeof *t);
    if (!t)
        return c->t_err;
    t->kind = EVE_TY_CLASS;
    t->cls = cls;
    return t;
}

/* Declares the library's types, objects and functions (depth 0). Modules
 * are declared by the imports. */
static void load_stdlib(chk_t *c)
{
    size_t ntypes = 0;
    for (size_t i = 0; i < eve_stdlib_count; i++)
        if (eve_stdlib[i].kind == EVE_LIB_TYPE)
            ntypes++;
    c->libcls = alloc(c, (ntypes + 1) * sizeof *c->libcls);
    if (!c->libcls)
        return;
    /* the types first: signatures name them */
    for (size_t i = 0; i < eve_stdlib_count; i++) {
        const eve_lib_entry_t *e = &eve_stdlib[i];
        if (e->kind != EVE_LIB_TYPE)
            continue;
        eve_class_t *cls = alloc(c, sizeof *cls);
        if (!cls)
            return;
        cls->name = e->name;
        cls->lib = true;
        c->libcls[c->nlibcls++] = cls;
        eve_sym_t *s = declare(c, e->name, EVE_SYM_CLASS, (eve_pos_t){0, 0});
        if (!s)
            return;
        s->cls = cls;
        const eve_ty_t *b = basic_kind(c, e->name);
        int k = container_kind(e->name);
        if (b)
            c->kind_cls[b->kind] = cls;
        else if (k >= 0)
            c->kind_cls[k] = cls;
    }
    for (size_t i = 0; i < eve_stdlib_count; i++) {
        const eve_lib_entry_t *e = &eve_stdlib[i];
        switch (e->kind) {
        case EVE_LIB_GLOBAL: {
            eve_sym_t *s = declare(c, e->name, EVE_SYM_LIBOBJ, (eve_pos_t){0, 0});
            const char *sig = e->sig;
            if (s)
                s->ty = lib_type(c, &sig);
            break;
        }
        case EVE_LIB_FUNC:
            if (!e->owner) {
                eve_sym_t *s = declare(c, e->name, EVE_SYM_FUNC, (eve_pos_t){0, 0});
                if (s)
                    s->ty = lib_sig(c, e->sig);
                if (s && strcmp(e->name, "exit") == 0)
                    c->exit_sym = s;
                break;
            }
            /* a module's function: a static member of the module */
            /* fall through */
        case EVE_LIB_METHOD:
        case EVE_LIB_STATIC:
        case EVE_LIB_EVENT: {
            eve_class_t *cls = lib_class(c, e->owner);
            if (!cls) {
                /* a module: a class of its own, made on first use */
                cls = alloc(c, sizeof *cls);
                if (!cls)
                    return;
                cls->name = e->owner;
                cls->lib = true;
                eve_class_t **more = alloc(c, (c->nlibcls + 1) * sizeof *more);
                if (!more)
                    return;
                memcpy(more, c->libcls, c->nlibcls * sizeof *more);
                more[c->nlibcls++] = cls;
                c->libcls = more;
            }
            eve_member_t *m = alloc(c, sizeof *m);
            if (!m)
                return;
            m->name = e->name;
            m->mut = e->mut;
            if (e->kind == EVE_LIB_EVENT) {
                const char *sig = e->sig;
                m->kind = EVE_MEM_EVENT;
                m->ty = lib_type(c, &sig);
            } else {
                m->kind = e->kind == EVE_LIB_METHOD ? EVE_MEM_METHOD : EVE_MEM_STATIC;
                m->ty = lib_sig(c, e->sig);
            }
            add_member(c, cls, m);
            break;
        }
        default:
            break;
        }
    }
}

static bool is_lib_module(const char *name)
{
    for (size_t i = 0; i < eve_stdlib_count; i++)
        if (eve_stdlib[i].kind == EVE_LIB_MODULE && strcmp(eve_stdlib[i].name, name) == 0)
            return true;
    return false;
}

/* ---- types written in the program --------------------------------------------------- */

/* where: "variable", "parameter", "field", "result", "argument" (of a generic) */
/* The paper's names for library types (its Program 2), used where the
 * program declares no type of that name: `socket` and a listener's
 * `connection` are sockets (calling a connection parameter, c(), gives it),
 * the `error` a listener reports is its message. */
static const char *const type_aliases[][2] = {
    {"socket", "tcp_socket"}, {"connection", "tcp_socket"}, {"error", "string"}};

/* "'@' on an element's type": an object is taken as it is (elements are
 * reached by reference already); a value cannot be shared there. */
static void shared_element(chk_t *c, const eve_type_t *t, const eve_ty_t *r, const char *where)
{
    char b[96];
    if (!t->shared || is_err(r))
        return;
    if (eve_ty_is_value(r))
        err(c, t->pos, "'@' (shared) marks a variable or a parameter, not this type");
    else
        eve_warning(c->cx, t->pos, "'%s@' as %s: taken as %s (an object is reached by reference; a task's "
                    "permission on it is what its list names)", t->name, where, tn(r, b));
}

static const eve_ty_t *resolve_type(chk_t *c, const eve_type_t *t, bool allow_void, bool allow_shared)
{
    if (!t)
        return c->t_err;
    bool ref_ok = c->allow_ref;
    c->allow_ref = false; /* not in type arguments */
    if (t->shared && !allow_shared)
        err(c, t->pos, "'@' (shared) marks a variable or a parameter, not this type");
    if (t->ref && !ref_ok)
        err(c, t->pos, "'&' (a reference) marks a parameter's type, not this type");
    const char *name = t->name;
    eve_sym_t *s = lookup(c, name);
    for (size_t i = 0; !s && i < sizeof type_aliases / sizeof type_aliases[0]; i++)
        if (strcmp(name, type_aliases[i][0]) == 0) {
            name = type_aliases[i][1];
            s = lookup(c, name);
        }
    if (!s) {
        err(c, t->pos, "unknown type '%s'", t->name);
        return c->t_err;
    }
    if (s->kind != EVE_SYM_CLASS) {
        err(c, t->pos, "'%s' is not a type", t->name);
        return c->t_err;
    }
    const eve_ty_t *b = s->cls->lib ? basic_kind(c, name) : NULL;
    int k = s->cls->lib ? container_kind(name) : -1;
    size_t want = k < 0 ? 0 : k == EVE_TY_MAP ? 2 : 1;
    if (t->nargs != want) {
        if (want == 0)
            err(c, t->pos, "'%s' takes no type arguments", t->name);
        else
            err(c, t->pos, "'%s' takes %zu type argument%s, %zu given", t->name, want,
                want == 1 ? "" : "s", t->nargs);
        return c->t_err;
    }
    if (b) {
        if (b->kind == EVE_TY_VOID && !allow_void) {
            err(c, t->pos, "'void' is only a result type or an event's payload (emitter<void>)");
            return c->t_err;
        }
        return b;
    }
    if (k >= 0) {
        const eve_ty_t *a0 = resolve_type(c, t->args[0], k == EVE_TY_EMITTER, true);
        shared_element(c, t->args[0], a0, "a type argument");
        const eve_ty_t *a1 = want == 2 ? resolve_type(c, t->args[1], false, true) : NULL;
        if (a1)
            shared_element(c, t->args[1], a1, "a type argument");
        if (k == EVE_TY_MAP && !is_err(a0) && !eve_ty_is_value(a0)) {
            char buf[96];
            err(c, t->args[0]->pos, "a map's key must be a value type (int, bool, float, char, string), not %s",
                tn(a0, buf));
        }
        if ((k == EVE_TY_SET) && !is_err(a0) && !eve_ty_is_value(a0) && a0->kind != EVE_TY_CLASS) {
            char buf[96];
            err(c, t->args[0]->pos, "a set holds values or objects, not %s", tn(a0, buf));
        }
        return mkty(c, (eve_ty_kind_t)k, a0, a1);
    }
    return class_type(c, s->cls);
}

/* A parameter's type: T& may be written (a reference: for an object what a
 * parameter is anyway, for a value the caller's value, read only). */
static const eve_ty_t *resolve_param_type(chk_t *c, const eve_type_t *t, bool allow_shared)
{
    c->allow_ref = true;
    const eve_ty_t *r = resolve_type(c, t, false, allow_shared);
    c->allow_ref = false;
    return r;
}

/* ---- permission scopes and holdings ------------------------------------------------------ */

static const char *ps_noun(const pscope_t *ps)
{
    switch (ps->kind) {
    case PS_ROOT: return "program";
    case PS_FUNC: return "function";
    case PS_METHOD: return "method";
    case PS_TASK: case PS_PFOR: return "task";
    case PS_CALLBACK: return "callback";
    case PS_LAMBDA: return "lambda";
    }
    return "task";
}

static bool path_covers(const char *grant, const char *path)
{
    size_t n = strlen(grant);
    return strncmp(grant, path, n) == 0 && (path[n] == 0 || path[n] == '.');
}

static int grant_hold(eve_perm_kind_t k)
{
    switch (k) {
    case EVE_PERM_READ: return H_READ;
    case EVE_PERM_FULL: return H_FULL;
    case EVE_PERM_NULL: return H_NULL;
    case EVE_CAPTURE_COPY: return H_COPY;
    case EVE_CAPTURE_REF: return H_REF;
    }
    return H_NONE;
}

/* path with its first component replaced by the alias's path */
static const char *realias(chk_t *c, const char *alias_path, const char *path)
{
    const char *dot = strchr(path, '.');
    if (!dot)
        return alias_path;
    size_t a = strlen(alias_path), r = strlen(dot);
    char *p = alloc(c, a + r + 1);
    if (!p)
        return alias_path;
    memcpy(p, alias_path, a);
    memcpy(p + a, dot, r + 1);
    return p;
}

/* What ps holds on the variable (path starts with its name). *shown: the
 * name a message should give (the granted path, or the aliased object). */
static int held(chk_t *c, pscope_t *ps, eve_sym_t *sym, const char *path, const char **shown)
{
    for (int hops = 0; hops < 64; hops++) {
        *shown = path;
        if (!ps || ps->kind == PS_ROOT)
            return H_FULL;
        grant_t *best = NULL;
        size_t bestlen = 0;
        for (grant_t *g = sym->grants; g; g = g->next) {
            size_t n = strlen(g->path);
            if (g->ps == ps && path_covers(g->path, path) && (!best || n > bestlen)) {
                best = g;
                bestlen = n;
            }
        }
        if (best) {
            *shown = best->path;
            return grant_hold(best->kind);
        }
        if (sym->owner == ps) {
            if (sym->alias) {
                path = realias(c, sym->alias_path, path);
                sym = sym->alias;
                continue;
            }
            return sym->own;
        }
        if (!sym->shared && eve_ty_is_value(sym->ty))
            return H_IMPLICIT;
        return H_NONE;
    }
    return H_FULL;
}

/* A use of variable sym (at path) in the current scope. via: the function
 * whose permission list asks for it, or NULL. */
static void check_access(chk_t *c, eve_pos_t pos, eve_sym_t *sym, const char *path, int mode, const char *via)
{
    if (mode == A_DEFER) {
        c->pending.sym = sym;
        c->pending.path = path;
        c->pending.pos = pos;
        c->pending.set = true;
        return;
    }
    if (sym->kind == EVE_SYM_LIBOBJ) {
        if (mode == A_WRITE)
            err(c, pos, "cannot modify '%s': it belongs to the library", sym->name);
        return;
    }
    if (sym->kind != EVE_SYM_VAR)
        return;
    const char *shown;
    int h = held(c, c->ps, sym, path, &shown);
    const char *noun = ps_noun(c->ps);
    char suffix[EVE_MAX_MSG / 2] = "";
    if (via)
        snprintf(suffix, sizeof suffix, " (calling '%s' needs it)", via);
    switch (h) {
    case H_NONE:
        err(c, pos, "'%s' is used but not declared in the %s's permissions%s", shown, noun, suffix);
        break;
    case H_NULL:
        if (mode != A_REFER)
            err(c, pos, "'%s' has only the null permission in the %s (-%s): it may be passed on, not used%s",
                shown, noun, shown, suffix);
        break;
    case H_IMPLICIT:
        if (mode == A_WRITE)
            err(c, pos, "'%s' is modified but the %s has only a copy of it (write [+%s])%s", shown, noun,
                shown, suffix);
        break;
    case H_COPY:
        if (mode == A_WRITE)
            err(c, pos, "'%s' is a copy in the %s (=%s): it cannot be modified%s", shown, noun, shown, suffix);
        break;
    case H_READ:
        if (mode == A_WRITE)
            err(c, pos, "'%s' is modified but the %s has only read permission (write [+%s])%s", shown,
                noun, shown, suffix);
        break;
    default:
        break;
    }
}

static void flush_pending(chk_t *c, int mode, const char *via)
{
    if (c->pending.set) {
        c->pending.set = false;
        check_access(c, c->pending.pos, c->pending.sym, c->pending.path, mode, via);
    }
}

static void push_grant(chk_t *c, pscope_t *ps, eve_sym_t *sym, eve_perm_kind_t kind, const char *path)
{
    grant_t *g = alloc(c, sizeof *g);
    if (!g)
        return;
    g->ps = ps;
    g->kind = kind;
    g->path = path;
    g->sym = sym;
    g->next = sym->grants;
    sym->grants = g;
    g->undo = ps->granted;
    ps->granted = g;
}

static void pop_grants(pscope_t *ps)
{
    for (grant_t *g = ps->granted; g; g = g->undo)
        if (g->sym->grants == g)
            g->sym->grants = g->next;
    ps->granted = NULL;
}

static const char *perm_sigil(eve_perm_kind_t k)
{
    switch (k) {
    case EVE_PERM_FULL: return "+";
    case EVE_PERM_NULL: return "-";
    case EVE_CAPTURE_COPY: return "=";
    case EVE_CAPTURE_REF: return "&";
    default: return "";
    }
}

/* The root name of a permission path, in buf. */
static const char *path_root(const char *path, char *buf, size_t size)
{
    size_t n = strcspn(path, ".");
    if (n >= size)
        n = size - 1;
    memcpy(buf, path, n);
    buf[n] = 0;
    return buf;
}

/* The type at a dotted path below a variable's type; reports a missing field. */
static const eve_ty_t *path_type(chk_t *c, eve_pos_t pos, const eve_ty_t *t, const char *path)
{
    const char *p = strchr(path, '.');
    while (p && !is_err(t)) {
        p++;
        char name[EVE_MAX_IDENT + 1];
        size_t n = strcspn(p, ".");
        if (n > EVE_MAX_IDENT)
            n = EVE_MAX_IDENT;
        memcpy(name, p, n);
        name[n] = 0;
        eve_member_t *m = t->kind == EVE_TY_CLASS ? find_member(c, t->cls, name, false) : NULL;
        if (!m || m->kind != EVE_MEM_FIELD) {
            char buf[96];
            err(c, pos, "%s has no field '%s'", tn(t, buf), name);
            return c->t_err;
        }
        t = m->ty;
        p = strchr(p, '.');
    }
    return t;
}

/* Resolves one entry of a permission list to its variable; NULL (reported)
 * if it names none. */
static eve_sym_t *perm_sym(chk_t *c, const eve_perm_t *pm)
{
    char root[EVE_MAX_IDENT + 1];
    path_root(pm->name, root, sizeof root);
    eve_sym_t *s = lookup(c, root);
    if (!s) {
        err(c, pm->pos, "unknown name '%s'", root);
        return NULL;
    }
    if (s->kind == EVE_SYM_LIBOBJ) {
        /* the paper's Program 2 writes [+stderr]: harmless, so not refused */
        eve_warning(c->cx, pm->pos, "'%s' belongs to the library and needs no permission: '%s%s' is ignored", root,
                    perm_sigil(pm->kind), pm->name);
        return NULL;
    }
    if (s->kind != EVE_SYM_VAR) {
        err(c, pm->pos, "'%s' is not a variable: permissions name variables", root);
        return NULL;
    }
    path_type(c, pm->pos, s->ty, pm->name);
    return s;
}

static const char *hold_words(int h, const char *name, char *buf, size_t size)
{
    switch (h) {
    case H_NONE: snprintf(buf, size, "does not hold '%s'", name); break;
    case H_NULL: snprintf(buf, size, "holds only '-%s'", name); break;
    case H_IMPLICIT: case H_COPY: snprintf(buf, size, "holds only a copy of '%s'", name); break;
    case H_READ: snprintf(buf, size, "holds only '%s'", name); break;
    default: snprintf(buf, size, "holds '%s'", name); break;
    }
    return buf;
}

/* Opens the permission list of a task, parallel for, callback or lambda
 * (function lists: resolve_fn). loopvar: a parallel for's own variable. */
static void open_perms(chk_t *c, pscope_t *ps, const eve_perms_t *perms, eve_sym_t *loopvar)
{
    pscope_t *parent = ps->parent;
    bool spawned = (ps->kind == PS_TASK || ps->kind == PS_PFOR) && ps->in_finish && parent;
    for (size_t i = 0; i < perms->n; i++) {
        const eve_perm_t *pm = &perms->v[i];
        eve_sym_t *s = perm_sym(c, pm);
        if (!s)
            continue;
        perms->v[i].sym = s; /* for the code generator */
        /* A refused entry is still granted as written: one mistake, one error. */
        push_grant(c, ps, s, pm->kind, pm->name);
        const char *noun = ps_noun(ps), *sigil = perm_sigil(pm->kind), *name = pm->name;
        bool capture = pm->kind == EVE_CAPTURE_COPY || pm->kind == EVE_CAPTURE_REF;
        char w[EVE_MAX_MSG / 2];
        const char *shown = name;
        int h = spawned ? held(c, parent, s, name, &shown) : H_FULL;
        if (capture && s->shared) {
            err(c, pm->pos, "'%s' is shared: name it with a permission (%s, +%s or -%s), not %s%s", name, name,
                name, name, sigil, name);
        } else if (s == loopvar) {
            if (capture)
                err(c, pm->pos, "'%s' is the parallel for's own variable: name it %s, +%s or -%s", name, name,
                    name, name);
        } else if (pm->kind == EVE_CAPTURE_REF) {
            /* the variable must outlive the scope: a global, or the parent's
             * own (or its &x) while the parent waits in finish */
            if (s->global)
                continue;
            if (spawned && (s->owner == parent || h == H_REF)) {
                if (h < H_REF)
                    err(c, pm->pos, "the task asks for '&%s' but its parent %s (inside 'finish' a task may ask "
                        "only for permissions its parent holds)", name, hold_words(h, shown, w, sizeof w));
            } else if (ps->kind == PS_TASK || ps->kind == PS_PFOR) {
                err(c, pm->pos, "'&%s' refers to a variable the task may outlive: capture a copy (=%s), or "
                    "spawn the task inside 'finish'", name, name);
            } else {
                err(c, pm->pos, "'&%s' refers to a variable the %s may outlive: capture a copy (=%s) or make it "
                    "shared (T@) and name it", name, noun, name);
            }
        } else if (spawned) {
            /* inside finish: only what the parent holds */
            bool ok = pm->kind == EVE_PERM_FULL ? h >= H_REF : pm->kind == EVE_PERM_NULL ? h >= H_NULL
                                                                                            : h >= H_IMPLICIT;
            if (!ok)
                err(c, pm->pos, "the task asks for '%s%s' but its parent %s (inside 'finish' a task may ask only "
                    "for permissions its parent holds)", sigil, name, hold_words(h, shown, w, sizeof w));
        }
    }
}

/* ---- expressions ----------------------------------------------------------------------- */

static const eve_ty_t *value(chk_t *c, eve_node_t *n, int mode, const char *sub);
static void block(chk_t *c, eve_list_t *body);
static void stmts(chk_t *c, eve_list_t *body);
static bool always_returns(chk_t *c, const eve_list_t *body);

static const eve_ty_t *set_ty(eve_node_t *n, const eve_ty_t *t)
{
    n->type = t;
    return t;
}

/* A name used as a value (a variable, a field of self, a library object). */
static const eve_ty_t *name_value(chk_t *c, eve_node_t *n, int mode, const char *sub)
{
    const char *name = n->u.name.name;
    eve_sym_t *s = lookup(c, name);
    /* inside a method, the class's members come before globals and the library */
    if (c->cls && (!s || s->depth <= 1)) {
        eve_member_t *m = find_member(c, c->cls, name, false);
        eve_sym_t *self = lookup(c, "self");
        if (m && self && self->kind == EVE_SYM_VAR) {
            if (m->kind != EVE_MEM_FIELD) {
                err(c, n->pos, "method '%s' must be called", name);
                return c->t_err;
            }
            size_t len = 5 + strlen(name) + (sub ? strlen(sub) + 1 : 0) + 1;
            char *path = alloc(c, len);
            if (path)
                snprintf(path, len, "self.%s%s%s", name, sub ? "." : "", sub ? sub : "");
            n->sym = self;
            check_access(c, n->pos, self, path ? path : "self", mode, NULL);
            return m->ty;
        }
    }
    if (!s && c->handler_name && c->handler_param && strcmp(name, c->handler_name) == 0) {
        /* the paper's Program 2 prints `error` inside the error handler
         * whose parameter is `e`: the handler's name, read as its value */
        eve_warning(c->cx, n->pos, "'%s' is the handler's name, not a variable: taken as its parameter '%s'", name,
                    c->handler_param);
        n->u.name.name = c->handler_param;
        return name_value(c, n, mode, sub);
    }
    if (!s) {
        if (is_lib_module(name))
            err(c, n->pos, "unknown name '%s' (a library module: import %s)", name, name);
        else
            err(c, n->pos, "unknown name '%s'", name);
        return c->t_err;
    }
    n->sym = s;
    switch (s->kind) {
    case EVE_SYM_VAR:
    case EVE_SYM_LIBOBJ: {
        if (c->toplevel && c->ps == &c->root && s->global && s->order >= c->item && s->pos.line)
            err(c, n->pos, "'%s' is used before its declaration (at %u:%u)", name, (unsigned)s->pos.line,
                (unsigned)s->pos.col);
        const char *path = name;
        if (sub) {
            size_t len = strlen(name) + strlen(sub) + 2;
            char *p = alloc(c, len);
            if (p) {
                snprintf(p, len, "%s.%s", name, sub);
                path = p;
            }
        }
        check_access(c, n->pos, s, path, mode, NULL);
        return s->ty;
    }
    case EVE_SYM_FUNC:
        err(c, n->pos, "'%s' is a function: call it (only lambdas are values)", name);
        return c->t_err;
    case EVE_SYM_CLASS:
        err(c, n->pos, "'%s' is a type, not a value", name);
        return c->t_err;
    case EVE_SYM_MODULE:
        err(c, n->pos, "'%s' is a module, not a value", name);
        return c->t_err;
    default:
        return c->t_err;
    }
}

/* Arguments against parameter types. fn: a user function (its list says
 * which parameters it modifies); recv: the receiver for T, K, V. */
static void check_args(chk_t *c, eve_node_t *call, const char *fname, const eve_ty_t *ft,
                       const struct eve_fninfo *fn, const eve_ty_t *recv)
{
    eve_list_t *args = &call->u.call.args;
    size_t np = ft->nparams;
    bool emit_void = recv && recv->kind == EVE_TY_EMITTER && recv->a && recv->a->kind == EVE_TY_VOID;
    if (emit_void)
        np = 0;
    if (args->n != np)
        err(c, call->pos, "'%s' takes %zu argument%s, %zu given", fname, np, np == 1 ? "" : "s", args->n);
    for (size_t i = 0; i < args->n; i++) {
        int mode = A_READ;
        if (fn)
            for (size_t k = 0; k < fn->nreqs; k++)
                if (fn->reqs[k].param == (long)i && strchr(fn->reqs[k].path, '.') == NULL)
                    mode = fn->reqs[k].kind == EVE_PERM_FULL ? A_WRITE
                           : fn->reqs[k].kind == EVE_PERM_NULL ? A_REFER : A_READ;
        const eve_ty_t *pt = i < np ? ft->params[i] : c->t_err;
        if (recv)
            pt = subst(c, pt, recv);
        const eve_ty_t *at = value(c, args->v[i], mode, NULL);
        if (at->kind == EVE_TY_VOID) {
            err(c, start_pos(args->v[i]), "argument %zu of '%s' has no value (void)", i + 1, fname);
        } else if (!assignable(pt, at)) {
            char b1[96], b2[96];
            err(c, start_pos(args->v[i]), "argument %zu of '%s' is %s, expected %s", i + 1, fname, tn(at, b1),
                tn(pt, b2));
        }
    }
}

/* The permissions a user function's or method's list asks for its globals,
 * checked at a call as uses by the caller. */
static void check_reqs(chk_t *c, eve_pos_t pos, const struct eve_fninfo *fn)
{
    for (size_t k = 0; k < fn->nreqs; k++) {
        const req_t *r = &fn->reqs[k];
        if (r->param != -1)
            continue;
        int mode = r->kind == EVE_PERM_FULL ? A_WRITE : r->kind == EVE_PERM_NULL ? A_REFER : A_READ;
        check_access(c, pos, r->sym, r->path, mode, fn->name);
    }
}

static int self_mode(const struct eve_fninfo *fn)
{
    if (!fn)
        return A_READ;
    for (size_t k = 0; k < fn->nreqs; k++)
        if (fn->reqs[k].param == -2 && strchr(fn->reqs[k].path, '.') == NULL)
            return fn->reqs[k].kind == EVE_PERM_FULL ? A_WRITE
                   : fn->reqs[k].kind == EVE_PERM_NULL ? A_REFER : A_READ;
    for (size_t k = 0; k < fn->nreqs; k++)
        if (fn->reqs[k].param == -2 && fn->reqs[k].kind == EVE_PERM_FULL)
            return A_WRITE; /* +self.field: modifies part of the receiver */
    return A_READ;
}

static eve_node_t *mknode(chk_t *c, eve_node_kind_t k, eve_pos_t pos)
{
    eve_node_t *n = alloc(c, sizeof *n);
    if (n) {
        n->kind = k;
        n->pos = pos;
    }
    return n;
}

static eve_node_t *mkstring(chk_t *c, eve_pos_t pos, const char *bytes, size_t len)
{
    eve_node_t *n = mknode(c, EVE_N_STRING, pos);
    char *b = alloc(c, len + 1);
    if (!n || !b)
        return NULL;
    memcpy(b, bytes, len);
    n->u.string.bytes = b;
    n->u.string.len = len;
    return n;
}

/* a + b, strings (a NULL: b alone) */
static eve_node_t *concat(chk_t *c, eve_node_t *a, eve_node_t *b)
{
    if (!a || !b)
        return a ? a : b;
    eve_node_t *n = mknode(c, EVE_N_BINARY, b->pos);
    if (n) {
        n->u.binary.op = EVE_T_PLUS;
        n->u.binary.lhs = a;
        n->u.binary.rhs = b;
    }
    return n;
}

/* stream.write(FORMAT, args...) (the paper's `stderr.write("...: %s",
 * error)`): FORMAT, a string literal, becomes the concatenation of its
 * text and of to_string(arg) for each %s, %d, %f or %c in it (%% is a
 * '%'), which write's one argument then takes. False (reported) when the
 * format is no literal or does not match the arguments. */
static bool expand_format(chk_t *c, eve_node_t *call, const char *what)
{
    eve_list_t *a = &call->u.call.args;
    eve_node_t *f = a->v[0];
    if (f->kind != EVE_N_STRING) {
        err(c, start_pos(f), "%s with arguments takes a format that is a string literal", what);
        return false;
    }
    eve_node_t *out = NULL;
    size_t next = 1, from = 0;
    const char *s = f->u.string.bytes;
    char lit[EVE_MAX_MSG];
    for (size_t i = 0; i <= f->u.string.len; i++) {
        bool end = i == f->u.string.len;
        if (!end && s[i] != '%')
            continue;
        if (!end && i + 1 < f->u.string.len && s[i + 1] == '%') {
            out = concat(c, out, mkstring(c, f->pos, s + from, i + 1 - from)); /* the text and one '%' */
            from = i + 2;
            i++;
            continue;
        }
        if (i > from)
            out = concat(c, out, mkstring(c, f->pos, s + from, i - from));
        if (end)
            break;
        char conv = i + 1 < f->u.string.len ? s[i + 1] : 0;
        if (conv != 's' && conv != 'd' && conv != 'f' && conv != 'c') {
            snprintf(lit, sizeof lit, conv > 0x20 && conv < 0x7f ? "'%%%c'" : "'%%' at the end", conv);
            err(c, f->pos, "%s: unknown conversion %s in the format (it knows %%s, %%d, %%f, %%c and %%%%)", what,
                lit);
            return false;
        }
        if (next >= a->n) {
            err(c, f->pos, "%s: the format has more conversions than the %zu argument%s after it", what, a->n - 1,
                a->n == 2 ? "" : "s");
            return false;
        }
        eve_node_t *conv_call = mknode(c, EVE_N_CALL, a->v[next]->pos);
        eve_node_t *fn = mknode(c, EVE_N_NAME, a->v[next]->pos);
        eve_node_t **args = alloc(c, sizeof *args);
        if (!conv_call || !fn || !args)
            return false;
        fn->u.name.name = "to_string";
        args[0] = a->v[next++];
        conv_call->u.call.callee = fn;
        conv_call->u.call.args.v = args;
        conv_call->u.call.args.n = 1;
        out = concat(c, out, conv_call);
        from = i + 2;
        i++;
    }
    if (next < a->n) {
        err(c, start_pos(a->v[next]), "%s: %zu argument%s after the format, which has %zu conversion%s", what,
            a->n - 1, a->n == 2 ? "" : "s", next - 1, next == 2 ? "" : "s");
        return false;
    }
    if (!out)
        out = mkstring(c, f->pos, "", 0);
    if (!out)
        return false;
    a->v[0] = out;
    a->n = 1;
    return true;
}

static const eve_ty_t *call_value(chk_t *c, eve_node_t *n)
{
    eve_node_t *callee = n->u.call.callee;
    char name[EVE_MAX_IDENT * 2 + 2];
    if (callee->kind == EVE_N_NAME && n->u.call.args.n == 0) {
        eve_sym_t *s = lookup(c, callee->u.name.name);
        if (s && s->kind == EVE_SYM_VAR && s->accepts) {
            /* c() on a connection: accepting it gives its socket, which our
             * runtime accepted before the handler ran: the value is c's */
            *n = *callee;
            return name_value(c, n, A_READ, NULL);
        }
    }
    if (callee->kind == EVE_N_NAME) {
        const char *fname = callee->u.name.name;
        eve_sym_t *s = lookup(c, fname);
        if (c->cls && (!s || s->depth <= 1)) {
            eve_member_t *m = find_member(c, c->cls, fname, false);
            eve_sym_t *self = lookup(c, "self");
            if (m && self && m->kind == EVE_MEM_METHOD) {
                /* a method of self, called by its bare name */
                callee->sym = self;
                check_access(c, callee->pos, self, "self", self_mode(m->fn), m->name);
                if (m->fn)
                    check_reqs(c, start_pos(n), m->fn);
                check_args(c, n, fname, m->ty, m->fn, NULL);
                return m->ty->ret;
            }
        }
        if (s && s->kind == EVE_SYM_FUNC) {
            callee->sym = s;
            if (s->fn)
                check_reqs(c, start_pos(n), s->fn);
            check_args(c, n, fname, s->ty, s->fn, NULL);
            return s->ty->ret;
        }
        if (s && s->kind == EVE_SYM_CLASS) {
            err(c, callee->pos, "'%s' is a type: declare a variable of it to make one (x : %s)", fname, fname);
            for (size_t i = 0; i < n->u.call.args.n; i++)
                value(c, n->u.call.args.v[i], A_READ, NULL);
            return c->t_err;
        }
    } else if (callee->kind == EVE_N_MEMBER) {
        eve_node_t *obj = callee->u.member.obj;
        const char *mname = callee->u.member.name;
        eve_sym_t *os = obj->kind == EVE_N_NAME ? lookup(c, obj->u.name.name) : NULL;
        bool field_first = c->cls && obj->kind == EVE_N_NAME && (!os || os->depth <= 1) &&
                           find_member(c, c->cls, obj->u.name.name, false);
        if (os && !field_first && (os->kind == EVE_SYM_MODULE || os->kind == EVE_SYM_CLASS)) {
            /* text.find(...), tcp_socket.listen(...) */
            obj->sym = os;
            eve_class_t *cls = os->kind == EVE_SYM_MODULE ? lib_class(c, os->module) : os->cls;
            eve_member_t *m = find_member(c, cls, mname, false);
            snprintf(name, sizeof name, "%s.%s", obj->u.name.name, mname);
            if (!m || (m->kind != EVE_MEM_STATIC)) {
                err(c, callee->pos, "%s '%s' has no function '%s'", os->kind == EVE_SYM_MODULE ? "module" : "type",
                    obj->u.name.name, mname);
                for (size_t i = 0; i < n->u.call.args.n; i++)
                    value(c, n->u.call.args.v[i], A_READ, NULL);
                return c->t_err;
            }
            /* tcp_socket.listen(8080), the paper's: a port on every IPv4 address */
            eve_node_t *port = n->u.call.args.n == 1 ? n->u.call.args.v[0] : NULL;
            if (cls && cls->lib && strcmp(cls->name, "tcp_socket") == 0 && strcmp(mname, "listen") == 0 && port &&
                port->kind == EVE_N_INT) {
                char addr[32] = "";
                int k = 0;
                if (port->u.int_.value > 65535) /* one error: the address is then "" */
                    err(c, port->pos, "port %llu is not from 0 to 65535", (unsigned long long)port->u.int_.value);
                else
                    k = snprintf(addr, sizeof addr, "0.0.0.0:%u", (unsigned)port->u.int_.value);
                eve_node_t *sn = mkstring(c, port->pos, addr, (size_t)k);
                if (sn)
                    n->u.call.args.v[0] = sn;
            }
            check_args(c, n, name, m->ty, NULL, NULL);
            return m->ty->ret;
        }
        /* a method of an object: the receiver's access waits for the method */
        pending_t saved = c->pending;
        c->pending.set = false;
        const eve_ty_t *rt = value(c, obj, A_DEFER, NULL);
        pending_t mine = c->pending;
        c->pending = saved;
        snprintf(name, sizeof name, "%s", mname);
        if (is_err(rt)) {
            for (size_t i = 0; i < n->u.call.args.n; i++)
                value(c, n->u.call.args.v[i], A_READ, NULL);
            return c->t_err;
        }
        eve_class_t *cls = class_of(c, rt);
        eve_member_t *m = find_member(c, cls, mname, false);
        if (m && m->kind == EVE_MEM_FIELD && m->ty->kind == EVE_TY_FUNC) {
            m = NULL; /* a lambda in a field: not supported as a method */
        }
        if (!m || m->kind != EVE_MEM_METHOD) {
            char buf[96];
            err(c, callee->pos, "%s has no method '%s'", tn(rt, buf), mname);
            for (size_t i = 0; i < n->u.call.args.n; i++)
                value(c, n->u.call.args.v[i], A_READ, NULL);
            return c->t_err;
        }
        if (!m->decl && cls && cls->lib && strcmp(cls->name, "stream") == 0 && strcmp(mname, "write") == 0 &&
            n->u.call.args.n >= 2 && !expand_format(c, n, "write")) {
            for (size_t i = 1; i < n->u.call.args.n; i++)
                value(c, n->u.call.args.v[i], A_READ, NULL);
            return c->t_err;
        }
        int mode = m->decl ? self_mode(m->fn) : m->mut ? A_WRITE : A_READ;
        if (mine.set) {
            saved = c->pending;
            c->pending = mine;
            flush_pending(c, mode, NULL);
            c->pending = saved;
        }
        if (m->fn)
            check_reqs(c, start_pos(n), m->fn);
        check_args(c, n, mname, m->ty, m->fn, rt);
        return subst(c, m->ty->ret, rt);
    }
    /* a lambda value */
    const eve_ty_t *ft = value(c, callee, A_READ, NULL);
    if (is_err(ft)) {
        for (size_t i = 0; i < n->u.call.args.n; i++)
            value(c, n->u.call.args.v[i], A_READ, NULL);
        return c->t_err;
    }
    if (ft->kind != EVE_TY_FUNC) {
        char buf[96];
        err(c, start_pos(callee), "cannot call a value of type %s", tn(ft, buf));
        for (size_t i = 0; i < n->u.call.args.n; i++)
            value(c, n->u.call.args.v[i], A_READ, NULL);
        return c->t_err;
    }
    check_args(c, n, callee->kind == EVE_N_NAME ? callee->u.name.name : "the lambda", ft, NULL, NULL);
    return ft->ret;
}

static bool numeric(const eve_ty_t *t)
{
    return t->kind == EVE_TY_INT || t->kind == EVE_TY_FLOAT;
}

static const char *op_name(eve_tok_kind_t op)
{
    return eve_tok_name(op);
}

/* The result of lhs op rhs (binary or compound assignment), or an error. */
static const eve_ty_t *binop(chk_t *c, eve_pos_t pos, eve_tok_kind_t op, const eve_ty_t *l, const eve_ty_t *r)
{
    if (is_err(l) || is_err(r))
        return (op == EVE_T_EQ || op == EVE_T_NE || op == EVE_T_LT || op == EVE_T_LE || op == EVE_T_GT ||
                op == EVE_T_GE || op == EVE_T_ANDAND || op == EVE_T_OROR)
                   ? c->t_bool
                   : c->t_err;
    char b1[96], b2[96];
    switch (op) {
    case EVE_T_ANDAND:
    case EVE_T_OROR:
        if (l->kind != EVE_TY_BOOL || r->kind != EVE_TY_BOOL) {
            err(c, pos, "%s needs bool operands, not %s and %s", op_name(op), tn(l, b1), tn(r, b2));
        }
        return c->t_bool;
    case EVE_T_EQ:
    case EVE_T_NE:
        if (!ty_eq(l, r))
            err(c, pos, "cannot compare %s with %s", tn(l, b1), tn(r, b2));
        else if (l->kind == EVE_TY_VOID || l->kind == EVE_TY_FUNC)
            err(c, pos, "cannot compare values of type %s", tn(l, b1));
        return c->t_bool;
    case EVE_T_LT: case EVE_T_LE: case EVE_T_GT: case EVE_T_GE:
        if (!ty_eq(l, r))
            err(c, pos, "cannot compare %s with %s", tn(l, b1), tn(r, b2));
        else if (!numeric(l) && l->kind != EVE_TY_CHAR && l->kind != EVE_TY_STRING)
            err(c, pos, "%s orders numbers, chars and strings, not %s", op_name(op), tn(l, b1));
        return c->t_bool;
    case EVE_T_PLUS: case EVE_T_PLUS_ASSIGN:
        if (l->kind == EVE_TY_STRING && r->kind == EVE_TY_STRING)
            return c->t_string;
        /* fall through */
    case EVE_T_MINUS: case EVE_T_STAR: case EVE_T_SLASH:
    case EVE_T_MINUS_ASSIGN: case EVE_T_STAR_ASSIGN: case EVE_T_SLASH_ASSIGN:
        if (!numeric(l) || !numeric(r)) {
            if (l->kind == EVE_TY_STRING || r->kind == EVE_TY_STRING)
                err(c, pos, "%s needs two numbers or two strings, not %s and %s (to_string converts)",
                    op_name(op), tn(l, b1), tn(r, b2));
            else
                err(c, pos, "%s needs numbers, not %s and %s", op_name(op), tn(l, b1), tn(r, b2));
            return c->t_err;
        }
        if (!ty_eq(l, r)) {
            err(c, pos, "the operands of %s have different types: %s and %s (to_int and to_float convert)",
                op_name(op), tn(l, b1), tn(r, b2));
            return c->t_err;
        }
        return l;
    default: /* % & | ^ << >> %= */
        if (l->kind != EVE_TY_INT || r->kind != EVE_TY_INT) {
            err(c, pos, "%s needs int operands, not %s and %s", op_name(op), tn(l, b1), tn(r, b2));
            return c->t_err;
        }
        return c->t_int;
    }
}

/* (params) [perms] ret: expr | block */
static const eve_ty_t *lambda_value(chk_t *c, eve_node_t *n)
{
    pscope_t ps = {.kind = PS_LAMBDA, .fname = "lambda"};
    pscope_t *outer = c->ps;
    eve_class_t *cls = c->cls;
    eve_ty_t *ft = alloc(c, sizeof *ft);
    if (!ft)
        return c->t_err;
    ft->kind = EVE_TY_FUNC;
    ft->nparams = n->u.lambda.params.n;
    ft->params = alloc(c, (ft->nparams ? ft->nparams : 1) * sizeof *ft->params);
    if (!ft->params)
        return c->t_err;
    const eve_ty_t *ret = n->u.lambda.ret ? resolve_type(c, n->u.lambda.ret, true, false) : NULL;
    open_scope(c);
    /* the list names outer variables: resolve it before the parameters hide them */
    c->ps = &ps;
    open_perms(c, &ps, &n->u.lambda.perms, NULL);
    for (size_t i = 0; i < n->u.lambda.params.n; i++) {
        const eve_param_t *p = &n->u.lambda.params.v[i];
        const eve_ty_t *t = c->t_err;
        if (!p->type)
            err(c, p->pos, "lambda parameter '%s' needs a type", p->name);
        else
            t = resolve_param_type(c, p->type, false);
        ft->params[i] = t;
        eve_sym_t *s = declare(c, p->name, EVE_SYM_VAR, p->pos);
        if (s) {
            s->ty = t;
            s->own = eve_ty_is_value(t) ? H_FULL : H_READ;
        }
    }
    if (n->u.lambda.expr) {
        ps.ret = c->t_void;
        const eve_ty_t *t = value(c, n->u.lambda.expr, A_READ, NULL);
        if (ret && !assignable(ret, t)) {
            char b1[96], b2[96];
            err(c, start_pos(n->u.lambda.expr), "the lambda returns %s but its body is %s", tn(ret, b1), tn(t, b2));
        }
        ft->ret = ret ? ret : t;
    } else {
        ps.ret = ret ? ret : c->t_void;
        ft->ret = ps.ret;
        stmts(c, &n->u.lambda.body);
        if (ps.ret->kind != EVE_TY_VOID && !is_err(ps.ret) && !always_returns(c, &n->u.lambda.body))
            err(c, n->pos, "the lambda returns %s but may reach its end without a return",
                tn(ps.ret, (char[96]){0}));
    }
    pop_grants(&ps);
    c->ps = outer;
    c->cls = cls;
    close_scope(c);
    return ft;
}

static const eve_ty_t *value(chk_t *c, eve_node_t *n, int mode, const char *sub)
{
    char b1[96];
    switch (n->kind) {
    case EVE_N_INT:
        if (n->u.int_.value > (uint64_t)INT64_MAX)
            err(c, n->pos, "%llu does not fit in an int", (unsigned long long)n->u.int_.value);
        return set_ty(n, c->t_int);
    case EVE_N_FLOAT: return set_ty(n, c->t_float);
    case EVE_N_CHAR: return set_ty(n, c->t_char);
    case EVE_N_STRING: return set_ty(n, c->t_string);
    case EVE_N_BOOL: return set_ty(n, c->t_bool);
    case EVE_N_NAME: return set_ty(n, name_value(c, n, mode, sub));
    case EVE_N_MEMBER: {
        const char *name = n->u.member.name;
        size_t len = strlen(name) + (sub ? strlen(sub) + 1 : 0) + 1;
        char *path = alloc(c, len);
        if (path)
            snprintf(path, len, "%s%s%s", name, sub ? "." : "", sub ? sub : "");
        eve_node_t *obj = n->u.member.obj;
        if (obj->kind == EVE_N_NAME) {
            eve_sym_t *os = lookup(c, obj->u.name.name);
            if (os && (os->kind == EVE_SYM_MODULE || os->kind == EVE_SYM_CLASS) &&
                !(c->cls && os->depth <= 1 && find_member(c, c->cls, obj->u.name.name, false))) {
                err(c, n->pos, "'%s.%s' is a function: call it", obj->u.name.name, name);
                return set_ty(n, c->t_err);
            }
        }
        const eve_ty_t *t = value(c, obj, mode, path);
        if (is_err(t))
            return set_ty(n, t);
        eve_member_t *m = t->kind == EVE_TY_CLASS ? find_member(c, t->cls, name, false) : NULL;
        if (!m) {
            err(c, n->pos, "%s has no field '%s'", tn(t, b1), name);
            return set_ty(n, c->t_err);
        }
        if (m->kind != EVE_MEM_FIELD) {
            err(c, n->pos, "method '%s' must be called", name);
            return set_ty(n, c->t_err);
        }
        return set_ty(n, m->ty);
    }
    case EVE_N_INDEX: {
        /* a permission on a container covers its elements */
        const eve_ty_t *t = value(c, n->u.index.obj, mode, NULL);
        const eve_ty_t *it = value(c, n->u.index.index, A_READ, NULL);
        if (is_err(t))
            return set_ty(n, t);
        const eve_ty_t *key = c->t_int, *elem;
        switch (t->kind) {
        case EVE_TY_VECTOR: elem = t->a; break;
        case EVE_TY_MAP: key = t->a; elem = t->b; break;
        case EVE_TY_STRING: elem = c->t_char; break;
        default:
            if (t->kind == EVE_TY_CLASS && t->cls->lib && strcmp(t->cls->name, "read_buffer") == 0) {
                elem = c->t_char;
                break;
            }
            err(c, n->pos, "cannot index %s", tn(t, b1));
            return set_ty(n, c->t_err);
        }
        if (!assignable(key, it)) {
            char b2[96];
            err(c, start_pos(n->u.index.index), "the index is %s, expected %s", tn(it, b1), tn(key, b2));
        }
        return set_ty(n, elem);
    }
    case EVE_N_CALL: {
        const eve_ty_t *t = call_value(c, n);
        if (mode == A_DEFER)
            c->pending.set = false;
        return set_ty(n, t ? t : c->t_err);
    }
    case EVE_N_UNARY: {
        eve_node_t *o = n->u.unary.operand;
        const eve_ty_t *t;
        if (n->u.unary.op == EVE_T_MINUS && o->kind == EVE_N_INT && o->u.int_.value == (uint64_t)INT64_MAX + 1) {
            set_ty(o, c->t_int); /* -9223372036854775808 */
            return set_ty(n, c->t_int);
        }
        t = value(c, o, A_READ, NULL);
        if (is_err(t))
            return set_ty(n, t);
        switch (n->u.unary.op) {
        case EVE_T_MINUS:
            if (!numeric(t))
                err(c, n->pos, "'-' needs a number, not %s", tn(t, b1));
            return set_ty(n, numeric(t) ? t : c->t_err);
        case EVE_T_BANG:
            if (t->kind != EVE_TY_BOOL)
                err(c, n->pos, "'!' needs a bool, not %s", tn(t, b1));
            return set_ty(n, c->t_bool);
        default:
            if (t->kind != EVE_TY_INT)
                err(c, n->pos, "'~' needs an int, not %s", tn(t, b1));
            return set_ty(n, c->t_int);
        }
    }
    case EVE_N_BINARY: {
        const eve_ty_t *l = value(c, n->u.binary.lhs, A_READ, NULL);
        const eve_ty_t *r = value(c, n->u.binary.rhs, A_READ, NULL);
        if ((l->kind == EVE_TY_VOID || r->kind == EVE_TY_VOID)) {
            err(c, n->pos, "an operand of %s has no value (void)", op_name(n->u.binary.op));
            return set_ty(n, c->t_err);
        }
        return set_ty(n, binop(c, n->pos, n->u.binary.op, l, r));
    }
    case EVE_N_LAMBDA:
        return set_ty(n, lambda_value(c, n));
    default:
        return set_ty(n, c->t_err);
    }
}

/* ---- statements ---------------------------------------------------------------------- */

static bool is_true(const eve_node_t *n)
{
    return n->kind == EVE_N_BOOL && n->u.bool_.value;
}

/* Does a loop body contain a break that ends this loop? */
static bool breaks(const eve_list_t *body)
{
    for (size_t i = 0; i < body->n; i++) {
        const eve_node_t *s = body->v[i];
        switch (s->kind) {
        case EVE_N_BREAK: return true;
        case EVE_N_IF:
            if (breaks(&s->u.if_.then) || breaks(&s->u.if_.else_))
                return true;
            break;
        case EVE_N_FINISH:
            if (breaks(&s->u.finish.body))
                return true;
            break;
        default: break; /* inner loops' breaks are theirs; tasks may not break */
        }
    }
    return false;
}

static bool terminates(chk_t *c, const eve_node_t *s)
{
    switch (s->kind) {
    case EVE_N_RETURN: return true;
    case EVE_N_IF:
        return s->u.if_.has_else && always_returns(c, &s->u.if_.then) && always_returns(c, &s->u.if_.else_);
    case EVE_N_FINISH: return always_returns(c, &s->u.finish.body);
    case EVE_N_WHILE: return is_true(s->u.while_.cond) && !breaks(&s->u.while_.body);
    case EVE_N_EXPR: {
        const eve_node_t *e = s->u.expr.expr;
        return e->kind == EVE_N_CALL && e->u.call.callee->kind == EVE_N_NAME && c->exit_sym &&
               e->u.call.callee->sym == c->exit_sym;
    }
    default: return false;
    }
}

static bool always_returns(chk_t *c, const eve_list_t *body)
{
    for (size_t i = 0; i < body->n; i++)
        if (terminates(c, body->v[i]))
            return true;
    return false;
}

static void cond(chk_t *c, eve_node_t *e, const char *what)
{
    const eve_ty_t *t = value(c, e, A_READ, NULL);
    if (!is_err(t) && t->kind != EVE_TY_BOOL) {
        char buf[96];
        err(c, start_pos(e), "the condition of '%s' is %s, not bool", what, tn(t, buf));
    }
}

/* The variable and dotted path an expression names (x, x.f.g), or NULL. */
static eve_sym_t *expr_path(chk_t *c, const eve_node_t *e, const char **path)
{
    if (e->kind == EVE_N_NAME) {
        eve_sym_t *s = e->sym;
        if (!s || s->kind != EVE_SYM_VAR)
            return NULL;
        if (strcmp(s->name, e->u.name.name) != 0) {
            /* a field of self named bare */
            size_t len = strlen(e->u.name.name) + 6;
            char *q = alloc(c, len);
            if (!q)
                return NULL;
            snprintf(q, len, "self.%s", e->u.name.name);
            *path = q;
        } else {
            *path = e->u.name.name;
        }
        return s;
    }
    if (e->kind == EVE_N_MEMBER) {
        const char *p;
        eve_sym_t *s = expr_path(c, e->u.member.obj, &p);
        if (!s)
            return NULL;
        size_t len = strlen(p) + strlen(e->u.member.name) + 2;
        char *q = alloc(c, len);
        if (!q)
            return NULL;
        snprintf(q, len, "%s.%s", p, e->u.member.name);
        *path = q;
        return s;
    }
    return NULL;
}

static void var_stmt(chk_t *c, eve_node_t *n, bool toplevel_item)
{
    const eve_ty_t *t;
    if (toplevel_item) {
        /* declared by the first pass: check the initializer */
        t = n->u.var.nnames && n->sym ? n->sym->ty : c->t_err;
    } else {
        t = resolve_type(c, n->u.var.type, false, true);
    }
    if (n->u.var.init) {
        const eve_ty_t *it = value(c, n->u.var.init, A_READ, NULL);
        if (!assignable(t, it)) {
            char b1[96], b2[96];
            err(c, start_pos(n->u.var.init), "cannot initialize %s '%s' with %s", tn(t, b1), n->u.var.names[0],
                tn(it, b2));
        }
    }
    if (toplevel_item)
        return;
    for (size_t i = 0; i < n->u.var.nnames; i++) {
        eve_sym_t *s = declare(c, n->u.var.names[i], EVE_SYM_VAR, n->pos);
        if (!s)
            return;
        s->ty = t;
        s->shared = n->u.var.type && n->u.var.type->shared;
        if (i == 0)
            n->sym = s;
        /* x : T = y, T an object type: x is another name for y's object */
        const char *path;
        eve_sym_t *src;
        if (n->u.var.init && !eve_ty_is_value(t) && !s->shared &&
            (src = expr_path(c, n->u.var.init, &path)) != NULL && src != s) {
            s->alias = src;
            s->alias_path = path;
        }
    }
}

static void assign_stmt(chk_t *c, eve_node_t *n)
{
    eve_node_t *target = n->u.assign.target;
    const eve_ty_t *vt = value(c, n->u.assign.value, A_READ, NULL);
    const eve_ty_t *tt = value(c, target, A_WRITE, NULL);
    char b1[96], b2[96];
    const char *what = target->kind == EVE_N_NAME ? target->u.name.name
                     : target->kind == EVE_N_MEMBER ? target->u.member.name : NULL;
    if (target->kind == EVE_N_INDEX && !is_err(tt)) {
        const eve_ty_t *ct = target->u.index.obj->type;
        if (ct && (ct->kind == EVE_TY_STRING || ct->kind == EVE_TY_CLASS)) {
            err(c, target->pos, "cannot assign to an element of %s: it cannot be changed in place", tn(ct, b1));
            return;
        }
    }
    if (vt->kind == EVE_TY_VOID) {
        err(c, start_pos(n->u.assign.value), "the value assigned has no value (void)");
        return;
    }
    if (n->u.assign.op == EVE_T_ASSIGN) {
        if (!assignable(tt, vt)) {
            if (what)
                err(c, start_pos(target), "cannot assign %s to %s '%s'", tn(vt, b1), tn(tt, b2), what);
            else
                err(c, start_pos(target), "cannot assign %s to an element of type %s", tn(vt, b1), tn(tt, b2));
        }
        return;
    }
    const eve_ty_t *r = binop(c, n->pos, n->u.assign.op, tt, vt);
    if (!is_err(r) && !is_err(tt) && !ty_eq(r, tt))
        err(c, n->pos, "cannot assign %s to %s '%s'", tn(r, b1), tn(tt, b2), what ? what : "element");
}

/* One callback: `on obj event (params) [perms]:` (source: obj) or a handler
 * of a call (source NULL; ret: the result an assigned handler declares). */
static void callback(chk_t *c, eve_pos_t pos, const eve_ty_t *objt, const char *event, eve_params_t *params,
                     eve_perms_t *perms, eve_list_t *body, const eve_type_t *ret, const eve_node_t *source)
{
    char b1[96], b2[96];
    const eve_ty_t *payload = c->t_err;
    if (!is_err(objt)) {
        eve_class_t *cls = objt->kind == EVE_TY_CLASS ? objt->cls : NULL;
        eve_member_t *m = find_member(c, cls, event, true);
        if (!m)
            err(c, pos, "%s has no event '%s'", tn(objt, b1), event);
        else
            payload = m->kind == EVE_MEM_EVENT ? m->ty : m->ty->a;
    }
    const eve_ty_t *rt = ret ? resolve_type(c, ret, true, false) : c->t_void;
    pscope_t ps = {.kind = PS_CALLBACK, .ret = rt, .fname = event};
    pscope_t *outer = c->ps;
    const char *outer_handler = c->handler_name, *outer_param = c->handler_param;
    open_scope(c);
    c->ps = &ps;
    open_perms(c, &ps, perms, NULL);
    /* The object an `on` names is the event's source: its callback may read
     * it without naming it (the paper's Program 2 uses `client` so in its
     * `on client data` callback). No permission is acquired for it: as a
     * callback's parameter, it is the object the event is about. */
    if (source && source->kind == EVE_N_NAME && source->sym && source->sym->kind == EVE_SYM_VAR &&
        source->sym->ty && source->sym->ty->kind == EVE_TY_CLASS) {
        bool listed = false;
        for (size_t i = 0; i < perms->n; i++)
            listed = listed || perms->v[i].sym == source->sym;
        if (!listed)
            push_grant(c, &ps, source->sym, EVE_PERM_READ, source->u.name.name);
    }
    c->handler_name = event;
    c->handler_param = params->n == 1 ? params->v[0].name : NULL;
    if (params->n > 1)
        err(c, params->v[1].pos, "a callback takes at most one parameter (the value the event carries)");
    for (size_t i = 0; i < params->n; i++) {
        const eve_param_t *p = &params->v[i];
        const eve_ty_t *t = payload;
        if (i == 0 && payload->kind == EVE_TY_VOID) {
            err(c, p->pos, "event '%s' carries nothing: its callback takes no parameter", event);
            t = c->t_err;
        }
        if (p->type) {
            const eve_ty_t *wt = resolve_param_type(c, p->type, false);
            if (i == 0 && !is_err(t) && !ty_eq(wt, t))
                err(c, p->type->pos, "parameter '%s' is %s but event '%s' carries %s", p->name, tn(wt, b1), event,
                    tn(t, b2));
            t = wt;
        }
        eve_sym_t *s = declare(c, p->name, EVE_SYM_VAR, p->pos);
        if (s) {
            s->ty = i == 0 ? t : c->t_err;
            /* `c: connection`: a pending connection, c() accepts it (ours
             * are accepted already: c() is the socket) */
            s->accepts = p->type && strcmp(p->type->name, "connection") == 0 && !lookup(c, "connection");
        }
    }
    stmts(c, body);
    if (!is_err(rt) && rt->kind != EVE_TY_VOID && !always_returns(c, body))
        err(c, pos, "the handler '%s' returns %s but may reach its end without a return", event, tn(rt, b1));
    pop_grants(&ps);
    c->ps = outer;
    c->handler_name = outer_handler;
    c->handler_param = outer_param;
    close_scope(c);
}

/* @ [perms]: body, and @ for (x: T in coll) [perms]: body */
static void task(chk_t *c, eve_node_t *n)
{
    pscope_t ps = {.kind = n->kind == EVE_N_TASK ? PS_TASK : PS_PFOR, .ret = c->t_void, .fname = "task"};
    ps.parent = c->ps;
    ps.in_finish = c->ps->finish > 0;
    pscope_t *outer = c->ps;
    open_scope(c);
    if (n->kind == EVE_N_TASK) {
        c->ps = &ps;
        open_perms(c, &ps, &n->u.task.perms, NULL);
        stmts(c, &n->u.task.body);
    } else {
        /* the collection is read by the spawner */
        const eve_ty_t *ct = value(c, n->u.for_.coll, A_READ, NULL);
        const eve_ty_t *et = c->t_err;
        char b1[96], b2[96];
        if (!is_err(ct)) {
            switch (ct->kind) {
            case EVE_TY_VECTOR: case EVE_TY_SET: et = ct->a; break;
            case EVE_TY_MAP: et = ct->a; break;
            case EVE_TY_STRING: et = c->t_char; break;
            default:
                if (ct->kind == EVE_TY_CLASS && ct->cls->lib && strcmp(ct->cls->name, "read_buffer") == 0)
                    et = c->t_char;
                else
                    err(c, start_pos(n->u.for_.coll), "cannot iterate over %s", tn(ct, b1));
            }
        }
        if (n->u.for_.type) {
            const eve_ty_t *wt = resolve_type(c, n->u.for_.type, false, true);
            shared_element(c, n->u.for_.type, wt, "a loop variable's type");
            if (!is_err(et) && !is_err(wt) && !ty_eq(wt, et))
                err(c, n->u.for_.type->pos, "loop variable '%s' is declared %s but the elements are %s",
                    n->u.for_.var, tn(wt, b1), tn(et, b2));
            if (!is_err(wt))
                et = wt;
        }
        c->ps = &ps;
        eve_sym_t *s = declare(c, n->u.for_.var, EVE_SYM_VAR, n->pos);
        if (s) {
            s->ty = et;
            s->own = eve_ty_is_value(et) ? H_FULL : H_READ;
            n->sym = s;
        }
        open_perms(c, &ps, &n->u.for_.perms, s);
        /* +x on an element that is a value writes into the collection */
        for (grant_t *g = ps.granted; g && s; g = g->undo)
            if (g->sym == s && g->kind == EVE_PERM_FULL && eve_ty_is_value(et)) {
                c->ps = outer;
                const char *cp;
                eve_sym_t *cs = expr_path(c, n->u.for_.coll, &cp);
                if (cs)
                    check_access(c, start_pos(n->u.for_.coll), cs, cp, A_WRITE, NULL);
                c->ps = &ps;
            }
        stmts(c, &n->u.for_.body);
    }
    pop_grants(&ps);
    c->ps = outer;
    close_scope(c);
}

static void for_stmt(chk_t *c, eve_node_t *n)
{
    const eve_ty_t *ct = value(c, n->u.for_.coll, A_READ, NULL);
    const eve_ty_t *et = c->t_err;
    char b1[96], b2[96];
    if (!is_err(ct)) {
        switch (ct->kind) {
        case EVE_TY_VECTOR: case EVE_TY_SET: case EVE_TY_MAP: et = ct->a; break;
        case EVE_TY_STRING: et = c->t_char; break;
        default:
            if (ct->kind == EVE_TY_CLASS && ct->cls->lib && strcmp(ct->cls->name, "read_buffer") == 0)
                et = c->t_char;
            else
                err(c, start_pos(n->u.for_.coll), "cannot iterate over %s", tn(ct, b1));
        }
    }
    if (n->u.for_.type) {
        const eve_ty_t *wt = resolve_type(c, n->u.for_.type, false, true);
        shared_element(c, n->u.for_.type, wt, "a loop variable's type");
        if (!is_err(et) && !is_err(wt) && !ty_eq(wt, et))
            err(c, n->u.for_.type->pos, "loop variable '%s' is declared %s but the elements are %s", n->u.for_.var,
                tn(wt, b1), tn(et, b2));
        if (!is_err(wt))
            et = wt;
    }
    open_scope(c);
    eve_sym_t *s = declare(c, n->u.for_.var, EVE_SYM_VAR, n->pos);
    if (s) {
        s->ty = et;
        n->sym = s;
        /* an object element is reached through the collection: same permission */
        const char *path;
        eve_sym_t *src;
        if (!eve_ty_is_value(et) && (src = expr_path(c, n->u.for_.coll, &path)) != NULL) {
            s->alias = src;
            s->alias_path = path;
        }
    }
    c->ps->loops++;
    block(c, &n->u.for_.body);
    c->ps->loops--;
    close_scope(c);
}

static void stmt(chk_t *c, eve_node_t *n)
{
    char b1[96], b2[96];
    switch (n->kind) {
    case EVE_N_VAR:
        var_stmt(c, n, false);
        break;
    case EVE_N_EXPR: {
        eve_node_t *e = n->u.expr.expr;
        const eve_ty_t *t = value(c, e, A_READ, NULL);
        if (e->kind != EVE_N_CALL)
            err(c, start_pos(e), "this expression does nothing: only a call may stand as a statement");
        for (size_t i = 0; i < n->u.expr.handlers.n; i++) {
            eve_node_t *h = n->u.expr.handlers.v[i];
            callback(c, h->pos, t, h->u.handler.name, &h->u.handler.params, &h->u.handler.perms,
                     &h->u.handler.body, h->u.handler.ret, NULL);
        }
        break;
    }
    case EVE_N_ASSIGN:
        assign_stmt(c, n);
        break;
    case EVE_N_RETURN: {
        const eve_ty_t *want = c->ps->ret;
        const eve_ty_t *t = n->u.ret.value ? value(c, n->u.ret.value, A_READ, NULL) : NULL;
        if (!want) {
            err(c, n->pos, "'return' outside a function, task or callback");
        } else if (want->kind == EVE_TY_VOID) {
            if (t)
                err(c, n->pos, "%s '%s' returns void: 'return' takes no value here",
                    ps_noun(c->ps), c->ps->fname ? c->ps->fname : "");
        } else if (!t) {
            err(c, n->pos, "'%s' returns %s: 'return' needs a value", c->ps->fname, tn(want, b1));
        } else if (!assignable(want, t)) {
            err(c, start_pos(n->u.ret.value), "'%s' returns %s, not %s", c->ps->fname, tn(want, b1), tn(t, b2));
        }
        break;
    }
    case EVE_N_IF:
        cond(c, n->u.if_.cond, "if");
        block(c, &n->u.if_.then);
        block(c, &n->u.if_.else_);
        break;
    case EVE_N_WHILE:
        cond(c, n->u.while_.cond, "while");
        if (is_true(n->u.while_.cond) && !breaks(&n->u.while_.body))
            err(c, n->pos, "this loop never ends ('while true' with no 'break'): Eve code may not loop forever");
        c->ps->loops++;
        block(c, &n->u.while_.body);
        c->ps->loops--;
        break;
    case EVE_N_FOR:
        if (n->u.for_.parallel)
            task(c, n);
        else
            for_stmt(c, n);
        break;
    case EVE_N_FINISH:
        c->ps->finish++;
        block(c, &n->u.finish.body);
        c->ps->finish--;
        break;
    case EVE_N_TASK:
        task(c, n);
        break;
    case EVE_N_ON: {
        const eve_ty_t *t = value(c, n->u.on.obj, A_READ, NULL);
        callback(c, n->pos, t, n->u.on.event, &n->u.on.params, &n->u.on.perms, &n->u.on.body, NULL, n->u.on.obj);
        break;
    }
    case EVE_N_BREAK:
    case EVE_N_CONTINUE:
        if (c->ps->loops == 0)
            err(c, n->pos, "'%s' outside a loop%s", n->kind == EVE_N_BREAK ? "break" : "continue",
                c->ps->kind == PS_ROOT || c->ps->kind == PS_FUNC || c->ps->kind == PS_METHOD
                    ? "" : " (a task or callback cannot leave the loop around it)");
        break;
    case EVE_N_IMPORT:
    case EVE_N_CLASS:
    case EVE_N_FUNC:
        /* the parser accepts these at the top level only */
        break;
    default:
        break;
    }
}

static void stmts(chk_t *c, eve_list_t *body)
{
    for (size_t i = 0; i < body->n; i++)
        stmt(c, body->v[i]);
}

static void block(chk_t *c, eve_list_t *body)
{
    open_scope(c);
    stmts(c, body);
    close_scope(c);
}

/* ---- functions, methods and classes -------------------------------------------------------- */

/* The signature and permission list of a function or method: parameter
 * symbols (reused when the body is checked) and what the list asks of callers. */
static struct eve_fninfo *resolve_fn(chk_t *c, eve_node_t *f, eve_class_t *cls)
{
    struct eve_fninfo *fn = alloc(c, sizeof *fn);
    eve_ty_t *ft = alloc(c, sizeof *ft);
    if (!fn || !ft)
        return NULL;
    size_t np = f->u.func.params.n;
    fn->name = f->u.func.name;
    fn->params = alloc(c, (np ? np : 1) * sizeof *fn->params);
    ft->params = alloc(c, (np ? np : 1) * sizeof *ft->params);
    fn->reqs = alloc(c, (f->u.func.perms.n ? f->u.func.perms.n : 1) * sizeof *fn->reqs);
    if (!fn->params || !ft->params || !fn->reqs)
        return NULL;
    ft->kind = EVE_TY_FUNC;
    ft->nparams = np;
    fn->nparams = np;
    fn->ret = f->u.func.ret ? resolve_type(c, f->u.func.ret, true, false) : c->t_void;
    ft->ret = fn->ret;
    fn->type = ft;
    open_scope(c);
    if (cls) {
        fn->self = declare(c, "self", EVE_SYM_VAR, f->pos);
        if (fn->self) {
            fn->self->ty = class_type(c, cls);
            fn->self->own = H_READ;
        }
    }
    for (size_t i = 0; i < np; i++) {
        const eve_param_t *p = &f->u.func.params.v[i];
        const eve_ty_t *t = resolve_param_type(c, p->type, true);
        eve_sym_t *s = declare(c, p->name, EVE_SYM_VAR, p->pos);
        ft->params[i] = t;
        if (!s)
            break;
        s->ty = t;
        s->shared = p->type && p->type->shared;
        s->own = eve_ty_is_value(t) && !s->shared ? H_FULL : H_READ;
        fn->params[i] = s;
    }
    for (size_t i = 0; i < f->u.func.perms.n; i++) {
        const eve_perm_t *pm = &f->u.func.perms.v[i];
        if (pm->kind == EVE_CAPTURE_COPY || pm->kind == EVE_CAPTURE_REF) {
            err(c, pm->pos, "a %s captures nothing: '%s%s' has no place in its permission list",
                cls ? "method" : "function", perm_sigil(pm->kind), pm->name);
            continue;
        }
        eve_sym_t *s = perm_sym(c, pm);
        if (!s)
            continue;
        req_t *r = &fn->reqs[fn->nreqs++];
        r->sym = s;
        r->kind = pm->kind;
        r->path = pm->name;
        r->param = -1;
        if (fn->self && s == fn->self)
            r->param = -2;
        for (size_t k = 0; k < np; k++)
            if (fn->params[k] == s)
                r->param = (long)k;
        if (r->param == -1 && !s->global) {
            err(c, pm->pos, "'%s' is not a global or a parameter", pm->name);
            fn->nreqs--;
        }
    }
    close_scope(c);
    return fn;
}

static void check_fn_body(chk_t *c, eve_node_t *f, struct eve_fninfo *fn, eve_class_t *cls)
{
    pscope_t ps = {.kind = cls ? PS_METHOD : PS_FUNC, .ret = fn->ret, .fname = f->u.func.name};
    pscope_t *outer = c->ps;
    bool toplevel = c->toplevel;
    c->toplevel = false;
    c->ps = &ps;
    c->cls = cls;
    open_scope(c);
    if (fn->self) {
        fn->self->owner = &ps;
        bind(c, fn->self);
    }
    for (size_t i = 0; i < fn->nparams; i++)
        if (fn->params[i]) {
            fn->params[i]->owner = &ps;
            bind(c, fn->params[i]);
        }
    for (size_t k = 0; k < fn->nreqs; k++)
        push_grant(c, &ps, fn->reqs[k].sym, fn->reqs[k].kind, fn->reqs[k].path);
    stmts(c, &f->u.func.body);
    if (fn->ret->kind != EVE_TY_VOID && !is_err(fn->ret) && !always_returns(c, &f->u.func.body)) {
        char buf[96];
        err(c, f->pos, "'%s' returns %s but may reach its end without a return", f->u.func.name,
            tn(fn->ret, buf));
    }
    pop_grants(&ps);
    close_scope(c);
    for (size_t i = 0; i < fn->nparams; i++)
        if (fn->params[i])
            fn->params[i]->owner = NULL;
    c->ps = outer;
    c->cls = NULL;
    c->toplevel = toplevel;
}

/* ---- the program ---------------------------------------------------------------------------- */

/* A program with no top-level statement that declares `main: ()` (the
 * paper's Program 2) runs main: a call of it becomes its one statement. */
static void entry_main(chk_t *c, eve_node_t *program)
{
    eve_list_t *items = &program->u.program.items;
    eve_node_t *main_fn = NULL;
    for (size_t i = 0; i < items->n; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind == EVE_N_FUNC && strcmp(it->u.func.name, "main") == 0 && it->u.func.params.n == 0)
            main_fn = items->v[i];
        else if (it->kind != EVE_N_IMPORT && it->kind != EVE_N_CLASS && it->kind != EVE_N_FUNC &&
                 it->kind != EVE_N_VAR)
            return;
    }
    if (!main_fn)
        return;
    eve_node_t *stmt = mknode(c, EVE_N_EXPR, main_fn->pos);
    eve_node_t *call = mknode(c, EVE_N_CALL, main_fn->pos);
    eve_node_t *name = mknode(c, EVE_N_NAME, main_fn->pos);
    eve_node_t **v = alloc(c, (items->n + 1) * sizeof *v);
    if (!stmt || !call || !name || !v)
        return;
    name->u.name.name = "main";
    call->u.call.callee = name;
    stmt->u.expr.expr = call;
    memcpy(v, items->v, items->n * sizeof *v);
    v[items->n] = stmt;
    items->v = v;
    items->n++;
}

bool eve_check(eve_ctx_t *cx, eve_node_t *program)
{
    chk_t c0, *c = &c0;
    memset(c, 0, sizeof *c);
    c->cx = cx;
    c->ar = cx->arena;
    static const eve_ty_kind_t basics[] = {EVE_TY_ERROR, EVE_TY_VOID, EVE_TY_INT, EVE_TY_BOOL,
                                           EVE_TY_FLOAT, EVE_TY_CHAR, EVE_TY_STRING, EVE_TY_BASIC,
                                           EVE_TY_BYTES};
    const eve_ty_t **slots[] = {&c->t_err, &c->t_void, &c->t_int, &c->t_bool, &c->t_float,
                                &c->t_char, &c->t_string, &c->t_basic, &c->t_bytes};
    static const eve_ty_t fallback = {.kind = EVE_TY_ERROR};
    c->t_err = &fallback;
    for (size_t i = 0; i < sizeof basics / sizeof basics[0]; i++)
        *slots[i] = mkty(c, basics[i], NULL, NULL);
    for (int i = 0; i < 2; i++) {
        eve_ty_t *g = alloc(c, sizeof *g);
        if (g) {
            g->kind = EVE_TY_GENERIC;
            g->index = i;
        }
        c->t_generic[i] = g ? g : c->t_err;
    }
    c->nmbuckets = 1024;
    c->mbuckets = alloc(c, c->nmbuckets * sizeof *c->mbuckets);
    c->root.kind = PS_ROOT;
    c->ps = &c->root;
    if (c->oom || !program || program->kind != EVE_N_PROGRAM) {
        eve_error(cx, (eve_pos_t){1, 1}, "out of memory");
        return false;
    }
    load_stdlib(c);
    entry_main(c, program);

    /* the program's scope (depth 1): its declarations are visible everywhere */
    open_scope(c);
    eve_list_t *items = &program->u.program.items;
    /* 1. imports and classes */
    for (size_t i = 0; i < items->n && !c->oom; i++) {
        eve_node_t *n = items->v[i];
        if (n->kind == EVE_N_IMPORT) {
            const char *path = n->u.import.path;
            size_t plen = strlen(path);
            if (plen > 2 && strcmp(path + plen - 2, ".*") == 0) {
                /* import a.b.*: every name of a.b, which the library's
                 * modules do not keep apart from the module itself */
                char *base = alloc(c, plen - 1);
                if (!base)
                    continue;
                memcpy(base, path, plen - 2);
                path = base;
            }
            if (!is_lib_module(path)) {
                char list[EVE_MAX_MSG / 2] = "";
                size_t at = 0;
                for (size_t k = 0; k < eve_stdlib_count; k++) {
                    if (eve_stdlib[k].kind != EVE_LIB_MODULE)
                        continue;
                    if (at)
                        at = put(list, sizeof list, at, ", ");
                    at = put(list, sizeof list, at, eve_stdlib[k].name);
                }
                err(c, n->pos, "unknown module '%s' (the library's modules: %s)", path, list);
                continue;
            }
            eve_sym_t *old = lookup(c, path);
            if (old && old->kind == EVE_SYM_MODULE)
                continue; /* imported twice: harmless */
            eve_sym_t *s = declare(c, path, EVE_SYM_MODULE, n->pos);
            if (s)
                s->module = path;
            n->sym = s;
        } else if (n->kind == EVE_N_CLASS) {
            eve_sym_t *s = declare(c, n->u.class_.name, EVE_SYM_CLASS, n->pos);
            eve_class_t *cls = alloc(c, sizeof *cls);
            if (!s || !cls)
                break;
            cls->name = n->u.class_.name;
            cls->decl = n;
            s->cls = cls;
            s->decl = n;
            n->sym = s;
        }
    }
    /* 2. class members, functions and globals: their types */
    for (size_t i = 0; i < items->n && !c->oom; i++) {
        eve_node_t *n = items->v[i];
        if (n->kind == EVE_N_CLASS && n->sym) {
            eve_class_t *cls = n->sym->cls;
            for (size_t k = 0; k < n->u.class_.members.n; k++) {
                eve_node_t *mn = n->u.class_.members.v[k];
                if (mn->kind == EVE_N_VAR) {
                    const eve_ty_t *t = resolve_type(c, mn->u.var.type, false, false);
                    for (size_t j = 0; j < mn->u.var.nnames; j++) {
                        const char *name = mn->u.var.names[j];
                        if (find_member(c, cls, name, false) || find_member(c, cls, name, true)) {
                            err(c, mn->pos, "class '%s' already has a member '%s'", cls->name, name);
                            continue;
                        }
                        eve_member_t *m = alloc(c, sizeof *m);
                        if (!m)
                            break;
                        m->name = name;
                        m->kind = EVE_MEM_FIELD;
                        m->ty = t;
                        m->decl = mn;
                        add_member(c, cls, m);
                    }
                } else if (mn->kind == EVE_N_FUNC) {
                    const char *name = mn->u.func.name;
                    if (find_member(c, cls, name, false) || find_member(c, cls, name, true)) {
                        err(c, mn->pos, "class '%s' already has a member '%s'", cls->name, name);
                        continue;
                    }
                    eve_member_t *m = alloc(c, sizeof *m);
                    if (!m)
                        break;
                    m->name = name;
                    m->kind = EVE_MEM_METHOD;
                    m->decl = mn;
                    m->ty = c->t_err;
                    add_member(c, cls, m);
                }
            }
        } else if (n->kind == EVE_N_FUNC) {
            eve_sym_t *s = declare(c, n->u.func.name, EVE_SYM_FUNC, n->pos);
            if (!s)
                break;
            s->decl = n;
            s->ty = c->t_err;
            n->sym = s;
        } else if (n->kind == EVE_N_VAR) {
            const eve_ty_t *t = resolve_type(c, n->u.var.type, false, true);
            for (size_t k = 0; k < n->u.var.nnames; k++) {
                eve_sym_t *s = declare(c, n->u.var.names[k], EVE_SYM_VAR, n->pos);
                if (!s)
                    break;
                s->ty = t;
                s->shared = n->u.var.type && n->u.var.type->shared;
                s->global = true;
                s->order = i;
                if (k == 0)
                    n->sym = s;
            }
        }
    }
    /* 3. signatures and permission lists (they name globals) */
    for (size_t i = 0; i < items->n && !c->oom; i++) {
        eve_node_t *n = items->v[i];
        if (n->kind == EVE_N_FUNC && n->sym && n->sym->kind == EVE_SYM_FUNC && n->sym->decl == n) {
            n->sym->fn = resolve_fn(c, n, NULL);
            if (n->sym->fn)
                n->sym->ty = n->sym->fn->type;
        } else if (n->kind == EVE_N_CLASS && n->sym) {
            for (size_t k = 0; k < n->u.class_.members.n; k++) {
                eve_node_t *mn = n->u.class_.members.v[k];
                if (mn->kind != EVE_N_FUNC)
                    continue;
                eve_member_t *m = find_member(c, n->sym->cls, mn->u.func.name, false);
                if (!m || m->decl != mn)
                    continue;
                m->fn = resolve_fn(c, mn, n->sym->cls);
                if (m->fn) {
                    m->ty = m->fn->type;
                    m->mut = self_mode(m->fn) == A_WRITE;
                }
            }
        }
    }
    /* 4. bodies and top-level statements, in order */
    for (size_t i = 0; i < items->n && !c->oom; i++) {
        eve_node_t *n = items->v[i];
        c->item = i;
        switch (n->kind) {
        case EVE_N_IMPORT:
            break;
        case EVE_N_FUNC:
            if (n->sym && n->sym->fn && n->sym->decl == n)
                check_fn_body(c, n, n->sym->fn, NULL);
            break;
        case EVE_N_CLASS:
            if (!n->sym)
                break;
            for (size_t k = 0; k < n->u.class_.members.n; k++) {
                eve_node_t *mn = n->u.class_.members.v[k];
                if (mn->kind == EVE_N_FUNC) {
                    eve_member_t *m = find_member(c, n->sym->cls, mn->u.func.name, false);
                    if (m && m->decl == mn && m->fn)
                        check_fn_body(c, mn, m->fn, n->sym->cls);
                } else if (mn->kind == EVE_N_VAR && mn->u.var.init) {
                    const eve_ty_t *t = resolve_type(c, mn->u.var.type, false, true);
                    const eve_ty_t *it = value(c, mn->u.var.init, A_READ, NULL);
                    if (!assignable(t, it)) {
                        char b1[96], b2[96];
                        err(c, start_pos(mn->u.var.init), "cannot initialize %s '%s' with %s", tn(t, b1),
                            mn->u.var.names[0], tn(it, b2));
                    }
                }
            }
            break;
        case EVE_N_VAR:
            c->toplevel = true;
            var_stmt(c, n, true);
            c->toplevel = false;
            break;
        default:
            c->toplevel = true;
            stmt(c, n);
            c->toplevel = false;
            break;
        }
    }
    close_scope(c);

    if (c->oom)
        err(c, (eve_pos_t){1, 1}, "out of memory");
    /* sorted by position; the same message at the same place once */
    if (c->nerrs)
        qsort(c->errs, c->nerrs, sizeof *c->errs, cmp_err);
    size_t reported = 0;
    for (size_t i = 0; i < c->nerrs; i++) {
        const err_t *e = &c->errs[i];
        if (i && e->pos.line == e[-1].pos.line && e->pos.col == e[-1].pos.col && strcmp(e->msg, e[-1].msg) == 0)
            continue;
        eve_error(cx, e->pos, "%s", e->msg);
        reported++;
    }
    cx->nerrors += c->dropped;
    return reported == 0 && c->dropped == 0;
}
