/* yard-eve's checker (check.c): the library (stdlib.c's table) read into
 * classes, types and symbols: its types and signatures as written there. */
#include "check_int.h"

#include <string.h>

/* ---- the library --------------------------------------------------------------- */

const eve_ty_t *chk_basic_kind(chk_t *c, const char *name)
{
    if (strcmp(name, "int") == 0) return c->t_int;
    if (strcmp(name, "bool") == 0) return c->t_bool;
    if (strcmp(name, "float") == 0) return c->t_float;
    if (strcmp(name, "char") == 0) return c->t_char;
    if (strcmp(name, "string") == 0) return c->t_string;
    if (strcmp(name, "void") == 0) return c->t_void;
    return NULL;
}

int chk_container_kind(const char *name)
{
    if (strcmp(name, "vector") == 0) return EVE_TY_VECTOR;
    if (strcmp(name, "set") == 0) return EVE_TY_SET;
    if (strcmp(name, "map") == 0) return EVE_TY_MAP;
    if (strcmp(name, "emitter") == 0) return EVE_TY_EMITTER;
    return -1;
}

static void skip_ws(const char **s)
{
    while (**s == ' ')
        (*s)++;
}

/* A type in a library signature (trusted text: the table in stdlib.c). */
static const eve_ty_t *lib_type(chk_t *c, const char **s)
{
    skip_ws(s);
    char name[64];
    size_t n = 0;
    while ((**s >= 'a' && **s <= 'z') || (**s >= 'A' && **s <= 'Z') || **s == '_') {
        if (n + 1 < sizeof name)
            name[n++] = **s;
        (*s)++;
    }
    name[n] = 0;
    const eve_ty_t *args[2] = {NULL, NULL};
    size_t nargs = 0;
    skip_ws(s);
    if (**s == '<') {
        (*s)++;
        while (nargs < 2) {
            args[nargs++] = lib_type(c, s);
            skip_ws(s);
            if (**s != ',')
                break;
            (*s)++;
        }
        if (**s == '>')
            (*s)++;
    }
    const eve_ty_t *b = chk_basic_kind(c, name);
    if (b)
        return b;
    if (strcmp(name, "T") == 0 || strcmp(name, "K") == 0) return c->t_generic[0];
    if (strcmp(name, "V") == 0) return c->t_generic[1];
    if (strcmp(name, "basic") == 0) return c->t_basic;
    if (strcmp(name, "bytes") == 0) return c->t_bytes;
    int k = chk_container_kind(name);
    if (k >= 0)
        return chk_mkty(c, (eve_ty_kind_t)k, args[0] ? args[0] : c->t_err,
                    k == EVE_TY_MAP ? (args[1] ? args[1] : c->t_err) : NULL);
    eve_class_t *cls = chk_lib_class(c, name);
    if (!cls)
        return c->t_err; /* a typo in the table: test_eve_check catches it */
    eve_ty_t *t = chk_alloc(c, sizeof *t);
    if (!t)
        return c->t_err;
    t->kind = EVE_TY_CLASS;
    t->cls = cls;
    return t;
}

/* "(a: T, b: int) R" */
static const eve_ty_t *lib_sig(chk_t *c, const char *s)
{
    eve_ty_t *t = chk_alloc(c, sizeof *t);
    const eve_ty_t *params[8];
    size_t n = 0;
    if (!t)
        return c->t_err;
    t->kind = EVE_TY_FUNC;
    skip_ws(&s);
    if (*s == '(')
        s++;
    skip_ws(&s);
    while (*s && *s != ')') {
        while (*s && *s != ':' && *s != ')')
            s++; /* the parameter's name: documentation */
        if (*s != ':')
            break;
        s++;
        if (n < 8)
            params[n++] = lib_type(c, &s);
        skip_ws(&s);
        if (*s == ',')
            s++;
        skip_ws(&s);
    }
    if (*s == ')')
        s++;
    t->ret = lib_type(c, &s);
    t->params = chk_alloc(c, (n ? n : 1) * sizeof *t->params);
    if (!t->params)
        return c->t_err;
    for (size_t i = 0; i < n; i++)
        t->params[i] = params[i];
    t->nparams = n;
    return t;
}

const eve_ty_t *chk_class_type(chk_t *c, eve_class_t *cls)
{
    eve_ty_t *t = chk_alloc(c, sizeof *t);
    if (!t)
        return c->t_err;
    t->kind = EVE_TY_CLASS;
    t->cls = cls;
    return t;
}

/* Declares the library's types, objects and functions (depth 0). Modules
 * are declared by the imports. */
void chk_load_stdlib(chk_t *c)
{
    size_t ntypes = 0;
    for (size_t i = 0; i < eve_stdlib_count; i++)
        if (eve_stdlib[i].kind == EVE_LIB_TYPE)
            ntypes++;
    c->libcls = chk_alloc(c, (ntypes + 1) * sizeof *c->libcls);
    if (!c->libcls)
        return;
    /* the types first: signatures name them */
    for (size_t i = 0; i < eve_stdlib_count; i++) {
        const eve_lib_entry_t *e = &eve_stdlib[i];
        if (e->kind != EVE_LIB_TYPE)
            continue;
        eve_class_t *cls = chk_alloc(c, sizeof *cls);
        if (!cls)
            return;
        cls->name = e->name;
        cls->lib = true;
        c->libcls[c->nlibcls++] = cls;
        eve_sym_t *s = chk_declare(c, e->name, EVE_SYM_CLASS, (eve_pos_t){0, 0});
        if (!s)
            return;
        s->cls = cls;
        const eve_ty_t *b = chk_basic_kind(c, e->name);
        int k = chk_container_kind(e->name);
        if (b)
            c->kind_cls[b->kind] = cls;
        else if (k >= 0)
            c->kind_cls[k] = cls;
    }
    for (size_t i = 0; i < eve_stdlib_count; i++) {
        const eve_lib_entry_t *e = &eve_stdlib[i];
        switch (e->kind) {
        case EVE_LIB_GLOBAL: {
            eve_sym_t *s = chk_declare(c, e->name, EVE_SYM_LIBOBJ, (eve_pos_t){0, 0});
            const char *sig = e->sig;
            if (s)
                s->ty = lib_type(c, &sig);
            break;
        }
        case EVE_LIB_FUNC:
            if (!e->owner) {
                eve_sym_t *s = chk_declare(c, e->name, EVE_SYM_FUNC, (eve_pos_t){0, 0});
                if (s)
                    s->ty = lib_sig(c, e->sig);
                if (s && strcmp(e->name, "exit") == 0)
                    c->exit_sym = s;
                break;
            }
            /* a module's function: a static member of the module */
            /* fall through */
        case EVE_LIB_METHOD:
        case EVE_LIB_STATIC:
        case EVE_LIB_EVENT: {
            eve_class_t *cls = chk_lib_class(c, e->owner);
            if (!cls) {
                /* a module: a class of its own, made on first use */
                cls = chk_alloc(c, sizeof *cls);
                if (!cls)
                    return;
                cls->name = e->owner;
                cls->lib = true;
                eve_class_t **more = chk_alloc(c, (c->nlibcls + 1) * sizeof *more);
                if (!more)
                    return;
                memcpy(more, c->libcls, c->nlibcls * sizeof *more);
                more[c->nlibcls++] = cls;
                c->libcls = more;
            }
            eve_member_t *m = chk_alloc(c, sizeof *m);
            if (!m)
                return;
            m->name = e->name;
            m->mut = e->mut;
            if (e->kind == EVE_LIB_EVENT) {
                const char *sig = e->sig;
                m->kind = EVE_MEM_EVENT;
                m->ty = lib_type(c, &sig);
            } else {
                m->kind = e->kind == EVE_LIB_METHOD ? EVE_MEM_METHOD : EVE_MEM_STATIC;
                m->ty = lib_sig(c, e->sig);
            }
            chk_add_member(c, cls, m);
            break;
        }
        default:
            break;
        }
    }
}

bool chk_is_lib_module(const char *name)
{
    for (size_t i = 0; i < eve_stdlib_count; i++)
        if (eve_stdlib[i].kind == EVE_LIB_MODULE && strcmp(eve_stdlib[i].name, name) == 0)
            return true;
    return false;
}
