/* yard-eve's code generator (gen.c): closures (their env structs,
 * captures and permissions) and statements as C, with the cleanups each
 * way out of a scope runs. */
#include "gen_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- closures: env structs, captures, permissions ------------------------------------------------ */

void gen_emit_env_struct(gen_t *g, frame_t *f)
{
    sb_t *b = &g->types;
    gen_sb_printf(b, "struct env_%s {\n", f->cname);
    size_t n = 0;
    if (f->loopvar) {
        gen_sb_printf(b, "    %s %s;\n", gen_ctype(g, f->loopvar->ty), f->loopvar->cname);
        n++;
    }
    for (size_t i = 0; i < f->ncaps; i++) {
        const cap_t *c = &f->caps[i];
        if (c->mode == CAP_REF)
            gen_sb_printf(b, "    eve_box_t *%s;\n", c->v->cname);
        else
            gen_sb_printf(b, "    %s %s;\n", gen_ctype(g, c->v->ty), c->v->cname);
        n++;
    }
    if (!n)
        gen_sb_puts(b, "    char unused;\n");
    gen_sb_puts(b, "};\n");
}

/* Fills env `ev` (a pointer) with f's captures, from the current frame.
 * keep: the closure may outlive this statement (retain what it holds). */
static void fill_env(gen_t *g, frame_t *f, const char *ev, bool keep)
{
    for (size_t i = 0; i < f->ncaps; i++) {
        const cap_t *c = &f->caps[i];
        if (c->mode == CAP_REF) {
            gen_line(g, "%s->%s = %s;", ev, c->v->cname, gen_vcell(g, g->f, c->v));
            if (keep && c->v->box)
                gen_line(g, "eve_retain(%s->%s);", ev, c->v->cname);
        } else {
            gen_line(g, "%s->%s = %s;", ev, c->v->cname, gen_vread(g, g->f, c->v));
            if (keep && gen_ty_ref(c->v->ty))
                gen_line(g, "eve_retain(%s->%s);", ev, c->v->cname);
        }
    }
}

/* Releases what fill_env(keep) retained, in the closure (env `e`). */
void gen_release_env(gen_t *g, frame_t *f)
{
    if (f->loopvar && gen_ty_ref(f->loopvar->ty))
        gen_line(g, "eve_release(e->%s);", f->loopvar->cname);
    for (size_t i = 0; i < f->ncaps; i++) {
        const cap_t *c = &f->caps[i];
        if ((c->mode == CAP_REF && c->v->box) || (c->mode != CAP_REF && gen_ty_ref(c->v->ty)))
            gen_line(g, "eve_release(e->%s);", c->v->cname);
    }
}

/* Walks a dotted permission path from its variable: the C expression of the
 * object whose permission it is. */
static char *perm_object(gen_t *g, frame_t *f, const eve_perm_t *pe, const char *loopvar_expr)
{
    vinfo_t *v = gen_vsym(g, pe->sym);
    if (!v)
        return NULL;
    const char *dot = strchr(pe->name, '.');
    if (!dot) {
        if (f && f->loopvar == v)
            return gen_ty_ref(v->ty) ? gen_fmt(g, "EVE_PERM(%s)", loopvar_expr) : NULL;
        if (!gen_ty_ref(v->ty) || v->ty->kind == EVE_TY_STRING)
            return gen_fmt(g, "(&%s->h.perm)", gen_vcell(g, g->f, v));
        return gen_fmt(g, "EVE_PERM(%s)", gen_vread(g, g->f, v));
    }
    /* a field: the permission of the deepest object on the path */
    char *obj = f && f->loopvar == v ? gen_fmt(g, "%s", loopvar_expr) : gen_vread(g, g->f, v);
    const eve_ty_t *t = v->ty;
    char *last_obj = obj;
    const char *p = dot + 1;
    while (*p && gen_ty_user(t)) {
        const char *q = strchr(p, '.');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        const eve_ty_t *ft = NULL;
        for (eve_member_t *m = t->cls->members; m; m = m->next)
            if (m->kind == EVE_MEM_FIELD && strlen(m->name) == len && strncmp(m->name, p, len) == 0)
                ft = m->ty;
        obj = gen_fmt(g, "%s->f_%.*s", obj, (int)len, p);
        if (!ft || !gen_ty_obj(ft))
            break;
        last_obj = obj;
        t = ft;
        p = q ? q + 1 : p + len;
        if (!q)
            break;
    }
    return gen_fmt(g, "EVE_PERM(%s)", last_obj);
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
            gen_line(g, "%s[%zu] = (yard_coro_perm_t){%s, %s};", arr, n, o, mode);
        else
            gen_sb_printf(&b, "%s{%s, %s}", n ? ", " : "", o, mode);
        n++;
    }
    if (n && !into_cb)
        gen_line(g, "yard_coro_perm_t %s[] = {%s};", arr, b.p);
    free(b.p);
    return n;
}

/* ---- statements ------------------------------------------------------------------------------------ */

/* Does parameter v need a variable of its own (a cell, or its own
 * reference because the program assigns it)? */
bool gen_own_local(const vinfo_t *v)
{
    return v->cell || (gen_ty_ref(v->ty) && v->assigned);
}

/* Declares local v (in the current function) with C value `init` (NULL: the
 * type's default, a fresh object for object types) and registers its
 * cleanup. init is borrowed. */
void gen_decl_local(gen_t *g, vinfo_t *v, const char *init, eve_pos_t pos)
{
    const eve_ty_t *t = v->ty;
    bool ref = gen_ty_ref(t);
    if (v->cell) {
        bool str = t && t->kind == EVE_TY_STRING;
        if (v->box) {
            gen_line(g, "eve_box_t *%s = eve_box_new(%s);", v->cname, str ? "true" : "false");
            gen_push_cleanup(g, gen_fmt(g, "eve_release(%s);", v->cname));
        } else {
            gen_line(g, "eve_box_t %s = {.str = %s};", v->cname, str ? "true" : "false");
            if (str)
                gen_push_cleanup(g, gen_fmt(g, "eve_release(%s.v.p);", v->cname));
        }
        const char *lv = v->box ? gen_fmt(g, "%s->v.%s", v->cname, gen_vfield(t)) : gen_fmt(g, "%s.v.%s", v->cname, gen_vfield(t));
        if (str)
            gen_line(g, "%s = %s; eve_retain(%s);", lv, init ? init : "(&eve_str_empty)", lv);
        else
            gen_line(g, "%s = %s;", lv, init ? init : gen_zero(g, t));
        return;
    }
    if (!ref) {
        gen_line(g, "%s %s = %s;", gen_ctype(g, t), v->cname, init ? init : gen_zero(g, t));
        return;
    }
    if (init) {
        gen_line(g, "%s%s = %s;", gen_ctype(g, t), v->cname, init);
        gen_line(g, "eve_retain(%s);", v->cname);
    } else if (t->kind == EVE_TY_STRING) {
        gen_line(g, "%s%s = &eve_str_empty;", gen_ctype(g, t), v->cname);
    } else {
        gen_line(g, "%s%s = %s;", gen_ctype(g, t), v->cname, gen_fresh(g, t, pos));
    }
    gen_push_cleanup(g, gen_fmt(g, "eve_release(%s);", v->cname));
}

void gen_drain(gen_t *g)
{
    static const char d[] = "EVE_DRAIN(cx, m_);\n";
    if (g->out->n >= sizeof d - 1 && strcmp(g->out->p + g->out->n - (sizeof d - 1), d) == 0)
        return; /* just released */
    gen_line(g, "EVE_DRAIN(cx, m_);");
}

static const char *finish_now(gen_t *g)
{
    return g->nfins ? gen_fmt(g, "&%s", g->fins[g->nfins - 1]) : "NULL";
}

static void g_spawn(gen_t *g, const eve_node_t *n)
{
    frame_t *f = gen_frame_of(g, n);
    if (!f)
        return;
    gen_frame_fn(g, f);
    gen_line(g, "{");
    g->ind++;
    gen_line(g, "struct env_%s *env_ = eve_task_env(sizeof *env_, %s);", f->cname, f->cname);
    fill_env(g, f, "env_", true);
    size_t np = emit_perms(g, f, f->perms, "perms_", NULL, false);
    gen_line(g, "eve_task_spawn(cx, %s, env_, %s, %zu, %s);", finish_now(g), np ? "perms_" : "NULL", np,
         gen_posstr(g, n->pos));
    g->ind--;
    gen_line(g, "}");
}

/* The loop header over a collection c_ of type ct, binding elem_ (borrowed)
 * of type et; returns the closing text. */
static const char *open_iter(gen_t *g, const eve_ty_t *ct, const eve_ty_t *et, const char *c, int id, eve_pos_t pos)
{
    char *P = gen_posstr(g, pos);
    switch (ct->kind) {
    case EVE_TY_VECTOR:
        gen_line(g, "for (int64_t i_%d = 0; i_%d < eve_vec_size(%s); i_%d++) {", id, id, c, id);
        gen_line(g, "    %s elem_%d = %s;", gen_ctype(g, et), id, gen_from_val(g, gen_fmt(g, "eve_vec_get(%s, i_%d, %s)", c, id, P), et));
        return "}";
    case EVE_TY_SET:
    case EVE_TY_MAP:
        gen_line(g, "size_t it_%d = 0;", id);
        gen_line(g, "eve_val_t v_%d;", id);
        gen_line(g, "while (eve_%s_next(%s, &it_%d, &v_%d)) {", ct->kind == EVE_TY_SET ? "set" : "map", c, id, id);
        gen_line(g, "    %s elem_%d = %s;", gen_ctype(g, et), id, gen_from_val(g, gen_fmt(g, "v_%d", id), et));
        return "}";
    case EVE_TY_STRING:
        gen_line(g, "for (int64_t i_%d = 0; i_%d < eve_str_size(%s); i_%d++) {", id, id, c, id);
        gen_line(g, "    uint8_t elem_%d = eve_str_at(%s, i_%d, %s);", id, c, id, P);
        return "}";
    default: /* read_buffer */
        gen_line(g, "for (int64_t i_%d = 0; i_%d < eve_rbuf_size(%s); i_%d++) {", id, id, c, id);
        gen_line(g, "    uint8_t elem_%d = eve_rbuf_at(%s, i_%d, %s);", id, c, id, P);
        return "}";
    }
}

static void g_pfor(gen_t *g, const eve_node_t *n)
{
    frame_t *f = gen_frame_of(g, n);
    if (!f || !f->loopvar)
        return;
    gen_frame_fn(g, f);
    const eve_ty_t *ct = n->u.for_.coll->type;
    int id = ++g->nlabel;
    gen_line(g, "{");
    g->ind++;
    gen_line(g, "%s c_%d = %s;", gen_ctype(g, ct), id, gen_expr(g, n->u.for_.coll));
    const char *close = open_iter(g, ct, f->loopvar->ty, gen_fmt(g, "c_%d", id), id, n->pos);
    g->ind++;
    gen_line(g, "struct env_%s *env_ = eve_task_env(sizeof *env_, %s);", f->cname, f->cname);
    gen_line(g, "env_->%s = elem_%d;", f->loopvar->cname, id);
    if (gen_ty_ref(f->loopvar->ty))
        gen_line(g, "eve_retain(env_->%s);", f->loopvar->cname);
    fill_env(g, f, "env_", true);
    size_t np = emit_perms(g, f, f->perms, "perms_", gen_fmt(g, "elem_%d", id), false);
    gen_line(g, "eve_task_spawn(cx, %s, env_, %s, %zu, %s);", finish_now(g), np ? "perms_" : "NULL", np,
         gen_posstr(g, n->pos));
    g->ind--;
    gen_line(g, "%s", close);
    g->ind--;
    gen_line(g, "}");
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
    if (gen_ty_user(objt))
        return "EVE_EV_EMIT";
    gen_err(g, pos, "the event '%s' has no code yet", event);
    return "EVE_EV_COUNT";
}

/* Registers the callback of node n (an `on` or a handler) on source `src`. */
static void g_register(gen_t *g, const eve_node_t *n, const char *src, const eve_ty_t *objt, const char *event)
{
    frame_t *f = gen_frame_of(g, n);
    if (!f)
        return;
    gen_frame_fn(g, f);
    const char *ev = event_enum(g, objt, event, n->pos);
    const char *source = src;
    if (gen_ty_user(objt))
        source = gen_fmt(g, "%s->f_%s", src, event);
    gen_line(g, "{");
    g->ind++;
    gen_line(g, "struct env_%s *env_ = eve_env_alloc(sizeof *env_);", f->cname);
    fill_env(g, f, "env_", true);
    gen_line(g, "eve_cb_t cb_ = {.fn = %s, .env = env_, .env_free = %s_free, .pos = %s};", f->cname, f->cname,
         gen_posstr(g, n->pos));
    const eve_perms_t *perms = n->kind == EVE_N_ON ? &n->u.on.perms : &n->u.handler.perms;
    size_t np = emit_perms(g, f, perms, "cb_.perms", NULL, true);
    if (np)
        gen_line(g, "cb_.nperms = %zu;", np);
    gen_line(g, "eve_on(cx, %s, %s, &cb_);", source, ev);
    g->ind--;
    gen_line(g, "}");
}

static void g_assign(gen_t *g, const eve_node_t *n)
{
    const eve_node_t *t = n->u.assign.target;
    eve_tok_kind_t op = n->u.assign.op;
    const eve_ty_t *tt = t->type;
    char *val = gen_expr(g, n->u.assign.value);
    if (t->kind == EVE_N_INDEX) {
        const eve_ty_t *ct = t->u.index.obj->type;
        gen_line(g, "{");
        g->ind++;
        gen_line(g, "%s c_ = %s;", gen_ctype(g, ct), gen_expr(g, t->u.index.obj));
        bool map = ct && ct->kind == EVE_TY_MAP;
        const eve_ty_t *kt = map ? ct->a : NULL;
        gen_line(g, "%s k_ = %s;", map ? gen_ctype(g, kt) : "int64_t", gen_expr(g, t->u.index.index));
        char *P = gen_posstr(g, n->pos);
        char *kval = map ? gen_to_val(g, "k_", kt) : "k_";
        if (op != EVE_T_ASSIGN) {
            char *cur = map ? gen_from_val(g, gen_fmt(g, "eve_map_get(c_, %s, %s)", kval, P), ct->b)
                            : gen_from_val(g, gen_fmt(g, "eve_vec_get(c_, k_, %s)", P), ct->a);
            val = gen_binop(g, op, cur, val, tt, n->pos);
        }
        if (map)
            gen_line(g, "eve_map_put(c_, %s, %s);", kval, gen_to_val(g, val, ct->b));
        else
            gen_line(g, "eve_vec_set(c_, k_, %s, %s);", gen_to_val(g, val, ct->a), P);
        g->ind--;
        gen_line(g, "}");
        return;
    }
    char *lv;
    if (t->kind == EVE_N_NAME) {
        const eve_sym_t *s = t->sym;
        vinfo_t *v = gen_vsym(g, s);
        if (s && v && strcmp(s->name, t->u.name.name) != 0) {
            lv = gen_fmt(g, "%s->f_%s", gen_vread(g, g->f, v), t->u.name.name);
        } else {
            if (v && gen_ty_obj(v->ty) && !v->global && v->decl != g->f) {
                gen_err(g, t->pos, "'%s' belongs to an enclosing scope: a task or callback can modify the object, "
                     "not make the variable refer to another one", t->u.name.name);
                return;
            }
            lv = gen_vaccess(g, g->f, v);
        }
    } else {
        lv = gen_expr(g, t);
    }
    if (op != EVE_T_ASSIGN) {
        if (tt && tt->kind == EVE_TY_INT && (op == EVE_T_PLUS_ASSIGN || op == EVE_T_MINUS_ASSIGN ||
                                             op == EVE_T_STAR_ASSIGN))
            val = gen_fmt(g, "((int64_t)((uint64_t)(%s) %s (uint64_t)(%s)))", lv, gen_binop_c(op), val);
        else
            val = gen_binop(g, op, lv, val, tt, n->pos);
    }
    if (gen_ty_ref(tt))
        gen_line(g, "EVE_ASSIGN_REF(%s, %s);", lv, val);
    else
        gen_line(g, "%s = %s;", lv, val);
}

/* A loop's body: break and continue inside it know lp; its locals are
 * released at its end, and the continue label follows when one jumps to it. */
static void loop_body(gen_t *g, loop_t lp, const eve_list_t *body)
{
    if (g->nloops == g->caploops) {
        loop_t *l = gen_grown(g, g->loops, &g->caploops, sizeof *l);
        if (!l)
            return;
        g->loops = l;
    }
    g->loops[g->nloops++] = lp;
    gen_stmts(g, body);
    gen_close_scope(g, lp.body);
    if (g->loops[--g->nloops].continued)
        gen_line(g, "cont_%d:;", lp.label);
}

/* A variable declaration: a global assigned, locals declared. */
static void g_var(gen_t *g, const eve_node_t *n)
{
    bool global = g->f->kind == F_TOP && n->sym && n->sym->global;
    char *init = n->u.var.init ? gen_expr(g, n->u.var.init) : NULL;
    for (size_t i = 0; i < n->u.var.nnames; i++) {
        vinfo_t *v = gen_vget(g, n->u.var.names[i], n->pos);
        if (!v)
            continue;
        if (global) {
            if (init) {
                if (gen_ty_ref(v->ty))
                    gen_line(g, "EVE_ASSIGN_REF(%s, %s);", gen_vaccess(g, g->f, v), init);
                else
                    gen_line(g, "%s = %s;", gen_vaccess(g, g->f, v), init);
            }
        } else {
            gen_decl_local(g, v, init, n->pos);
        }
    }
    if (init)
        gen_drain(g);
}

/* An expression statement, with the handlers `on` registers on its value. */
static void g_expr_stmt(gen_t *g, const eve_node_t *n)
{
    const eve_node_t *e = n->u.expr.expr;
    if (n->u.expr.handlers.n) {
        gen_line(g, "{");
        g->ind++;
        gen_line(g, "%s src_ = %s;", gen_ctype(g, e->type), gen_expr(g, e));
        for (size_t i = 0; i < n->u.expr.handlers.n; i++) {
            const eve_node_t *h = n->u.expr.handlers.v[i];
            g_register(g, h, "src_", e->type, h->u.handler.name);
        }
        g->ind--;
        gen_line(g, "}");
    } else {
        gen_line(g, "%s;", gen_expr(g, e));
    }
    gen_drain(g);
}

/* `return`: the value kept while the scopes' cleanups run. */
static void g_return(gen_t *g, const eve_node_t *n)
{
    if (n->u.ret.value && g->ret && g->ret->kind != EVE_TY_VOID) {
        gen_line(g, "{");
        g->ind++;
        gen_line(g, "%s r_ = %s;", gen_ctype(g, g->ret), gen_expr(g, n->u.ret.value));
        if (gen_ty_ref(g->ret))
            gen_line(g, "eve_retain(r_);");
        gen_drain(g);
        gen_run_cleanups(g, 0);
        gen_line(g, "return r_;");
        g->ind--;
        gen_line(g, "}");
    } else {
        /* a handler's result (the paper's `return true`) is computed for
         * what it does and not used: nothing in the runtime asks for it */
        if (n->u.ret.value)
            gen_line(g, "(void)(%s);", gen_expr(g, n->u.ret.value));
        gen_drain(g);
        gen_run_cleanups(g, 0);
        gen_line(g, "return;");
    }
}

/* `if`, with the cleanups of each branch's scope. */
static void g_if(gen_t *g, const eve_node_t *n)
{
    gen_line(g, "if (%s) {", gen_expr(g, n->u.if_.cond));
    g->ind++;
    size_t d = g->ncl;
    gen_stmts(g, &n->u.if_.then);
    gen_close_scope(g, d);
    g->ind--;
    if (n->u.if_.has_else && n->u.if_.else_.n) {
        gen_line(g, "} else {");
        g->ind++;
        gen_stmts(g, &n->u.if_.else_);
        gen_close_scope(g, d);
        g->ind--;
    }
    gen_line(g, "}");
}

/* `while`: its condition tested at the top of each turn. */
static void g_while(gen_t *g, const eve_node_t *n)
{
    int id = ++g->nlabel;
    gen_line(g, "for (;;) {");
    g->ind++;
    gen_line(g, "bool w_ = %s;", gen_expr(g, n->u.while_.cond));
    gen_drain(g);
    gen_line(g, "if (!w_)");
    gen_line(g, "    break;");
    loop_body(g, (loop_t){g->ncl, g->ncl, id, false}, &n->u.while_.body);
    g->ind--;
    gen_line(g, "}");
}

/* `for` over a collection (a parallel for is a task per element: g_pfor). */
static void g_for(gen_t *g, const eve_node_t *n)
{
    if (n->u.for_.parallel) {
        g_pfor(g, n);
        return;
    }
    int id = ++g->nlabel;
    const eve_ty_t *ct = n->u.for_.coll->type;
    vinfo_t *v = gen_vget(g, n->u.for_.var, n->pos);
    if (!ct || !v)
        return;
    gen_line(g, "{");
    g->ind++;
    size_t outer0 = g->ncl;
    gen_line(g, "%s c_%d = %s;", gen_ctype(g, ct), id, gen_expr(g, n->u.for_.coll));
    gen_line(g, "eve_retain(c_%d);", id);
    gen_push_cleanup(g, gen_fmt(g, "eve_release(c_%d);", id));
    gen_drain(g);
    const char *close = open_iter(g, ct, v->ty, gen_fmt(g, "c_%d", id), id, n->pos);
    g->ind++;
    size_t outer = g->ncl;
    gen_decl_local(g, v, gen_fmt(g, "elem_%d", id), n->pos);
    if (!v->cell)
        gen_line(g, "(void)%s;", v->cname);
    loop_body(g, (loop_t){outer, g->ncl, id, false}, &n->u.for_.body);
    gen_close_scope(g, outer);
    g->ind--;
    gen_line(g, "%s", close);
    gen_close_scope(g, outer0);
    g->ind--;
    gen_line(g, "}");
}

/* `finish`: its body, then a wait for the tasks it spawned. */
static void g_finish(gen_t *g, const eve_node_t *n)
{
    int id = ++g->nlabel;
    char *fin = gen_fmt(g, "fin_%d", id);
    gen_line(g, "{");
    g->ind++;
    gen_line(g, "yard_coro_finish_t %s;", fin);
    gen_line(g, "eve_finish_begin(cx, &%s);", fin);
    size_t d = g->ncl;
    gen_push_cleanup(g, gen_fmt(g, "eve_finish_end(cx, &%s);", fin));
    if (g->nfins == g->capfins) {
        char **fs = gen_grown(g, g->fins, &g->capfins, sizeof *fs);
        if (!fs)
            return;
        g->fins = fs;
    }
    g->fins[g->nfins++] = fin;
    size_t body = g->ncl;
    gen_stmts(g, &n->u.finish.body);
    gen_close_scope(g, body);
    g->nfins--;
    gen_close_scope(g, d);
    g->ind--;
    gen_line(g, "}");
}

/* `on obj event`: a callback registered on obj. */
static void g_on(gen_t *g, const eve_node_t *n)
{
    gen_line(g, "{");
    g->ind++;
    gen_line(g, "%s src_ = %s;", gen_ctype(g, n->u.on.obj->type), gen_expr(g, n->u.on.obj));
    g_register(g, n, "src_", n->u.on.obj->type, n->u.on.event);
    g->ind--;
    gen_line(g, "}");
    gen_drain(g);
}

void gen_stmt(gen_t *g, const eve_node_t *n)
{
    if (g->failed)
        return;
    gen_hash_line(g, n->pos);
    switch (n->kind) {
    case EVE_N_VAR:
        g_var(g, n);
        break;
    case EVE_N_EXPR:
        g_expr_stmt(g, n);
        break;
    case EVE_N_ASSIGN:
        g_assign(g, n);
        gen_drain(g);
        break;
    case EVE_N_RETURN:
        g_return(g, n);
        break;
    case EVE_N_IF:
        g_if(g, n);
        break;
    case EVE_N_WHILE:
        g_while(g, n);
        break;
    case EVE_N_FOR:
        g_for(g, n);
        break;
    case EVE_N_BREAK:
    case EVE_N_CONTINUE: {
        if (!g->nloops)
            break;
        loop_t *lp = &g->loops[g->nloops - 1];
        if (n->kind == EVE_N_BREAK) {
            gen_run_cleanups(g, lp->outer);
            gen_line(g, "break;");
        } else {
            gen_run_cleanups(g, lp->body);
            gen_line(g, "goto cont_%d;", lp->label);
            lp->continued = true;
        }
        break;
    }
    case EVE_N_FINISH:
        g_finish(g, n);
        break;
    case EVE_N_TASK:
        g_spawn(g, n);
        break;
    case EVE_N_ON:
        g_on(g, n);
        break;
    case EVE_N_PASS:
        gen_line(g, ";");
        break;
    default:
        break;
    }
}

void gen_stmts(gen_t *g, const eve_list_t *l)
{
    for (size_t i = 0; i < l->n && !g->failed; i++)
        gen_stmt(g, l->v[i]);
}
