/* yard-eve's checker (check.c): its types, built in the context's arena
 * (equality, assignability, names in messages, a method's receiver
 * substituted), and the types written in the program resolved. */
#include "check_int.h"

#include <string.h>

/* ---- types ------------------------------------------------------------------------ */

const eve_ty_t *chk_mkty(chk_t *c, eve_ty_kind_t k, const eve_ty_t *a, const eve_ty_t *b)
{
    eve_ty_t *t = chk_alloc(c, sizeof *t);
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

size_t chk_put(char *buf, size_t size, size_t at, const char *s)
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
        return chk_put(buf, size, at, "...");
    switch (t->kind) {
    case EVE_TY_CLASS:
        return chk_put(buf, size, at, t->cls->name);
    case EVE_TY_GENERIC:
        return chk_put(buf, size, at, t->index ? "V" : "T");
    case EVE_TY_FUNC:
        at = chk_put(buf, size, at, "(");
        for (size_t i = 0; i < t->nparams; i++) {
            if (i)
                at = chk_put(buf, size, at, ", ");
            at = ty_str(t->params[i], buf, size, at, depth + 1);
        }
        at = chk_put(buf, size, at, ") ");
        return ty_str(t->ret, buf, size, at, depth + 1);
    case EVE_TY_VECTOR: case EVE_TY_SET: case EVE_TY_EMITTER: case EVE_TY_MAP:
        at = chk_put(buf, size, at, names[t->kind]);
        at = chk_put(buf, size, at, "<");
        at = ty_str(t->a, buf, size, at, depth + 1);
        if (t->kind == EVE_TY_MAP) {
            at = chk_put(buf, size, at, ", ");
            at = ty_str(t->b, buf, size, at, depth + 1);
        }
        return chk_put(buf, size, at, ">");
    default:
        return chk_put(buf, size, at, names[t->kind]);
    }
}

const char *eve_ty_name(const eve_ty_t *t, char *buf, size_t size)
{
    if (size)
        buf[0] = 0;
    ty_str(t, buf, size, 0, 0);
    return buf;
}

const char *chk_tn(const eve_ty_t *t, char *buf)
{
    return eve_ty_name(t, buf, 96);
}

bool chk_ty_eq(const eve_ty_t *x, const eve_ty_t *y)
{
    if (x == y)
        return true;
    if (x->kind != y->kind)
        return false;
    switch (x->kind) {
    case EVE_TY_VECTOR: case EVE_TY_SET: case EVE_TY_EMITTER:
        return chk_ty_eq(x->a, y->a);
    case EVE_TY_MAP:
        return chk_ty_eq(x->a, y->a) && chk_ty_eq(x->b, y->b);
    case EVE_TY_CLASS:
        return x->cls == y->cls;
    case EVE_TY_GENERIC:
        return x->index == y->index;
    case EVE_TY_FUNC:
        if (x->nparams != y->nparams || !chk_ty_eq(x->ret, y->ret))
            return false;
        for (size_t i = 0; i < x->nparams; i++)
            if (!chk_ty_eq(x->params[i], y->params[i]))
                return false;
        return true;
    default:
        return true;
    }
}

bool chk_is_err(const eve_ty_t *t)
{
    return t->kind == EVE_TY_ERROR;
}

/* May a value of type from go where type to is expected? */
bool chk_assignable(const eve_ty_t *to, const eve_ty_t *from)
{
    if (chk_is_err(to) || chk_is_err(from))
        return true;
    if (to->kind == EVE_TY_BASIC)
        return from->kind == EVE_TY_INT || from->kind == EVE_TY_BOOL || from->kind == EVE_TY_FLOAT ||
               from->kind == EVE_TY_CHAR || from->kind == EVE_TY_STRING;
    if (to->kind == EVE_TY_BYTES)
        return from->kind == EVE_TY_STRING ||
               (from->kind == EVE_TY_CLASS && from->cls->lib &&
                (strcmp(from->cls->name, "read_buffer") == 0 ||
                 strcmp(from->cls->name, "write_buffer") == 0));
    return chk_ty_eq(to, from);
}

/* T, K, V of the library's signatures, replaced by the receiver's arguments. */
const eve_ty_t *chk_subst(chk_t *c, const eve_ty_t *t, const eve_ty_t *recv)
{
    switch (t->kind) {
    case EVE_TY_GENERIC: {
        const eve_ty_t *r = t->index == 0 ? recv->a : recv->b;
        return r ? r : c->t_err;
    }
    case EVE_TY_VECTOR: case EVE_TY_SET: case EVE_TY_EMITTER:
        return chk_mkty(c, t->kind, chk_subst(c, t->a, recv), NULL);
    case EVE_TY_MAP:
        return chk_mkty(c, t->kind, chk_subst(c, t->a, recv), chk_subst(c, t->b, recv));
    default:
        return t;
    }
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
void chk_shared_element(chk_t *c, const eve_type_t *t, const eve_ty_t *r, const char *where)
{
    char b[96];
    if (!t->shared || chk_is_err(r))
        return;
    if (eve_ty_is_value(r))
        chk_err(c, t->pos, "'@' (shared) marks a variable or a parameter, not this type");
    else
        eve_warning(c->cx, t->pos, "'%s@' as %s: taken as %s (an object is reached by reference; a task's "
                    "permission on it is what its list names)", t->name, where, chk_tn(r, b));
}

const eve_ty_t *chk_resolve_type(chk_t *c, const eve_type_t *t, bool allow_void, bool allow_shared)
{
    if (!t)
        return c->t_err;
    bool ref_ok = c->allow_ref;
    c->allow_ref = false; /* not in type arguments */
    if (t->shared && !allow_shared)
        chk_err(c, t->pos, "'@' (shared) marks a variable or a parameter, not this type");
    if (t->ref && !ref_ok)
        chk_err(c, t->pos, "'&' (a reference) marks a parameter's type, not this type");
    const char *name = t->name;
    eve_sym_t *s = chk_lookup(c, name);
    for (size_t i = 0; !s && i < sizeof type_aliases / sizeof type_aliases[0]; i++)
        if (strcmp(name, type_aliases[i][0]) == 0) {
            name = type_aliases[i][1];
            s = chk_lookup(c, name);
        }
    if (!s) {
        chk_err(c, t->pos, "unknown type '%s'", t->name);
        return c->t_err;
    }
    if (s->kind != EVE_SYM_CLASS) {
        chk_err(c, t->pos, "'%s' is not a type", t->name);
        return c->t_err;
    }
    const eve_ty_t *b = s->cls->lib ? chk_basic_kind(c, name) : NULL;
    int k = s->cls->lib ? chk_container_kind(name) : -1;
    size_t want = k < 0 ? 0 : k == EVE_TY_MAP ? 2 : 1;
    if (t->nargs != want) {
        if (want == 0)
            chk_err(c, t->pos, "'%s' takes no type arguments", t->name);
        else
            chk_err(c, t->pos, "'%s' takes %zu type argument%s, %zu given", t->name, want,
                want == 1 ? "" : "s", t->nargs);
        return c->t_err;
    }
    if (b) {
        if (b->kind == EVE_TY_VOID && !allow_void) {
            chk_err(c, t->pos, "'void' is only a result type or an event's payload (emitter<void>)");
            return c->t_err;
        }
        return b;
    }
    if (k >= 0) {
        const eve_ty_t *a0 = chk_resolve_type(c, t->args[0], k == EVE_TY_EMITTER, true);
        chk_shared_element(c, t->args[0], a0, "a type argument");
        const eve_ty_t *a1 = want == 2 ? chk_resolve_type(c, t->args[1], false, true) : NULL;
        if (a1)
            chk_shared_element(c, t->args[1], a1, "a type argument");
        if (k == EVE_TY_MAP && !chk_is_err(a0) && !eve_ty_is_value(a0)) {
            char buf[96];
            chk_err(c, t->args[0]->pos, "a map's key must be a value type (int, bool, float, char, string), not %s",
                chk_tn(a0, buf));
        }
        if ((k == EVE_TY_SET) && !chk_is_err(a0) && !eve_ty_is_value(a0) && a0->kind != EVE_TY_CLASS) {
            char buf[96];
            chk_err(c, t->args[0]->pos, "a set holds values or objects, not %s", chk_tn(a0, buf));
        }
        return chk_mkty(c, (eve_ty_kind_t)k, a0, a1);
    }
    return chk_class_type(c, s->cls);
}

/* A parameter's type: T& may be written (a reference: for an object what a
 * parameter is anyway, for a value the caller's value, read only). */
const eve_ty_t *chk_resolve_param_type(chk_t *c, const eve_type_t *t, bool allow_shared)
{
    c->allow_ref = true;
    const eve_ty_t *r = chk_resolve_type(c, t, false, allow_shared);
    c->allow_ref = false;
    return r;
}
