/* yard-eve's code generator (gen.c): Eve types as C: the C type of a
 * value, its field in a cell or a box, its runtime kind, and its
 * retain, release and default value. */
#include "gen_int.h"

#include <inttypes.h>
#include <string.h>

/* ---- types -------------------------------------------------------------------------------------- */

bool gen_ty_is(const eve_ty_t *t, const char *libname)
{
    return t && t->kind == EVE_TY_CLASS && t->cls && t->cls->lib && strcmp(t->cls->name, libname) == 0;
}

bool gen_ty_user(const eve_ty_t *t)
{
    return t && t->kind == EVE_TY_CLASS && t->cls && !t->cls->lib;
}

/* Strings and objects: reference counted. */
bool gen_ty_ref(const eve_ty_t *t)
{
    return t && t->kind != EVE_TY_VOID && t->kind != EVE_TY_INT && t->kind != EVE_TY_BOOL &&
           t->kind != EVE_TY_FLOAT && t->kind != EVE_TY_CHAR && t->kind != EVE_TY_FUNC;
}

bool gen_ty_obj(const eve_ty_t *t)
{
    return gen_ty_ref(t) && t->kind != EVE_TY_STRING;
}

const char *gen_ctype(gen_t *g, const eve_ty_t *t)
{
    if (!t)
        return "void";
    switch (t->kind) {
    case EVE_TY_VOID: return "void";
    case EVE_TY_INT: return "int64_t";
    case EVE_TY_BOOL: return "bool";
    case EVE_TY_FLOAT: return "double";
    case EVE_TY_CHAR: return "uint8_t";
    case EVE_TY_STRING: return "eve_str_t *";
    case EVE_TY_VECTOR: return "eve_vec_t *";
    case EVE_TY_SET: return "eve_set_t *";
    case EVE_TY_MAP: return "eve_map_t *";
    case EVE_TY_EMITTER: return "eve_emitter_t *";
    case EVE_TY_CLASS:
        if (!t->cls->lib)
            return gen_fmt(g, "struct cls_%s *", t->cls->name);
        if (strcmp(t->cls->name, "tcp_socket") == 0) return "eve_socket_t *";
        if (strcmp(t->cls->name, "tcp_listener") == 0) return "eve_listener_t *";
        if (strcmp(t->cls->name, "read_buffer") == 0) return "eve_rbuf_t *";
        if (strcmp(t->cls->name, "write_buffer") == 0) return "eve_wbuf_t *";
        if (strcmp(t->cls->name, "timer") == 0) return "eve_timer_t *";
        if (strcmp(t->cls->name, "stream") == 0) return "eve_stream_t *";
        if (strcmp(t->cls->name, "signal_set") == 0) return "eve_signals_t *";
        return "void *";
    default:
        return "void *";
    }
}

/* The field of eve_val_t / eve_box_t.v a value of t lives in. */
const char *gen_vfield(const eve_ty_t *t)
{
    switch (t ? t->kind : EVE_TY_ERROR) {
    case EVE_TY_INT: return "i";
    case EVE_TY_FLOAT: return "f";
    case EVE_TY_BOOL: return "b";
    case EVE_TY_CHAR: return "c";
    default: return "p";
    }
}

static const char *kind_of(const eve_ty_t *t)
{
    switch (t ? t->kind : EVE_TY_ERROR) {
    case EVE_TY_INT: return "EVE_K_INT";
    case EVE_TY_FLOAT: return "EVE_K_FLOAT";
    case EVE_TY_BOOL: return "EVE_K_BOOL";
    case EVE_TY_CHAR: return "EVE_K_CHAR";
    case EVE_TY_STRING: return "EVE_K_STR";
    case EVE_TY_VOID: return "EVE_K_INT";
    default: return "EVE_K_OBJ";
    }
}

/* expr (of type t) as an eve_val_t */
char *gen_to_val(gen_t *g, const char *e, const eve_ty_t *t)
{
    switch (t ? t->kind : EVE_TY_ERROR) {
    case EVE_TY_INT: return gen_fmt(g, "eve_vi(%s)", e);
    case EVE_TY_FLOAT: return gen_fmt(g, "eve_vf(%s)", e);
    case EVE_TY_BOOL: return gen_fmt(g, "eve_vb(%s)", e);
    case EVE_TY_CHAR: return gen_fmt(g, "eve_vc(%s)", e);
    default: return gen_fmt(g, "eve_vp(%s)", e);
    }
}

/* an eve_val_t as a value of t */
char *gen_from_val(gen_t *g, const char *e, const eve_ty_t *t)
{
    if (gen_ty_ref(t))
        return gen_fmt(g, "((%s)(%s).p)", gen_ctype(g, t), e);
    return gen_fmt(g, "(%s).%s", e, gen_vfield(t));
}

/* A fresh object of type t (a declaration without an initializer). */
char *gen_fresh(gen_t *g, const eve_ty_t *t, eve_pos_t pos)
{
    switch (t->kind) {
    case EVE_TY_VECTOR: return gen_fmt(g, "eve_vec_new(%s)", kind_of(t->a));
    case EVE_TY_SET: return gen_fmt(g, "eve_set_new(%s)", kind_of(t->a));
    case EVE_TY_MAP: return gen_fmt(g, "eve_map_new(%s, %s)", kind_of(t->a), kind_of(t->b));
    case EVE_TY_EMITTER: return gen_fmt(g, "eve_emitter_new(%s)", kind_of(t->a));
    case EVE_TY_CLASS:
        if (!t->cls->lib)
            return gen_fmt(g, "new_%s(cx)", t->cls->name);
        if (strcmp(t->cls->name, "tcp_socket") == 0) return "eve_socket_new()";
        if (strcmp(t->cls->name, "read_buffer") == 0) return "eve_rbuf_new()";
        if (strcmp(t->cls->name, "write_buffer") == 0) return "eve_wbuf_new()";
        if (strcmp(t->cls->name, "timer") == 0) return "eve_timer_new()";
        gen_err(g, pos, "a %s cannot be made by declaring it%s", t->cls->name,
             strcmp(t->cls->name, "tcp_listener") == 0 ? ": tcp_socket.listen(address) makes one"
                                                       : ": the library's objects are stdout, stderr and signals");
        return "NULL";
    default:
        return "NULL";
    }
}

char *gen_zero(gen_t *g, const eve_ty_t *t)
{
    switch (t ? t->kind : EVE_TY_ERROR) {
    case EVE_TY_INT: return "0";
    case EVE_TY_FLOAT: return "0.0";
    case EVE_TY_BOOL: return "false";
    case EVE_TY_CHAR: return "0";
    case EVE_TY_STRING: return "(&eve_str_empty)";
    default: return gen_fmt(g, "((%s)NULL)", gen_ctype(g, t));
    }
}
