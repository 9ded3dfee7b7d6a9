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
#include "check_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- memory and errors ----------------------------------------------------------- */

void *chk_alloc(chk_t *c, size_t n)
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
        err_t *e = chk_alloc(c, cap * sizeof *e);
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
void chk_err(chk_t *c, eve_pos_t pos, const char *fmt, ...)
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
eve_pos_t chk_start_pos(const eve_node_t *n)
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

/* ---- functions, methods and classes -------------------------------------------------------- */

/* The signature and permission list of a function or method: parameter
 * symbols (reused when the body is checked) and what the list asks of callers. */
static struct eve_fninfo *resolve_fn(chk_t *c, eve_node_t *f, eve_class_t *cls)
{
    struct eve_fninfo *fn = chk_alloc(c, sizeof *fn);
    eve_ty_t *ft = chk_alloc(c, sizeof *ft);
    if (!fn || !ft)
        return NULL;
    size_t np = f->u.func.params.n;
    fn->name = f->u.func.name;
    fn->params = chk_alloc(c, (np ? np : 1) * sizeof *fn->params);
    ft->params = chk_alloc(c, (np ? np : 1) * sizeof *ft->params);
    fn->reqs = chk_alloc(c, (f->u.func.perms.n ? f->u.func.perms.n : 1) * sizeof *fn->reqs);
    if (!fn->params || !ft->params || !fn->reqs)
        return NULL;
    ft->kind = EVE_TY_FUNC;
    ft->nparams = np;
    fn->nparams = np;
    fn->ret = f->u.func.ret ? chk_resolve_type(c, f->u.func.ret, true, false) : c->t_void;
    ft->ret = fn->ret;
    fn->type = ft;
    chk_open_scope(c);
    if (cls) {
        fn->self = chk_declare(c, "self", EVE_SYM_VAR, f->pos);
        if (fn->self) {
            fn->self->ty = chk_class_type(c, cls);
            fn->self->own = H_READ;
        }
    }
    for (size_t i = 0; i < np; i++) {
        const eve_param_t *p = &f->u.func.params.v[i];
        const eve_ty_t *t = chk_resolve_param_type(c, p->type, true);
        eve_sym_t *s = chk_declare(c, p->name, EVE_SYM_VAR, p->pos);
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
            chk_err(c, pm->pos, "a %s captures nothing: '%s%s' has no place in its permission list",
                cls ? "method" : "function", chk_perm_sigil(pm->kind), pm->name);
            continue;
        }
        eve_sym_t *s = chk_perm_sym(c, pm);
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
            chk_err(c, pm->pos, "'%s' is not a global or a parameter", pm->name);
            fn->nreqs--;
        }
    }
    chk_close_scope(c);
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
    chk_open_scope(c);
    if (fn->self) {
        fn->self->owner = &ps;
        chk_bind(c, fn->self);
    }
    for (size_t i = 0; i < fn->nparams; i++)
        if (fn->params[i]) {
            fn->params[i]->owner = &ps;
            chk_bind(c, fn->params[i]);
        }
    for (size_t k = 0; k < fn->nreqs; k++)
        chk_push_grant(c, &ps, fn->reqs[k].sym, fn->reqs[k].kind, fn->reqs[k].path);
    chk_stmts(c, &f->u.func.body);
    if (fn->ret->kind != EVE_TY_VOID && !chk_is_err(fn->ret) && !chk_always_returns(c, &f->u.func.body)) {
        char buf[96];
        chk_err(c, f->pos, "'%s' returns %s but may reach its end without a return", f->u.func.name,
            chk_tn(fn->ret, buf));
    }
    chk_pop_grants(&ps);
    chk_close_scope(c);
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
    eve_node_t *stmt = chk_mknode(c, EVE_N_EXPR, main_fn->pos);
    eve_node_t *call = chk_mknode(c, EVE_N_CALL, main_fn->pos);
    eve_node_t *name = chk_mknode(c, EVE_N_NAME, main_fn->pos);
    eve_node_t **v = chk_alloc(c, (items->n + 1) * sizeof *v);
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

/* The checker's basic types, made once (an error type to fall back on
 * when memory runs out), and the two generic parameters of the library. */
static void init_types(chk_t *c)
{
    static const eve_ty_kind_t basics[] = {EVE_TY_ERROR, EVE_TY_VOID, EVE_TY_INT, EVE_TY_BOOL,
                                           EVE_TY_FLOAT, EVE_TY_CHAR, EVE_TY_STRING, EVE_TY_BASIC,
                                           EVE_TY_BYTES};
    const eve_ty_t **slots[] = {&c->t_err, &c->t_void, &c->t_int, &c->t_bool, &c->t_float,
                                &c->t_char, &c->t_string, &c->t_basic, &c->t_bytes};
    static const eve_ty_t fallback = {.kind = EVE_TY_ERROR};
    c->t_err = &fallback;
    for (size_t i = 0; i < sizeof basics / sizeof basics[0]; i++)
        *slots[i] = chk_mkty(c, basics[i], NULL, NULL);
    for (int i = 0; i < 2; i++) {
        eve_ty_t *g = chk_alloc(c, sizeof *g);
        if (g) {
            g->kind = EVE_TY_GENERIC;
            g->index = i;
        }
        c->t_generic[i] = g ? g : c->t_err;
    }
}

/* `import a.b` (or `a.b.*`): the library's module, declared once. */
static void declare_import(chk_t *c, eve_node_t *n)
{
    const char *path = n->u.import.path;
    size_t plen = strlen(path);
    if (plen > 2 && strcmp(path + plen - 2, ".*") == 0) {
        /* import a.b.*: every name of a.b, which the library's
         * modules do not keep apart from the module itself */
        char *base = chk_alloc(c, plen - 1);
        if (!base)
            return;
        memcpy(base, path, plen - 2);
        path = base;
    }
    if (!chk_is_lib_module(path)) {
        char list[EVE_MAX_MSG / 2] = "";
        size_t at = 0;
        for (size_t k = 0; k < eve_stdlib_count; k++) {
            if (eve_stdlib[k].kind != EVE_LIB_MODULE)
                continue;
            if (at)
                at = chk_put(list, sizeof list, at, ", ");
            at = chk_put(list, sizeof list, at, eve_stdlib[k].name);
        }
        chk_err(c, n->pos, "unknown module '%s' (the library's modules: %s)", path, list);
        return;
    }
    eve_sym_t *old = chk_lookup(c, path);
    if (old && old->kind == EVE_SYM_MODULE)
        return; /* imported twice: harmless */
    eve_sym_t *s = chk_declare(c, path, EVE_SYM_MODULE, n->pos);
    if (s)
        s->module = path;
    n->sym = s;
}

/* A class's name; false: out of memory. */
static bool declare_class(chk_t *c, eve_node_t *n)
{
    eve_sym_t *s = chk_declare(c, n->u.class_.name, EVE_SYM_CLASS, n->pos);
    eve_class_t *cls = chk_alloc(c, sizeof *cls);
    if (!s || !cls)
        return false;
    cls->name = n->u.class_.name;
    cls->decl = n;
    s->cls = cls;
    s->decl = n;
    n->sym = s;
    return true;
}

/* A class's fields and methods as members (a method's type comes with
 * its signature, in the third pass). */
static void declare_members(chk_t *c, eve_node_t *n)
{
    eve_class_t *cls = n->sym->cls;
    for (size_t k = 0; k < n->u.class_.members.n; k++) {
        eve_node_t *mn = n->u.class_.members.v[k];
        if (mn->kind == EVE_N_VAR) {
            const eve_ty_t *t = chk_resolve_type(c, mn->u.var.type, false, false);
            for (size_t j = 0; j < mn->u.var.nnames; j++) {
                const char *name = mn->u.var.names[j];
                if (chk_find_member(c, cls, name, false) || chk_find_member(c, cls, name, true)) {
                    chk_err(c, mn->pos, "class '%s' already has a member '%s'", cls->name, name);
                    continue;
                }
                eve_member_t *m = chk_alloc(c, sizeof *m);
                if (!m)
                    break;
                m->name = name;
                m->kind = EVE_MEM_FIELD;
                m->ty = t;
                m->decl = mn;
                chk_add_member(c, cls, m);
            }
        } else if (mn->kind == EVE_N_FUNC) {
            const char *name = mn->u.func.name;
            if (chk_find_member(c, cls, name, false) || chk_find_member(c, cls, name, true)) {
                chk_err(c, mn->pos, "class '%s' already has a member '%s'", cls->name, name);
                continue;
            }
            eve_member_t *m = chk_alloc(c, sizeof *m);
            if (!m)
                return;
            m->name = name;
            m->kind = EVE_MEM_METHOD;
            m->decl = mn;
            m->ty = c->t_err;
            chk_add_member(c, cls, m);
        }
    }
}

/* 1. imports and classes */
static void declare_imports_and_classes(chk_t *c, eve_list_t *items)
{
    for (size_t i = 0; i < items->n && !c->oom; i++) {
        eve_node_t *n = items->v[i];
        if (n->kind == EVE_N_IMPORT) {
            declare_import(c, n);
        } else if (n->kind == EVE_N_CLASS) {
            if (!declare_class(c, n))
                break;
        }
    }
}

/* 2. class members, functions and globals: their types */
static void declare_members_functions_globals(chk_t *c, eve_list_t *items)
{
    for (size_t i = 0; i < items->n && !c->oom; i++) {
        eve_node_t *n = items->v[i];
        if (n->kind == EVE_N_CLASS && n->sym) {
            declare_members(c, n);
        } else if (n->kind == EVE_N_FUNC) {
            eve_sym_t *s = chk_declare(c, n->u.func.name, EVE_SYM_FUNC, n->pos);
            if (!s)
                break;
            s->decl = n;
            s->ty = c->t_err;
            n->sym = s;
        } else if (n->kind == EVE_N_VAR) {
            const eve_ty_t *t = chk_resolve_type(c, n->u.var.type, false, true);
            for (size_t k = 0; k < n->u.var.nnames; k++) {
                eve_sym_t *s = chk_declare(c, n->u.var.names[k], EVE_SYM_VAR, n->pos);
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
}

/* 3. signatures and permission lists (they name globals) */
static void resolve_signatures(chk_t *c, eve_list_t *items)
{
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
                eve_member_t *m = chk_find_member(c, n->sym->cls, mn->u.func.name, false);
                if (!m || m->decl != mn)
                    continue;
                m->fn = resolve_fn(c, mn, n->sym->cls);
                if (m->fn) {
                    m->ty = m->fn->type;
                    m->mut = chk_self_mode(m->fn) == A_WRITE;
                }
            }
        }
    }
}

/* A class's method bodies and its fields' initial values. */
static void check_class_body(chk_t *c, eve_node_t *n)
{
    for (size_t k = 0; k < n->u.class_.members.n; k++) {
        eve_node_t *mn = n->u.class_.members.v[k];
        if (mn->kind == EVE_N_FUNC) {
            eve_member_t *m = chk_find_member(c, n->sym->cls, mn->u.func.name, false);
            if (m && m->decl == mn && m->fn)
                check_fn_body(c, mn, m->fn, n->sym->cls);
        } else if (mn->kind == EVE_N_VAR && mn->u.var.init) {
            const eve_ty_t *t = chk_resolve_type(c, mn->u.var.type, false, true);
            const eve_ty_t *it = chk_value(c, mn->u.var.init, A_READ, NULL);
            if (!chk_assignable(t, it)) {
                char b1[96], b2[96];
                chk_err(c, chk_start_pos(mn->u.var.init), "cannot initialize %s '%s' with %s", chk_tn(t, b1),
                    mn->u.var.names[0], chk_tn(it, b2));
            }
        }
    }
}

/* 4. bodies and top-level statements, in order */
static void check_items(chk_t *c, eve_list_t *items)
{
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
            check_class_body(c, n);
            break;
        case EVE_N_VAR:
            c->toplevel = true;
            chk_var_stmt(c, n, true);
            c->toplevel = false;
            break;
        default:
            c->toplevel = true;
            chk_stmt(c, n);
            c->toplevel = false;
            break;
        }
    }
}

/* The errors reported: sorted by position; the same message at the same
 * place once. True when there were none. */
static bool report_errors(chk_t *c)
{
    eve_ctx_t *cx = c->cx;
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

bool eve_check(eve_ctx_t *cx, eve_node_t *program)
{
    chk_t c0, *c = &c0;
    memset(c, 0, sizeof *c);
    c->cx = cx;
    c->ar = cx->arena;
    init_types(c);
    c->nmbuckets = 1024;
    c->mbuckets = chk_alloc(c, c->nmbuckets * sizeof *c->mbuckets);
    c->root.kind = PS_ROOT;
    c->ps = &c->root;
    if (c->oom || !program || program->kind != EVE_N_PROGRAM) {
        eve_error(cx, (eve_pos_t){1, 1}, "out of memory");
        return false;
    }
    chk_load_stdlib(c);
    entry_main(c, program);

    /* the program's scope (depth 1): its declarations are visible everywhere */
    chk_open_scope(c);
    eve_list_t *items = &program->u.program.items;
    declare_imports_and_classes(c, items);
    declare_members_functions_globals(c, items);
    resolve_signatures(c, items);
    check_items(c, items);
    chk_close_scope(c);

    if (c->oom)
        chk_err(c, (eve_pos_t){1, 1}, "out of memory");
    return report_errors(c);
}
