/* yard-eve's code generator: a checked Eve program to C11 on the Eve runtime
 * (docs/eve.md, "How code is generated").
 *
 * Two passes over the tree the checker annotated (node->type, node->sym):
 *
 * 1. Analysis. Every function, method, task, parallel for, callback and
 *    lambda is a *frame*: one C function. For each variable a frame uses
 *    but an outer frame declares, the frame *captures* it: a copy (a value
 *    the checker lets it read: implicit copies and =x), a reference to its
 *    cell (a value variable named in the permission list, x +x &x, whose
 *    permission lives in the cell), or the object (object-typed variables:
 *    the pointer, retained). A value variable captured by reference, or
 *    shared (T@), lives in a cell (eve_box_t: the value and its permission);
 *    on the heap when a frame that may outlive the declaring one captures it
 *    (a callback, a task outside finish), else on the declaring C function's
 *    stack (a task inside finish: the parent waits for it).
 *
 * 2. Emission. Each frame becomes a C function; closures get an env struct
 *    holding their captures. Expressions are C expressions; a string or
 *    object a call returns is owned by the statement (eve_tmp) and released
 *    after it (EVE_DRAIN); a store retains. Scopes release their locals on
 *    every way out (a cleanup stack: block ends, return, break, continue,
 *    and a finish's wait). Each statement carries a #line directive to the
 *    Eve source. */
#include "gen.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text buffers --------------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sb_t;

static void sb_putn(sb_t *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_puts(sb_t *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

static void sb_vprintf(sb_t *b, const char *fmt, va_list ap)
{
    char small[512];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0) {
        b->oom = true;
    } else if ((size_t)n < sizeof small) {
        sb_putn(b, small, (size_t)n);
    } else {
        char *big = malloc((size_t)n + 1);
        if (!big)
            b->oom = true;
        else {
            vsnprintf(big, (size_t)n + 1, fmt, ap2);
            sb_putn(b, big, (size_t)n);
            free(big);
        }
    }
    va_end(ap2);
}

static void sb_printf(sb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sb_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

/* ---- frames and variables ------------------------------------------------------------------- */

enum { F_TOP, F_FUNC, F_METHOD, F_TASK, F_PFOR, F_CB, F_LAMBDA };
enum { CAP_COPY, CAP_REF, CAP_OBJ };

typedef struct frame frame_t;

typedef struct vinfo {
    const char *name;
    eve_pos_t pos;
    const eve_ty_t *ty;
    bool global;
    frame_t *decl;
    bool cell;          /* a value variable with a permission cell */
    bool box;           /* ... on the heap */
    bool loopvar;       /* a parallel for's element (in its task's env) */
    bool assigned;      /* the program assigns it (a parameter then needs its own reference) */
    char *cname;
    struct vinfo *next; /* hash chain (by name) */
} vinfo_t;

typedef struct {
    vinfo_t *v;
    int mode;
} cap_t;

struct frame {
    int kind;
    frame_t *parent;    /* the frame whose body holds it */
    bool in_finish;     /* a task spawned inside a finish of parent */
    const eve_node_t *node;
    char *cname;
    cap_t *caps;
    size_t ncaps, capcaps;
    const eve_perms_t *perms;
    vinfo_t *loopvar;
    eve_class_t *cls;   /* methods */
    const eve_ty_t *fty; /* functions and methods: the function type */
    frame_t *hnext;     /* node -> frame hash chain */
};

#define NBUCKETS 4096

/* The cleanup stack of the C function being emitted: what to run, in
 * reverse, on each way out of a scope. */
typedef struct {
    char *code;
} cleanup_t;

typedef struct {
    size_t outer;  /* cleanups before the loop variable (break runs down to here) */
    size_t body;   /* cleanups before the body (continue runs down to here) */
    int label;
    bool continued; /* a continue jumps to the label */
} loop_t;

typedef struct {
    eve_ctx_t *cx;
    eve_arena_t *ar;
    const char *source;  /* for #line and positions (C-escaped) */
    bool failed;
    vinfo_t *vb[NBUCKETS];
    frame_t *fb[NBUCKETS];
    frame_t *top;
    int nlabel;
    int nlit;
    /* output sections */
    sb_t lits, types, protos, funcs;
    /* the function being emitted */
    frame_t *f;
    sb_t *out;
    int ind;
    cleanup_t *cl;
    size_t ncl, capcl;
    loop_t *loops;
    size_t nloops, caploops;
    char **fins;          /* open finish scopes' C names */
    size_t nfins, capfins;
    const eve_ty_t *ret;  /* the function's result (NULL: void) */
    sb_t *decls;          /* the function's sequencing temporaries' declarations */
    bool made_tmp;        /* the function registers temporaries (else it needs no draining) */
    int ntemp;
    struct ovr { const eve_node_t *n; char *c; } *ovr; /* operands already evaluated into temporaries */
    size_t novr, capovr;
} gen_t;

static void *galloc(gen_t *g, size_t n)
{
    void *p = eve_arena_alloc(g->ar, n ? n : 1);
    if (!p)
        g->failed = true;
    return p;
}

static char *fmt(gen_t *g, const char *f, ...) __attribute__((format(printf, 2, 3)));
static char *fmt(gen_t *g, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    sb_t b = {0};
    sb_vprintf(&b, f, ap);
    va_end(ap);
    if (b.oom) {
        free(b.p);
        g->failed = true;
        return "";
    }
    char *s = eve_arena_strndup(g->ar, b.p ? b.p : "", b.n);
    free(b.p);
    if (!s) {
        g->failed = true;
        return "";
    }
    return s;
}

static void gerr(gen_t *g, eve_pos_t pos, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void gerr(gen_t *g, eve_pos_t pos, const char *f, ...)
{
    char msg[EVE_MAX_MSG];
    va_list ap;
    va_start(ap, f);
    vsnprintf(msg, sizeof msg, f, ap);
    va_end(ap);
    eve_error(g->cx, pos, "%s", msg);
    g->failed = true;
}

static size_t hstr(const char *s)
{
    size_t h = 5381;
    while (*s)
        h = h * 33 + (unsigned char)*s++;
    return h;
}

static vinfo_t *vget(gen_t *g, const char *name, eve_pos_t pos)
{
    for (vinfo_t *v = g->vb[hstr(name) % NBUCKETS]; v; v = v->next)
        if (v->pos.line == pos.line && v->pos.col == pos.col && strcmp(v->name, name) == 0)
            return v;
    return NULL;
}

static vinfo_t *vsym(gen_t *g, const eve_sym_t *s)
{
    return s ? vget(g, s->name, s->pos) : NULL;
}

static bool is_ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static vinfo_t *vadd(gen_t *g, const char *name, eve_pos_t pos, const eve_ty_t *ty, frame_t *decl)
{
    vinfo_t *old = vget(g, name, pos);
    if (old)
        return old;
    vinfo_t *v = galloc(g, sizeof *v);
    if (!v)
        return NULL;
    v->name = name;
    v->pos = pos;
    v->ty = ty;
    v->decl = decl;
    /* name_LINE, and _cCOL when the same name is declared twice on a line */
    bool clash = false;
    size_t h = hstr(name) % NBUCKETS;
    for (vinfo_t *o = g->vb[h]; o; o = o->next)
        if (o->pos.line == pos.line && strcmp(o->name, name) == 0)
            clash = true;
    for (const char *c = name; *c; c++)
        if (!is_ident_char(*c))
            clash = true;
    v->cname = clash ? fmt(g, "%s_%u_c%u", name, (unsigned)pos.line, (unsigned)pos.col)
                     : fmt(g, "%s_%u", name, (unsigned)pos.line);
    v->next = g->vb[h];
    g->vb[h] = v;
    return v;
}

static size_t hptr(const void *p)
{
    return (size_t)((uintptr_t)p >> 4) * 2654435761u;
}

static frame_t *frame_of(gen_t *g, const eve_node_t *n)
{
    for (frame_t *f = g->fb[hptr(n) % NBUCKETS]; f; f = f->hnext)
        if (f->node == n)
            return f;
    return NULL;
}

static frame_t *frame_new(gen_t *g, int kind, frame_t *parent, const eve_node_t *n, const char *prefix)
{
    frame_t *f = galloc(g, sizeof *f);
    if (!f)
        return NULL;
    f->kind = kind;
    f->parent = parent;
    f->node = n;
    f->cname = n ? fmt(g, "%s_%u_%u", prefix, (unsigned)n->pos.line, (unsigned)n->pos.col) : fmt(g, "%s", prefix);
    size_t h = hptr(n) % NBUCKETS;
    f->hnext = g->fb[h];
    g->fb[h] = f;
    return f;
}

/* ---- types -------------------------------------------------------------------------------------- */

static bool ty_is(const eve_ty_t *t, const char *libname)
{
    return t && t->kind == EVE_TY_CLASS && t->cls && t->cls->lib && strcmp(t->cls->name, libname) == 0;
}

static bool ty_user(const eve_ty_t *t)
{
    return t && t->kind == EVE_TY_CLASS && t->cls && !t->cls->lib;
}

/* Strings and objects: reference counted. */
static bool ty_ref(const eve_ty_t *t)
{
    return t && t->kind != EVE_TY_VOID && t->kind != EVE_TY_INT && t->kind != EVE_TY_BOOL &&
           t->kind != EVE_TY_FLOAT && t->kind != EVE_TY_CHAR && t->kind != EVE_TY_FUNC;
}

static bool ty_obj(const eve_ty_t *t)
{
    return ty_ref(t) && t->kind != EVE_TY_STRING;
}

static const char *ctype(gen_t *g, const eve_ty_t *t)
{
    if (!t)
        return "void";
    switch (t->kind) {
    case EVE_TY_VOID: return "void";
    case EVE_TY_INT: return "int64_t";
    case EVE_TY_BOOL: return "bool";
    case EVE_TY_FLOAT: return "double";
    case EVE_TY_CHAR: return "uint8_t";
    case EVE_TY_STRING: return "eve_str_t *";
    case EVE_TY_VECTOR: return "eve_vec_t *";
    case EVE_TY_SET: return "eve_set_t *";
    case EVE_TY_MAP: return "eve_map_t *";
    case EVE_TY_EMITTER: return "eve_emitter_t *";
    case EVE_TY_CLASS:
        if (!t->cls->lib)
            return fmt(g, "struct cls_%s *", t->cls->name);
        if (strcmp(t->cls->name, "tcp_socket") == 0) return "eve_socket_t *";
        if (strcmp(t->cls->name, "tcp_listener") == 0) return "eve_listener_t *";
        if (strcmp(t->cls->name, "read_buffer") == 0) return "eve_rbuf_t *";
        if (strcmp(t->cls->name, "write_buffer") == 0) return "eve_wbuf_t *";
        if (strcmp(t->cls->name, "timer") == 0) return "eve_timer_t *";
        if (strcmp(t->cls->name, "stream") == 0) return "eve_stream_t *";
        if (strcmp(t->cls->name, "signal_set") == 0) return "eve_signals_t *";
        return "void *";
    default:
        return "void *";
    }
}

/* The field of eve_val_t / eve_box_t.v a value of t lives in. */
static const char *vfield(const eve_ty_t *t)
{
    switch (t ? t->kind : EVE_TY_ERROR) {
    case EVE_TY_INT: return "i";
    case EVE_TY_FLOAT: return "f";
    case EVE_TY_BOOL: return "b";
    case EVE_TY_CHAR: return "c";
    default: return "p";
    }
}

static const char *kind_of(const eve_ty_t *t)
{
    switch (t ? t->kind : EVE_TY_ERROR) {
    case EVE_TY_INT: return "EVE_K_INT";
    case EVE_TY_FLOAT: return "EVE_K_FLOAT";
    case EVE_TY_BOOL: return "EVE_K_BOOL";
    case EVE_TY_CHAR: return "EVE_K_CHAR";
    case EVE_TY_STRING: return "EVE_K_STR";
    case EVE_TY_VOID: return "EVE_K_INT";
    default: return "EVE_K_OBJ";
    }
}

/* expr (of type t) as an eve_val_t */
static char *to_val(gen_t *g, const char *e, const eve_ty_t *t)
{
    switch (t ? t->kind : EVE_TY_ERROR) {
    case EVE_TY_INT: return fmt(g, "eve_vi(%s)", e);
    case EVE_TY_FLOAT: return fmt(g, "eve_vf(%s)", e);
    case EVE_TY_BOOL: return fmt(g, "eve_vb(%s)", e);
    case EVE_TY_CHAR: return fmt(g, "eve_vc(%s)", e);
    default: return fmt(g, "eve_vp(%s)", e);
    }
}

/* an eve_val_t as a value of t */
static char *from_val(gen_t *g, const char *e, const eve_ty_t *t)
{
    if (ty_ref(t))
        return fmt(g, "((%s)(%s).p)", ctype(g, t), e);
    return fmt(g, "(%s).%s", e, vfield(t));
}

/* A fresh object of type t (a declaration without an initializer). */
static char *fresh(gen_t *g, const eve_ty_t *t, eve_pos_t pos)
{
    switch (t->kind) {
    case EVE_TY_VECTOR: return fmt(g, "eve_vec_new(%s)", kind_of(t->a));
    case EVE_TY_SET: return fmt(g, "eve_set_new(%s)", kind_of(t->a));
    case EVE_TY_MAP: return fmt(g, "eve_map_new(%s, %s)", kind_of(t->a), kind_of(t->b));
    case EVE_TY_EMITTER: return fmt(g, "eve_emitter_new(%s)", kind_of(t->a));
    case EVE_TY_CLASS:
        if (!t->cls->lib)
            return fmt(g, "new_%s(cx)", t->cls->name);
        if (strcmp(t->cls->name, "tcp_socket") == 0) return "eve_socket_new()";
        if (strcmp(t->cls->name, "read_buffer") == 0) return "eve_rbuf_new()";
        if (strcmp(t->cls->name, "write_buffer") == 0) return "eve_wbuf_new()";
        if (strcmp(t->cls->name, "timer") == 0) return "eve_timer_new()";
        gerr(g, pos, "a %s cannot be made by declaring it%s", t->cls->name,
             strcmp(t->cls->name, "tcp_listener") == 0 ? ": tcp_socket.listen(address) makes one"
                                                       : ": the library's objects are stdout, stderr and signals");
        return "NULL";
    default:
        return "NULL";
    }
}

static char *zero(gen_t *g, const eve_ty_t *t)
{
    switch (t ? t->kind : EVE_TY_ERROR) {
    case EVE_TY_INT: return "0";
    case EVE_TY_FLOAT: return "0.0";
    case EVE_TY_BOOL: return "false";
    case EVE_TY_CHAR: return "0";
    case EVE_TY_STRING: return "(&eve_str_empty)";
    default: return fmt(g, "((%s)NULL)", ctype(g, t));
    }
}

/* ---- pass 1: analysis --------------------------------------------------------------------------- */

static void an_stmts(gen_t *g, frame_t *f, const eve_list_t *l);
static void an_expr(gen_t *g, frame_t *f, const eve_node_t *n);

static const eve_perm_t *perm_entry(const frame_t *f, const eve_sym_t *s)
{
    if (!f->perms)
        return NULL;
    for (size_t i = 0; i < f->perms->n; i++)
        if (f->perms->v[i].sym == s)
            return &f->perms->v[i];
    return NULL;
}

/* May frame f run after the activation of its parent has ended? */
static bool outlives(const frame_t *f)
{
    if (f->kind == F_LAMBDA)
        return false;
    if (f->kind == F_TASK || f->kind == F_PFOR)
        return !f->in_finish;
    return f->kind == F_CB;
}

static void add_cap(gen_t *g, frame_t *f, vinfo_t *v, int mode)
{
    for (size_t i = 0; i < f->ncaps; i++)
        if (f->caps[i].v == v) {
            if (mode == CAP_REF)
                f->caps[i].mode = CAP_REF;
            return;
        }
    if (f->ncaps == f->capcaps) {
        size_t cap = f->capcaps ? f->capcaps * 2 : 8;
        cap_t *c = galloc(g, cap * sizeof *c);
        if (!c)
            return;
        if (f->ncaps)
            memcpy(c, f->caps, f->ncaps * sizeof *c);
        f->caps = c;
        f->capcaps = cap;
    }
    f->caps[f->ncaps++] = (cap_t){v, mode};
}

/* Frame f uses variable s (force_ref: names it in its permission list, so
 * the cell must be reachable). */
static void use_var(gen_t *g, frame_t *f, const eve_sym_t *s, bool force_ref)
{
    if (!s || s->kind != EVE_SYM_VAR || s->global)
        return;
    vinfo_t *v = vsym(g, s);
    if (!v || v->decl == f || !v->decl)
        return;
    bool value = !ty_ref(v->ty) || v->ty->kind == EVE_TY_STRING;
    bool ref = false;
    /* innermost first: a frame needs a reference if it or a frame inside it does */
    for (frame_t *fr = f; fr && fr != v->decl; fr = fr->parent) {
        const eve_perm_t *pe = perm_entry(fr, s);
        bool mine = pe && (pe->kind == EVE_PERM_READ || pe->kind == EVE_PERM_FULL || pe->kind == EVE_CAPTURE_REF);
        if (fr == f && force_ref)
            mine = mine || (pe && pe->kind != EVE_CAPTURE_COPY && pe->kind != EVE_PERM_NULL);
        if (value && (mine || s->shared))
            ref = true;
        int mode = !value ? CAP_OBJ : ref ? CAP_REF : CAP_COPY;
        add_cap(g, fr, v, mode);
        if (ref) {
            v->cell = true;
            if (outlives(fr))
                v->box = true;
        }
    }
}

/* The variable a name node stands for (a bare field of self: self). */
static void an_name(gen_t *g, frame_t *f, const eve_node_t *n)
{
    if (n->sym)
        use_var(g, f, n->sym, false);
}

static void an_perms(gen_t *g, frame_t *f, const eve_perms_t *p)
{
    for (size_t i = 0; i < p->n; i++) {
        const eve_perm_t *pe = &p->v[i];
        if (!pe->sym)
            continue;
        /* the spawner evaluates the permission's object; the frame keeps it.
         * A parallel for's own element is the spawner's to hand out, not a
         * variable of a frame around it (walking up from the spawner for
         * it would capture it into every enclosing frame). */
        if (!f->loopvar || vsym(g, pe->sym) != f->loopvar)
            use_var(g, f->parent, pe->sym, false);
        if (pe->kind != EVE_PERM_NULL)
            use_var(g, f, pe->sym, true);
    }
}

/* A lambda's parameters, typed from its function type ft. */
static void declare_params(gen_t *g, frame_t *f, const eve_params_t *ps, const eve_ty_t *ft)
{
    for (size_t i = 0; i < ps->n; i++)
        vadd(g, ps->v[i].name, ps->v[i].pos, ft && ft->kind == EVE_TY_FUNC && i < ft->nparams ? ft->params[i] : NULL,
             f);
}

static const eve_ty_t *event_payload(const eve_ty_t *objt, const char *event)
{
    if (!objt || objt->kind != EVE_TY_CLASS || !objt->cls)
        return NULL;
    for (eve_member_t *m = objt->cls->members; m; m = m->next)
        if (strcmp(m->name, event) == 0) {
            if (m->kind == EVE_MEM_EVENT)
                return m->ty;
            if (m->kind == EVE_MEM_FIELD && m->ty->kind == EVE_TY_EMITTER)
                return m->ty->a;
        }
    return NULL;
}

static void an_callback(gen_t *g, frame_t *f, const eve_node_t *n, const eve_ty_t *objt, const char *event,
                        const eve_params_t *params, const eve_perms_t *perms, const eve_list_t *body)
{
    frame_t *cf = frame_new(g, F_CB, f, n, "cb");
    if (!cf)
        return;
    cf->perms = perms;
    const eve_ty_t *pt = event_payload(objt, event);
    for (size_t i = 0; i < params->n; i++)
        vadd(g, params->v[i].name, params->v[i].pos, pt, cf);
    an_perms(g, cf, perms);
    an_stmts(g, cf, body);
}

static void an_stmt(gen_t *g, frame_t *f, const eve_node_t *n, size_t finish)
{
    switch (n->kind) {
    case EVE_N_VAR: {
        const eve_ty_t *t = n->sym ? n->sym->ty : NULL;
        if (n->u.var.init)
            an_expr(g, f, n->u.var.init);
        bool global = f->kind == F_TOP && n->sym && n->sym->global;
        for (size_t i = 0; i < n->u.var.nnames; i++) {
            vinfo_t *v = vadd(g, n->u.var.names[i], n->pos, t, f);
            if (v) {
                v->global = global;
                if (global)
                    v->cname = fmt(g, "g_%s", v->name);
            }
        }
        break;
    }
    case EVE_N_EXPR: {
        an_expr(g, f, n->u.expr.expr);
        for (size_t i = 0; i < n->u.expr.handlers.n; i++) {
            const eve_node_t *h = n->u.expr.handlers.v[i];
            an_callback(g, f, h, n->u.expr.expr->type, h->u.handler.name, &h->u.handler.params,
                        &h->u.handler.perms, &h->u.handler.body);
        }
        break;
    }
    case EVE_N_ASSIGN: {
        const eve_node_t *t = n->u.assign.target;
        if (t->kind == EVE_N_NAME && t->sym && strcmp(t->sym->name, t->u.name.name) == 0) {
            vinfo_t *v = vsym(g, t->sym);
            if (v)
                v->assigned = true;
        }
        an_expr(g, f, t);
        an_expr(g, f, n->u.assign.value);
        break;
    }
    case EVE_N_RETURN:
        if (n->u.ret.value)
            an_expr(g, f, n->u.ret.value);
        break;
    case EVE_N_IF:
        an_expr(g, f, n->u.if_.cond);
        for (size_t i = 0; i < n->u.if_.then.n; i++)
            an_stmt(g, f, n->u.if_.then.v[i], finish);
        for (size_t i = 0; i < n->u.if_.else_.n; i++)
            an_stmt(g, f, n->u.if_.else_.v[i], finish);
        break;
    case EVE_N_WHILE:
        an_expr(g, f, n->u.while_.cond);
        for (size_t i = 0; i < n->u.while_.body.n; i++)
            an_stmt(g, f, n->u.while_.body.v[i], finish);
        break;
    case EVE_N_FOR: {
        an_expr(g, f, n->u.for_.coll);
        const eve_ty_t *et = n->sym ? n->sym->ty : NULL;
        if (!n->u.for_.parallel) {
            vadd(g, n->u.for_.var, n->pos, et, f);
            for (size_t i = 0; i < n->u.for_.body.n; i++)
                an_stmt(g, f, n->u.for_.body.v[i], finish);
            break;
        }
        frame_t *tf = frame_new(g, F_PFOR, f, n, "pfor");
        if (!tf)
            return;
        tf->in_finish = finish > 0;
        tf->perms = &n->u.for_.perms;
        tf->loopvar = vadd(g, n->u.for_.var, n->pos, et, tf);
        if (tf->loopvar)
            tf->loopvar->loopvar = true;
        an_perms(g, tf, &n->u.for_.perms);
        an_stmts(g, tf, &n->u.for_.body);
        break;
    }
    case EVE_N_FINISH:
        for (size_t i = 0; i < n->u.finish.body.n; i++)
            an_stmt(g, f, n->u.finish.body.v[i], finish + 1);
        break;
    case EVE_N_TASK: {
        frame_t *tf = frame_new(g, F_TASK, f, n, "task");
        if (!tf)
            return;
        tf->in_finish = finish > 0;
        tf->perms = &n->u.task.perms;
        an_perms(g, tf, &n->u.task.perms);
        an_stmts(g, tf, &n->u.task.body);
        break;
    }
    case EVE_N_ON:
        an_expr(g, f, n->u.on.obj);
        an_callback(g, f, n, n->u.on.obj->type, n->u.on.event, &n->u.on.params, &n->u.on.perms, &n->u.on.body);
        break;
    default:
        break;
    }
}

static void an_stmts(gen_t *g, frame_t *f, const eve_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        an_stmt(g, f, l->v[i], 0);
}

static void an_expr(gen_t *g, frame_t *f, const eve_node_t *n)
{
    if (!n)
        return;
    switch (n->kind) {
    case EVE_N_NAME:
        an_name(g, f, n);
        break;
    case EVE_N_UNARY:
        an_expr(g, f, n->u.unary.operand);
        break;
    case EVE_N_BINARY:
        an_expr(g, f, n->u.binary.lhs);
        an_expr(g, f, n->u.binary.rhs);
        break;
    case EVE_N_CALL:
        if (n->u.call.callee->kind == EVE_N_NAME) {
            if (n->u.call.callee->sym && n->u.call.callee->sym->kind == EVE_SYM_VAR)
                use_var(g, f, n->u.call.callee->sym, false); /* a method of self by its bare name */
        } else {
            an_expr(g, f, n->u.call.callee);
        }
        for (size_t i = 0; i < n->u.call.args.n; i++)
            an_expr(g, f, n->u.call.args.v[i]);
        break;
    case EVE_N_INDEX:
        an_expr(g, f, n->u.index.obj);
        an_expr(g, f, n->u.index.index);
        break;
    case EVE_N_MEMBER:
        an_expr(g, f, n->u.member.obj);
        break;
    case EVE_N_LAMBDA: {
        frame_t *lf = frame_new(g, F_LAMBDA, f, n, "lambda");
        if (!lf)
            return;
        lf->perms = &n->u.lambda.perms;
        declare_params(g, lf, &n->u.lambda.params, n->type);
        an_perms(g, lf, &n->u.lambda.perms);
        if (n->u.lambda.expr)
            an_expr(g, lf, n->u.lambda.expr);
        else
            an_stmts(g, lf, &n->u.lambda.body);
        break;
    }
    default:
        break;
    }
}

static void an_func(gen_t *g, const eve_node_t *fn, eve_class_t *cls)
{
    frame_t *f = frame_new(g, cls ? F_METHOD : F_FUNC, NULL, fn, cls ? fmt(g, "m_%s", cls->name) : "f");
    if (!f)
        return;
    f->cname = cls ? fmt(g, "m_%s_%s", cls->name, fn->u.func.name) : fmt(g, "f_%s", fn->u.func.name);
    f->cls = cls;
    const eve_ty_t *ft = fn->sym ? fn->sym->ty : NULL;
    if (cls) {
        for (eve_member_t *m = cls->members; m; m = m->next)
            if (m->decl == fn)
                ft = m->ty;
        vinfo_t *self = vadd(g, "self", fn->pos, NULL, f);
        if (self) {
            eve_ty_t *st = galloc(g, sizeof *st);
            if (st) {
                st->kind = EVE_TY_CLASS;
                st->cls = cls;
            }
            self->ty = st;
        }
    }
    for (size_t i = 0; i < fn->u.func.params.n; i++) {
        const eve_param_t *p = &fn->u.func.params.v[i];
        const eve_ty_t *pt = ft && ft->kind == EVE_TY_FUNC && i < ft->nparams ? ft->params[i] : NULL;
        vadd(g, p->name, p->pos, pt, f);
    }
    f->fty = ft;
    an_stmts(g, f, &fn->u.func.body);
}

/* ---- pass 2: emission: helpers ----------------------------------------------------------------- */

static void ind(gen_t *g)
{
    for (int i = 0; i < g->ind; i++)
        sb_puts(g->out, "    ");
}

static void line(gen_t *g, const char *f, ...) __attribute__((format(printf, 2, 3)));
static void line(gen_t *g, const char *f, ...)
{
    ind(g);
    va_list ap;
    va_start(ap, f);
    sb_vprintf(g->out, f, ap);
    va_end(ap);
    sb_puts(g->out, "\n");
}

static void hash_line(gen_t *g, eve_pos_t pos)
{
    sb_printf(g->out, "#line %u \"%s\"\n", (unsigned)pos.line, g->source);
}

static char *posstr(gen_t *g, eve_pos_t pos)
{
    return fmt(g, "\"%s:%u:%u\"", g->source, (unsigned)pos.line, (unsigned)pos.col);
}

/* A full heap array arr of *cap elements of `size` bytes, twice as large
 * (*cap updated); NULL (and g failed, arr untouched) when out of memory. */
static void *grown(gen_t *g, void *arr, size_t *cap, size_t size)
{
    size_t c = *cap ? *cap * 2 : 8;
    void *p = realloc(arr, c * size);
    if (!p) {
        g->failed = true;
        return NULL;
    }
    *cap = c;
    return p;
}

static void push_cleanup(gen_t *g, char *code)
{
    if (g->ncl == g->capcl) {
        cleanup_t *c = grown(g, g->cl, &g->capcl, sizeof *c);
        if (!c)
            return;
        g->cl = c;
    }
    g->cl[g->ncl++] = (cleanup_t){code};
}

/* Emits the cleanups above depth `to`, innermost first (without popping). */
static void run_cleanups(gen_t *g, size_t to)
{
    for (size_t i = g->ncl; i-- > to;)
        line(g, "%s", g->cl[i].code);
}

/* Ends a scope opened at cleanup depth `to`: its cleanups, popped. */
static void close_scope(gen_t *g, size_t to)
{
    run_cleanups(g, to);
    g->ncl = to;
}

/* ---- variables: access --------------------------------------------------------------------------- */

static const cap_t *cap_in(const frame_t *f, const vinfo_t *v)
{
    for (size_t i = 0; i < f->ncaps; i++)
        if (f->caps[i].v == v)
            return &f->caps[i];
    return NULL;
}

static bool stored_in_env(const frame_t *f, const vinfo_t *v)
{
    return v->loopvar && v->decl == f;
}

/* The C lvalue of variable v's value in frame f. */
static char *vaccess(gen_t *g, frame_t *f, vinfo_t *v)
{
    if (!v)
        return "0";
    if (v->global)
        return v->cell ? fmt(g, "%s.v.%s", v->cname, vfield(v->ty)) : v->cname;
    if (v->decl == f) {
        if (stored_in_env(f, v))
            return fmt(g, "e->%s", v->cname);
        if (v->cell)
            return fmt(g, v->box ? "%s->v.%s" : "%s.v.%s", v->cname, vfield(v->ty));
        return v->cname;
    }
    const cap_t *c = cap_in(f, v);
    if (!c) {
        gerr(g, v->pos, "internal error: '%s' is not captured where it is used", v->name);
        return "0";
    }
    if (c->mode == CAP_REF)
        return fmt(g, "e->%s->v.%s", v->cname, vfield(v->ty));
    return fmt(g, "e->%s", v->cname);
}

/* A string or object assigned to v is typed void * in a cell: read it back typed. */
static char *vread(gen_t *g, frame_t *f, vinfo_t *v)
{
    char *a = vaccess(g, f, v);
    if (v && v->cell && ty_ref(v->ty))
        return fmt(g, "((%s)%s)", ctype(g, v->ty), a);
    return a;
}

/* A pointer to v's cell (eve_box_t *) in frame f. */
static char *vcell(gen_t *g, frame_t *f, vinfo_t *v)
{
    if (v->global)
        return fmt(g, "(&%s)", v->cname);
    if (v->decl == f)
        return v->box ? v->cname : fmt(g, "(&%s)", v->cname);
    const cap_t *c = cap_in(f, v);
    if (!c || c->mode != CAP_REF) {
        gerr(g, v->pos, "internal error: no cell for '%s' here", v->name);
        return "NULL";
    }
    return fmt(g, "e->%s", v->cname);
}

/* ---- expressions ------------------------------------------------------------------------------------ */

static char *gx(gen_t *g, const eve_node_t *n);
static char *new_temp(gen_t *g, const eve_ty_t *t);

static char *lit_string(gen_t *g, const char *bytes, size_t len)
{
    int id = g->nlit++;
    sb_t *b = &g->lits;
    sb_printf(b, "static eve_str_t lit_%d = EVE_STR_LIT(\"", id);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)bytes[i];
        if (c == '"' || c == '\\' || c == '?')
            sb_printf(b, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            sb_putn(b, (const char *)&c, 1);
        else
            sb_printf(b, "\\%03o", c);
    }
    sb_printf(b, "\", %zu);\n", len);
    return fmt(g, "(&lit_%d)", id);
}

static const char *bytes_kind(const eve_ty_t *t)
{
    if (t && t->kind == EVE_TY_STRING)
        return "str";
    if (ty_is(t, "read_buffer"))
        return "rbuf";
    return "wbuf";
}

static char *tmp_owned(gen_t *g, const eve_ty_t *t, const char *owned)
{
    g->made_tmp = true;
    return fmt(g, "((%s)eve_tmp(cx, %s))", ctype(g, t), owned);
}

static const char *binop_c(eve_tok_kind_t op)
{
    switch (op) {
    case EVE_T_PLUS: return "+";
    case EVE_T_MINUS: return "-";
    case EVE_T_STAR: return "*";
    case EVE_T_SLASH: return "/";
    case EVE_T_PERCENT: return "%";
    case EVE_T_AMP: return "&";
    case EVE_T_PIPE: return "|";
    case EVE_T_CARET: return "^";
    case EVE_T_LT: return "<";
    case EVE_T_LE: return "<=";
    case EVE_T_GT: return ">";
    case EVE_T_GE: return ">=";
    case EVE_T_EQ: return "==";
    case EVE_T_NE: return "!=";
    case EVE_T_ANDAND: return "&&";
    case EVE_T_OROR: return "||";
    case EVE_T_PLUS_ASSIGN: return "+";
    case EVE_T_MINUS_ASSIGN: return "-";
    case EVE_T_STAR_ASSIGN: return "*";
    case EVE_T_SLASH_ASSIGN: return "/";
    case EVE_T_PERCENT_ASSIGN: return "%";
    default: return "?";
    }
}

/* a OP b on values of type t (lt: the left operand's type) */
static char *binop(gen_t *g, eve_tok_kind_t op, const char *a, const char *b, const eve_ty_t *lt, eve_pos_t pos)
{
    const char *o = binop_c(op);
    bool str = lt && lt->kind == EVE_TY_STRING;
    bool isint = lt && lt->kind == EVE_TY_INT;
    switch (op) {
    case EVE_T_EQ:
    case EVE_T_NE:
        if (str)
            return fmt(g, "(%seve_str_eq(%s, %s))", op == EVE_T_NE ? "!" : "", a, b);
        if (ty_ref(lt))
            return fmt(g, "((const void *)(%s) %s (const void *)(%s))", a, o, b);
        return fmt(g, "((%s) %s (%s))", a, o, b);
    case EVE_T_LT:
    case EVE_T_LE:
    case EVE_T_GT:
    case EVE_T_GE:
        if (str)
            return fmt(g, "(eve_str_cmp(%s, %s) %s 0)", a, b, o);
        return fmt(g, "((%s) %s (%s))", a, o, b);
    case EVE_T_PLUS:
    case EVE_T_PLUS_ASSIGN:
        if (str) {
            g->made_tmp = true;
            return fmt(g, "eve_tmp_str(cx, eve_str_concat(%s, %s))", a, b);
        }
        return fmt(g, "((%s) + (%s))", a, b);
    case EVE_T_SLASH:
    case EVE_T_SLASH_ASSIGN:
        if (isint)
            return fmt(g, "eve_div(%s, %s, %s)", a, b, posstr(g, pos));
        return fmt(g, "((%s) / (%s))", a, b);
    case EVE_T_PERCENT:
    case EVE_T_PERCENT_ASSIGN:
        return fmt(g, "eve_mod(%s, %s, %s)", a, b, posstr(g, pos));
    case EVE_T_SHL:
        return fmt(g, "eve_shl(%s, %s)", a, b);
    case EVE_T_SHR:
        return fmt(g, "eve_shr(%s, %s)", a, b);
    default:
        return fmt(g, "((%s) %s (%s))", a, o, b);
    }
}

/* The value of a name node in the current frame. */
static char *name_value(gen_t *g, const eve_node_t *n)
{
    const eve_sym_t *s = n->sym;
    if (!s)
        return "0";
    if (s->kind == EVE_SYM_LIBOBJ) {
        if (strcmp(s->name, "stdout") == 0) return "eve_stdout";
        if (strcmp(s->name, "stderr") == 0) return "eve_stderr";
        if (strcmp(s->name, "args") == 0) return "eve_args";
        if (strcmp(s->name, "signals") == 0) return "eve_signals";
        gerr(g, n->pos, "the library object '%s' has no code yet", s->name);
        return "NULL";
    }
    vinfo_t *v = vsym(g, s);
    if (!v) {
        gerr(g, n->pos, "internal error: no variable '%s'", n->u.name.name);
        return "0";
    }
    if (strcmp(s->name, n->u.name.name) != 0) /* a field of self, named bare */
        return fmt(g, "%s->f_%s", vread(g, g->f, v), n->u.name.name);
    return vread(g, g->f, v);
}

static char *call_args(gen_t *g, const eve_node_t *call, bool lead_comma)
{
    sb_t b = {0};
    for (size_t i = 0; i < call->u.call.args.n; i++) {
        if (i || lead_comma)
            sb_puts(&b, ", ");
        sb_puts(&b, gx(g, call->u.call.args.v[i]));
    }
    char *s = fmt(g, "%s", b.p ? b.p : "");
    free(b.p);
    return s;
}

static char *lambda_call(gen_t *g, const eve_node_t *call);

static char *user_call(gen_t *g, const char *cfn, const char *recv, const eve_node_t *call, const eve_ty_t *ret)
{
    char *c = fmt(g, "%s(cx%s%s%s)", cfn, recv ? ", " : "", recv ? recv : "", call_args(g, call, true));
    if (ty_ref(ret))
        return tmp_owned(g, ret, c);
    return c;
}

static char *lib_func(gen_t *g, const eve_node_t *n, const char *fname)
{
    const eve_list_t *a = &n->u.call.args;
    const eve_ty_t *at = a->n ? a->v[0]->type : NULL;
    char *x = a->n ? gx(g, a->v[0]) : "";
    int k = at ? (int)at->kind : -1;
    if (strcmp(fname, "exit") == 0)
        return fmt(g, "eve_exit(%s)", x);
    if (strcmp(fname, "clock_ns") == 0)
        return "eve_clock_ns()";
    if (strcmp(fname, "range") == 0)
        return tmp_owned(g, n->type, fmt(g, "eve_range(%s, %s)", x, gx(g, a->v[1])));
    if (strcmp(fname, "to_string") == 0) {
        switch (k) {
        case EVE_TY_INT: return tmp_owned(g, n->type, fmt(g, "eve_str_of_int(%s)", x));
        case EVE_TY_FLOAT: return tmp_owned(g, n->type, fmt(g, "eve_str_of_float(%s)", x));
        case EVE_TY_BOOL: return tmp_owned(g, n->type, fmt(g, "eve_str_of_bool(%s)", x));
        case EVE_TY_CHAR: return tmp_owned(g, n->type, fmt(g, "eve_str_of_char(%s)", x));
        default: return x;
        }
    }
    if (strcmp(fname, "to_int") == 0) {
        switch (k) {
        case EVE_TY_STRING: return fmt(g, "eve_str_to_int(%s, %s)", x, posstr(g, n->pos));
        case EVE_TY_FLOAT: return fmt(g, "eve_float_to_int(%s, %s)", x, posstr(g, n->pos));
        case EVE_TY_INT: return x;
        default: return fmt(g, "((int64_t)(%s))", x);
        }
    }
    if (strcmp(fname, "to_float") == 0) {
        switch (k) {
        case EVE_TY_STRING: return fmt(g, "eve_str_to_float(%s, %s)", x, posstr(g, n->pos));
        case EVE_TY_FLOAT: return x;
        default: return fmt(g, "((double)(%s))", x);
        }
    }
    gerr(g, n->pos, "the library function '%s' has no code yet", fname);
    return "0";
}

/* recv.mname(args) for a library type */
static char *lib_method(gen_t *g, const eve_node_t *n, const eve_ty_t *rt, const char *recv, const char *mname)
{
    const eve_list_t *a = &n->u.call.args;
    char *x = a->n > 0 ? gx(g, a->v[0]) : "";
    char *y = a->n > 1 ? gx(g, a->v[1]) : "";
    const eve_ty_t *xt = a->n > 0 ? a->v[0]->type : NULL;
    char *P = posstr(g, n->pos);
#define IS(s) (strcmp(mname, s) == 0)
    switch (rt->kind) {
    case EVE_TY_STRING:
        if (IS("size")) return fmt(g, "eve_str_size(%s)", recv);
        if (IS("substring")) return tmp_owned(g, rt, fmt(g, "eve_str_substring(%s, %s, %s, %s)", recv, x, y, P));
        if (IS("find")) return fmt(g, "eve_str_find(%s, %s)", recv, x);
        break;
    case EVE_TY_VECTOR:
        if (IS("size")) return fmt(g, "eve_vec_size(%s)", recv);
        if (IS("contains")) return fmt(g, "eve_vec_contains(%s, %s)", recv, to_val(g, x, rt->a));
        if (IS("push")) return fmt(g, "eve_vec_push(%s, %s)", recv, to_val(g, x, rt->a));
        if (IS("remove")) return fmt(g, "eve_vec_remove(%s, %s)", recv, to_val(g, x, rt->a));
        if (IS("clear")) return fmt(g, "eve_vec_clear(%s)", recv);
        if (IS("pop")) {
            char *c = fmt(g, "eve_vec_pop(%s, %s)", recv, P);
            if (ty_ref(rt->a))
                return tmp_owned(g, rt->a, fmt(g, "%s.p", c));
            return from_val(g, c, rt->a);
        }
        break;
    case EVE_TY_SET:
        if (IS("size")) return fmt(g, "eve_set_size(%s)", recv);
        if (IS("contains")) return fmt(g, "eve_set_contains(%s, %s)", recv, to_val(g, x, rt->a));
        if (IS("add") || IS("insert")) return fmt(g, "eve_set_add(%s, %s)", recv, to_val(g, x, rt->a));
        if (IS("remove")) return fmt(g, "eve_set_remove(%s, %s)", recv, to_val(g, x, rt->a));
        if (IS("clear")) return fmt(g, "eve_set_clear(%s)", recv);
        break;
    case EVE_TY_MAP:
        if (IS("size")) return fmt(g, "eve_map_size(%s)", recv);
        if (IS("contains")) return fmt(g, "eve_map_contains(%s, %s)", recv, to_val(g, x, rt->a));
        if (IS("remove")) return fmt(g, "eve_map_remove(%s, %s)", recv, to_val(g, x, rt->a));
        if (IS("clear")) return fmt(g, "eve_map_clear(%s)", recv);
        break;
    case EVE_TY_EMITTER:
        if (IS("emit"))
            return fmt(g, "eve_emit(cx, %s, %s)", recv, a->n ? to_val(g, x, rt->a) : "eve_vi(0)");
        break;
    case EVE_TY_CLASS: {
        const char *cn = rt->cls->name;
        if (strcmp(cn, "tcp_socket") == 0) {
            if (IS("write")) return fmt(g, "eve_sock_write_%s(cx, %s, %s)", bytes_kind(xt), recv, x);
            if (IS("close")) return fmt(g, "eve_socket_close(cx, %s)", recv);
            if (IS("read_buffer")) return tmp_owned(g, n->type, fmt(g, "eve_sock_read_buffer(cx, %s, %s)", recv, P));
            if (IS("write_buffer")) return fmt(g, "eve_sock_write_vec(cx, %s, %s, %s)", recv, x, P);
        } else if (strcmp(cn, "tcp_listener") == 0) {
            if (IS("close")) return fmt(g, "eve_listener_close(cx, %s)", recv);
        } else if (strcmp(cn, "read_buffer") == 0) {
            if (IS("size")) return fmt(g, "eve_rbuf_size(%s)", recv);
            if (IS("to_string")) return tmp_owned(g, n->type, fmt(g, "eve_rbuf_to_string(%s)", recv));
        } else if (strcmp(cn, "write_buffer") == 0) {
            if (IS("size")) return fmt(g, "eve_wbuf_size(%s)", recv);
            if (IS("append")) return fmt(g, "eve_wbuf_append_%s(%s, %s)", bytes_kind(xt), recv, x);
            if (IS("append_byte")) return fmt(g, "eve_wbuf_append_byte(%s, %s)", recv, x);
            if (IS("clear")) return fmt(g, "eve_wbuf_clear(%s)", recv);
        } else if (strcmp(cn, "stream") == 0) {
            if (IS("write")) return fmt(g, "eve_stream_write_%s(%s, %s)", bytes_kind(xt), recv, x);
            if (IS("write_line")) return fmt(g, "eve_stream_write_line(%s, %s)", recv, x);
        } else if (strcmp(cn, "timer") == 0) {
            if (IS("start")) return fmt(g, "eve_timer_start(cx, %s, %s, %s)", recv, x, P);
            if (IS("once")) return fmt(g, "eve_timer_once(cx, %s, %s, %s)", recv, x, P);
            if (IS("stop")) return fmt(g, "eve_timer_stop(cx, %s)", recv);
        }
        break;
    }
    default:
        break;
    }
#undef IS
    gerr(g, n->pos, "the library method '%s' has no code yet", mname);
    return "0";
}

static char *call_value(gen_t *g, const eve_node_t *n)
{
    const eve_node_t *callee = n->u.call.callee;
    if (callee->kind == EVE_N_NAME) {
        const eve_sym_t *s = callee->sym;
        if (s && s->kind == EVE_SYM_FUNC) {
            if (s->decl)
                return user_call(g, fmt(g, "f_%s", s->name), NULL, n, n->type);
            return lib_func(g, n, s->name);
        }
        if (s && s->kind == EVE_SYM_VAR && strcmp(s->name, callee->u.name.name) != 0) {
            /* a method of self by its bare name */
            vinfo_t *self = vsym(g, s);
            const eve_ty_t *st = self && self->ty ? self->ty : NULL;
            const char *cls = st && st->cls ? st->cls->name : "?";
            return user_call(g, fmt(g, "m_%s_%s", cls, callee->u.name.name), vread(g, g->f, self), n, n->type);
        }
        return lambda_call(g, n);
    }
    if (callee->kind == EVE_N_MEMBER) {
        const eve_node_t *obj = callee->u.member.obj;
        const char *mname = callee->u.member.name;
        const eve_sym_t *os = obj->kind == EVE_N_NAME ? obj->sym : NULL;
        if (os && os->kind == EVE_SYM_MODULE) {
            const eve_list_t *a = &n->u.call.args;
            if (strcmp(mname, "find") == 0)
                return fmt(g, "eve_str_find(%s, %s)", gx(g, a->v[0]), gx(g, a->v[1]));
            if (strcmp(mname, "trim") == 0)
                return tmp_owned(g, n->type, fmt(g, "eve_str_trim(%s)", gx(g, a->v[0])));
            gerr(g, n->pos, "the library function '%s.%s' has no code yet", os->name, mname);
            return "0";
        }
        if (os && os->kind == EVE_SYM_CLASS) {
            if (strcmp(mname, "listen") == 0)
                return tmp_owned(g, n->type, fmt(g, "eve_tcp_listen(cx, %s)", gx(g, n->u.call.args.v[0])));
            gerr(g, n->pos, "the library function '%s.%s' has no code yet", os->name, mname);
            return "0";
        }
        const eve_ty_t *rt = obj->type;
        char *recv = gx(g, obj);
        if (ty_user(rt))
            return user_call(g, fmt(g, "m_%s_%s", rt->cls->name, mname), recv, n, n->type);
        return lib_method(g, n, rt, recv, mname);
    }
    return lambda_call(g, n);
}

/* May evaluating n have an effect a later operand could see (or the other
 * way round)? Calls, but those of the library that only read. */
static bool effects(const eve_node_t *n)
{
    if (!n)
        return false;
    switch (n->kind) {
    case EVE_N_UNARY:
        return effects(n->u.unary.operand);
    case EVE_N_BINARY:
        return effects(n->u.binary.lhs) || effects(n->u.binary.rhs);
    case EVE_N_INDEX:
        return effects(n->u.index.obj) || effects(n->u.index.index);
    case EVE_N_MEMBER:
        return effects(n->u.member.obj);
    case EVE_N_CALL: {
        for (size_t i = 0; i < n->u.call.args.n; i++)
            if (effects(n->u.call.args.v[i]))
                return true;
        const eve_node_t *c = n->u.call.callee;
        static const char *const pure[] = {"to_string", "to_int", "to_float", "range", "clock_ns", "size",
                                           "contains", "substring", "find", "trim"};
        const char *name = NULL;
        if (c->kind == EVE_N_NAME && c->sym && c->sym->kind == EVE_SYM_FUNC && !c->sym->decl)
            name = c->sym->name;
        else if (c->kind == EVE_N_MEMBER && c->u.member.obj->type && !ty_user(c->u.member.obj->type)) {
            if (effects(c->u.member.obj))
                return true;
            name = c->u.member.name;
        } else if (c->kind == EVE_N_MEMBER && c->u.member.obj->kind == EVE_N_NAME && c->u.member.obj->sym &&
                   c->u.member.obj->sym->kind == EVE_SYM_MODULE)
            name = c->u.member.name;
        for (size_t i = 0; name && i < sizeof pure / sizeof pure[0]; i++)
            if (strcmp(name, pure[i]) == 0)
                return false;
        return true;
    }
    default:
        return false;
    }
}

static bool is_literal(const eve_node_t *n)
{
    return n->kind == EVE_N_INT || n->kind == EVE_N_FLOAT || n->kind == EVE_N_CHAR || n->kind == EVE_N_STRING ||
           n->kind == EVE_N_BOOL;
}

static char *new_temp(gen_t *g, const eve_ty_t *t)
{
    char *name = fmt(g, "t_%d", ++g->ntemp);
    if (g->decls)
        sb_printf(g->decls, "    %s%s%s;\n", ctype(g, t), ty_ref(t) ? "" : " ", name);
    return name;
}

static char *gx_raw(gen_t *g, const eve_node_t *n);

/* The i-th operand n evaluates, in order: a binary operator's two (not
 * && and ||, which C already orders), a method's receiver then a call's
 * arguments; NULL past the last. */
static const eve_node_t *operand(const eve_node_t *n, size_t i)
{
    if (n->kind == EVE_N_BINARY && n->u.binary.op != EVE_T_ANDAND && n->u.binary.op != EVE_T_OROR)
        return i == 0 ? n->u.binary.lhs : i == 1 ? n->u.binary.rhs : NULL;
    if (n->kind != EVE_N_CALL)
        return NULL;
    const eve_node_t *c = n->u.call.callee;
    const eve_node_t *obj = c->kind == EVE_N_MEMBER ? c->u.member.obj : NULL;
    if (obj && !(obj->kind == EVE_N_NAME && obj->sym &&
                 (obj->sym->kind == EVE_SYM_MODULE || obj->sym->kind == EVE_SYM_CLASS))) {
        if (i == 0)
            return obj;
        i--;
    }
    return i < n->u.call.args.n ? n->u.call.args.v[i] : NULL;
}

/* Operands are evaluated left to right, as written: where one may have an
 * effect, they go into temporaries in order first (C leaves the order of a
 * call's arguments and of an operator's operands open). */
static char *gx(gen_t *g, const eve_node_t *n)
{
    for (size_t i = g->novr; i-- > 0;)
        if (g->ovr[i].n == n)
            return g->ovr[i].c;
    /* an effect anywhere, and another operand that could be evaluated before or after it */
    bool effect = false;
    size_t nonlit = 0;
    const eve_node_t *o;
    for (size_t i = 0; (o = operand(n, i)) != NULL; i++) {
        effect = effect || effects(o);
        nonlit += !is_literal(o);
    }
    if (!effect || nonlit < 2)
        return gx_raw(g, n);
    sb_t pre = {0};
    size_t base = g->novr;
    for (size_t i = 0; (o = operand(n, i)) != NULL; i++) {
        if (is_literal(o) || !o->type)
            continue;
        char *v = gx(g, o);
        char *t = new_temp(g, o->type);
        sb_printf(&pre, "%s = %s, ", t, v);
        if (g->novr == g->capovr) {
            struct ovr *a = grown(g, g->ovr, &g->capovr, sizeof *a);
            if (!a)
                break;
            g->ovr = a;
        }
        g->ovr[g->novr++] = (struct ovr){o, t};
    }
    char *r = gx_raw(g, n);
    g->novr = base;
    char *out = fmt(g, "(%s%s)", pre.p ? pre.p : "", r);
    free(pre.p);
    return out;
}

static char *gx_raw(gen_t *g, const eve_node_t *n)
{
    switch (n->kind) {
    case EVE_N_INT:
        if (n->u.int_.value > (uint64_t)INT64_MAX)
            return "INT64_MIN"; /* only as -9223372036854775808 (the checker) */
        return fmt(g, "INT64_C(%" PRIu64 ")", n->u.int_.value);
    case EVE_N_FLOAT:
        return fmt(g, "%s", n->u.float_.text);
    case EVE_N_CHAR:
        return fmt(g, "((uint8_t)%u)", (unsigned)n->u.char_.value);
    case EVE_N_STRING:
        return lit_string(g, n->u.string.bytes, n->u.string.len);
    case EVE_N_BOOL:
        return n->u.bool_.value ? "true" : "false";
    case EVE_N_NAME:
        return name_value(g, n);
    case EVE_N_UNARY: {
        const eve_node_t *o = n->u.unary.operand;
        if (n->u.unary.op == EVE_T_MINUS && o->kind == EVE_N_INT && o->u.int_.value == (uint64_t)INT64_MAX + 1)
            return "INT64_MIN";
        char *x = gx(g, o);
        switch (n->u.unary.op) {
        case EVE_T_MINUS:
            if (o->type && o->type->kind == EVE_TY_INT)
                return fmt(g, "((int64_t)(0u - (uint64_t)(%s)))", x);
            return fmt(g, "(-(%s))", x);
        case EVE_T_BANG: return fmt(g, "(!(%s))", x);
        default: return fmt(g, "(~(%s))", x);
        }
    }
    case EVE_N_BINARY: {
        eve_tok_kind_t op = n->u.binary.op;
        const eve_ty_t *lt = n->u.binary.lhs->type;
        char *a = gx(g, n->u.binary.lhs);
        char *b = gx(g, n->u.binary.rhs);
        if (lt && lt->kind == EVE_TY_INT && (op == EVE_T_PLUS || op == EVE_T_MINUS || op == EVE_T_STAR))
            /* wrapping, without undefined behaviour */
            return fmt(g, "((int64_t)((uint64_t)(%s) %s (uint64_t)(%s)))", a, binop_c(op), b);
        return binop(g, op, a, b, lt, n->pos);
    }
    case EVE_N_CALL:
        return call_value(g, n);
    case EVE_N_INDEX: {
        const eve_ty_t *ct = n->u.index.obj->type;
        char *c = gx(g, n->u.index.obj);
        char *i = gx(g, n->u.index.index);
        char *P = posstr(g, n->pos);
        if (!ct)
            return "0";
        if (ct->kind == EVE_TY_VECTOR)
            return from_val(g, fmt(g, "eve_vec_get(%s, %s, %s)", c, i, P), ct->a);
        if (ct->kind == EVE_TY_MAP)
            return from_val(g, fmt(g, "eve_map_get(%s, %s, %s)", c, to_val(g, i, ct->a), P), ct->b);
        if (ct->kind == EVE_TY_STRING)
            return fmt(g, "eve_str_at(%s, %s, %s)", c, i, P);
        return fmt(g, "eve_rbuf_at(%s, %s, %s)", c, i, P);
    }
    case EVE_N_MEMBER:
        return fmt(g, "%s->f_%s", gx(g, n->u.member.obj), n->u.member.name);
    case EVE_N_LAMBDA:
        gerr(g, n->pos, "a lambda can only be called where it is made: (lambda)(arguments)");
        return "0";
    default:
        gerr(g, n->pos, "internal error: an expression the generator does not know");
        return "0";
    }
}

/* ---- closures: env structs, captures, permissions ------------------------------------------------ */

static void emit_env_struct(gen_t *g, frame_t *f)
{
    sb_t *b = &g->types;
    sb_printf(b, "struct env_%s {\n", f->cname);
    size_t n = 0;
    if (f->loopvar) {
        sb_printf(b, "    %s %s;\n", ctype(g, f->loopvar->ty), f->loopvar->cname);
        n++;
    }
    for (size_t i = 0; i < f->ncaps; i++) {
        const cap_t *c = &f->caps[i];
        if (c->mode == CAP_REF)
            sb_printf(b, "    eve_box_t *%s;\n", c->v->cname);
        else
            sb_printf(b, "    %s %s;\n", ctype(g, c->v->ty), c->v->cname);
        n++;
    }
    if (!n)
        sb_puts(b, "    char unused;\n");
    sb_puts(b, "};\n");
}

/* Fills env `ev` (a pointer) with f's captures, from the current frame.
 * keep: the closure may outlive this statement (retain what it holds). */
static void fill_env(gen_t *g, frame_t *f, const char *ev, bool keep)
{
    for (size_t i = 0; i < f->ncaps; i++) {
        const cap_t *c = &f->caps[i];
        if (c->mode == CAP_REF) {
            line(g, "%s->%s = %s;", ev, c->v->cname, vcell(g, g->f, c->v));
            if (keep && c->v->box)
                line(g, "eve_retain(%s->%s);", ev, c->v->cname);
        } else {
            line(g, "%s->%s = %s;", ev, c->v->cname, vread(g, g->f, c->v));
            if (keep && ty_ref(c->v->ty))
                line(g, "eve_retain(%s->%s);", ev, c->v->cname);
        }
    }
}

/* Releases what fill_env(keep) retained, in the closure (env `e`). */
static void release_env(gen_t *g, frame_t *f)
{
    if (f->loopvar && ty_ref(f->loopvar->ty))
        line(g, "eve_release(e->%s);", f->loopvar->cname);
    for (size_t i = 0; i < f->ncaps; i++) {
        const cap_t *c = &f->caps[i];
        if ((c->mode == CAP_REF && c->v->box) || (c->mode != CAP_REF && ty_ref(c->v->ty)))
            line(g, "eve_release(e->%s);", c->v->cname);
    }
}

/* Walks a dotted permission path from its variable: the C expression of the
 * object whose permission it is. */
static char *perm_object(gen_t *g, frame_t *f, const eve_perm_t *pe, const char *loopvar_expr)
{
    vinfo_t *v = vsym(g, pe->sym);
    if (!v)
        return NULL;
    const char *dot = strchr(pe->name, '.');
    if (!dot) {
        if (f && f->loopvar == v)
            return ty_ref(v->ty) ? fmt(g, "EVE_PERM(%s)", loopvar_expr) : NULL;
        if (!ty_ref(v->ty) || v->ty->kind == EVE_TY_STRING)
            return fmt(g, "(&%s->h.perm)", vcell(g, g->f, v));
        return fmt(g, "EVE_PERM(%s)", vread(g, g->f, v));
    }
    /* a field: the permission of the deepest object on the path */
    char *obj = f && f->loopvar == v ? fmt(g, "%s", loopvar_expr) : vread(g, g->f, v);
    const eve_ty_t *t = v->ty;
    char *last_obj = obj;
    const char *p = dot + 1;
    while (*p && ty_user(t)) {
        const char *q = strchr(p, '.');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        const eve_ty_t *ft = NULL;
        for (eve_member_t *m = t->cls->members; m; m = m->next)
            if (m->kind == EVE_MEM_FIELD && strlen(m->name) == len && strncmp(m->name, p, len) == 0)
                ft = m->ty;
        obj = fmt(g, "%s->f_%.*s", obj, (int)len, p);
        if (!ft || !ty_obj(ft))
            break;
        last_obj = obj;
        t = ft;
        p = q ? q + 1 : p + len;
        if (!q)
            break;
    }
    return fmt(g, "EVE_PERM(%s)", last_obj);
}

/* The permissions of a list, evaluated in the current frame: emitted as
 * `yard_coro_perm_t ARR[] = {...};` or, into_cb, as assignments to
 * ARR[i] of an eve_cb_t. Returns how many. */
static size_t emit_perms(gen_t *g, frame_t *f, const eve_perms_t *perms, const char *arr, const char *loopvar_expr,
                         bool into_cb)
{
    size_t n = 0;
    sb_t b = {0};
    for (size_t i = 0; perms && i < perms->n; i++) {
        const eve_perm_t *pe = &perms->v[i];
        if (!pe->sym || (pe->kind != EVE_PERM_READ && pe->kind != EVE_PERM_FULL))
            continue;
        char *o = perm_object(g, f, pe, loopvar_expr);
        if (!o)
            continue;
        const char *mode = pe->kind == EVE_PERM_FULL ? "YARD_PERM_FULL" : "YARD_PERM_READ";
        if (into_cb)
            line(g, "%s[%zu] = (yard_coro_perm_t){%s, %s};", arr, n, o, mode);
        else
            sb_printf(&b, "%s{%s, %s}", n ? ", " : "", o, mode);
        n++;
    }
    if (n && !into_cb)
        line(g, "yard_coro_perm_t %s[] = {%s};", arr, b.p);
    free(b.p);
    return n;
}

/* ---- statements ------------------------------------------------------------------------------------ */

static void g_stmts(gen_t *g, const eve_list_t *l);
static void g_frame_fn(gen_t *g, frame_t *f);

/* Does parameter v need a variable of its own (a cell, or its own
 * reference because the program assigns it)? */
static bool own_local(const vinfo_t *v)
{
    return v->cell || (ty_ref(v->ty) && v->assigned);
}

/* Declares local v (in the current function) with C value `init` (NULL: the
 * type's default, a fresh object for object types) and registers its
 * cleanup. init is borrowed. */
static void decl_local(gen_t *g, vinfo_t *v, const char *init, eve_pos_t pos)
{
    const eve_ty_t *t = v->ty;
    bool ref = ty_ref(t);
    if (v->cell) {
        bool str = t && t->kind == EVE_TY_STRING;
        if (v->box) {
            line(g, "eve_box_t *%s = eve_box_new(%s);", v->cname, str ? "true" : "false");
            push_cleanup(g, fmt(g, "eve_release(%s);", v->cname));
        } else {
            line(g, "eve_box_t %s = {.str = %s};", v->cname, str ? "true" : "false");
            if (str)
                push_cleanup(g, fmt(g, "eve_release(%s.v.p);", v->cname));
        }
        const char *lv = v->box ? fmt(g, "%s->v.%s", v->cname, vfield(t)) : fmt(g, "%s.v.%s", v->cname, vfield(t));
        if (str)
            line(g, "%s = %s; eve_retain(%s);", lv, init ? init : "(&eve_str_empty)", lv);
        else
            line(g, "%s = %s;", lv, init ? init : zero(g, t));
        return;
    }
    if (!ref) {
        line(g, "%s %s = %s;", ctype(g, t), v->cname, init ? init : zero(g, t));
        return;
    }
    if (init) {
        line(g, "%s%s = %s;", ctype(g, t), v->cname, init);
        line(g, "eve_retain(%s);", v->cname);
    } else if (t->kind == EVE_TY_STRING) {
        line(g, "%s%s = &eve_str_empty;", ctype(g, t), v->cname);
    } else {
        line(g, "%s%s = %s;", ctype(g, t), v->cname, fresh(g, t, pos));
    }
    push_cleanup(g, fmt(g, "eve_release(%s);", v->cname));
}

static void drain(gen_t *g)
{
    static const char d[] = "EVE_DRAIN(cx, m_);\n";
    if (g->out->n >= sizeof d - 1 && strcmp(g->out->p + g->out->n - (sizeof d - 1), d) == 0)
        return; /* just released */
    line(g, "EVE_DRAIN(cx, m_);");
}

static const char *finish_now(gen_t *g)
{
    return g->nfins ? fmt(g, "&%s", g->fins[g->nfins - 1]) : "NULL";
}

static void g_spawn(gen_t *g, const eve_node_t *n)
{
    frame_t *f = frame_of(g, n);
    if (!f)
        return;
    g_frame_fn(g, f);
    line(g, "{");
    g->ind++;
    line(g, "struct env_%s *env_ = eve_task_env(sizeof *env_, %s);", f->cname, f->cname);
    fill_env(g, f, "env_", true);
    size_t np = emit_perms(g, f, f->perms, "perms_", NULL, false);
    line(g, "eve_task_spawn(cx, %s, env_, %s, %zu, %s);", finish_now(g), np ? "perms_" : "NULL", np,
         posstr(g, n->pos));
    g->ind--;
    line(g, "}");
}

/* The loop header over a collection c_ of type ct, binding elem_ (borrowed)
 * of type et; returns the closing text. */
static const char *open_iter(gen_t *g, const eve_ty_t *ct, const eve_ty_t *et, const char *c, int id, eve_pos_t pos)
{
    char *P = posstr(g, pos);
    switch (ct->kind) {
    case EVE_TY_VECTOR:
        line(g, "for (int64_t i_%d = 0; i_%d < eve_vec_size(%s); i_%d++) {", id, id, c, id);
        line(g, "    %s elem_%d = %s;", ctype(g, et), id, from_val(g, fmt(g, "eve_vec_get(%s, i_%d, %s)", c, id, P), et));
        return "}";
    case EVE_TY_SET:
    case EVE_TY_MAP:
        line(g, "size_t it_%d = 0;", id);
        line(g, "eve_val_t v_%d;", id);
        line(g, "while (eve_%s_next(%s, &it_%d, &v_%d)) {", ct->kind == EVE_TY_SET ? "set" : "map", c, id, id);
        line(g, "    %s elem_%d = %s;", ctype(g, et), id, from_val(g, fmt(g, "v_%d", id), et));
        return "}";
    case EVE_TY_STRING:
        line(g, "for (int64_t i_%d = 0; i_%d < eve_str_size(%s); i_%d++) {", id, id, c, id);
        line(g, "    uint8_t elem_%d = eve_str_at(%s, i_%d, %s);", id, c, id, P);
        return "}";
    default: /* read_buffer */
        line(g, "for (int64_t i_%d = 0; i_%d < eve_rbuf_size(%s); i_%d++) {", id, id, c, id);
        line(g, "    uint8_t elem_%d = eve_rbuf_at(%s, i_%d, %s);", id, c, id, P);
        return "}";
    }
}

static void g_pfor(gen_t *g, const eve_node_t *n)
{
    frame_t *f = frame_of(g, n);
    if (!f || !f->loopvar)
        return;
    g_frame_fn(g, f);
    const eve_ty_t *ct = n->u.for_.coll->type;
    int id = ++g->nlabel;
    line(g, "{");
    g->ind++;
    line(g, "%s c_%d = %s;", ctype(g, ct), id, gx(g, n->u.for_.coll));
    const char *close = open_iter(g, ct, f->loopvar->ty, fmt(g, "c_%d", id), id, n->pos);
    g->ind++;
    line(g, "struct env_%s *env_ = eve_task_env(sizeof *env_, %s);", f->cname, f->cname);
    line(g, "env_->%s = elem_%d;", f->loopvar->cname, id);
    if (ty_ref(f->loopvar->ty))
        line(g, "eve_retain(env_->%s);", f->loopvar->cname);
    fill_env(g, f, "env_", true);
    size_t np = emit_perms(g, f, f->perms, "perms_", fmt(g, "elem_%d", id), false);
    line(g, "eve_task_spawn(cx, %s, env_, %s, %zu, %s);", finish_now(g), np ? "perms_" : "NULL", np,
         posstr(g, n->pos));
    g->ind--;
    line(g, "%s", close);
    g->ind--;
    line(g, "}");
}

static const char *event_enum(gen_t *g, const eve_ty_t *objt, const char *event, eve_pos_t pos)
{
    if (objt && objt->kind == EVE_TY_CLASS && objt->cls->lib) {
        static const char *const map[][3] = {
            {"tcp_listener", "listening", "EVE_EV_LISTENING"}, {"tcp_listener", "connection", "EVE_EV_CONNECTION"},
            {"tcp_listener", "error", "EVE_EV_ERROR"},         {"tcp_socket", "data", "EVE_EV_DATA"},
            {"tcp_socket", "close", "EVE_EV_CLOSE"},           {"timer", "tick", "EVE_EV_TICK"},
            {"signal_set", "terminate", "EVE_EV_TERMINATE"},   {"signal_set", "hangup", "EVE_EV_HANGUP"},
        };
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (strcmp(objt->cls->name, map[i][0]) == 0 && strcmp(event, map[i][1]) == 0)
                return map[i][2];
    }
    if (ty_user(objt))
        return "EVE_EV_EMIT";
    gerr(g, pos, "the event '%s' has no code yet", event);
    return "EVE_EV_COUNT";
}

/* Registers the callback of node n (an `on` or a handler) on source `src`. */
static void g_register(gen_t *g, const eve_node_t *n, const char *src, const eve_ty_t *objt, const char *event)
{
    frame_t *f = frame_of(g, n);
    if (!f)
        return;
    g_frame_fn(g, f);
    const char *ev = event_enum(g, objt, event, n->pos);
    const char *source = src;
    if (ty_user(objt))
        source = fmt(g, "%s->f_%s", src, event);
    line(g, "{");
    g->ind++;
    line(g, "struct env_%s *env_ = eve_env_alloc(sizeof *env_);", f->cname);
    fill_env(g, f, "env_", true);
    line(g, "eve_cb_t cb_ = {.fn = %s, .env = env_, .env_free = %s_free, .pos = %s};", f->cname, f->cname,
         posstr(g, n->pos));
    const eve_perms_t *perms = n->kind == EVE_N_ON ? &n->u.on.perms : &n->u.handler.perms;
    size_t np = emit_perms(g, f, perms, "cb_.perms", NULL, true);
    if (np)
        line(g, "cb_.nperms = %zu;", np);
    line(g, "eve_on(cx, %s, %s, &cb_);", source, ev);
    g->ind--;
    line(g, "}");
}

static void g_assign(gen_t *g, const eve_node_t *n)
{
    const eve_node_t *t = n->u.assign.target;
    eve_tok_kind_t op = n->u.assign.op;
    const eve_ty_t *tt = t->type;
    char *val = gx(g, n->u.assign.value);
    if (t->kind == EVE_N_INDEX) {
        const eve_ty_t *ct = t->u.index.obj->type;
        line(g, "{");
        g->ind++;
        line(g, "%s c_ = %s;", ctype(g, ct), gx(g, t->u.index.obj));
        bool map = ct && ct->kind == EVE_TY_MAP;
        const eve_ty_t *kt = map ? ct->a : NULL;
        line(g, "%s k_ = %s;", map ? ctype(g, kt) : "int64_t", gx(g, t->u.index.index));
        char *P = posstr(g, n->pos);
        char *kval = map ? to_val(g, "k_", kt) : "k_";
        if (op != EVE_T_ASSIGN) {
            char *cur = map ? from_val(g, fmt(g, "eve_map_get(c_, %s, %s)", kval, P), ct->b)
                            : from_val(g, fmt(g, "eve_vec_get(c_, k_, %s)", P), ct->a);
            val = binop(g, op, cur, val, tt, n->pos);
        }
        if (map)
            line(g, "eve_map_put(c_, %s, %s);", kval, to_val(g, val, ct->b));
        else
            line(g, "eve_vec_set(c_, k_, %s, %s);", to_val(g, val, ct->a), P);
        g->ind--;
        line(g, "}");
        return;
    }
    char *lv;
    if (t->kind == EVE_N_NAME) {
        const eve_sym_t *s = t->sym;
        vinfo_t *v = vsym(g, s);
        if (s && v && strcmp(s->name, t->u.name.name) != 0) {
            lv = fmt(g, "%s->f_%s", vread(g, g->f, v), t->u.name.name);
        } else {
            if (v && ty_obj(v->ty) && !v->global && v->decl != g->f) {
                gerr(g, t->pos, "'%s' belongs to an enclosing scope: a task or callback can modify the object, "
                     "not make the variable refer to another one", t->u.name.name);
                return;
            }
            lv = vaccess(g, g->f, v);
        }
    } else {
        lv = gx(g, t);
    }
    if (op != EVE_T_ASSIGN) {
        if (tt && tt->kind == EVE_TY_INT && (op == EVE_T_PLUS_ASSIGN || op == EVE_T_MINUS_ASSIGN ||
                                             op == EVE_T_STAR_ASSIGN))
            val = fmt(g, "((int64_t)((uint64_t)(%s) %s (uint64_t)(%s)))", lv, binop_c(op), val);
        else
            val = binop(g, op, lv, val, tt, n->pos);
    }
    if (ty_ref(tt))
        line(g, "EVE_ASSIGN_REF(%s, %s);", lv, val);
    else
        line(g, "%s = %s;", lv, val);
}

/* A loop's body: break and continue inside it know lp; its locals are
 * released at its end, and the continue label follows when one jumps to it. */
static void loop_body(gen_t *g, loop_t lp, const eve_list_t *body)
{
    if (g->nloops == g->caploops) {
        loop_t *l = grown(g, g->loops, &g->caploops, sizeof *l);
        if (!l)
            return;
        g->loops = l;
    }
    g->loops[g->nloops++] = lp;
    g_stmts(g, body);
    close_scope(g, lp.body);
    if (g->loops[--g->nloops].continued)
        line(g, "cont_%d:;", lp.label);
}

static void g_stmt(gen_t *g, const eve_node_t *n)
{
    if (g->failed)
        return;
    hash_line(g, n->pos);
    switch (n->kind) {
    case EVE_N_VAR: {
        bool global = g->f->kind == F_TOP && n->sym && n->sym->global;
        char *init = n->u.var.init ? gx(g, n->u.var.init) : NULL;
        for (size_t i = 0; i < n->u.var.nnames; i++) {
            vinfo_t *v = vget(g, n->u.var.names[i], n->pos);
            if (!v)
                continue;
            if (global) {
                if (init) {
                    if (ty_ref(v->ty))
                        line(g, "EVE_ASSIGN_REF(%s, %s);", vaccess(g, g->f, v), init);
                    else
                        line(g, "%s = %s;", vaccess(g, g->f, v), init);
                }
            } else {
                decl_local(g, v, init, n->pos);
            }
        }
        if (init)
            drain(g);
        break;
    }
    case EVE_N_EXPR: {
        const eve_node_t *e = n->u.expr.expr;
        if (n->u.expr.handlers.n) {
            line(g, "{");
            g->ind++;
            line(g, "%s src_ = %s;", ctype(g, e->type), gx(g, e));
            for (size_t i = 0; i < n->u.expr.handlers.n; i++) {
                const eve_node_t *h = n->u.expr.handlers.v[i];
                g_register(g, h, "src_", e->type, h->u.handler.name);
            }
            g->ind--;
            line(g, "}");
        } else {
            line(g, "%s;", gx(g, e));
        }
        drain(g);
        break;
    }
    case EVE_N_ASSIGN:
        g_assign(g, n);
        drain(g);
        break;
    case EVE_N_RETURN:
        if (n->u.ret.value && g->ret && g->ret->kind != EVE_TY_VOID) {
            line(g, "{");
            g->ind++;
            line(g, "%s r_ = %s;", ctype(g, g->ret), gx(g, n->u.ret.value));
            if (ty_ref(g->ret))
                line(g, "eve_retain(r_);");
            drain(g);
            run_cleanups(g, 0);
            line(g, "return r_;");
            g->ind--;
            line(g, "}");
        } else {
            /* a handler's result (the paper's `return true`) is computed for
             * what it does and not used: nothing in the runtime asks for it */
            if (n->u.ret.value)
                line(g, "(void)(%s);", gx(g, n->u.ret.value));
            drain(g);
            run_cleanups(g, 0);
            line(g, "return;");
        }
        break;
    case EVE_N_IF: {
        line(g, "if (%s) {", gx(g, n->u.if_.cond));
        g->ind++;
        size_t d = g->ncl;
        g_stmts(g, &n->u.if_.then);
        close_scope(g, d);
        g->ind--;
        if (n->u.if_.has_else && n->u.if_.else_.n) {
            line(g, "} else {");
            g->ind++;
            g_stmts(g, &n->u.if_.else_);
            close_scope(g, d);
            g->ind--;
        }
        line(g, "}");
        break;
    }
    case EVE_N_WHILE: {
        int id = ++g->nlabel;
        line(g, "for (;;) {");
        g->ind++;
        line(g, "bool w_ = %s;", gx(g, n->u.while_.cond));
        drain(g);
        line(g, "if (!w_)");
        line(g, "    break;");
        loop_body(g, (loop_t){g->ncl, g->ncl, id, false}, &n->u.while_.body);
        g->ind--;
        line(g, "}");
        break;
    }
    case EVE_N_FOR: {
        if (n->u.for_.parallel) {
            g_pfor(g, n);
            break;
        }
        int id = ++g->nlabel;
        const eve_ty_t *ct = n->u.for_.coll->type;
        vinfo_t *v = vget(g, n->u.for_.var, n->pos);
        if (!ct || !v)
            break;
        line(g, "{");
        g->ind++;
        size_t outer0 = g->ncl;
        line(g, "%s c_%d = %s;", ctype(g, ct), id, gx(g, n->u.for_.coll));
        line(g, "eve_retain(c_%d);", id);
        push_cleanup(g, fmt(g, "eve_release(c_%d);", id));
        drain(g);
        const char *close = open_iter(g, ct, v->ty, fmt(g, "c_%d", id), id, n->pos);
        g->ind++;
        size_t outer = g->ncl;
        decl_local(g, v, fmt(g, "elem_%d", id), n->pos);
        if (!v->cell)
            line(g, "(void)%s;", v->cname);
        loop_body(g, (loop_t){outer, g->ncl, id, false}, &n->u.for_.body);
        close_scope(g, outer);
        g->ind--;
        line(g, "%s", close);
        close_scope(g, outer0);
        g->ind--;
        line(g, "}");
        break;
    }
    case EVE_N_BREAK:
    case EVE_N_CONTINUE: {
        if (!g->nloops)
            break;
        loop_t *lp = &g->loops[g->nloops - 1];
        if (n->kind == EVE_N_BREAK) {
            run_cleanups(g, lp->outer);
            line(g, "break;");
        } else {
            run_cleanups(g, lp->body);
            line(g, "goto cont_%d;", lp->label);
            lp->continued = true;
        }
        break;
    }
    case EVE_N_FINISH: {
        int id = ++g->nlabel;
        char *fin = fmt(g, "fin_%d", id);
        line(g, "{");
        g->ind++;
        line(g, "yard_coro_finish_t %s;", fin);
        line(g, "eve_finish_begin(cx, &%s);", fin);
        size_t d = g->ncl;
        push_cleanup(g, fmt(g, "eve_finish_end(cx, &%s);", fin));
        if (g->nfins == g->capfins) {
            char **fs = grown(g, g->fins, &g->capfins, sizeof *fs);
            if (!fs)
                return;
            g->fins = fs;
        }
        g->fins[g->nfins++] = fin;
        size_t body = g->ncl;
        g_stmts(g, &n->u.finish.body);
        close_scope(g, body);
        g->nfins--;
        close_scope(g, d);
        g->ind--;
        line(g, "}");
        break;
    }
    case EVE_N_TASK:
        g_spawn(g, n);
        break;
    case EVE_N_ON: {
        line(g, "{");
        g->ind++;
        line(g, "%s src_ = %s;", ctype(g, n->u.on.obj->type), gx(g, n->u.on.obj));
        g_register(g, n, "src_", n->u.on.obj->type, n->u.on.event);
        g->ind--;
        line(g, "}");
        drain(g);
        break;
    }
    case EVE_N_PASS:
        line(g, ";");
        break;
    default:
        break;
    }
}

static void g_stmts(gen_t *g, const eve_list_t *l)
{
    for (size_t i = 0; i < l->n && !g->failed; i++)
        g_stmt(g, l->v[i]);
}

/* ---- frames as C functions ---------------------------------------------------------------------- */

typedef struct {
    frame_t *f;
    sb_t *out;
    int ind;
    cleanup_t *cl;
    size_t ncl, capcl;
    loop_t *loops;
    size_t nloops, caploops;
    char **fins;
    size_t nfins, capfins;
    const eve_ty_t *ret;
    sb_t *decls;
    size_t novr;
    bool made_tmp;
} saved_t;

static void save(gen_t *g, saved_t *s)
{
    *s = (saved_t){g->f, g->out, g->ind, g->cl, g->ncl, g->capcl, g->loops, g->nloops, g->caploops,
                   g->fins, g->nfins, g->capfins, g->ret, g->decls, g->novr, g->made_tmp};
    g->made_tmp = false;
    g->cl = NULL;
    g->ncl = g->capcl = 0;
    g->loops = NULL;
    g->nloops = g->caploops = 0;
    g->fins = NULL;
    g->nfins = g->capfins = 0;
}

static void restore(gen_t *g, const saved_t *s)
{
    free(g->cl);
    free(g->loops);
    free(g->fins);
    g->f = s->f;
    g->out = s->out;
    g->ind = s->ind;
    g->cl = s->cl;
    g->ncl = s->ncl;
    g->capcl = s->capcl;
    g->loops = s->loops;
    g->nloops = s->nloops;
    g->caploops = s->caploops;
    g->fins = s->fins;
    g->nfins = s->nfins;
    g->capfins = s->capfins;
    g->ret = s->ret;
    g->decls = s->decls;
    g->novr = s->novr;
    g->made_tmp = s->made_tmp;
}

/* A parameter (or payload) p arrives as C value `in`: make it the variable. */
static void bind_param(gen_t *g, vinfo_t *v, const char *in, eve_pos_t pos)
{
    if (own_local(v))
        decl_local(g, v, in, pos);
    /* otherwise the C parameter itself is the variable: the caller's
     * reference keeps a string or object alive for the call */
}

#define DECLS_MARK "    /*@decls@*/\n"

/* Deletes every line of b that contains text (with its indentation). */
static void delete_lines(sb_t *b, const char *text)
{
    if (!b->p)
        return;
    size_t w = 0, tl = strlen(text);
    for (size_t r = 0; r < b->n;) {
        const char *nl = memchr(b->p + r, '\n', b->n - r);
        size_t end = nl ? (size_t)(nl - b->p) + 1 : b->n;
        bool hit = false;
        for (size_t i = r; i + tl <= end && !hit; i++)
            hit = memcmp(b->p + i, text, tl) == 0;
        if (!hit) {
            memmove(b->p + w, b->p + r, end - r);
            w += end - r;
        }
        r = end;
    }
    b->n = w;
    b->p[w] = 0;
}

/* Puts the sequencing temporaries' declarations where the mark is; a
 * function that registers no temporary loses its mark and its drains. */
static void place_decls(gen_t *g, sb_t *body, sb_t *decls)
{
    if (!g->made_tmp) {
        delete_lines(body, "EVE_DRAIN(cx, m_);");
        delete_lines(body, "size_t m_ = cx->ntmp;");
    }
    char *m = body->p ? strstr(body->p, DECLS_MARK) : NULL;
    if (!m)
        return;
    size_t at = (size_t)(m - body->p), ml = strlen(DECLS_MARK);
    sb_t out = {0};
    sb_putn(&out, body->p, at);
    if (decls->p)
        sb_puts(&out, decls->p);
    sb_puts(&out, m + ml);
    if (out.oom)
        g->failed = true;
    free(body->p);
    *body = out;
    free(decls->p);
    *decls = (sb_t){0};
}

/* Emits the C function(s) of a task, parallel for's task, callback or lambda
 * frame into g->funcs (once). */
static void g_frame_fn(gen_t *g, frame_t *f)
{
    saved_t sv;
    save(g, &sv);
    sb_t body = {0}, decls = {0};
    g->f = f;
    g->out = &body;
    g->decls = &decls;
    g->ind = 1;
    g->ret = NULL;
    emit_env_struct(g, f);
    const eve_node_t *n = f->node;
    if (f->kind == F_TASK || f->kind == F_PFOR) {
        sb_printf(&g->protos, "static void %s(eve_cx_t *cx, void *arg);\n", f->cname);
        sb_printf(&body, "static void %s_body(eve_cx_t *cx, struct env_%s *e)\n{\n" DECLS_MARK, f->cname,
                  f->cname);
        line(g, "size_t m_ = cx->ntmp;");
        line(g, "(void)e;");
        g_stmts(g, f->kind == F_TASK ? &n->u.task.body : &n->u.for_.body);
        drain(g);
        close_scope(g, 0);
        sb_printf(&body, "}\n\nstatic void %s(eve_cx_t *cx, void *arg)\n{\n", f->cname);
        line(g, "struct env_%s *e = arg;", f->cname);
        line(g, "%s_body(cx, e);", f->cname);
        line(g, "eve_task_done(cx);"); /* before the captures go: they may be the objects held */
        release_env(g, f);
        sb_puts(&body, "}\n\n");
    } else if (f->kind == F_CB) {
        const eve_params_t *ps = n->kind == EVE_N_ON ? &n->u.on.params : &n->u.handler.params;
        const eve_list_t *stm = n->kind == EVE_N_ON ? &n->u.on.body : &n->u.handler.body;
        sb_printf(&g->protos, "static void %s(eve_cx_t *cx, void *arg, eve_val_t payload_);\n", f->cname);
        sb_printf(&g->protos, "static void %s_free(void *arg);\n", f->cname);
        sb_printf(&body, "static void %s(eve_cx_t *cx, void *arg, eve_val_t payload_)\n{\n" DECLS_MARK, f->cname);
        line(g, "struct env_%s *e = arg;", f->cname);
        line(g, "size_t m_ = cx->ntmp;");
        line(g, "(void)e;");
        line(g, "(void)payload_;");
        for (size_t i = 0; i < ps->n; i++) {
            vinfo_t *v = vget(g, ps->v[i].name, ps->v[i].pos);
            if (!v || !v->ty)
                continue;
            char *in = from_val(g, "payload_", v->ty);
            if (own_local(v))
                decl_local(g, v, in, ps->v[i].pos);
            else
                line(g, "%s %s = %s;", ctype(g, v->ty), v->cname, in);
        }
        g_stmts(g, stm);
        drain(g);
        close_scope(g, 0);
        sb_printf(&body, "}\n\nstatic void %s_free(void *arg)\n{\n", f->cname);
        line(g, "struct env_%s *e = arg;", f->cname);
        release_env(g, f);
        line(g, "free(e);");
        sb_puts(&body, "}\n\n");
    } else if (f->kind == F_LAMBDA) {
        const eve_ty_t *ft = n->type;
        const eve_ty_t *ret = ft && ft->kind == EVE_TY_FUNC ? ft->ret : NULL;
        g->ret = ret;
        sb_t sig = {0};
        sb_printf(&sig, "static %s%s%s(eve_cx_t *cx, struct env_%s *e", ctype(g, ret),
                  ty_ref(ret) ? "" : " ", f->cname, f->cname);
        for (size_t i = 0; i < n->u.lambda.params.n; i++) {
            vinfo_t *v = vget(g, n->u.lambda.params.v[i].name, n->u.lambda.params.v[i].pos);
            if (v)
                sb_printf(&sig, ", %s%s%s", ctype(g, v->ty), ty_ref(v->ty) ? "" : " ",
                          own_local(v) ? fmt(g, "%s_in", v->cname) : v->cname);
        }
        sb_puts(&sig, ")");
        sb_printf(&g->protos, "%s;\n", sig.p);
        sb_printf(&body, "%s\n{\n" DECLS_MARK, sig.p);
        free(sig.p);
        line(g, "size_t m_ = cx->ntmp;");
        line(g, "(void)e;");
        for (size_t i = 0; i < n->u.lambda.params.n; i++) {
            vinfo_t *v = vget(g, n->u.lambda.params.v[i].name, n->u.lambda.params.v[i].pos);
            if (v)
                bind_param(g, v, fmt(g, "%s_in", v->cname), v->pos);
        }
        if (n->u.lambda.expr) {
            if (ret && ret->kind != EVE_TY_VOID) {
                line(g, "%s r_ = %s;", ctype(g, ret), gx(g, n->u.lambda.expr));
                if (ty_ref(ret))
                    line(g, "eve_retain(r_);");
                drain(g);
                close_scope(g, 0);
                line(g, "return r_;");
            } else {
                line(g, "%s;", gx(g, n->u.lambda.expr));
                drain(g);
                close_scope(g, 0);
            }
        } else {
            g_stmts(g, &n->u.lambda.body);
            drain(g);
            close_scope(g, 0);
        }
        sb_puts(&body, "}\n\n");
    }
    place_decls(g, &body, &decls);
    if (body.oom)
        g->failed = true;
    if (body.p)
        sb_puts(&g->funcs, body.p);
    free(body.p);
    restore(g, &sv);
}

/* (lambda)(args): the lambda's function, called with an env on the stack. */
static char *lambda_call(gen_t *g, const eve_node_t *call)
{
    const eve_node_t *lam = call->u.call.callee;
    if (lam->kind != EVE_N_LAMBDA) {
        gerr(g, call->pos, "only a lambda written in place can be called");
        return "0";
    }
    frame_t *f = frame_of(g, lam);
    if (!f)
        return "0";
    g_frame_fn(g, f);
    /* the env as a compound literal: the lambda runs now, inside this statement */
    sb_t b = {0};
    sb_printf(&b, "%s(cx, &(struct env_%s){", f->cname, f->cname);
    size_t k = 0;
    for (size_t i = 0; i < f->ncaps; i++) {
        const cap_t *c = &f->caps[i];
        sb_printf(&b, "%s.%s = %s", k++ ? ", " : "", c->v->cname,
                  c->mode == CAP_REF ? vcell(g, g->f, c->v) : vread(g, g->f, c->v));
    }
    if (!k)
        sb_puts(&b, "0");
    sb_printf(&b, "}%s)", call_args(g, call, true));
    char *s = fmt(g, "%s", b.p ? b.p : "");
    free(b.p);
    const eve_ty_t *ret = lam->type && lam->type->kind == EVE_TY_FUNC ? lam->type->ret : NULL;
    if (ty_ref(ret))
        return tmp_owned(g, ret, s);
    return s;
}

/* A function or method. */
static void g_func(gen_t *g, const eve_node_t *fn, eve_class_t *cls)
{
    frame_t *f = frame_of(g, fn);
    if (!f)
        return;
    saved_t sv;
    save(g, &sv);
    sb_t body = {0}, decls = {0};
    g->f = f;
    g->out = &body;
    g->decls = &decls;
    g->ind = 1;
    /* the function type an_func found (a method's from its class's member) */
    const eve_ty_t *ret = f->fty && f->fty->kind == EVE_TY_FUNC ? f->fty->ret : NULL;
    g->ret = ret;
    sb_t sig = {0};
    sb_printf(&sig, "static %s%s%s(eve_cx_t *cx", ctype(g, ret), ty_ref(ret) ? "" : " ", f->cname);
    if (cls) {
        vinfo_t *self = vget(g, "self", fn->pos);
        if (self)
            sb_printf(&sig, ", struct cls_%s *%s", cls->name, own_local(self) ? fmt(g, "%s_in", self->cname)
                                                                             : self->cname);
    }
    for (size_t i = 0; i < fn->u.func.params.n; i++) {
        const eve_param_t *p = &fn->u.func.params.v[i];
        vinfo_t *v = vget(g, p->name, p->pos);
        if (!v)
            continue;
        sb_printf(&sig, ", %s%s%s", ctype(g, v->ty), ty_ref(v->ty) ? "" : " ",
                  own_local(v) ? fmt(g, "%s_in", v->cname) : v->cname);
    }
    sb_puts(&sig, ")");
    if (sig.oom)
        g->failed = true;
    sb_printf(&g->protos, "%s;\n", sig.p ? sig.p : "");
    hash_line(g, fn->pos);
    sb_printf(&body, "%s\n{\n" DECLS_MARK, sig.p ? sig.p : "");
    free(sig.p);
    line(g, "size_t m_ = cx->ntmp;");
    if (cls) {
        vinfo_t *self = vget(g, "self", fn->pos);
        if (self)
            bind_param(g, self, fmt(g, "%s_in", self->cname), fn->pos);
    }
    for (size_t i = 0; i < fn->u.func.params.n; i++) {
        const eve_param_t *p = &fn->u.func.params.v[i];
        vinfo_t *v = vget(g, p->name, p->pos);
        if (v)
            bind_param(g, v, fmt(g, "%s_in", v->cname), p->pos);
    }
    g_stmts(g, &fn->u.func.body);
    drain(g);
    close_scope(g, 0);
    if (ret && ret->kind != EVE_TY_VOID)
        line(g, "return %s; /* not reached: the checker saw a return on every path */", zero(g, ret));
    sb_puts(&body, "}\n\n");
    place_decls(g, &body, &decls);
    if (body.oom)
        g->failed = true;
    if (body.p)
        sb_puts(&g->funcs, body.p);
    free(body.p);
    restore(g, &sv);
}

/* struct cls_X, its destructor and its constructor. */
static void g_class(gen_t *g, const eve_node_t *cn)
{
    const char *name = cn->u.class_.name;
    eve_class_t *cls = cn->sym ? cn->sym->cls : NULL;
    if (!cls)
        return;
    sb_printf(&g->types, "struct cls_%s {\n    eve_obj_t h;\n", name);
    sb_t dtor = {0}, ctor = {0};
    sb_printf(&dtor, "static void cls_%s_dtor(eve_obj_t *o)\n{\n    struct cls_%s *self = (void *)o;\n    (void)self;\n",
              name, name);
    sb_printf(&ctor, "static struct cls_%s *new_%s(eve_cx_t *cx)\n{\n    (void)cx;\n"
                     "    struct cls_%s *o = eve_obj_new(sizeof *o, cls_%s_dtor);\n", name, name, name, name);
    sb_printf(&g->protos, "static struct cls_%s *new_%s(eve_cx_t *cx);\n", name, name);
    for (size_t i = 0; i < cn->u.class_.members.n; i++) {
        const eve_node_t *m = cn->u.class_.members.v[i];
        if (m->kind != EVE_N_VAR)
            continue;
        const eve_ty_t *t = NULL;
        for (eve_member_t *mm = cls->members; mm; mm = mm->next)
            if (mm->decl == m)
                t = mm->ty;
        for (size_t k = 0; k < m->u.var.nnames; k++) {
            const char *fname = m->u.var.names[k];
            const eve_ty_t *ft = t;
            if (!ft)
                for (eve_member_t *mm = cls->members; mm; mm = mm->next)
                    if (strcmp(mm->name, fname) == 0 && mm->kind == EVE_MEM_FIELD)
                        ft = mm->ty;
            if (!ft)
                continue;
            sb_printf(&g->types, "    %s%sf_%s;\n", ctype(g, ft), ty_ref(ft) ? "" : " ", fname);
            if (ty_user(ft) && ft->cls == cls) {
                gerr(g, m->pos, "class '%s' contains itself (field '%s'): a fresh object would never end", name,
                     fname);
                continue;
            }
            if (ty_ref(ft))
                sb_printf(&dtor, "    eve_release(self->f_%s);\n", fname);
            if (m->u.var.init) {
                saved_t sv;
                save(g, &sv);
                g->f = g->top;
                char *init = gx(g, m->u.var.init);
                restore(g, &sv);
                if (ty_ref(ft))
                    sb_printf(&ctor, "    o->f_%s = %s;\n    eve_retain(o->f_%s);\n", fname, init, fname);
                else
                    sb_printf(&ctor, "    o->f_%s = %s;\n", fname, init);
            } else if (ft->kind == EVE_TY_STRING) {
                sb_printf(&ctor, "    o->f_%s = &eve_str_empty;\n", fname);
            } else if (ty_ref(ft)) {
                sb_printf(&ctor, "    o->f_%s = %s;\n", fname, fresh(g, ft, m->pos));
            }
        }
    }
    sb_puts(&g->types, "};\n");
    sb_puts(&dtor, "}\n\n");
    sb_puts(&ctor, "    return o;\n}\n\n");
    sb_puts(&g->funcs, dtor.p ? dtor.p : "");
    sb_puts(&g->funcs, ctor.p ? ctor.p : "");
    if (dtor.oom || ctor.oom)
        g->failed = true;
    free(dtor.p);
    free(ctor.p);
}

/* ---- the program ------------------------------------------------------------------------------------ */

static void c_escape(sb_t *b, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\' || c == '?')
            sb_printf(b, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            sb_putn(b, (const char *)&c, 1);
        else
            sb_printf(b, "\\%03o", c);
    }
}

char *eve_gen_c(eve_ctx_t *cx, const eve_node_t *program, const char *source, const char *name, size_t *len)
{
    gen_t *g = calloc(1, sizeof *g);
    if (!g) {
        eve_error(cx, (eve_pos_t){1, 1}, "out of memory");
        return NULL;
    }
    g->cx = cx;
    g->ar = cx->arena;
    sb_t esc = {0};
    c_escape(&esc, source);
    g->source = fmt(g, "%s", esc.p ? esc.p : "");
    free(esc.p);

    /* pass 1 */
    g->top = frame_new(g, F_TOP, NULL, program, "eve_top");
    if (g->top)
        g->top->cname = "eve_top";
    const eve_list_t *items = &program->u.program.items;
    for (size_t i = 0; i < items->n && g->top; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind == EVE_N_FUNC)
            an_func(g, it, NULL);
        else if (it->kind == EVE_N_CLASS) {
            eve_class_t *cls = it->sym ? it->sym->cls : NULL;
            for (size_t k = 0; k < it->u.class_.members.n; k++)
                if (it->u.class_.members.v[k]->kind == EVE_N_FUNC)
                    an_func(g, it->u.class_.members.v[k], cls);
        } else if (it->kind != EVE_N_IMPORT)
            an_stmt(g, g->top, it, 0);
    }
    /* globals of a value type live in cells (their permission beside them) */
    for (size_t i = 0; i < items->n; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind != EVE_N_VAR)
            continue;
        for (size_t k = 0; k < it->u.var.nnames; k++) {
            vinfo_t *v = vget(g, it->u.var.names[k], it->pos);
            if (v && v->global && !ty_obj(v->ty))
                v->cell = true;
        }
    }

    /* pass 2 */
    sb_t globals = {0}, top = {0}, fini = {0};
    for (size_t i = 0; i < items->n; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind == EVE_N_CLASS)
            g_class(g, it);
    }
    for (size_t i = 0; i < items->n; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind == EVE_N_FUNC)
            g_func(g, it, NULL);
        else if (it->kind == EVE_N_CLASS) {
            eve_class_t *cls = it->sym ? it->sym->cls : NULL;
            for (size_t k = 0; k < it->u.class_.members.n; k++)
                if (it->u.class_.members.v[k]->kind == EVE_N_FUNC)
                    g_func(g, it->u.class_.members.v[k], cls);
        }
    }
    /* the top level */
    saved_t sv;
    save(g, &sv);
    sb_t top_decls = {0};
    g->f = g->top;
    g->out = &top;
    g->decls = &top_decls;
    g->ind = 1;
    sb_puts(&top, "static void eve_top(eve_cx_t *cx)\n{\n" DECLS_MARK);
    line(g, "size_t m_ = cx->ntmp;");
    for (size_t i = 0; i < items->n; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind != EVE_N_VAR)
            continue;
        for (size_t k = 0; k < it->u.var.nnames; k++) {
            vinfo_t *v = vget(g, it->u.var.names[k], it->pos);
            if (!v || !v->global)
                continue;
            if (v->cell) {
                sb_printf(&globals, "static eve_box_t %s;\n", v->cname);
                if (v->ty && v->ty->kind == EVE_TY_STRING) {
                    line(g, "%s.str = true; %s.v.p = &eve_str_empty;", v->cname, v->cname);
                    sb_printf(&fini, "    eve_release(%s.v.p);\n", v->cname);
                }
            } else {
                sb_printf(&globals, "static %s%s;\n", ctype(g, v->ty), v->cname);
                line(g, "%s = %s;", v->cname, fresh(g, v->ty, it->pos));
                if (ty_ref(v->ty))
                    sb_printf(&fini, "    eve_release(%s);\n", v->cname);
            }
        }
    }
    for (size_t i = 0; i < items->n && !g->failed; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind != EVE_N_FUNC && it->kind != EVE_N_CLASS && it->kind != EVE_N_IMPORT)
            g_stmt(g, it);
    }
    drain(g);
    close_scope(g, 0);
    sb_puts(&top, "}\n");
    place_decls(g, &top, &top_decls);
    restore(g, &sv);

    sb_t out = {0};
    sb_printf(&out, "/* Generated by yard-eve from %s: do not edit (docs/eve.md, \"How code is generated\"). */\n",
              g->source);
    sb_puts(&out, "#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <stdlib.h>\n\n"
                  "#include \"eve_gen.h\"\n\n");
    sb_puts(&out, "/* string literals */\n");
    sb_puts(&out, g->lits.p ? g->lits.p : "");
    sb_puts(&out, "\n/* classes and closures' environments */\n");
    sb_puts(&out, g->types.p ? g->types.p : "");
    sb_puts(&out, "\n/* globals */\n");
    sb_puts(&out, globals.p ? globals.p : "");
    sb_puts(&out, "\n/* functions */\n");
    sb_puts(&out, g->protos.p ? g->protos.p : "");
    sb_puts(&out, "\n");
    sb_puts(&out, g->funcs.p ? g->funcs.p : "");
    sb_puts(&out, top.p ? top.p : "");
    /* a program that ends by itself lets its globals go (the scheduler has
     * stopped: nothing else holds them now) */
    sb_puts(&out, "\nstatic void eve_globals_release(void)\n{\n");
    sb_puts(&out, fini.p ? fini.p : "");
    sb_puts(&out, "}\n");
    sb_puts(&out, "\nint main(int argc, char **argv)\n{\n    int rc_ = eve_main(argc, argv, \"");
    c_escape(&out, name);
    sb_puts(&out, "\", eve_top);\n    eve_globals_release();\n    return rc_;\n}\n");
    bool oom = out.oom || g->lits.oom || g->types.oom || g->protos.oom || g->funcs.oom || globals.oom || top.oom ||
               fini.oom;
    free(fini.p);
    free(g->lits.p);
    free(g->types.p);
    free(g->protos.p);
    free(g->funcs.p);
    free(globals.p);
    free(top.p);
    bool failed = g->failed;
    free(g->ovr);
    free(g);
    if (oom && !failed)
        eve_error(cx, (eve_pos_t){1, 1}, "out of memory generating C");
    if (oom || failed) {
        free(out.p);
        return NULL;
    }
    *len = out.n;
    return out.p;
}
