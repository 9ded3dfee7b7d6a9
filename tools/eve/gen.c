/* yard-eve's code generator: a checked Eve program to C11 on the Eve runtime
 * (docs/eve.md, "How code is generated").
 *
 * Two passes over the tree the checker annotated (node->type, node->sym):
 *
 * 1. Analysis. Every function, method, task, parallel for, callback and
 *    lambda is a *frame*: one C function. For each variable a frame uses
 *    but an outer frame declares, the frame *captures* it: a copy (a value
 *    the checker lets it read: implicit copies and =x), a reference to its
 *    cell (a value variable named in the permission list, x +x &x, whose
 *    permission lives in the cell), or the object (object-typed variables:
 *    the pointer, retained). A value variable captured by reference, or
 *    shared (T@), lives in a cell (eve_box_t: the value and its permission);
 *    on the heap when a frame that may outlive the declaring one captures it
 *    (a callback, a task outside finish), else on the declaring C function's
 *    stack (a task inside finish: the parent waits for it).
 *
 * 2. Emission. Each frame becomes a C function; closures get an env struct
 *    holding their captures. Expressions are C expressions; a string or
 *    object a call returns is owned by the statement (eve_tmp) and released
 *    after it (EVE_DRAIN); a store retains. Scopes release their locals on
 *    every way out (a cleanup stack: block ends, return, break, continue,
 *    and a finish's wait). Each statement carries a #line directive to the
 *    Eve source. */
#include "gen_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text buffers --------------------------------------------------------------------------- */

void gen_sb_putn(sb_t *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void gen_sb_puts(sb_t *b, const char *s)
{
    gen_sb_putn(b, s, strlen(s));
}

void gen_sb_vprintf(sb_t *b, const char *fmt, va_list ap)
{
    char small[512];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0) {
        b->oom = true;
    } else if ((size_t)n < sizeof small) {
        gen_sb_putn(b, small, (size_t)n);
    } else {
        char *big = malloc((size_t)n + 1);
        if (!big)
            b->oom = true;
        else {
            vsnprintf(big, (size_t)n + 1, fmt, ap2);
            gen_sb_putn(b, big, (size_t)n);
            free(big);
        }
    }
    va_end(ap2);
}

void gen_sb_printf(sb_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gen_sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void *gen_alloc(gen_t *g, size_t n)
{
    void *p = eve_arena_alloc(g->ar, n ? n : 1);
    if (!p)
        g->failed = true;
    return p;
}

char *gen_fmt(gen_t *g, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    sb_t b = {0};
    gen_sb_vprintf(&b, f, ap);
    va_end(ap);
    if (b.oom) {
        free(b.p);
        g->failed = true;
        return "";
    }
    char *s = eve_arena_strndup(g->ar, b.p ? b.p : "", b.n);
    free(b.p);
    if (!s) {
        g->failed = true;
        return "";
    }
    return s;
}

void gen_err(gen_t *g, eve_pos_t pos, const char *f, ...)
{
    char msg[EVE_MAX_MSG];
    va_list ap;
    va_start(ap, f);
    vsnprintf(msg, sizeof msg, f, ap);
    va_end(ap);
    eve_error(g->cx, pos, "%s", msg);
    g->failed = true;
}

static size_t hstr(const char *s)
{
    size_t h = 5381;
    while (*s)
        h = h * 33 + (unsigned char)*s++;
    return h;
}

vinfo_t *gen_vget(gen_t *g, const char *name, eve_pos_t pos)
{
    for (vinfo_t *v = g->vb[hstr(name) % NBUCKETS]; v; v = v->next)
        if (v->pos.line == pos.line && v->pos.col == pos.col && strcmp(v->name, name) == 0)
            return v;
    return NULL;
}

vinfo_t *gen_vsym(gen_t *g, const eve_sym_t *s)
{
    return s ? gen_vget(g, s->name, s->pos) : NULL;
}

static bool is_ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

vinfo_t *gen_vadd(gen_t *g, const char *name, eve_pos_t pos, const eve_ty_t *ty, frame_t *decl)
{
    vinfo_t *old = gen_vget(g, name, pos);
    if (old)
        return old;
    vinfo_t *v = gen_alloc(g, sizeof *v);
    if (!v)
        return NULL;
    v->name = name;
    v->pos = pos;
    v->ty = ty;
    v->decl = decl;
    /* name_LINE, and _cCOL when the same name is declared twice on a line */
    bool clash = false;
    size_t h = hstr(name) % NBUCKETS;
    for (vinfo_t *o = g->vb[h]; o; o = o->next)
        if (o->pos.line == pos.line && strcmp(o->name, name) == 0)
            clash = true;
    for (const char *c = name; *c; c++)
        if (!is_ident_char(*c))
            clash = true;
    v->cname = clash ? gen_fmt(g, "%s_%u_c%u", name, (unsigned)pos.line, (unsigned)pos.col)
                     : gen_fmt(g, "%s_%u", name, (unsigned)pos.line);
    v->next = g->vb[h];
    g->vb[h] = v;
    return v;
}

static size_t hptr(const void *p)
{
    return (size_t)((uintptr_t)p >> 4) * 2654435761u;
}

frame_t *gen_frame_of(gen_t *g, const eve_node_t *n)
{
    for (frame_t *f = g->fb[hptr(n) % NBUCKETS]; f; f = f->hnext)
        if (f->node == n)
            return f;
    return NULL;
}

frame_t *gen_frame_new(gen_t *g, int kind, frame_t *parent, const eve_node_t *n, const char *prefix)
{
    frame_t *f = gen_alloc(g, sizeof *f);
    if (!f)
        return NULL;
    f->kind = kind;
    f->parent = parent;
    f->node = n;
    f->cname = n ? gen_fmt(g, "%s_%u_%u", prefix, (unsigned)n->pos.line, (unsigned)n->pos.col) : gen_fmt(g, "%s", prefix);
    size_t h = hptr(n) % NBUCKETS;
    f->hnext = g->fb[h];
    g->fb[h] = f;
    return f;
}

/* ---- the program ------------------------------------------------------------------------------------ */

static void c_escape(sb_t *b, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\' || c == '?')
            gen_sb_printf(b, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            gen_sb_putn(b, (const char *)&c, 1);
        else
            gen_sb_printf(b, "\\%03o", c);
    }
}

/* Pass 1: the frames of the program's functions, methods and top-level
 * statements, and what they capture. */
static void analyse_program(gen_t *g, const eve_node_t *program)
{
    g->top = gen_frame_new(g, F_TOP, NULL, program, "eve_top");
    if (g->top)
        g->top->cname = "eve_top";
    const eve_list_t *items = &program->u.program.items;
    for (size_t i = 0; i < items->n && g->top; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind == EVE_N_FUNC)
            gen_an_func(g, it, NULL);
        else if (it->kind == EVE_N_CLASS) {
            eve_class_t *cls = it->sym ? it->sym->cls : NULL;
            for (size_t k = 0; k < it->u.class_.members.n; k++)
                if (it->u.class_.members.v[k]->kind == EVE_N_FUNC)
                    gen_an_func(g, it->u.class_.members.v[k], cls);
        } else if (it->kind != EVE_N_IMPORT)
            gen_an_stmt(g, g->top, it, 0);
    }
    /* globals of a value type live in cells (their permission beside them) */
    for (size_t i = 0; i < items->n; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind != EVE_N_VAR)
            continue;
        for (size_t k = 0; k < it->u.var.nnames; k++) {
            vinfo_t *v = gen_vget(g, it->u.var.names[k], it->pos);
            if (v && v->global && !gen_ty_obj(v->ty))
                v->cell = true;
        }
    }
}

/* Pass 2: the classes, then every function and method. */
static void emit_functions(gen_t *g, const eve_list_t *items)
{
    for (size_t i = 0; i < items->n; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind == EVE_N_CLASS)
            gen_class(g, it);
    }
    for (size_t i = 0; i < items->n; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind == EVE_N_FUNC)
            gen_func(g, it, NULL);
        else if (it->kind == EVE_N_CLASS) {
            eve_class_t *cls = it->sym ? it->sym->cls : NULL;
            for (size_t k = 0; k < it->u.class_.members.n; k++)
                if (it->u.class_.members.v[k]->kind == EVE_N_FUNC)
                    gen_func(g, it->u.class_.members.v[k], cls);
        }
    }
}

/* The top level as eve_top: the globals declared (into globals), made,
 * and released at the end (into fini), then the top-level statements. */
static void emit_top(gen_t *g, const eve_list_t *items, sb_t *top, sb_t *globals, sb_t *fini)
{
    saved_t sv;
    gen_save(g, &sv);
    sb_t top_decls = {0};
    g->f = g->top;
    g->out = top;
    g->decls = &top_decls;
    g->ind = 1;
    gen_sb_puts(top, "static void eve_top(eve_cx_t *cx)\n{\n" DECLS_MARK);
    gen_line(g, "size_t m_ = cx->ntmp;");
    for (size_t i = 0; i < items->n; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind != EVE_N_VAR)
            continue;
        for (size_t k = 0; k < it->u.var.nnames; k++) {
            vinfo_t *v = gen_vget(g, it->u.var.names[k], it->pos);
            if (!v || !v->global)
                continue;
            if (v->cell) {
                gen_sb_printf(globals, "static eve_box_t %s;\n", v->cname);
                if (v->ty && v->ty->kind == EVE_TY_STRING) {
                    gen_line(g, "%s.str = true; %s.v.p = &eve_str_empty;", v->cname, v->cname);
                    gen_sb_printf(fini, "    eve_release(%s.v.p);\n", v->cname);
                }
            } else {
                gen_sb_printf(globals, "static %s%s;\n", gen_ctype(g, v->ty), v->cname);
                gen_line(g, "%s = %s;", v->cname, gen_fresh(g, v->ty, it->pos));
                if (gen_ty_ref(v->ty))
                    gen_sb_printf(fini, "    eve_release(%s);\n", v->cname);
            }
        }
    }
    for (size_t i = 0; i < items->n && !g->failed; i++) {
        const eve_node_t *it = items->v[i];
        if (it->kind != EVE_N_FUNC && it->kind != EVE_N_CLASS && it->kind != EVE_N_IMPORT)
            gen_stmt(g, it);
    }
    gen_drain(g);
    gen_close_scope(g, 0);
    gen_sb_puts(top, "}\n");
    gen_place_decls(g, top, &top_decls);
    gen_restore(g, &sv);
}

/* The C file: the sections in order, then main (name: the program's name). */
static void assemble(gen_t *g, sb_t *out, const sb_t *globals, const sb_t *top, const sb_t *fini, const char *name)
{
    gen_sb_printf(out, "/* Generated by yard-eve from %s: do not edit (docs/eve.md, \"How code is generated\"). */\n",
                  g->source);
    gen_sb_puts(out, "#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <stdlib.h>\n\n"
                     "#include \"eve_gen.h\"\n\n");
    gen_sb_puts(out, "/* string literals */\n");
    gen_sb_puts(out, g->lits.p ? g->lits.p : "");
    gen_sb_puts(out, "\n/* classes and closures' environments */\n");
    gen_sb_puts(out, g->types.p ? g->types.p : "");
    gen_sb_puts(out, "\n/* globals */\n");
    gen_sb_puts(out, globals->p ? globals->p : "");
    gen_sb_puts(out, "\n/* functions */\n");
    gen_sb_puts(out, g->protos.p ? g->protos.p : "");
    gen_sb_puts(out, "\n");
    gen_sb_puts(out, g->funcs.p ? g->funcs.p : "");
    gen_sb_puts(out, top->p ? top->p : "");
    /* a program that ends by itself lets its globals go (the scheduler has
     * stopped: nothing else holds them now) */
    gen_sb_puts(out, "\nstatic void eve_globals_release(void)\n{\n");
    gen_sb_puts(out, fini->p ? fini->p : "");
    gen_sb_puts(out, "}\n");
    gen_sb_puts(out, "\nint main(int argc, char **argv)\n{\n    int rc_ = eve_main(argc, argv, \"");
    c_escape(out, name);
    gen_sb_puts(out, "\", eve_top);\n    eve_globals_release();\n    return rc_;\n}\n");
}

char *eve_gen_c(eve_ctx_t *cx, const eve_node_t *program, const char *source, const char *name, size_t *len)
{
    gen_t *g = calloc(1, sizeof *g);
    if (!g) {
        eve_error(cx, (eve_pos_t){1, 1}, "out of memory");
        return NULL;
    }
    g->cx = cx;
    g->ar = cx->arena;
    sb_t esc = {0};
    c_escape(&esc, source);
    g->source = gen_fmt(g, "%s", esc.p ? esc.p : "");
    free(esc.p);

    analyse_program(g, program);
    const eve_list_t *items = &program->u.program.items;
    sb_t globals = {0}, top = {0}, fini = {0};
    emit_functions(g, items);
    emit_top(g, items, &top, &globals, &fini);

    sb_t out = {0};
    assemble(g, &out, &globals, &top, &fini, name);
    bool oom = out.oom || g->lits.oom || g->types.oom || g->protos.oom || g->funcs.oom || globals.oom || top.oom ||
               fini.oom;
    free(fini.p);
    free(g->lits.p);
    free(g->types.p);
    free(g->protos.p);
    free(g->funcs.p);
    free(globals.p);
    free(top.p);
    bool failed = g->failed;
    free(g->ovr);
    free(g);
    if (oom && !failed)
        eve_error(cx, (eve_pos_t){1, 1}, "out of memory generating C");
    if (oom || failed) {
        free(out.p);
        return NULL;
    }
    *len = out.n;
    return out.p;
}
