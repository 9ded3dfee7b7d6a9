/* yard-eve's code generator (gen.c), pass 2: emission's helpers (lines,
 * the cleanup stack), variables read and written through their frames,
 * and expressions as C expressions, evaluated in the order written. */
#include "gen_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pass 2: emission: helpers ----------------------------------------------------------------- */

static void ind(gen_t *g)
{
    for (int i = 0; i < g->ind; i++)
        gen_sb_puts(g->out, "    ");
}

void gen_line(gen_t *g, const char *f, ...)
{
    ind(g);
    va_list ap;
    va_start(ap, f);
    gen_sb_vprintf(g->out, f, ap);
    va_end(ap);
    gen_sb_puts(g->out, "\n");
}

void gen_hash_line(gen_t *g, eve_pos_t pos)
{
    gen_sb_printf(g->out, "#line %u \"%s\"\n", (unsigned)pos.line, g->source);
}

char *gen_posstr(gen_t *g, eve_pos_t pos)
{
    return gen_fmt(g, "\"%s:%u:%u\"", g->source, (unsigned)pos.line, (unsigned)pos.col);
}

/* A full heap array arr of *cap elements of `size` bytes, twice as large
 * (*cap updated); NULL (and g failed, arr untouched) when out of memory. */
void *gen_grown(gen_t *g, void *arr, size_t *cap, size_t size)
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

void gen_push_cleanup(gen_t *g, char *code)
{
    if (g->ncl == g->capcl) {
        cleanup_t *c = gen_grown(g, g->cl, &g->capcl, sizeof *c);
        if (!c)
            return;
        g->cl = c;
    }
    g->cl[g->ncl++] = (cleanup_t){code};
}

/* Emits the cleanups above depth `to`, innermost first (without popping). */
void gen_run_cleanups(gen_t *g, size_t to)
{
    for (size_t i = g->ncl; i-- > to;)
        gen_line(g, "%s", g->cl[i].code);
}

/* Ends a scope opened at cleanup depth `to`: its cleanups, popped. */
void gen_close_scope(gen_t *g, size_t to)
{
    gen_run_cleanups(g, to);
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
char *gen_vaccess(gen_t *g, frame_t *f, vinfo_t *v)
{
    if (!v)
        return "0";
    if (v->global)
        return v->cell ? gen_fmt(g, "%s.v.%s", v->cname, gen_vfield(v->ty)) : v->cname;
    if (v->decl == f) {
        if (stored_in_env(f, v))
            return gen_fmt(g, "e->%s", v->cname);
        if (v->cell)
            return gen_fmt(g, v->box ? "%s->v.%s" : "%s.v.%s", v->cname, gen_vfield(v->ty));
        return v->cname;
    }
    const cap_t *c = cap_in(f, v);
    if (!c) {
        gen_err(g, v->pos, "internal error: '%s' is not captured where it is used", v->name);
        return "0";
    }
    if (c->mode == CAP_REF)
        return gen_fmt(g, "e->%s->v.%s", v->cname, gen_vfield(v->ty));
    return gen_fmt(g, "e->%s", v->cname);
}

/* A string or object assigned to v is typed void * in a cell: read it back typed. */
char *gen_vread(gen_t *g, frame_t *f, vinfo_t *v)
{
    char *a = gen_vaccess(g, f, v);
    if (v && v->cell && gen_ty_ref(v->ty))
        return gen_fmt(g, "((%s)%s)", gen_ctype(g, v->ty), a);
    return a;
}

/* A pointer to v's cell (eve_box_t *) in frame f. */
char *gen_vcell(gen_t *g, frame_t *f, vinfo_t *v)
{
    if (v->global)
        return gen_fmt(g, "(&%s)", v->cname);
    if (v->decl == f)
        return v->box ? v->cname : gen_fmt(g, "(&%s)", v->cname);
    const cap_t *c = cap_in(f, v);
    if (!c || c->mode != CAP_REF) {
        gen_err(g, v->pos, "internal error: no cell for '%s' here", v->name);
        return "NULL";
    }
    return gen_fmt(g, "e->%s", v->cname);
}

/* ---- expressions ------------------------------------------------------------------------------------ */

static char *new_temp(gen_t *g, const eve_ty_t *t);

static char *lit_string(gen_t *g, const char *bytes, size_t len)
{
    int id = g->nlit++;
    sb_t *b = &g->lits;
    gen_sb_printf(b, "static eve_str_t lit_%d = EVE_STR_LIT(\"", id);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)bytes[i];
        if (c == '"' || c == '\\' || c == '?')
            gen_sb_printf(b, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            gen_sb_putn(b, (const char *)&c, 1);
        else
            gen_sb_printf(b, "\\%03o", c);
    }
    gen_sb_printf(b, "\", %zu);\n", len);
    return gen_fmt(g, "(&lit_%d)", id);
}

const char *gen_bytes_kind(const eve_ty_t *t)
{
    if (t && t->kind == EVE_TY_STRING)
        return "str";
    if (gen_ty_is(t, "read_buffer"))
        return "rbuf";
    return "wbuf";
}

char *gen_tmp_owned(gen_t *g, const eve_ty_t *t, const char *owned)
{
    g->made_tmp = true;
    return gen_fmt(g, "((%s)eve_tmp(cx, %s))", gen_ctype(g, t), owned);
}

const char *gen_binop_c(eve_tok_kind_t op)
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
char *gen_binop(gen_t *g, eve_tok_kind_t op, const char *a, const char *b, const eve_ty_t *lt, eve_pos_t pos)
{
    const char *o = gen_binop_c(op);
    bool str = lt && lt->kind == EVE_TY_STRING;
    bool isint = lt && lt->kind == EVE_TY_INT;
    switch (op) {
    case EVE_T_EQ:
    case EVE_T_NE:
        if (str)
            return gen_fmt(g, "(%seve_str_eq(%s, %s))", op == EVE_T_NE ? "!" : "", a, b);
        if (gen_ty_ref(lt))
            return gen_fmt(g, "((const void *)(%s) %s (const void *)(%s))", a, o, b);
        return gen_fmt(g, "((%s) %s (%s))", a, o, b);
    case EVE_T_LT:
    case EVE_T_LE:
    case EVE_T_GT:
    case EVE_T_GE:
        if (str)
            return gen_fmt(g, "(eve_str_cmp(%s, %s) %s 0)", a, b, o);
        return gen_fmt(g, "((%s) %s (%s))", a, o, b);
    case EVE_T_PLUS:
    case EVE_T_PLUS_ASSIGN:
        if (str) {
            g->made_tmp = true;
            return gen_fmt(g, "eve_tmp_str(cx, eve_str_concat(%s, %s))", a, b);
        }
        return gen_fmt(g, "((%s) + (%s))", a, b);
    case EVE_T_SLASH:
    case EVE_T_SLASH_ASSIGN:
        if (isint)
            return gen_fmt(g, "eve_div(%s, %s, %s)", a, b, gen_posstr(g, pos));
        return gen_fmt(g, "((%s) / (%s))", a, b);
    case EVE_T_PERCENT:
    case EVE_T_PERCENT_ASSIGN:
        return gen_fmt(g, "eve_mod(%s, %s, %s)", a, b, gen_posstr(g, pos));
    case EVE_T_SHL:
        return gen_fmt(g, "eve_shl(%s, %s)", a, b);
    case EVE_T_SHR:
        return gen_fmt(g, "eve_shr(%s, %s)", a, b);
    default:
        return gen_fmt(g, "((%s) %s (%s))", a, o, b);
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
        gen_err(g, n->pos, "the library object '%s' has no code yet", s->name);
        return "NULL";
    }
    vinfo_t *v = gen_vsym(g, s);
    if (!v) {
        gen_err(g, n->pos, "internal error: no variable '%s'", n->u.name.name);
        return "0";
    }
    if (strcmp(s->name, n->u.name.name) != 0) /* a field of self, named bare */
        return gen_fmt(g, "%s->f_%s", gen_vread(g, g->f, v), n->u.name.name);
    return gen_vread(g, g->f, v);
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
        else if (c->kind == EVE_N_MEMBER && c->u.member.obj->type && !gen_ty_user(c->u.member.obj->type)) {
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
    char *name = gen_fmt(g, "t_%d", ++g->ntemp);
    if (g->decls)
        gen_sb_printf(g->decls, "    %s%s%s;\n", gen_ctype(g, t), gen_ty_ref(t) ? "" : " ", name);
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
char *gen_expr(gen_t *g, const eve_node_t *n)
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
        char *v = gen_expr(g, o);
        char *t = new_temp(g, o->type);
        gen_sb_printf(&pre, "%s = %s, ", t, v);
        if (g->novr == g->capovr) {
            struct ovr *a = gen_grown(g, g->ovr, &g->capovr, sizeof *a);
            if (!a)
                break;
            g->ovr = a;
        }
        g->ovr[g->novr++] = (struct ovr){o, t};
    }
    char *r = gx_raw(g, n);
    g->novr = base;
    char *out = gen_fmt(g, "(%s%s)", pre.p ? pre.p : "", r);
    free(pre.p);
    return out;
}

static char *gx_raw(gen_t *g, const eve_node_t *n)
{
    switch (n->kind) {
    case EVE_N_INT:
        if (n->u.int_.value > (uint64_t)INT64_MAX)
            return "INT64_MIN"; /* only as -9223372036854775808 (the checker) */
        return gen_fmt(g, "INT64_C(%" PRIu64 ")", n->u.int_.value);
    case EVE_N_FLOAT:
        return gen_fmt(g, "%s", n->u.float_.text);
    case EVE_N_CHAR:
        return gen_fmt(g, "((uint8_t)%u)", (unsigned)n->u.char_.value);
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
        char *x = gen_expr(g, o);
        switch (n->u.unary.op) {
        case EVE_T_MINUS:
            if (o->type && o->type->kind == EVE_TY_INT)
                return gen_fmt(g, "((int64_t)(0u - (uint64_t)(%s)))", x);
            return gen_fmt(g, "(-(%s))", x);
        case EVE_T_BANG: return gen_fmt(g, "(!(%s))", x);
        default: return gen_fmt(g, "(~(%s))", x);
        }
    }
    case EVE_N_BINARY: {
        eve_tok_kind_t op = n->u.binary.op;
        const eve_ty_t *lt = n->u.binary.lhs->type;
        char *a = gen_expr(g, n->u.binary.lhs);
        char *b = gen_expr(g, n->u.binary.rhs);
        if (lt && lt->kind == EVE_TY_INT && (op == EVE_T_PLUS || op == EVE_T_MINUS || op == EVE_T_STAR))
            /* wrapping, without undefined behaviour */
            return gen_fmt(g, "((int64_t)((uint64_t)(%s) %s (uint64_t)(%s)))", a, gen_binop_c(op), b);
        return gen_binop(g, op, a, b, lt, n->pos);
    }
    case EVE_N_CALL:
        return gen_call_value(g, n);
    case EVE_N_INDEX: {
        const eve_ty_t *ct = n->u.index.obj->type;
        char *c = gen_expr(g, n->u.index.obj);
        char *i = gen_expr(g, n->u.index.index);
        char *P = gen_posstr(g, n->pos);
        if (!ct)
            return "0";
        if (ct->kind == EVE_TY_VECTOR)
            return gen_from_val(g, gen_fmt(g, "eve_vec_get(%s, %s, %s)", c, i, P), ct->a);
        if (ct->kind == EVE_TY_MAP)
            return gen_from_val(g, gen_fmt(g, "eve_map_get(%s, %s, %s)", c, gen_to_val(g, i, ct->a), P), ct->b);
        if (ct->kind == EVE_TY_STRING)
            return gen_fmt(g, "eve_str_at(%s, %s, %s)", c, i, P);
        return gen_fmt(g, "eve_rbuf_at(%s, %s, %s)", c, i, P);
    }
    case EVE_N_MEMBER:
        return gen_fmt(g, "%s->f_%s", gen_expr(g, n->u.member.obj), n->u.member.name);
    case EVE_N_LAMBDA:
        gen_err(g, n->pos, "a lambda can only be called where it is made: (lambda)(arguments)");
        return "0";
    default:
        gen_err(g, n->pos, "internal error: an expression the generator does not know");
        return "0";
    }
}
