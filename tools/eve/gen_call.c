/* yard-eve's code generator (gen.c): calls as C: the arguments, a
 * function or method of the program, the library's functions and its
 * types' methods, and a lambda's call. */
#include "gen_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

char *gen_call_args(gen_t *g, const eve_node_t *call, bool lead_comma)
{
    sb_t b = {0};
    for (size_t i = 0; i < call->u.call.args.n; i++) {
        if (i || lead_comma)
            gen_sb_puts(&b, ", ");
        gen_sb_puts(&b, gen_expr(g, call->u.call.args.v[i]));
    }
    char *s = gen_fmt(g, "%s", b.p ? b.p : "");
    free(b.p);
    return s;
}

static char *user_call(gen_t *g, const char *cfn, const char *recv, const eve_node_t *call, const eve_ty_t *ret)
{
    char *c = gen_fmt(g, "%s(cx%s%s%s)", cfn, recv ? ", " : "", recv ? recv : "", gen_call_args(g, call, true));
    if (gen_ty_ref(ret))
        return gen_tmp_owned(g, ret, c);
    return c;
}

static char *lib_func(gen_t *g, const eve_node_t *n, const char *fname)
{
    const eve_list_t *a = &n->u.call.args;
    const eve_ty_t *at = a->n ? a->v[0]->type : NULL;
    char *x = a->n ? gen_expr(g, a->v[0]) : "";
    int k = at ? (int)at->kind : -1;
    if (strcmp(fname, "exit") == 0)
        return gen_fmt(g, "eve_exit(%s)", x);
    if (strcmp(fname, "clock_ns") == 0)
        return "eve_clock_ns()";
    if (strcmp(fname, "range") == 0)
        return gen_tmp_owned(g, n->type, gen_fmt(g, "eve_range(%s, %s)", x, gen_expr(g, a->v[1])));
    if (strcmp(fname, "to_string") == 0) {
        switch (k) {
        case EVE_TY_INT: return gen_tmp_owned(g, n->type, gen_fmt(g, "eve_str_of_int(%s)", x));
        case EVE_TY_FLOAT: return gen_tmp_owned(g, n->type, gen_fmt(g, "eve_str_of_float(%s)", x));
        case EVE_TY_BOOL: return gen_tmp_owned(g, n->type, gen_fmt(g, "eve_str_of_bool(%s)", x));
        case EVE_TY_CHAR: return gen_tmp_owned(g, n->type, gen_fmt(g, "eve_str_of_char(%s)", x));
        default: return x;
        }
    }
    if (strcmp(fname, "to_int") == 0) {
        switch (k) {
        case EVE_TY_STRING: return gen_fmt(g, "eve_str_to_int(%s, %s)", x, gen_posstr(g, n->pos));
        case EVE_TY_FLOAT: return gen_fmt(g, "eve_float_to_int(%s, %s)", x, gen_posstr(g, n->pos));
        case EVE_TY_INT: return x;
        default: return gen_fmt(g, "((int64_t)(%s))", x);
        }
    }
    if (strcmp(fname, "to_float") == 0) {
        switch (k) {
        case EVE_TY_STRING: return gen_fmt(g, "eve_str_to_float(%s, %s)", x, gen_posstr(g, n->pos));
        case EVE_TY_FLOAT: return x;
        default: return gen_fmt(g, "((double)(%s))", x);
        }
    }
    gen_err(g, n->pos, "the library function '%s' has no code yet", fname);
    return "0";
}

/* recv.mname(args) for a library type */
static char *lib_method(gen_t *g, const eve_node_t *n, const eve_ty_t *rt, const char *recv, const char *mname)
{
    const eve_list_t *a = &n->u.call.args;
    char *x = a->n > 0 ? gen_expr(g, a->v[0]) : "";
    char *y = a->n > 1 ? gen_expr(g, a->v[1]) : "";
    const eve_ty_t *xt = a->n > 0 ? a->v[0]->type : NULL;
    char *P = gen_posstr(g, n->pos);
#define IS(s) (strcmp(mname, s) == 0)
    switch (rt->kind) {
    case EVE_TY_STRING:
        if (IS("size")) return gen_fmt(g, "eve_str_size(%s)", recv);
        if (IS("substring")) return gen_tmp_owned(g, rt, gen_fmt(g, "eve_str_substring(%s, %s, %s, %s)", recv, x, y, P));
        if (IS("find")) return gen_fmt(g, "eve_str_find(%s, %s)", recv, x);
        break;
    case EVE_TY_VECTOR:
        if (IS("size")) return gen_fmt(g, "eve_vec_size(%s)", recv);
        if (IS("contains")) return gen_fmt(g, "eve_vec_contains(%s, %s)", recv, gen_to_val(g, x, rt->a));
        if (IS("push")) return gen_fmt(g, "eve_vec_push(%s, %s)", recv, gen_to_val(g, x, rt->a));
        if (IS("remove")) return gen_fmt(g, "eve_vec_remove(%s, %s)", recv, gen_to_val(g, x, rt->a));
        if (IS("clear")) return gen_fmt(g, "eve_vec_clear(%s)", recv);
        if (IS("pop")) {
            char *c = gen_fmt(g, "eve_vec_pop(%s, %s)", recv, P);
            if (gen_ty_ref(rt->a))
                return gen_tmp_owned(g, rt->a, gen_fmt(g, "%s.p", c));
            return gen_from_val(g, c, rt->a);
        }
        break;
    case EVE_TY_SET:
        if (IS("size")) return gen_fmt(g, "eve_set_size(%s)", recv);
        if (IS("contains")) return gen_fmt(g, "eve_set_contains(%s, %s)", recv, gen_to_val(g, x, rt->a));
        if (IS("add") || IS("insert")) return gen_fmt(g, "eve_set_add(%s, %s)", recv, gen_to_val(g, x, rt->a));
        if (IS("remove")) return gen_fmt(g, "eve_set_remove(%s, %s)", recv, gen_to_val(g, x, rt->a));
        if (IS("clear")) return gen_fmt(g, "eve_set_clear(%s)", recv);
        break;
    case EVE_TY_MAP:
        if (IS("size")) return gen_fmt(g, "eve_map_size(%s)", recv);
        if (IS("contains")) return gen_fmt(g, "eve_map_contains(%s, %s)", recv, gen_to_val(g, x, rt->a));
        if (IS("remove")) return gen_fmt(g, "eve_map_remove(%s, %s)", recv, gen_to_val(g, x, rt->a));
        if (IS("clear")) return gen_fmt(g, "eve_map_clear(%s)", recv);
        break;
    case EVE_TY_EMITTER:
        if (IS("emit"))
            return gen_fmt(g, "eve_emit(cx, %s, %s)", recv, a->n ? gen_to_val(g, x, rt->a) : "eve_vi(0)");
        break;
    case EVE_TY_CLASS: {
        const char *cn = rt->cls->name;
        if (strcmp(cn, "tcp_socket") == 0) {
            if (IS("write")) return gen_fmt(g, "eve_sock_write_%s(cx, %s, %s)", gen_bytes_kind(xt), recv, x);
            if (IS("close")) return gen_fmt(g, "eve_socket_close(cx, %s)", recv);
            if (IS("read_buffer")) return gen_tmp_owned(g, n->type, gen_fmt(g, "eve_sock_read_buffer(cx, %s, %s)", recv, P));
            if (IS("write_buffer")) return gen_fmt(g, "eve_sock_write_vec(cx, %s, %s, %s)", recv, x, P);
        } else if (strcmp(cn, "tcp_listener") == 0) {
            if (IS("close")) return gen_fmt(g, "eve_listener_close(cx, %s)", recv);
        } else if (strcmp(cn, "read_buffer") == 0) {
            if (IS("size")) return gen_fmt(g, "eve_rbuf_size(%s)", recv);
            if (IS("to_string")) return gen_tmp_owned(g, n->type, gen_fmt(g, "eve_rbuf_to_string(%s)", recv));
        } else if (strcmp(cn, "write_buffer") == 0) {
            if (IS("size")) return gen_fmt(g, "eve_wbuf_size(%s)", recv);
            if (IS("append")) return gen_fmt(g, "eve_wbuf_append_%s(%s, %s)", gen_bytes_kind(xt), recv, x);
            if (IS("append_byte")) return gen_fmt(g, "eve_wbuf_append_byte(%s, %s)", recv, x);
            if (IS("clear")) return gen_fmt(g, "eve_wbuf_clear(%s)", recv);
        } else if (strcmp(cn, "stream") == 0) {
            if (IS("write")) return gen_fmt(g, "eve_stream_write_%s(%s, %s)", gen_bytes_kind(xt), recv, x);
            if (IS("write_line")) return gen_fmt(g, "eve_stream_write_line(%s, %s)", recv, x);
        } else if (strcmp(cn, "timer") == 0) {
            if (IS("start")) return gen_fmt(g, "eve_timer_start(cx, %s, %s, %s)", recv, x, P);
            if (IS("once")) return gen_fmt(g, "eve_timer_once(cx, %s, %s, %s)", recv, x, P);
            if (IS("stop")) return gen_fmt(g, "eve_timer_stop(cx, %s)", recv);
        }
        break;
    }
    default:
        break;
    }
#undef IS
    gen_err(g, n->pos, "the library method '%s' has no code yet", mname);
    return "0";
}

char *gen_call_value(gen_t *g, const eve_node_t *n)
{
    const eve_node_t *callee = n->u.call.callee;
    if (callee->kind == EVE_N_NAME) {
        const eve_sym_t *s = callee->sym;
        if (s && s->kind == EVE_SYM_FUNC) {
            if (s->decl)
                return user_call(g, gen_fmt(g, "f_%s", s->name), NULL, n, n->type);
            return lib_func(g, n, s->name);
        }
        if (s && s->kind == EVE_SYM_VAR && strcmp(s->name, callee->u.name.name) != 0) {
            /* a method of self by its bare name */
            vinfo_t *self = gen_vsym(g, s);
            const eve_ty_t *st = self && self->ty ? self->ty : NULL;
            const char *cls = st && st->cls ? st->cls->name : "?";
            return user_call(g, gen_fmt(g, "m_%s_%s", cls, callee->u.name.name), gen_vread(g, g->f, self), n, n->type);
        }
        return gen_lambda_call(g, n);
    }
    if (callee->kind == EVE_N_MEMBER) {
        const eve_node_t *obj = callee->u.member.obj;
        const char *mname = callee->u.member.name;
        const eve_sym_t *os = obj->kind == EVE_N_NAME ? obj->sym : NULL;
        if (os && os->kind == EVE_SYM_MODULE) {
            const eve_list_t *a = &n->u.call.args;
            if (strcmp(mname, "find") == 0)
                return gen_fmt(g, "eve_str_find(%s, %s)", gen_expr(g, a->v[0]), gen_expr(g, a->v[1]));
            if (strcmp(mname, "trim") == 0)
                return gen_tmp_owned(g, n->type, gen_fmt(g, "eve_str_trim(%s)", gen_expr(g, a->v[0])));
            gen_err(g, n->pos, "the library function '%s.%s' has no code yet", os->name, mname);
            return "0";
        }
        if (os && os->kind == EVE_SYM_CLASS) {
            if (strcmp(mname, "listen") == 0)
                return gen_tmp_owned(g, n->type, gen_fmt(g, "eve_tcp_listen(cx, %s)", gen_expr(g, n->u.call.args.v[0])));
            gen_err(g, n->pos, "the library function '%s.%s' has no code yet", os->name, mname);
            return "0";
        }
        const eve_ty_t *rt = obj->type;
        char *recv = gen_expr(g, obj);
        if (gen_ty_user(rt))
            return user_call(g, gen_fmt(g, "m_%s_%s", rt->cls->name, mname), recv, n, n->type);
        return lib_method(g, n, rt, recv, mname);
    }
    return gen_lambda_call(g, n);
}
