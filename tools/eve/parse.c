/* yard-eve's parser: tokens to the syntax tree of eve.h, by recursive
 * descent, with precedence climbing for binary operators. The grammar is
 * docs/eve.md's.
 *
 * Errors: a syntax error is recorded and the parser gives up the statement
 * it is in (longjmp to the statement's recovery point), skips to the end of
 * that line (and the indented block under it, if any) and goes on with the
 * next statement, so one run reports the errors of several statements, one
 * each. Running past EVE_MAX_NESTING (statements, expressions and types
 * within each other, counted together), out of memory, or EVE_MAX_DIAGS
 * errors stops the parse. The tree's depth is bounded by that limit, so the
 * passes that walk it recursively (the dumper, later the checker) are too.
 *
 * Pure: no I/O, no global state; the tree is in the context's arena. */
#include "parse_int.h"

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

/* ---- plumbing --------------------------------------------------------------- */

_Noreturn void parse_fatal(parser_t *p)
{
    longjmp(p->fatal, 1);
}

void *parse_alloc(parser_t *p, size_t size)
{
    void *m = eve_arena_alloc(p->cx->arena, size);
    if (!m) {
        eve_error(p->cx, p->t[p->i].pos, "out of memory");
        parse_fatal(p);
    }
    return m;
}

/* Appends item (elem bytes) to the arena array *v of *n items and *cap room. */
void parse_push(parser_t *p, void *vp, size_t *n, size_t *cap, const void *item, size_t elem)
{
    void **v = vp;
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        void *nv = parse_alloc(p, c * elem);
        if (*n)
            memcpy(nv, *v, *n * elem);
        *v = nv;
        *cap = c;
    }
    memcpy((char *)*v + *n * elem, item, elem);
    (*n)++;
}

const eve_tok_t *parse_cur(const parser_t *p)
{
    return &p->t[p->i];
}

eve_tok_kind_t parse_kind(const parser_t *p)
{
    return p->t[p->i].kind;
}

eve_tok_kind_t parse_kind_at(const parser_t *p, size_t k)
{
    return p->i + k < p->n ? p->t[p->i + k].kind : EVE_T_EOF;
}

const eve_tok_t *parse_advance(parser_t *p)
{
    const eve_tok_t *t = &p->t[p->i];
    if (t->kind != EVE_T_EOF)
        p->i++;
    return t;
}

bool parse_accept(parser_t *p, eve_tok_kind_t k)
{
    if (parse_kind(p) != k)
        return false;
    parse_advance(p);
    return true;
}

/* The line already ended: the last token was the DEDENT closing a block
 * (a lambda's block body ends its statement). */
bool parse_line_ended(const parser_t *p)
{
    return p->i > 0 && p->t[p->i - 1].kind == EVE_T_DEDENT;
}

/* "identifier 'x'", "integer 42", "newline", "'('". */
static const char *describe(const eve_tok_t *t, char *buf, size_t size)
{
    switch (t->kind) {
    case EVE_T_IDENT:
        snprintf(buf, size, "identifier '%s'", t->text);
        return buf;
    case EVE_T_INT:
        snprintf(buf, size, "integer %llu", (unsigned long long)t->ival);
        return buf;
    case EVE_T_INDENT:
        return "an indented block";
    case EVE_T_DEDENT:
        return "the end of the block";
    default:
        return eve_tok_name(t->kind);
    }
}

#include <stdarg.h>

_Noreturn void parse_syntax_error_at(parser_t *p, eve_pos_t pos, const char *fmt, ...)
{
    char msg[EVE_MAX_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    eve_error(p->cx, pos, "%s", msg);
    if (p->cx->nerrors >= EVE_MAX_DIAGS || !p->recover)
        parse_fatal(p);
    longjmp(*p->recover, 1);
}

/* "expected X[ context], found Y" at the current token. */
_Noreturn void parse_expected(parser_t *p, const char *what, const char *context)
{
    char buf[EVE_MAX_IDENT + 32];
    parse_syntax_error_at(p, parse_cur(p)->pos, "expected %s%s%s, found %s", what, context ? " " : "",
                    context ? context : "", describe(parse_cur(p), buf, sizeof buf));
}

const eve_tok_t *parse_expect(parser_t *p, eve_tok_kind_t k, const char *context)
{
    if (parse_kind(p) != k)
        parse_expected(p, eve_tok_name(k), context);
    return parse_advance(p);
}

const char *parse_expect_ident(parser_t *p, const char *what, const char *context)
{
    if (parse_kind(p) != EVE_T_IDENT)
        parse_expected(p, what, context);
    return parse_advance(p)->text;
}

/* Lists whose names are checked for repeats stay short: no quadratic time. */
void parse_list_room(parser_t *p, size_t n, const char *what)
{
    if (n >= EVE_MAX_LIST)
        parse_syntax_error_at(p, parse_cur(p)->pos, "more than %d %s", EVE_MAX_LIST, what);
}

void parse_enter(parser_t *p, eve_pos_t pos)
{
    if (++p->depth > EVE_MAX_NESTING) {
        eve_error(p->cx, pos, "nesting too deep: more than %d blocks, expressions or types within each other",
                  EVE_MAX_NESTING);
        parse_fatal(p);
    }
}

void parse_leave(parser_t *p)
{
    p->depth--;
}

eve_node_t *parse_node(parser_t *p, eve_node_kind_t k, eve_pos_t pos)
{
    eve_node_t *n = parse_alloc(p, sizeof *n);
    n->kind = k;
    n->pos = pos;
    return n;
}

/* The end of a simple statement: a newline (unless a block just ended it). */
void parse_end_of_statement(parser_t *p, const char *context)
{
    if (parse_line_ended(p))
        return;
    if (parse_kind(p) == EVE_T_EOF)
        return;
    parse_expect(p, EVE_T_NEWLINE, context);
}

/* ---- error recovery ----------------------------------------------------------- */

/* Skips the rest of a failed statement: up to and including its line's
 * NEWLINE, then the indented block under it, if any; never past the DEDENT
 * that closes the enclosing block. Always moves past start. */
static void skip_statement(parser_t *p, size_t start)
{
    int bal = 0;
    while (parse_kind(p) != EVE_T_EOF) {
        eve_tok_kind_t k = parse_kind(p);
        if (k == EVE_T_INDENT) {
            bal++;
        } else if (k == EVE_T_DEDENT) {
            if (bal == 0)
                break;
            bal--;
            if (bal == 0) {
                parse_advance(p);
                if (parse_kind(p) != EVE_T_INDENT)
                    break;
                continue;
            }
        } else if (k == EVE_T_NEWLINE && bal == 0) {
            parse_advance(p);
            if (parse_kind(p) != EVE_T_INDENT)
                break;
            continue;
        }
        parse_advance(p);
    }
    if (p->i == start && parse_kind(p) != EVE_T_EOF && parse_kind(p) != EVE_T_DEDENT)
        parse_advance(p);
}

/* Runs fn with a recovery point: on a syntax error inside it, skips the
 * statement and returns NULL. */
eve_node_t *parse_try_parse(parser_t *p, stmt_fn fn, void *arg)
{
    jmp_buf here;
    jmp_buf *const saved = p->recover;
    const int depth = p->depth;
    const size_t start = p->i;
    eve_node_t *n = NULL;
    if (setjmp(here) == 0) {
        p->recover = &here;
        n = fn(p, arg);
    } else {
        p->depth = depth;
        skip_statement(p, start);
    }
    p->recover = saved;
    return n;
}

/* ---- declarations ------------------------------------------------------------------ */

static eve_node_t *parse_member(parser_t *p, void *arg)
{
    const char *cls = arg;
    const eve_tok_t *t = parse_cur(p);
    parse_enter(p, t->pos);
    eve_node_t *n;
    if (parse_starts_func(p)) {
        n = parse_func(p);
    } else if (parse_starts_decl(p)) {
        n = parse_var(p);
    } else if (t->kind == EVE_T_PASS) {
        parse_advance(p);
        n = parse_node(p, EVE_N_PASS, t->pos);
        parse_end_of_statement(p, NULL);
    } else {
        char what[EVE_MAX_IDENT + 64];
        snprintf(what, sizeof what, "a field (name: type) or a method (name: (params) type:) in class %s", cls);
        parse_expected(p, what, NULL);
    }
    parse_leave(p);
    return n;
}

static eve_node_t *parse_top(parser_t *p, void *arg)
{
    (void)arg;
    const eve_tok_t *t = parse_cur(p);
    if (t->kind == EVE_T_IMPORT) {
        parse_advance(p);
        eve_node_t *n = parse_node(p, EVE_N_IMPORT, t->pos);
        char path[EVE_MAX_IDENT + 1];
        size_t len = 0;
        for (;;) {
            const eve_tok_t *s = parse_cur(p);
            parse_expect_ident(p, "a module name", "after 'import'");
            if (len + s->len + 1 > sizeof path)
                parse_syntax_error_at(p, t->pos, "module path longer than %d bytes", EVE_MAX_IDENT);
            if (len)
                path[len++] = '.';
            memcpy(path + len, s->text, s->len);
            len += s->len;
            if (!parse_accept(p, EVE_T_DOT))
                break;
            if (parse_kind(p) == EVE_T_STAR) { /* import a.b.*: every name of a.b */
                parse_advance(p);
                memcpy(path + len, ".*", 2);
                len += 2;
                break;
            }
        }
        n->u.import.path = eve_arena_strndup(p->cx->arena, path, len);
        if (!n->u.import.path)
            parse_fatal(p);
        parse_end_of_statement(p, "after the import");
        return n;
    }
    if (t->kind == EVE_T_CLASS) {
        parse_advance(p);
        parse_enter(p, t->pos);
        eve_node_t *n = parse_node(p, EVE_N_CLASS, t->pos);
        n->u.class_.name = parse_expect_ident(p, "a class name", "after 'class'");
        parse_expect(p, EVE_T_COLON, "after the class name");
        parse_expect(p, EVE_T_NEWLINE, "after 'class NAME:' (members go on the lines below)");
        if (parse_kind(p) != EVE_T_INDENT)
            parse_expected(p, "an indented block of members", "in the class");
        parse_advance(p);
        parse_block_items(p, &n->u.class_.members, parse_member, (void *)n->u.class_.name);
        parse_leave(p);
        return n;
    }
    if (parse_starts_func(p))
        return parse_func(p);
    return parse_stmt(p, NULL);
}

static eve_node_t *parse_program(parser_t *p)
{
    eve_node_t *prog = parse_node(p, EVE_N_PROGRAM, (eve_pos_t){1, 1});
    size_t cap = 0;
    while (parse_kind(p) != EVE_T_EOF) {
        if (parse_kind(p) == EVE_T_DEDENT || parse_kind(p) == EVE_T_NEWLINE) {
            parse_advance(p); /* cannot happen with a well-formed token stream */
            continue;
        }
        eve_node_t *item = parse_try_parse(p, parse_top, NULL);
        if (item && !parse_attach_assigned_handler(p, &prog->u.program.items, item))
            parse_push(p, &prog->u.program.items.v, &prog->u.program.items.n, &cap, &item,
                 sizeof item);
    }
    return prog;
}

/* The fatal exit's landing point, in a function of its own: nothing here
 * lives across the longjmp. */
static bool parse_guarded(parser_t *p, eve_node_t **out)
{
    if (setjmp(p->fatal) != 0)
        return false;
    *out = parse_program(p);
    return true;
}

eve_node_t *eve_parse(eve_ctx_t *cx, const char *src, size_t len)
{
    size_t errors_before = cx->nerrors;
    eve_tok_t *toks;
    size_t ntoks;
    if (!eve_lex(cx, src, len, &toks, &ntoks))
        return NULL;
    parser_t p = {.cx = cx, .t = toks, .n = ntoks};
    eve_node_t *prog = NULL;
    if (!parse_guarded(&p, &prog) || cx->nerrors != errors_before)
        return NULL;
    return prog;
}
