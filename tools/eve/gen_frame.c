/* yard-eve's code generator (gen.c): each frame as a C function: the
 * emitter's state saved around it, parameters bound, its temporaries
 * declared, and its env struct's constructor and destructor. */
#include "gen_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- frames as C functions ---------------------------------------------------------------------- */

void gen_save(gen_t *g, saved_t *s)
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

void gen_restore(gen_t *g, const saved_t *s)
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
    if (gen_own_local(v))
        gen_decl_local(g, v, in, pos);
    /* otherwise the C parameter itself is the variable: the caller's
     * reference keeps a string or object alive for the call */
}

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
void gen_place_decls(gen_t *g, sb_t *body, sb_t *decls)
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
    gen_sb_putn(&out, body->p, at);
    if (decls->p)
        gen_sb_puts(&out, decls->p);
    gen_sb_puts(&out, m + ml);
    if (out.oom)
        g->failed = true;
    free(body->p);
    *body = out;
    free(decls->p);
    *decls = (sb_t){0};
}

/* A function's text done: its temporaries declared (gen_place_decls), the
 * text added to the program's functions, and the generator's state as it
 * was before the function (gen_save). */
static void end_function(gen_t *g, sb_t *body, sb_t *decls, const saved_t *sv)
{
    gen_place_decls(g, body, decls);
    if (body->oom)
        g->failed = true;
    if (body->p)
        gen_sb_puts(&g->funcs, body->p);
    free(body->p);
    gen_restore(g, sv);
}

/* Emits the C function(s) of a task, parallel for's task, callback or lambda
 * frame into g->funcs (once). */
void gen_frame_fn(gen_t *g, frame_t *f)
{
    saved_t sv;
    gen_save(g, &sv);
    sb_t body = {0}, decls = {0};
    g->f = f;
    g->out = &body;
    g->decls = &decls;
    g->ind = 1;
    g->ret = NULL;
    gen_emit_env_struct(g, f);
    const eve_node_t *n = f->node;
    if (f->kind == F_TASK || f->kind == F_PFOR) {
        gen_sb_printf(&g->protos, "static void %s(eve_cx_t *cx, void *arg);\n", f->cname);
        gen_sb_printf(&body, "static void %s_body(eve_cx_t *cx, struct env_%s *e)\n{\n" DECLS_MARK, f->cname,
                  f->cname);
        gen_line(g, "size_t m_ = cx->ntmp;");
        gen_line(g, "(void)e;");
        gen_stmts(g, f->kind == F_TASK ? &n->u.task.body : &n->u.for_.body);
        gen_drain(g);
        gen_close_scope(g, 0);
        gen_sb_printf(&body, "}\n\nstatic void %s(eve_cx_t *cx, void *arg)\n{\n", f->cname);
        gen_line(g, "struct env_%s *e = arg;", f->cname);
        gen_line(g, "%s_body(cx, e);", f->cname);
        gen_line(g, "eve_task_done(cx);"); /* before the captures go: they may be the objects held */
        gen_release_env(g, f);
        gen_sb_puts(&body, "}\n\n");
    } else if (f->kind == F_CB) {
        const eve_params_t *ps = n->kind == EVE_N_ON ? &n->u.on.params : &n->u.handler.params;
        const eve_list_t *stm = n->kind == EVE_N_ON ? &n->u.on.body : &n->u.handler.body;
        gen_sb_printf(&g->protos, "static void %s(eve_cx_t *cx, void *arg, eve_val_t payload_);\n", f->cname);
        gen_sb_printf(&g->protos, "static void %s_free(void *arg);\n", f->cname);
        gen_sb_printf(&body, "static void %s(eve_cx_t *cx, void *arg, eve_val_t payload_)\n{\n" DECLS_MARK, f->cname);
        gen_line(g, "struct env_%s *e = arg;", f->cname);
        gen_line(g, "size_t m_ = cx->ntmp;");
        gen_line(g, "(void)e;");
        gen_line(g, "(void)payload_;");
        for (size_t i = 0; i < ps->n; i++) {
            vinfo_t *v = gen_vget(g, ps->v[i].name, ps->v[i].pos);
            if (!v || !v->ty)
                continue;
            char *in = gen_from_val(g, "payload_", v->ty);
            if (gen_own_local(v))
                gen_decl_local(g, v, in, ps->v[i].pos);
            else
                gen_line(g, "%s %s = %s;", gen_ctype(g, v->ty), v->cname, in);
        }
        gen_stmts(g, stm);
        gen_drain(g);
        gen_close_scope(g, 0);
        gen_sb_printf(&body, "}\n\nstatic void %s_free(void *arg)\n{\n", f->cname);
        gen_line(g, "struct env_%s *e = arg;", f->cname);
        gen_release_env(g, f);
        gen_line(g, "free(e);");
        gen_sb_puts(&body, "}\n\n");
    } else if (f->kind == F_LAMBDA) {
        const eve_ty_t *ft = n->type;
        const eve_ty_t *ret = ft && ft->kind == EVE_TY_FUNC ? ft->ret : NULL;
        g->ret = ret;
        sb_t sig = {0};
        gen_sb_printf(&sig, "static %s%s%s(eve_cx_t *cx, struct env_%s *e", gen_ctype(g, ret),
                  gen_ty_ref(ret) ? "" : " ", f->cname, f->cname);
        for (size_t i = 0; i < n->u.lambda.params.n; i++) {
            vinfo_t *v = gen_vget(g, n->u.lambda.params.v[i].name, n->u.lambda.params.v[i].pos);
            if (v)
                gen_sb_printf(&sig, ", %s%s%s", gen_ctype(g, v->ty), gen_ty_ref(v->ty) ? "" : " ",
                          gen_own_local(v) ? gen_fmt(g, "%s_in", v->cname) : v->cname);
        }
        gen_sb_puts(&sig, ")");
        gen_sb_printf(&g->protos, "%s;\n", sig.p);
        gen_sb_printf(&body, "%s\n{\n" DECLS_MARK, sig.p);
        free(sig.p);
        gen_line(g, "size_t m_ = cx->ntmp;");
        gen_line(g, "(void)e;");
        for (size_t i = 0; i < n->u.lambda.params.n; i++) {
            vinfo_t *v = gen_vget(g, n->u.lambda.params.v[i].name, n->u.lambda.params.v[i].pos);
            if (v)
                bind_param(g, v, gen_fmt(g, "%s_in", v->cname), v->pos);
        }
        if (n->u.lambda.expr) {
            if (ret && ret->kind != EVE_TY_VOID) {
                gen_line(g, "%s r_ = %s;", gen_ctype(g, ret), gen_expr(g, n->u.lambda.expr));
                if (gen_ty_ref(ret))
                    gen_line(g, "eve_retain(r_);");
                gen_drain(g);
                gen_close_scope(g, 0);
                gen_line(g, "return r_;");
            } else {
                gen_line(g, "%s;", gen_expr(g, n->u.lambda.expr));
                gen_drain(g);
                gen_close_scope(g, 0);
            }
        } else {
            gen_stmts(g, &n->u.lambda.body);
            gen_drain(g);
            gen_close_scope(g, 0);
        }
        gen_sb_puts(&body, "}\n\n");
    }
    end_function(g, &body, &decls, &sv);
}

/* (lambda)(args): the lambda's function, called with an env on the stack. */
char *gen_lambda_call(gen_t *g, const eve_node_t *call)
{
    const eve_node_t *lam = call->u.call.callee;
    if (lam->kind != EVE_N_LAMBDA) {
        gen_err(g, call->pos, "only a lambda written in place can be called");
        return "0";
    }
    frame_t *f = gen_frame_of(g, lam);
    if (!f)
        return "0";
    gen_frame_fn(g, f);
    /* the env as a compound literal: the lambda runs now, inside this statement */
    sb_t b = {0};
    gen_sb_printf(&b, "%s(cx, &(struct env_%s){", f->cname, f->cname);
    size_t k = 0;
    for (size_t i = 0; i < f->ncaps; i++) {
        const cap_t *c = &f->caps[i];
        gen_sb_printf(&b, "%s.%s = %s", k++ ? ", " : "", c->v->cname,
                  c->mode == CAP_REF ? gen_vcell(g, g->f, c->v) : gen_vread(g, g->f, c->v));
    }
    if (!k)
        gen_sb_puts(&b, "0");
    gen_sb_printf(&b, "}%s)", gen_call_args(g, call, true));
    char *s = gen_fmt(g, "%s", b.p ? b.p : "");
    free(b.p);
    const eve_ty_t *ret = lam->type && lam->type->kind == EVE_TY_FUNC ? lam->type->ret : NULL;
    if (gen_ty_ref(ret))
        return gen_tmp_owned(g, ret, s);
    return s;
}

/* A function or method. */
void gen_func(gen_t *g, const eve_node_t *fn, eve_class_t *cls)
{
    frame_t *f = gen_frame_of(g, fn);
    if (!f)
        return;
    saved_t sv;
    gen_save(g, &sv);
    sb_t body = {0}, decls = {0};
    g->f = f;
    g->out = &body;
    g->decls = &decls;
    g->ind = 1;
    /* the function type an_func found (a method's from its class's member) */
    const eve_ty_t *ret = f->fty && f->fty->kind == EVE_TY_FUNC ? f->fty->ret : NULL;
    g->ret = ret;
    sb_t sig = {0};
    gen_sb_printf(&sig, "static %s%s%s(eve_cx_t *cx", gen_ctype(g, ret), gen_ty_ref(ret) ? "" : " ", f->cname);
    if (cls) {
        vinfo_t *self = gen_vget(g, "self", fn->pos);
        if (self)
            gen_sb_printf(&sig, ", struct cls_%s *%s", cls->name, gen_own_local(self) ? gen_fmt(g, "%s_in", self->cname)
                                                                             : self->cname);
    }
    for (size_t i = 0; i < fn->u.func.params.n; i++) {
        const eve_param_t *p = &fn->u.func.params.v[i];
        vinfo_t *v = gen_vget(g, p->name, p->pos);
        if (!v)
            continue;
        gen_sb_printf(&sig, ", %s%s%s", gen_ctype(g, v->ty), gen_ty_ref(v->ty) ? "" : " ",
                  gen_own_local(v) ? gen_fmt(g, "%s_in", v->cname) : v->cname);
    }
    gen_sb_puts(&sig, ")");
    if (sig.oom)
        g->failed = true;
    gen_sb_printf(&g->protos, "%s;\n", sig.p ? sig.p : "");
    gen_hash_line(g, fn->pos);
    gen_sb_printf(&body, "%s\n{\n" DECLS_MARK, sig.p ? sig.p : "");
    free(sig.p);
    gen_line(g, "size_t m_ = cx->ntmp;");
    if (cls) {
        vinfo_t *self = gen_vget(g, "self", fn->pos);
        if (self)
            bind_param(g, self, gen_fmt(g, "%s_in", self->cname), fn->pos);
    }
    for (size_t i = 0; i < fn->u.func.params.n; i++) {
        const eve_param_t *p = &fn->u.func.params.v[i];
        vinfo_t *v = gen_vget(g, p->name, p->pos);
        if (v)
            bind_param(g, v, gen_fmt(g, "%s_in", v->cname), p->pos);
    }
    gen_stmts(g, &fn->u.func.body);
    gen_drain(g);
    gen_close_scope(g, 0);
    if (ret && ret->kind != EVE_TY_VOID)
        gen_line(g, "return %s; /* not reached: the checker saw a return on every path */", gen_zero(g, ret));
    gen_sb_puts(&body, "}\n\n");
    end_function(g, &body, &decls, &sv);
}

/* struct cls_X, its destructor and its constructor. */
void gen_class(gen_t *g, const eve_node_t *cn)
{
    const char *name = cn->u.class_.name;
    eve_class_t *cls = cn->sym ? cn->sym->cls : NULL;
    if (!cls)
        return;
    gen_sb_printf(&g->types, "struct cls_%s {\n    eve_obj_t h;\n", name);
    sb_t dtor = {0}, ctor = {0};
    gen_sb_printf(&dtor, "static void cls_%s_dtor(eve_obj_t *o)\n{\n    struct cls_%s *self = (void *)o;\n    (void)self;\n",
              name, name);
    gen_sb_printf(&ctor, "static struct cls_%s *new_%s(eve_cx_t *cx)\n{\n    (void)cx;\n"
                     "    struct cls_%s *o = eve_obj_new(sizeof *o, cls_%s_dtor);\n", name, name, name, name);
    gen_sb_printf(&g->protos, "static struct cls_%s *new_%s(eve_cx_t *cx);\n", name, name);
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
            gen_sb_printf(&g->types, "    %s%sf_%s;\n", gen_ctype(g, ft), gen_ty_ref(ft) ? "" : " ", fname);
            if (gen_ty_user(ft) && ft->cls == cls) {
                gen_err(g, m->pos, "class '%s' contains itself (field '%s'): a fresh object would never end", name,
                     fname);
                continue;
            }
            if (gen_ty_ref(ft))
                gen_sb_printf(&dtor, "    eve_release(self->f_%s);\n", fname);
            if (m->u.var.init) {
                saved_t sv;
                gen_save(g, &sv);
                g->f = g->top;
                char *init = gen_expr(g, m->u.var.init);
                gen_restore(g, &sv);
                if (gen_ty_ref(ft))
                    gen_sb_printf(&ctor, "    o->f_%s = %s;\n    eve_retain(o->f_%s);\n", fname, init, fname);
                else
                    gen_sb_printf(&ctor, "    o->f_%s = %s;\n", fname, init);
            } else if (ft->kind == EVE_TY_STRING) {
                gen_sb_printf(&ctor, "    o->f_%s = &eve_str_empty;\n", fname);
            } else if (gen_ty_ref(ft)) {
                gen_sb_printf(&ctor, "    o->f_%s = %s;\n", fname, gen_fresh(g, ft, m->pos));
            }
        }
    }
    gen_sb_puts(&g->types, "};\n");
    gen_sb_puts(&dtor, "}\n\n");
    gen_sb_puts(&ctor, "    return o;\n}\n\n");
    gen_sb_puts(&g->funcs, dtor.p ? dtor.p : "");
    gen_sb_puts(&g->funcs, ctor.p ? ctor.p : "");
    if (dtor.oom || ctor.oom)
        g->failed = true;
    free(dtor.p);
    free(ctor.p);
}
