/* yard-eve's checker (check.c): statements: declarations, assignments,
 * conditions, loops, tasks and finish blocks, callbacks, and whether a
 * body always returns. */
#include "check_int.h"

#include <stdio.h>
#include <string.h>

static void block(chk_t *c, eve_list_t *body);

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
        return s->u.if_.has_else && chk_always_returns(c, &s->u.if_.then) && chk_always_returns(c, &s->u.if_.else_);
    case EVE_N_FINISH: return chk_always_returns(c, &s->u.finish.body);
    case EVE_N_WHILE: return is_true(s->u.while_.cond) && !breaks(&s->u.while_.body);
    case EVE_N_EXPR: {
        const eve_node_t *e = s->u.expr.expr;
        return e->kind == EVE_N_CALL && e->u.call.callee->kind == EVE_N_NAME && c->exit_sym &&
               e->u.call.callee->sym == c->exit_sym;
    }
    default: return false;
    }
}

bool chk_always_returns(chk_t *c, const eve_list_t *body)
{
    for (size_t i = 0; i < body->n; i++)
        if (terminates(c, body->v[i]))
            return true;
    return false;
}

static void cond(chk_t *c, eve_node_t *e, const char *what)
{
    const eve_ty_t *t = chk_value(c, e, A_READ, NULL);
    if (!chk_is_err(t) && t->kind != EVE_TY_BOOL) {
        char buf[96];
        chk_err(c, chk_start_pos(e), "the condition of '%s' is %s, not bool", what, chk_tn(t, buf));
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
            char *q = chk_alloc(c, len);
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
        char *q = chk_alloc(c, len);
        if (!q)
            return NULL;
        snprintf(q, len, "%s.%s", p, e->u.member.name);
        *path = q;
        return s;
    }
    return NULL;
}

void chk_var_stmt(chk_t *c, eve_node_t *n, bool toplevel_item)
{
    const eve_ty_t *t;
    if (toplevel_item) {
        /* declared by the first pass: check the initializer */
        t = n->u.var.nnames && n->sym ? n->sym->ty : c->t_err;
    } else {
        t = chk_resolve_type(c, n->u.var.type, false, true);
    }
    if (n->u.var.init) {
        const eve_ty_t *it = chk_value(c, n->u.var.init, A_READ, NULL);
        if (!chk_assignable(t, it)) {
            char b1[96], b2[96];
            chk_err(c, chk_start_pos(n->u.var.init), "cannot initialize %s '%s' with %s", chk_tn(t, b1), n->u.var.names[0],
                chk_tn(it, b2));
        }
    }
    if (toplevel_item)
        return;
    for (size_t i = 0; i < n->u.var.nnames; i++) {
        eve_sym_t *s = chk_declare(c, n->u.var.names[i], EVE_SYM_VAR, n->pos);
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
    const eve_ty_t *vt = chk_value(c, n->u.assign.value, A_READ, NULL);
    const eve_ty_t *tt = chk_value(c, target, A_WRITE, NULL);
    char b1[96], b2[96];
    const char *what = target->kind == EVE_N_NAME ? target->u.name.name
                     : target->kind == EVE_N_MEMBER ? target->u.member.name : NULL;
    if (target->kind == EVE_N_INDEX && !chk_is_err(tt)) {
        const eve_ty_t *ct = target->u.index.obj->type;
        if (ct && (ct->kind == EVE_TY_STRING || ct->kind == EVE_TY_CLASS)) {
            chk_err(c, target->pos, "cannot assign to an element of %s: it cannot be changed in place", chk_tn(ct, b1));
            return;
        }
    }
    if (vt->kind == EVE_TY_VOID) {
        chk_err(c, chk_start_pos(n->u.assign.value), "the value assigned has no value (void)");
        return;
    }
    if (n->u.assign.op == EVE_T_ASSIGN) {
        if (!chk_assignable(tt, vt)) {
            if (what)
                chk_err(c, chk_start_pos(target), "cannot assign %s to %s '%s'", chk_tn(vt, b1), chk_tn(tt, b2), what);
            else
                chk_err(c, chk_start_pos(target), "cannot assign %s to an element of type %s", chk_tn(vt, b1), chk_tn(tt, b2));
        }
        return;
    }
    const eve_ty_t *r = chk_binop(c, n->pos, n->u.assign.op, tt, vt);
    if (!chk_is_err(r) && !chk_is_err(tt) && !chk_ty_eq(r, tt))
        chk_err(c, n->pos, "cannot assign %s to %s '%s'", chk_tn(r, b1), chk_tn(tt, b2), what ? what : "element");
}

/* One callback: `on obj event (params) [perms]:` (source: obj) or a handler
 * of a call (source NULL; ret: the result an assigned handler declares). */
static void callback(chk_t *c, eve_pos_t pos, const eve_ty_t *objt, const char *event, eve_params_t *params,
                     eve_perms_t *perms, eve_list_t *body, const eve_type_t *ret, const eve_node_t *source)
{
    char b1[96], b2[96];
    const eve_ty_t *payload = c->t_err;
    if (!chk_is_err(objt)) {
        eve_class_t *cls = objt->kind == EVE_TY_CLASS ? objt->cls : NULL;
        eve_member_t *m = chk_find_member(c, cls, event, true);
        if (!m)
            chk_err(c, pos, "%s has no event '%s'", chk_tn(objt, b1), event);
        else
            payload = m->kind == EVE_MEM_EVENT ? m->ty : m->ty->a;
    }
    const eve_ty_t *rt = ret ? chk_resolve_type(c, ret, true, false) : c->t_void;
    pscope_t ps = {.kind = PS_CALLBACK, .ret = rt, .fname = event};
    pscope_t *outer = c->ps;
    const char *outer_handler = c->handler_name, *outer_param = c->handler_param;
    chk_open_scope(c);
    c->ps = &ps;
    chk_open_perms(c, &ps, perms, NULL);
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
            chk_push_grant(c, &ps, source->sym, EVE_PERM_READ, source->u.name.name);
    }
    c->handler_name = event;
    c->handler_param = params->n == 1 ? params->v[0].name : NULL;
    if (params->n > 1)
        chk_err(c, params->v[1].pos, "a callback takes at most one parameter (the value the event carries)");
    for (size_t i = 0; i < params->n; i++) {
        const eve_param_t *p = &params->v[i];
        const eve_ty_t *t = payload;
        if (i == 0 && payload->kind == EVE_TY_VOID) {
            chk_err(c, p->pos, "event '%s' carries nothing: its callback takes no parameter", event);
            t = c->t_err;
        }
        if (p->type) {
            const eve_ty_t *wt = chk_resolve_param_type(c, p->type, false);
            if (i == 0 && !chk_is_err(t) && !chk_ty_eq(wt, t))
                chk_err(c, p->type->pos, "parameter '%s' is %s but event '%s' carries %s", p->name, chk_tn(wt, b1), event,
                    chk_tn(t, b2));
            t = wt;
        }
        eve_sym_t *s = chk_declare(c, p->name, EVE_SYM_VAR, p->pos);
        if (s) {
            s->ty = i == 0 ? t : c->t_err;
            /* `c: connection`: a pending connection, c() accepts it (ours
             * are accepted already: c() is the socket) */
            s->accepts = p->type && strcmp(p->type->name, "connection") == 0 && !chk_lookup(c, "connection");
        }
    }
    chk_stmts(c, body);
    if (!chk_is_err(rt) && rt->kind != EVE_TY_VOID && !chk_always_returns(c, body))
        chk_err(c, pos, "the handler '%s' returns %s but may reach its end without a return", event, chk_tn(rt, b1));
    chk_pop_grants(&ps);
    c->ps = outer;
    c->handler_name = outer_handler;
    c->handler_param = outer_param;
    chk_close_scope(c);
}

/* for (x[: T] in coll), parallel (@ for) or not: reads the collection and
 * gives the loop variable's type, the element type of coll or the T it is
 * declared with (which must be that element type). */
static const eve_ty_t *loop_element(chk_t *c, eve_node_t *n)
{
    const eve_ty_t *ct = chk_value(c, n->u.for_.coll, A_READ, NULL);
    const eve_ty_t *et = c->t_err;
    char b1[96], b2[96];
    if (!chk_is_err(ct)) {
        switch (ct->kind) {
        case EVE_TY_VECTOR: case EVE_TY_SET: case EVE_TY_MAP: et = ct->a; break;
        case EVE_TY_STRING: et = c->t_char; break;
        default:
            if (ct->kind == EVE_TY_CLASS && ct->cls->lib && strcmp(ct->cls->name, "read_buffer") == 0)
                et = c->t_char;
            else
                chk_err(c, chk_start_pos(n->u.for_.coll), "cannot iterate over %s", chk_tn(ct, b1));
        }
    }
    if (n->u.for_.type) {
        const eve_ty_t *wt = chk_resolve_type(c, n->u.for_.type, false, true);
        chk_shared_element(c, n->u.for_.type, wt, "a loop variable's type");
        if (!chk_is_err(et) && !chk_is_err(wt) && !chk_ty_eq(wt, et))
            chk_err(c, n->u.for_.type->pos, "loop variable '%s' is declared %s but the elements are %s",
                n->u.for_.var, chk_tn(wt, b1), chk_tn(et, b2));
        if (!chk_is_err(wt))
            et = wt;
    }
    return et;
}

/* @ [perms]: body, and @ for (x: T in coll) [perms]: body */
static void task(chk_t *c, eve_node_t *n)
{
    pscope_t ps = {.kind = n->kind == EVE_N_TASK ? PS_TASK : PS_PFOR, .ret = c->t_void, .fname = "task"};
    ps.parent = c->ps;
    ps.in_finish = c->ps->finish > 0;
    pscope_t *outer = c->ps;
    chk_open_scope(c);
    if (n->kind == EVE_N_TASK) {
        c->ps = &ps;
        chk_open_perms(c, &ps, &n->u.task.perms, NULL);
        chk_stmts(c, &n->u.task.body);
    } else {
        /* the collection is read by the spawner */
        const eve_ty_t *et = loop_element(c, n);
        c->ps = &ps;
        eve_sym_t *s = chk_declare(c, n->u.for_.var, EVE_SYM_VAR, n->pos);
        if (s) {
            s->ty = et;
            s->own = eve_ty_is_value(et) ? H_FULL : H_READ;
            n->sym = s;
        }
        chk_open_perms(c, &ps, &n->u.for_.perms, s);
        /* +x on an element that is a value writes into the collection */
        for (grant_t *g = ps.granted; g && s; g = g->undo)
            if (g->sym == s && g->kind == EVE_PERM_FULL && eve_ty_is_value(et)) {
                c->ps = outer;
                const char *cp;
                eve_sym_t *cs = expr_path(c, n->u.for_.coll, &cp);
                if (cs)
                    chk_check_access(c, chk_start_pos(n->u.for_.coll), cs, cp, A_WRITE, NULL);
                c->ps = &ps;
            }
        chk_stmts(c, &n->u.for_.body);
    }
    chk_pop_grants(&ps);
    c->ps = outer;
    chk_close_scope(c);
}

static void for_stmt(chk_t *c, eve_node_t *n)
{
    const eve_ty_t *et = loop_element(c, n);
    chk_open_scope(c);
    eve_sym_t *s = chk_declare(c, n->u.for_.var, EVE_SYM_VAR, n->pos);
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
    chk_close_scope(c);
}

void chk_stmt(chk_t *c, eve_node_t *n)
{
    char b1[96], b2[96];
    switch (n->kind) {
    case EVE_N_VAR:
        chk_var_stmt(c, n, false);
        break;
    case EVE_N_EXPR: {
        eve_node_t *e = n->u.expr.expr;
        const eve_ty_t *t = chk_value(c, e, A_READ, NULL);
        if (e->kind != EVE_N_CALL)
            chk_err(c, chk_start_pos(e), "this expression does nothing: only a call may stand as a statement");
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
        const eve_ty_t *t = n->u.ret.value ? chk_value(c, n->u.ret.value, A_READ, NULL) : NULL;
        if (!want) {
            chk_err(c, n->pos, "'return' outside a function, task or callback");
        } else if (want->kind == EVE_TY_VOID) {
            if (t)
                chk_err(c, n->pos, "%s '%s' returns void: 'return' takes no value here",
                    chk_ps_noun(c->ps), c->ps->fname ? c->ps->fname : "");
        } else if (!t) {
            chk_err(c, n->pos, "'%s' returns %s: 'return' needs a value", c->ps->fname, chk_tn(want, b1));
        } else if (!chk_assignable(want, t)) {
            chk_err(c, chk_start_pos(n->u.ret.value), "'%s' returns %s, not %s", c->ps->fname, chk_tn(want, b1), chk_tn(t, b2));
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
            chk_err(c, n->pos, "this loop never ends ('while true' with no 'break'): Eve code may not loop forever");
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
        const eve_ty_t *t = chk_value(c, n->u.on.obj, A_READ, NULL);
        callback(c, n->pos, t, n->u.on.event, &n->u.on.params, &n->u.on.perms, &n->u.on.body, NULL, n->u.on.obj);
        break;
    }
    case EVE_N_BREAK:
    case EVE_N_CONTINUE:
        if (c->ps->loops == 0)
            chk_err(c, n->pos, "'%s' outside a loop%s", n->kind == EVE_N_BREAK ? "break" : "continue",
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

void chk_stmts(chk_t *c, eve_list_t *body)
{
    for (size_t i = 0; i < body->n; i++)
        chk_stmt(c, body->v[i]);
}

static void block(chk_t *c, eve_list_t *body)
{
    chk_open_scope(c);
    chk_stmts(c, body);
    chk_close_scope(c);
}
