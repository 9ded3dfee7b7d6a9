/* yard-eve's checker (check.c): expressions, their types and the access
 * each makes: names, calls (arguments, permission lists, format strings
 * expanded), operators and lambdas. */
#include "check_int.h"

#include <stdio.h>
#include <string.h>

/* ---- expressions ----------------------------------------------------------------------- */

static const eve_ty_t *set_ty(eve_node_t *n, const eve_ty_t *t)
{
    n->type = t;
    return t;
}

/* A name used as a value (a variable, a field of self, a library object). */
static const eve_ty_t *name_value(chk_t *c, eve_node_t *n, int mode, const char *sub)
{
    const char *name = n->u.name.name;
    eve_sym_t *s = chk_lookup(c, name);
    /* inside a method, the class's members come before globals and the library */
    if (c->cls && (!s || s->depth <= 1)) {
        eve_member_t *m = chk_find_member(c, c->cls, name, false);
        eve_sym_t *self = chk_lookup(c, "self");
        if (m && self && self->kind == EVE_SYM_VAR) {
            if (m->kind != EVE_MEM_FIELD) {
                chk_err(c, n->pos, "method '%s' must be called", name);
                return c->t_err;
            }
            size_t len = 5 + strlen(name) + (sub ? strlen(sub) + 1 : 0) + 1;
            char *path = chk_alloc(c, len);
            if (path)
                snprintf(path, len, "self.%s%s%s", name, sub ? "." : "", sub ? sub : "");
            n->sym = self;
            chk_check_access(c, n->pos, self, path ? path : "self", mode, NULL);
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
        if (chk_is_lib_module(name))
            chk_err(c, n->pos, "unknown name '%s' (a library module: import %s)", name, name);
        else
            chk_err(c, n->pos, "unknown name '%s'", name);
        return c->t_err;
    }
    n->sym = s;
    switch (s->kind) {
    case EVE_SYM_VAR:
    case EVE_SYM_LIBOBJ: {
        if (c->toplevel && c->ps == &c->root && s->global && s->order >= c->item && s->pos.line)
            chk_err(c, n->pos, "'%s' is used before its declaration (at %u:%u)", name, (unsigned)s->pos.line,
                (unsigned)s->pos.col);
        const char *path = name;
        if (sub) {
            size_t len = strlen(name) + strlen(sub) + 2;
            char *p = chk_alloc(c, len);
            if (p) {
                snprintf(p, len, "%s.%s", name, sub);
                path = p;
            }
        }
        chk_check_access(c, n->pos, s, path, mode, NULL);
        return s->ty;
    }
    case EVE_SYM_FUNC:
        chk_err(c, n->pos, "'%s' is a function: call it (only lambdas are values)", name);
        return c->t_err;
    case EVE_SYM_CLASS:
        chk_err(c, n->pos, "'%s' is a type, not a value", name);
        return c->t_err;
    case EVE_SYM_MODULE:
        chk_err(c, n->pos, "'%s' is a module, not a value", name);
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
        chk_err(c, call->pos, "'%s' takes %zu argument%s, %zu given", fname, np, np == 1 ? "" : "s", args->n);
    for (size_t i = 0; i < args->n; i++) {
        int mode = A_READ;
        if (fn)
            for (size_t k = 0; k < fn->nreqs; k++)
                if (fn->reqs[k].param == (long)i && strchr(fn->reqs[k].path, '.') == NULL)
                    mode = fn->reqs[k].kind == EVE_PERM_FULL ? A_WRITE
                           : fn->reqs[k].kind == EVE_PERM_NULL ? A_REFER : A_READ;
        const eve_ty_t *pt = i < np ? ft->params[i] : c->t_err;
        if (recv)
            pt = chk_subst(c, pt, recv);
        const eve_ty_t *at = chk_value(c, args->v[i], mode, NULL);
        if (at->kind == EVE_TY_VOID) {
            chk_err(c, chk_start_pos(args->v[i]), "argument %zu of '%s' has no value (void)", i + 1, fname);
        } else if (!chk_assignable(pt, at)) {
            char b1[96], b2[96];
            chk_err(c, chk_start_pos(args->v[i]), "argument %zu of '%s' is %s, expected %s", i + 1, fname, chk_tn(at, b1),
                chk_tn(pt, b2));
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
        chk_check_access(c, pos, r->sym, r->path, mode, fn->name);
    }
}

int chk_self_mode(const struct eve_fninfo *fn)
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

eve_node_t *chk_mknode(chk_t *c, eve_node_kind_t k, eve_pos_t pos)
{
    eve_node_t *n = chk_alloc(c, sizeof *n);
    if (n) {
        n->kind = k;
        n->pos = pos;
    }
    return n;
}

static eve_node_t *mkstring(chk_t *c, eve_pos_t pos, const char *bytes, size_t len)
{
    eve_node_t *n = chk_mknode(c, EVE_N_STRING, pos);
    char *b = chk_alloc(c, len + 1);
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
    eve_node_t *n = chk_mknode(c, EVE_N_BINARY, b->pos);
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
        chk_err(c, chk_start_pos(f), "%s with arguments takes a format that is a string literal", what);
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
            chk_err(c, f->pos, "%s: unknown conversion %s in the format (it knows %%s, %%d, %%f, %%c and %%%%)", what,
                lit);
            return false;
        }
        if (next >= a->n) {
            chk_err(c, f->pos, "%s: the format has more conversions than the %zu argument%s after it", what, a->n - 1,
                a->n == 2 ? "" : "s");
            return false;
        }
        eve_node_t *conv_call = chk_mknode(c, EVE_N_CALL, a->v[next]->pos);
        eve_node_t *fn = chk_mknode(c, EVE_N_NAME, a->v[next]->pos);
        eve_node_t **args = chk_alloc(c, sizeof *args);
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
        chk_err(c, chk_start_pos(a->v[next]), "%s: %zu argument%s after the format, which has %zu conversion%s", what,
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

/* A library module's or type's function, `text.find(...)`,
 * `tcp_socket.listen(...)`: os is the module's or the type's symbol. */
static const eve_ty_t *call_static(chk_t *c, eve_node_t *n, eve_sym_t *os)
{
    eve_node_t *callee = n->u.call.callee;
    eve_node_t *obj = callee->u.member.obj;
    const char *mname = callee->u.member.name;
    char name[EVE_MAX_IDENT * 2 + 2];
    obj->sym = os;
    eve_class_t *cls = os->kind == EVE_SYM_MODULE ? chk_lib_class(c, os->module) : os->cls;
    eve_member_t *m = chk_find_member(c, cls, mname, false);
    snprintf(name, sizeof name, "%s.%s", obj->u.name.name, mname);
    if (!m || (m->kind != EVE_MEM_STATIC)) {
        chk_err(c, callee->pos, "%s '%s' has no function '%s'", os->kind == EVE_SYM_MODULE ? "module" : "type",
            obj->u.name.name, mname);
        for (size_t i = 0; i < n->u.call.args.n; i++)
            chk_value(c, n->u.call.args.v[i], A_READ, NULL);
        return c->t_err;
    }
    /* tcp_socket.listen(8080), the paper's: a port on every IPv4 address */
    eve_node_t *port = n->u.call.args.n == 1 ? n->u.call.args.v[0] : NULL;
    if (cls && cls->lib && strcmp(cls->name, "tcp_socket") == 0 && strcmp(mname, "listen") == 0 && port &&
        port->kind == EVE_N_INT) {
        char addr[32] = "";
        int k = 0;
        if (port->u.int_.value > 65535) /* one error: the address is then "" */
            chk_err(c, port->pos, "port %llu is not from 0 to 65535", (unsigned long long)port->u.int_.value);
        else
            k = snprintf(addr, sizeof addr, "0.0.0.0:%u", (unsigned)port->u.int_.value);
        eve_node_t *sn = mkstring(c, port->pos, addr, (size_t)k);
        if (sn)
            n->u.call.args.v[0] = sn;
    }
    check_args(c, n, name, m->ty, NULL, NULL);
    return m->ty->ret;
}

/* A method of an object, `obj.m(...)`: the receiver's access waits
 * for the method, whose permission list says how it uses the receiver. */
static const eve_ty_t *call_method(chk_t *c, eve_node_t *n)
{
    eve_node_t *callee = n->u.call.callee;
    eve_node_t *obj = callee->u.member.obj;
    const char *mname = callee->u.member.name;
    pending_t saved = c->pending;
    c->pending.set = false;
    const eve_ty_t *rt = chk_value(c, obj, A_DEFER, NULL);
    pending_t mine = c->pending;
    c->pending = saved;
    if (chk_is_err(rt)) {
        for (size_t i = 0; i < n->u.call.args.n; i++)
            chk_value(c, n->u.call.args.v[i], A_READ, NULL);
        return c->t_err;
    }
    eve_class_t *cls = chk_class_of(c, rt);
    eve_member_t *m = chk_find_member(c, cls, mname, false);
    if (m && m->kind == EVE_MEM_FIELD && m->ty->kind == EVE_TY_FUNC) {
        m = NULL; /* a lambda in a field: not supported as a method */
    }
    if (!m || m->kind != EVE_MEM_METHOD) {
        char buf[96];
        chk_err(c, callee->pos, "%s has no method '%s'", chk_tn(rt, buf), mname);
        for (size_t i = 0; i < n->u.call.args.n; i++)
            chk_value(c, n->u.call.args.v[i], A_READ, NULL);
        return c->t_err;
    }
    if (!m->decl && cls && cls->lib && strcmp(cls->name, "stream") == 0 && strcmp(mname, "write") == 0 &&
        n->u.call.args.n >= 2 && !expand_format(c, n, "write")) {
        for (size_t i = 1; i < n->u.call.args.n; i++)
            chk_value(c, n->u.call.args.v[i], A_READ, NULL);
        return c->t_err;
    }
    int mode = m->decl ? chk_self_mode(m->fn) : m->mut ? A_WRITE : A_READ;
    if (mine.set) {
        saved = c->pending;
        c->pending = mine;
        chk_flush_pending(c, mode, NULL);
        c->pending = saved;
    }
    if (m->fn)
        check_reqs(c, chk_start_pos(n), m->fn);
    check_args(c, n, mname, m->ty, m->fn, rt);
    return chk_subst(c, m->ty->ret, rt);
}

static const eve_ty_t *call_value(chk_t *c, eve_node_t *n)
{
    eve_node_t *callee = n->u.call.callee;
    if (callee->kind == EVE_N_NAME && n->u.call.args.n == 0) {
        eve_sym_t *s = chk_lookup(c, callee->u.name.name);
        if (s && s->kind == EVE_SYM_VAR && s->accepts) {
            /* c() on a connection: accepting it gives its socket, which our
             * runtime accepted before the handler ran: the value is c's */
            *n = *callee;
            return name_value(c, n, A_READ, NULL);
        }
    }
    if (callee->kind == EVE_N_NAME) {
        const char *fname = callee->u.name.name;
        eve_sym_t *s = chk_lookup(c, fname);
        if (c->cls && (!s || s->depth <= 1)) {
            eve_member_t *m = chk_find_member(c, c->cls, fname, false);
            eve_sym_t *self = chk_lookup(c, "self");
            if (m && self && m->kind == EVE_MEM_METHOD) {
                /* a method of self, called by its bare name */
                callee->sym = self;
                chk_check_access(c, callee->pos, self, "self", chk_self_mode(m->fn), m->name);
                if (m->fn)
                    check_reqs(c, chk_start_pos(n), m->fn);
                check_args(c, n, fname, m->ty, m->fn, NULL);
                return m->ty->ret;
            }
        }
        if (s && s->kind == EVE_SYM_FUNC) {
            callee->sym = s;
            if (s->fn)
                check_reqs(c, chk_start_pos(n), s->fn);
            check_args(c, n, fname, s->ty, s->fn, NULL);
            return s->ty->ret;
        }
        if (s && s->kind == EVE_SYM_CLASS) {
            chk_err(c, callee->pos, "'%s' is a type: declare a variable of it to make one (x : %s)", fname, fname);
            for (size_t i = 0; i < n->u.call.args.n; i++)
                chk_value(c, n->u.call.args.v[i], A_READ, NULL);
            return c->t_err;
        }
    } else if (callee->kind == EVE_N_MEMBER) {
        eve_node_t *obj = callee->u.member.obj;
        eve_sym_t *os = obj->kind == EVE_N_NAME ? chk_lookup(c, obj->u.name.name) : NULL;
        bool field_first = c->cls && obj->kind == EVE_N_NAME && (!os || os->depth <= 1) &&
                           chk_find_member(c, c->cls, obj->u.name.name, false);
        if (os && !field_first && (os->kind == EVE_SYM_MODULE || os->kind == EVE_SYM_CLASS)) {
            return call_static(c, n, os);
        }
        return call_method(c, n);
    }
    /* a lambda value */
    const eve_ty_t *ft = chk_value(c, callee, A_READ, NULL);
    if (chk_is_err(ft)) {
        for (size_t i = 0; i < n->u.call.args.n; i++)
            chk_value(c, n->u.call.args.v[i], A_READ, NULL);
        return c->t_err;
    }
    if (ft->kind != EVE_TY_FUNC) {
        char buf[96];
        chk_err(c, chk_start_pos(callee), "cannot call a value of type %s", chk_tn(ft, buf));
        for (size_t i = 0; i < n->u.call.args.n; i++)
            chk_value(c, n->u.call.args.v[i], A_READ, NULL);
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
const eve_ty_t *chk_binop(chk_t *c, eve_pos_t pos, eve_tok_kind_t op, const eve_ty_t *l, const eve_ty_t *r)
{
    if (chk_is_err(l) || chk_is_err(r))
        return (op == EVE_T_EQ || op == EVE_T_NE || op == EVE_T_LT || op == EVE_T_LE || op == EVE_T_GT ||
                op == EVE_T_GE || op == EVE_T_ANDAND || op == EVE_T_OROR)
                   ? c->t_bool
                   : c->t_err;
    char b1[96], b2[96];
    switch (op) {
    case EVE_T_ANDAND:
    case EVE_T_OROR:
        if (l->kind != EVE_TY_BOOL || r->kind != EVE_TY_BOOL) {
            chk_err(c, pos, "%s needs bool operands, not %s and %s", op_name(op), chk_tn(l, b1), chk_tn(r, b2));
        }
        return c->t_bool;
    case EVE_T_EQ:
    case EVE_T_NE:
        if (!chk_ty_eq(l, r))
            chk_err(c, pos, "cannot compare %s with %s", chk_tn(l, b1), chk_tn(r, b2));
        else if (l->kind == EVE_TY_VOID || l->kind == EVE_TY_FUNC)
            chk_err(c, pos, "cannot compare values of type %s", chk_tn(l, b1));
        return c->t_bool;
    case EVE_T_LT: case EVE_T_LE: case EVE_T_GT: case EVE_T_GE:
        if (!chk_ty_eq(l, r))
            chk_err(c, pos, "cannot compare %s with %s", chk_tn(l, b1), chk_tn(r, b2));
        else if (!numeric(l) && l->kind != EVE_TY_CHAR && l->kind != EVE_TY_STRING)
            chk_err(c, pos, "%s orders numbers, chars and strings, not %s", op_name(op), chk_tn(l, b1));
        return c->t_bool;
    case EVE_T_PLUS: case EVE_T_PLUS_ASSIGN:
        if (l->kind == EVE_TY_STRING && r->kind == EVE_TY_STRING)
            return c->t_string;
        /* fall through */
    case EVE_T_MINUS: case EVE_T_STAR: case EVE_T_SLASH:
    case EVE_T_MINUS_ASSIGN: case EVE_T_STAR_ASSIGN: case EVE_T_SLASH_ASSIGN:
        if (!numeric(l) || !numeric(r)) {
            if (l->kind == EVE_TY_STRING || r->kind == EVE_TY_STRING)
                chk_err(c, pos, "%s needs two numbers or two strings, not %s and %s (to_string converts)",
                    op_name(op), chk_tn(l, b1), chk_tn(r, b2));
            else
                chk_err(c, pos, "%s needs numbers, not %s and %s", op_name(op), chk_tn(l, b1), chk_tn(r, b2));
            return c->t_err;
        }
        if (!chk_ty_eq(l, r)) {
            chk_err(c, pos, "the operands of %s have different types: %s and %s (to_int and to_float convert)",
                op_name(op), chk_tn(l, b1), chk_tn(r, b2));
            return c->t_err;
        }
        return l;
    default: /* % & | ^ << >> %= */
        if (l->kind != EVE_TY_INT || r->kind != EVE_TY_INT) {
            chk_err(c, pos, "%s needs int operands, not %s and %s", op_name(op), chk_tn(l, b1), chk_tn(r, b2));
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
    eve_ty_t *ft = chk_alloc(c, sizeof *ft);
    if (!ft)
        return c->t_err;
    ft->kind = EVE_TY_FUNC;
    ft->nparams = n->u.lambda.params.n;
    ft->params = chk_alloc(c, (ft->nparams ? ft->nparams : 1) * sizeof *ft->params);
    if (!ft->params)
        return c->t_err;
    const eve_ty_t *ret = n->u.lambda.ret ? chk_resolve_type(c, n->u.lambda.ret, true, false) : NULL;
    chk_open_scope(c);
    /* the list names outer variables: resolve it before the parameters hide them */
    c->ps = &ps;
    chk_open_perms(c, &ps, &n->u.lambda.perms, NULL);
    for (size_t i = 0; i < n->u.lambda.params.n; i++) {
        const eve_param_t *p = &n->u.lambda.params.v[i];
        const eve_ty_t *t = c->t_err;
        if (!p->type)
            chk_err(c, p->pos, "lambda parameter '%s' needs a type", p->name);
        else
            t = chk_resolve_param_type(c, p->type, false);
        ft->params[i] = t;
        eve_sym_t *s = chk_declare(c, p->name, EVE_SYM_VAR, p->pos);
        if (s) {
            s->ty = t;
            s->own = eve_ty_is_value(t) ? H_FULL : H_READ;
        }
    }
    if (n->u.lambda.expr) {
        ps.ret = c->t_void;
        const eve_ty_t *t = chk_value(c, n->u.lambda.expr, A_READ, NULL);
        if (ret && !chk_assignable(ret, t)) {
            char b1[96], b2[96];
            chk_err(c, chk_start_pos(n->u.lambda.expr), "the lambda returns %s but its body is %s", chk_tn(ret, b1), chk_tn(t, b2));
        }
        ft->ret = ret ? ret : t;
    } else {
        ps.ret = ret ? ret : c->t_void;
        ft->ret = ps.ret;
        chk_stmts(c, &n->u.lambda.body);
        if (ps.ret->kind != EVE_TY_VOID && !chk_is_err(ps.ret) && !chk_always_returns(c, &n->u.lambda.body))
            chk_err(c, n->pos, "the lambda returns %s but may reach its end without a return",
                chk_tn(ps.ret, (char[96]){0}));
    }
    chk_pop_grants(&ps);
    c->ps = outer;
    c->cls = cls;
    chk_close_scope(c);
    return ft;
}

const eve_ty_t *chk_value(chk_t *c, eve_node_t *n, int mode, const char *sub)
{
    char b1[96];
    switch (n->kind) {
    case EVE_N_INT:
        if (n->u.int_.value > (uint64_t)INT64_MAX)
            chk_err(c, n->pos, "%llu does not fit in an int", (unsigned long long)n->u.int_.value);
        return set_ty(n, c->t_int);
    case EVE_N_FLOAT: return set_ty(n, c->t_float);
    case EVE_N_CHAR: return set_ty(n, c->t_char);
    case EVE_N_STRING: return set_ty(n, c->t_string);
    case EVE_N_BOOL: return set_ty(n, c->t_bool);
    case EVE_N_NAME: return set_ty(n, name_value(c, n, mode, sub));
    case EVE_N_MEMBER: {
        const char *name = n->u.member.name;
        size_t len = strlen(name) + (sub ? strlen(sub) + 1 : 0) + 1;
        char *path = chk_alloc(c, len);
        if (path)
            snprintf(path, len, "%s%s%s", name, sub ? "." : "", sub ? sub : "");
        eve_node_t *obj = n->u.member.obj;
        if (obj->kind == EVE_N_NAME) {
            eve_sym_t *os = chk_lookup(c, obj->u.name.name);
            if (os && (os->kind == EVE_SYM_MODULE || os->kind == EVE_SYM_CLASS) &&
                !(c->cls && os->depth <= 1 && chk_find_member(c, c->cls, obj->u.name.name, false))) {
                chk_err(c, n->pos, "'%s.%s' is a function: call it", obj->u.name.name, name);
                return set_ty(n, c->t_err);
            }
        }
        const eve_ty_t *t = chk_value(c, obj, mode, path);
        if (chk_is_err(t))
            return set_ty(n, t);
        eve_member_t *m = t->kind == EVE_TY_CLASS ? chk_find_member(c, t->cls, name, false) : NULL;
        if (!m) {
            chk_err(c, n->pos, "%s has no field '%s'", chk_tn(t, b1), name);
            return set_ty(n, c->t_err);
        }
        if (m->kind != EVE_MEM_FIELD) {
            chk_err(c, n->pos, "method '%s' must be called", name);
            return set_ty(n, c->t_err);
        }
        return set_ty(n, m->ty);
    }
    case EVE_N_INDEX: {
        /* a permission on a container covers its elements */
        const eve_ty_t *t = chk_value(c, n->u.index.obj, mode, NULL);
        const eve_ty_t *it = chk_value(c, n->u.index.index, A_READ, NULL);
        if (chk_is_err(t))
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
            chk_err(c, n->pos, "cannot index %s", chk_tn(t, b1));
            return set_ty(n, c->t_err);
        }
        if (!chk_assignable(key, it)) {
            char b2[96];
            chk_err(c, chk_start_pos(n->u.index.index), "the index is %s, expected %s", chk_tn(it, b1), chk_tn(key, b2));
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
        t = chk_value(c, o, A_READ, NULL);
        if (chk_is_err(t))
            return set_ty(n, t);
        switch (n->u.unary.op) {
        case EVE_T_MINUS:
            if (!numeric(t))
                chk_err(c, n->pos, "'-' needs a number, not %s", chk_tn(t, b1));
            return set_ty(n, numeric(t) ? t : c->t_err);
        case EVE_T_BANG:
            if (t->kind != EVE_TY_BOOL)
                chk_err(c, n->pos, "'!' needs a bool, not %s", chk_tn(t, b1));
            return set_ty(n, c->t_bool);
        default:
            if (t->kind != EVE_TY_INT)
                chk_err(c, n->pos, "'~' needs an int, not %s", chk_tn(t, b1));
            return set_ty(n, c->t_int);
        }
    }
    case EVE_N_BINARY: {
        const eve_ty_t *l = chk_value(c, n->u.binary.lhs, A_READ, NULL);
        const eve_ty_t *r = chk_value(c, n->u.binary.rhs, A_READ, NULL);
        if ((l->kind == EVE_TY_VOID || r->kind == EVE_TY_VOID)) {
            chk_err(c, n->pos, "an operand of %s has no value (void)", op_name(n->u.binary.op));
            return set_ty(n, c->t_err);
        }
        return set_ty(n, chk_binop(c, n->pos, n->u.binary.op, l, r));
    }
    case EVE_N_LAMBDA:
        return set_ty(n, lambda_value(c, n));
    default:
        return set_ty(n, c->t_err);
    }
}
