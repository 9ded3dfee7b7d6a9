/* yard-eve's code generator (gen.c), pass 1: analysis. Every function,
 * method, task, parallel for, callback and lambda becomes a frame; what
 * each frame captures of the variables outer frames declare, and which
 * value variables live in a cell (on the heap or the stack). */
#include "gen_int.h"

#include <string.h>

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
        cap_t *c = gen_alloc(g, cap * sizeof *c);
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
    vinfo_t *v = gen_vsym(g, s);
    if (!v || v->decl == f || !v->decl)
        return;
    bool value = !gen_ty_ref(v->ty) || v->ty->kind == EVE_TY_STRING;
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
        if (!f->loopvar || gen_vsym(g, pe->sym) != f->loopvar)
            use_var(g, f->parent, pe->sym, false);
        if (pe->kind != EVE_PERM_NULL)
            use_var(g, f, pe->sym, true);
    }
}

/* A lambda's parameters, typed from its function type ft. */
static void declare_params(gen_t *g, frame_t *f, const eve_params_t *ps, const eve_ty_t *ft)
{
    for (size_t i = 0; i < ps->n; i++)
        gen_vadd(g, ps->v[i].name, ps->v[i].pos, ft && ft->kind == EVE_TY_FUNC && i < ft->nparams ? ft->params[i] : NULL,
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
    frame_t *cf = gen_frame_new(g, F_CB, f, n, "cb");
    if (!cf)
        return;
    cf->perms = perms;
    const eve_ty_t *pt = event_payload(objt, event);
    for (size_t i = 0; i < params->n; i++)
        gen_vadd(g, params->v[i].name, params->v[i].pos, pt, cf);
    an_perms(g, cf, perms);
    an_stmts(g, cf, body);
}

void gen_an_stmt(gen_t *g, frame_t *f, const eve_node_t *n, size_t finish)
{
    switch (n->kind) {
    case EVE_N_VAR: {
        const eve_ty_t *t = n->sym ? n->sym->ty : NULL;
        if (n->u.var.init)
            an_expr(g, f, n->u.var.init);
        bool global = f->kind == F_TOP && n->sym && n->sym->global;
        for (size_t i = 0; i < n->u.var.nnames; i++) {
            vinfo_t *v = gen_vadd(g, n->u.var.names[i], n->pos, t, f);
            if (v) {
                v->global = global;
                if (global)
                    v->cname = gen_fmt(g, "g_%s", v->name);
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
            vinfo_t *v = gen_vsym(g, t->sym);
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
            gen_an_stmt(g, f, n->u.if_.then.v[i], finish);
        for (size_t i = 0; i < n->u.if_.else_.n; i++)
            gen_an_stmt(g, f, n->u.if_.else_.v[i], finish);
        break;
    case EVE_N_WHILE:
        an_expr(g, f, n->u.while_.cond);
        for (size_t i = 0; i < n->u.while_.body.n; i++)
            gen_an_stmt(g, f, n->u.while_.body.v[i], finish);
        break;
    case EVE_N_FOR: {
        an_expr(g, f, n->u.for_.coll);
        const eve_ty_t *et = n->sym ? n->sym->ty : NULL;
        if (!n->u.for_.parallel) {
            gen_vadd(g, n->u.for_.var, n->pos, et, f);
            for (size_t i = 0; i < n->u.for_.body.n; i++)
                gen_an_stmt(g, f, n->u.for_.body.v[i], finish);
            break;
        }
        frame_t *tf = gen_frame_new(g, F_PFOR, f, n, "pfor");
        if (!tf)
            return;
        tf->in_finish = finish > 0;
        tf->perms = &n->u.for_.perms;
        tf->loopvar = gen_vadd(g, n->u.for_.var, n->pos, et, tf);
        if (tf->loopvar)
            tf->loopvar->loopvar = true;
        an_perms(g, tf, &n->u.for_.perms);
        an_stmts(g, tf, &n->u.for_.body);
        break;
    }
    case EVE_N_FINISH:
        for (size_t i = 0; i < n->u.finish.body.n; i++)
            gen_an_stmt(g, f, n->u.finish.body.v[i], finish + 1);
        break;
    case EVE_N_TASK: {
        frame_t *tf = gen_frame_new(g, F_TASK, f, n, "task");
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
        gen_an_stmt(g, f, l->v[i], 0);
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
        frame_t *lf = gen_frame_new(g, F_LAMBDA, f, n, "lambda");
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

void gen_an_func(gen_t *g, const eve_node_t *fn, eve_class_t *cls)
{
    frame_t *f = gen_frame_new(g, cls ? F_METHOD : F_FUNC, NULL, fn, cls ? gen_fmt(g, "m_%s", cls->name) : "f");
    if (!f)
        return;
    f->cname = cls ? gen_fmt(g, "m_%s_%s", cls->name, fn->u.func.name) : gen_fmt(g, "f_%s", fn->u.func.name);
    f->cls = cls;
    const eve_ty_t *ft = fn->sym ? fn->sym->ty : NULL;
    if (cls) {
        for (eve_member_t *m = cls->members; m; m = m->next)
            if (m->decl == fn)
                ft = m->ty;
        vinfo_t *self = gen_vadd(g, "self", fn->pos, NULL, f);
        if (self) {
            eve_ty_t *st = gen_alloc(g, sizeof *st);
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
        gen_vadd(g, p->name, p->pos, pt, f);
    }
    f->fty = ft;
    an_stmts(g, f, &fn->u.func.body);
}
