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
#include "eve.h"

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    eve_ctx_t *cx;
    eve_tok_t *t;
    size_t n, i;
    int depth;
    jmp_buf *recover; /* the statement being parsed */
    jmp_buf fatal;    /* the whole parse */
} parser_t;

/* ---- plumbing --------------------------------------------------------------- */

static _Noreturn void fatal(parser_t *p)
{
    longjmp(p->fatal, 1);
}

static void *alloc(parser_t *p, size_t size)
{
    void *m = eve_arena_alloc(p->cx->arena, size);
    if (!m) {
        eve_error(p->cx, p->t[p->i].pos, "out of memory");
        fatal(p);
    }
    return m;
}

/* Appends item (elem bytes) to the arena array *v of *n items and *cap room. */
static void push(parser_t *p, void *vp, size_t *n, size_t *cap, const void *item, size_t elem)
{
    void **v = vp;
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 4;
        void *nv = alloc(p, c * elem);
        if (*n)
            memcpy(nv, *v, *n * elem);
        *v = nv;
        *cap = c;
    }
    memcpy((char *)*v + *n * elem, item, elem);
    (*n)++;
}

static const eve_tok_t *cur(const parser_t *p)
{
    return &p->t[p->i];
}

static eve_tok_kind_t kind(const parser_t *p)
{
    return p->t[p->i].kind;
}

static eve_tok_kind_t kind_at(const parser_t *p, size_t k)
{
    return p->i + k < p->n ? p->t[p->i + k].kind : EVE_T_EOF;
}

static const eve_tok_t *advance(parser_t *p)
{
    const eve_tok_t *t = &p->t[p->i];
    if (t->kind != EVE_T_EOF)
        p->i++;
    return t;
}

static bool accept(parser_t *p, eve_tok_kind_t k)
{
    if (kind(p) != k)
        return false;
    advance(p);
    return true;
}

/* The line already ended: the last token was the DEDENT closing a block
 * (a lambda's block body ends its statement). */
static bool line_ended(const parser_t *p)
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

static _Noreturn void syntax_error_at(parser_t *p, eve_pos_t pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#include <stdarg.h>

static _Noreturn void syntax_error_at(parser_t *p, eve_pos_t pos, const char *fmt, ...)
{
    char msg[EVE_MAX_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    eve_error(p->cx, pos, "%s", msg);
    if (p->cx->nerrors >= EVE_MAX_DIAGS || !p->recover)
        fatal(p);
    longjmp(*p->recover, 1);
}

/* "expected X[ context], found Y" at the current token. */
static _Noreturn void expected(parser_t *p, const char *what, const char *context)
{
    char buf[EVE_MAX_IDENT + 32];
    syntax_error_at(p, cur(p)->pos, "expected %s%s%s, found %s", what, context ? " " : "",
                    context ? context : "", describe(cur(p), buf, sizeof buf));
}

static const eve_tok_t *expect(parser_t *p, eve_tok_kind_t k, const char *context)
{
    if (kind(p) != k)
        expected(p, eve_tok_name(k), context);
    return advance(p);
}

static const char *expect_ident(parser_t *p, const char *what, const char *context)
{
    if (kind(p) != EVE_T_IDENT)
        expected(p, what, context);
    return advance(p)->text;
}

/* Lists whose names are checked for repeats stay short: no quadratic time. */
static void list_room(parser_t *p, size_t n, const char *what)
{
    if (n >= EVE_MAX_LIST)
        syntax_error_at(p, cur(p)->pos, "more than %d %s", EVE_MAX_LIST, what);
}

static void enter(parser_t *p, eve_pos_t pos)
{
    if (++p->depth > EVE_MAX_NESTING) {
        eve_error(p->cx, pos, "nesting too deep: more than %d blocks, expressions or types within each other",
                  EVE_MAX_NESTING);
        fatal(p);
    }
}

static void leave(parser_t *p)
{
    p->depth--;
}

static eve_node_t *node(parser_t *p, eve_node_kind_t k, eve_pos_t pos)
{
    eve_node_t *n = alloc(p, sizeof *n);
    n->kind = k;
    n->pos = pos;
    return n;
}

/* The end of a simple statement: a newline (unless a block just ended it). */
static void end_of_statement(parser_t *p, const char *context)
{
    if (line_ended(p))
        return;
    if (kind(p) == EVE_T_EOF)
        return;
    expect(p, EVE_T_NEWLINE, context);
}

/* ---- error recovery ----------------------------------------------------------- */

/* Skips the rest of a failed statement: up to and including its line's
 * NEWLINE, then the indented block under it, if any; never past the DEDENT
 * that closes the enclosing block. Always moves past start. */
static void skip_statement(parser_t *p, size_t start)
{
    int bal = 0;
    while (kind(p) != EVE_T_EOF) {
        eve_tok_kind_t k = kind(p);
        if (k == EVE_T_INDENT) {
            bal++;
        } else if (k == EVE_T_DEDENT) {
            if (bal == 0)
                break;
            bal--;
            if (bal == 0) {
                advance(p);
                if (kind(p) != EVE_T_INDENT)
                    break;
                continue;
            }
        } else if (k == EVE_T_NEWLINE && bal == 0) {
            advance(p);
            if (kind(p) != EVE_T_INDENT)
                break;
            continue;
        }
        advance(p);
    }
    if (p->i == start && kind(p) != EVE_T_EOF && kind(p) != EVE_T_DEDENT)
        advance(p);
}

typedef eve_node_t *(*stmt_fn)(parser_t *p, void *arg);

/* Runs fn with a recovery point: on a syntax error inside it, skips the
 * statement and returns NULL. */
static eve_node_t *try_parse(parser_t *p, stmt_fn fn, void *arg)
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

/* ---- types, parameters, permissions ---------------------------------------------- */

/* Takes a '>' for a generic's close, splitting '>>' and '>=' in two. */
static bool take_close_angle(parser_t *p)
{
    eve_tok_t *t = &p->t[p->i];
    if (t->kind == EVE_T_GT) {
        advance(p);
        return true;
    }
    if (t->kind == EVE_T_SHR || t->kind == EVE_T_GE) {
        t->kind = t->kind == EVE_T_SHR ? EVE_T_GT : EVE_T_ASSIGN;
        t->pos.col++;
        return true;
    }
    return false;
}

static eve_type_t *parse_type(parser_t *p, const char *context)
{
    const eve_tok_t *t = cur(p);
    if (t->kind != EVE_T_IDENT)
        expected(p, "a type", context);
    enter(p, t->pos);
    advance(p);
    eve_type_t *ty = alloc(p, sizeof *ty);
    ty->pos = t->pos;
    ty->name = t->text;
    if (accept(p, EVE_T_LT)) {
        size_t cap = 0;
        do {
            eve_type_t *a = parse_type(p, "as a type argument");
            push(p, &ty->args, &ty->nargs, &cap, &a, sizeof a);
        } while (accept(p, EVE_T_COMMA));
        if (!take_close_angle(p))
            expected(p, "',' or '>'", "in the type arguments");
    }
    if (accept(p, EVE_T_AT))
        ty->shared = true;
    if (accept(p, EVE_T_AMP))
        ty->ref = true;
    leave(p);
    return ty;
}

/* '(' [param {',' param}] ')'; param = name [':' type] (the type required
 * when typed). */
static void parse_params(parser_t *p, eve_params_t *out, bool typed, const char *context)
{
    size_t cap = 0;
    expect(p, EVE_T_LPAREN, context);
    if (accept(p, EVE_T_RPAREN))
        return;
    do {
        list_room(p, out->n, "parameters");
        eve_param_t prm = {.pos = cur(p)->pos};
        prm.name = expect_ident(p, "a parameter name", NULL);
        for (size_t k = 0; k < out->n; k++)
            if (strcmp(out->v[k].name, prm.name) == 0)
                syntax_error_at(p, prm.pos, "parameter '%s' appears twice", prm.name);
        if (typed || kind(p) == EVE_T_COLON) {
            expect(p, EVE_T_COLON, "after the parameter name");
            prm.type = parse_type(p, "for the parameter");
        }
        push(p, &out->v, &out->n, &cap, &prm, sizeof prm);
    } while (accept(p, EVE_T_COMMA));
    expect(p, EVE_T_RPAREN, "after the parameters");
}

/* '[' [perm {',' perm}] ']'; perm = ['+'|'-'|'='|'&'] name {'.' name}. */
static void parse_perms(parser_t *p, eve_perms_t *out)
{
    size_t cap = 0;
    expect(p, EVE_T_LBRACKET, NULL);
    out->has = true;
    if (accept(p, EVE_T_RBRACKET))
        return;
    for (;;) {
        list_room(p, out->n, "entries in a permission list");
        eve_perm_t pm = {.pos = cur(p)->pos, .kind = EVE_PERM_READ};
        switch (kind(p)) {
        case EVE_T_PLUS: pm.kind = EVE_PERM_FULL; advance(p); break;
        case EVE_T_MINUS: pm.kind = EVE_PERM_NULL; advance(p); break;
        case EVE_T_ASSIGN: pm.kind = EVE_CAPTURE_COPY; advance(p); break;
        case EVE_T_AMP: pm.kind = EVE_CAPTURE_REF; advance(p); break;
        default: break;
        }
        if (kind(p) != EVE_T_IDENT)
            expected(p, pm.kind == EVE_PERM_READ ? "a permission (x, +x, -x, =x or &x)"
                                                  : "a name after the permission's sign",
                     "in the permission list");
        /* A dotted path, joined into one string. */
        char path[EVE_MAX_IDENT + 3];
        size_t len = 0;
        for (;;) {
            const eve_tok_t *t = advance(p);
            if (len + t->len + 1 > sizeof path)
                syntax_error_at(p, pm.pos, "permission path longer than %d bytes", EVE_MAX_IDENT);
            if (len)
                path[len++] = '.';
            memcpy(path + len, t->text, t->len);
            len += t->len;
            if (kind(p) != EVE_T_DOT)
                break;
            advance(p);
            if (kind(p) != EVE_T_IDENT)
                expected(p, "a name after '.'", "in the permission list");
        }
        pm.name = eve_arena_strndup(p->cx->arena, path, len);
        if (!pm.name)
            fatal(p);
        for (size_t k = 0; k < out->n; k++)
            if (strcmp(out->v[k].name, pm.name) == 0)
                syntax_error_at(p, pm.pos, "'%s' appears twice in the permission list", pm.name);
        push(p, &out->v, &out->n, &cap, &pm, sizeof pm);
        if (accept(p, EVE_T_RBRACKET))
            return;
        if (kind(p) != EVE_T_COMMA)
            expected(p, "',' or ']'", "in the permission list");
        advance(p);
    }
}

/* ---- expressions ----------------------------------------------------------------- */

static eve_node_t *parse_expr(parser_t *p);
static void parse_body(parser_t *p, eve_list_t *out, const char *context);

static eve_node_t *parse_lambda(parser_t *p)
{
    eve_node_t *n = node(p, EVE_N_LAMBDA, cur(p)->pos);
    parse_perms(p, &n->u.lambda.perms);
    parse_params(p, &n->u.lambda.params, false, "after the lambda's permission list");
    if (kind(p) == EVE_T_IDENT)
        n->u.lambda.ret = parse_type(p, "for the lambda's result");
    expect(p, EVE_T_COLON, "before the lambda's body");
    if (kind(p) == EVE_T_NEWLINE)
        parse_body(p, &n->u.lambda.body, "as the lambda's body");
    else
        n->u.lambda.expr = parse_expr(p);
    return n;
}

static eve_node_t *parse_primary(parser_t *p)
{
    const eve_tok_t *t = cur(p);
    eve_node_t *n;
    switch (t->kind) {
    case EVE_T_INT:
        n = node(p, EVE_N_INT, t->pos);
        n->u.int_.value = t->ival;
        advance(p);
        return n;
    case EVE_T_FLOAT:
        n = node(p, EVE_N_FLOAT, t->pos);
        n->u.float_.text = t->text;
        advance(p);
        return n;
    case EVE_T_CHAR:
        n = node(p, EVE_N_CHAR, t->pos);
        n->u.char_.value = t->ival;
        advance(p);
        return n;
    case EVE_T_STRING:
        n = node(p, EVE_N_STRING, t->pos);
        n->u.string.bytes = t->text;
        n->u.string.len = t->len;
        advance(p);
        return n;
    case EVE_T_TRUE:
    case EVE_T_FALSE:
        n = node(p, EVE_N_BOOL, t->pos);
        n->u.bool_.value = t->kind == EVE_T_TRUE;
        advance(p);
        return n;
    case EVE_T_IDENT:
        n = node(p, EVE_N_NAME, t->pos);
        n->u.name.name = t->text;
        advance(p);
        return n;
    case EVE_T_LPAREN:
        advance(p);
        n = parse_expr(p);
        expect(p, EVE_T_RPAREN, "to close the parenthesis");
        return n;
    case EVE_T_LBRACKET:
        return parse_lambda(p);
    default:
        expected(p, "an expression", NULL);
    }
}

static eve_node_t *parse_postfix(parser_t *p)
{
    eve_node_t *n = parse_primary(p);
    int extra = 0;
    for (;;) {
        if (line_ended(p))
            break;
        const eve_tok_t *t = cur(p);
        eve_node_t *m;
        if (t->kind == EVE_T_DOT) {
            advance(p);
            m = node(p, EVE_N_MEMBER, t->pos);
            m->u.member.obj = n;
            m->u.member.name = expect_ident(p, "a member name", "after '.'");
        } else if (t->kind == EVE_T_LPAREN) {
            advance(p);
            m = node(p, EVE_N_CALL, t->pos);
            m->u.call.callee = n;
            size_t cap = 0;
            if (!accept(p, EVE_T_RPAREN)) {
                do {
                    eve_node_t *a = parse_expr(p);
                    push(p, &m->u.call.args.v, &m->u.call.args.n, &cap, &a, sizeof a);
                } while (accept(p, EVE_T_COMMA));
                expect(p, EVE_T_RPAREN, "after the arguments");
            }
        } else if (t->kind == EVE_T_LBRACKET) {
            advance(p);
            m = node(p, EVE_N_INDEX, t->pos);
            m->u.index.obj = n;
            m->u.index.index = parse_expr(p);
            expect(p, EVE_T_RBRACKET, "after the index");
        } else {
            break;
        }
        enter(p, t->pos);
        extra++;
        n = m;
    }
    p->depth -= extra;
    return n;
}

static eve_node_t *parse_unary(parser_t *p)
{
    const eve_tok_t *t = cur(p);
    if (t->kind == EVE_T_MINUS || t->kind == EVE_T_BANG || t->kind == EVE_T_TILDE) {
        enter(p, t->pos);
        advance(p);
        eve_node_t *n = node(p, EVE_N_UNARY, t->pos);
        n->u.unary.op = t->kind;
        n->u.unary.operand = parse_unary(p);
        leave(p);
        return n;
    }
    enter(p, t->pos);
    eve_node_t *n = parse_postfix(p);
    leave(p);
    return n;
}

static int precedence(eve_tok_kind_t k)
{
    switch (k) {
    case EVE_T_OROR: return 1;
    case EVE_T_ANDAND: return 2;
    case EVE_T_EQ: case EVE_T_NE: return 3;
    case EVE_T_LT: case EVE_T_LE: case EVE_T_GT: case EVE_T_GE: return 4;
    case EVE_T_PIPE: return 5;
    case EVE_T_CARET: return 6;
    case EVE_T_AMP: return 7;
    case EVE_T_SHL: case EVE_T_SHR: return 8;
    case EVE_T_PLUS: case EVE_T_MINUS: return 9;
    case EVE_T_STAR: case EVE_T_SLASH: case EVE_T_PERCENT: return 10;
    default: return 0;
    }
}

/* Precedence climbing; every binary operator is left-associative. */
static eve_node_t *parse_binary(parser_t *p, int min)
{
    eve_node_t *lhs = parse_unary(p);
    int extra = 0;
    for (;;) {
        if (line_ended(p))
            break;
        const eve_tok_t *t = cur(p);
        int prec = precedence(t->kind);
        if (prec == 0 || prec < min)
            break;
        advance(p);
        enter(p, t->pos);
        extra++;
        eve_node_t *rhs = parse_binary(p, prec + 1);
        eve_node_t *n = node(p, EVE_N_BINARY, t->pos);
        n->u.binary.op = t->kind;
        n->u.binary.lhs = lhs;
        n->u.binary.rhs = rhs;
        lhs = n;
    }
    p->depth -= extra;
    return lhs;
}

static eve_node_t *parse_expr(parser_t *p)
{
    return parse_binary(p, 1);
}

/* ---- statements ------------------------------------------------------------------- */

static eve_node_t *parse_stmt(parser_t *p, void *arg);

/* The statements of a block up to its DEDENT (consumed). */
static void append(parser_t *p, eve_list_t *l, eve_node_t *s);

/* `name = [perms] (params) [type]: block` right after a call with a handler
 * block, in the same block: the paper's Program 2 assigns its listener's
 * `error` handler so, at the indentation of the call rather than inside
 * its block. A lambda cannot be stored in a variable, so the statement can
 * mean nothing else: it is taken as one more handler of that call, with a
 * warning (docs/eve.md, "The paper's listings"). True when s was taken. */
static bool attach_assigned_handler(parser_t *p, eve_list_t *items, eve_node_t *s)
{
    if (s->kind != EVE_N_ASSIGN || s->u.assign.op != EVE_T_ASSIGN || s->u.assign.target->kind != EVE_N_NAME ||
        s->u.assign.value->kind != EVE_N_LAMBDA || items->n == 0)
        return false;
    eve_node_t *call = items->v[items->n - 1];
    if (call->kind != EVE_N_EXPR || call->u.expr.handlers.n == 0)
        return false;
    const eve_node_t *target = s->u.assign.target, *lam = s->u.assign.value;
    eve_node_t *h = node(p, EVE_N_HANDLER, target->pos);
    h->u.handler.name = target->u.name.name;
    h->u.handler.params = lam->u.lambda.params;
    h->u.handler.perms = lam->u.lambda.perms;
    h->u.handler.ret = lam->u.lambda.ret;
    h->u.handler.assigned = true;
    if (lam->u.lambda.expr) {
        eve_node_t *r = node(p, EVE_N_RETURN, lam->u.lambda.expr->pos);
        r->u.ret.value = lam->u.lambda.expr;
        append(p, &h->u.handler.body, r);
    } else {
        h->u.handler.body = lam->u.lambda.body;
    }
    eve_warning(p->cx, target->pos,
                "the handler '%s' is assigned after the handler block of the call on line %u: taken as one "
                "more handler of that call", h->u.handler.name, (unsigned)call->pos.line);
    append(p, &call->u.expr.handlers, h);
    return true;
}

static void parse_block_items(parser_t *p, eve_list_t *out, stmt_fn fn, void *arg)
{
    size_t cap = 0;
    while (kind(p) != EVE_T_DEDENT && kind(p) != EVE_T_EOF) {
        eve_node_t *s = try_parse(p, fn, arg);
        if (s && !attach_assigned_handler(p, out, s))
            push(p, &out->v, &out->n, &cap, &s, sizeof s);
    }
    accept(p, EVE_T_DEDENT);
}

/* After a ':': an indented block, or one statement on the same line. */
static void parse_body(parser_t *p, eve_list_t *out, const char *context)
{
    if (accept(p, EVE_T_NEWLINE)) {
        if (kind(p) != EVE_T_INDENT)
            expected(p, "an indented block", context);
        advance(p);
        parse_block_items(p, out, parse_stmt, NULL);
        return;
    }
    eve_node_t *s = parse_stmt(p, NULL);
    out->v = alloc(p, sizeof *out->v);
    out->v[0] = s;
    out->n = 1;
}

static eve_node_t *parse_if(parser_t *p)
{
    const eve_tok_t *t = advance(p); /* if */
    enter(p, t->pos);
    eve_node_t *n = node(p, EVE_N_IF, t->pos);
    n->u.if_.cond = parse_expr(p);
    expect(p, EVE_T_COLON, "after the condition of 'if'");
    parse_body(p, &n->u.if_.then, "after 'if'");
    if (kind(p) == EVE_T_ELSE) {
        advance(p);
        n->u.if_.has_else = true;
        if (kind(p) == EVE_T_IF) {
            eve_node_t *e = parse_if(p);
            n->u.if_.else_.v = alloc(p, sizeof *n->u.if_.else_.v);
            n->u.if_.else_.v[0] = e;
            n->u.if_.else_.n = 1;
        } else {
            expect(p, EVE_T_COLON, "after 'else'");
            parse_body(p, &n->u.if_.else_, "after 'else'");
        }
    }
    leave(p);
    return n;
}

/* '(' name [':' type] 'in' expr ')' */
static void parse_for_head(parser_t *p, eve_node_t *n)
{
    expect(p, EVE_T_LPAREN, "after 'for'");
    n->u.for_.var = expect_ident(p, "the loop variable", "in 'for'");
    if (accept(p, EVE_T_COLON))
        n->u.for_.type = parse_type(p, "for the loop variable");
    expect(p, EVE_T_IN, "in 'for'");
    n->u.for_.coll = parse_expr(p);
    expect(p, EVE_T_RPAREN, "after the collection of 'for'");
}

/* The assigned form of a handler, after "name =" (the paper's Program 2):
 * [perms] '(' params ')' [type] ':' body, the lambda's order. */
static void parse_assigned_handler(parser_t *p, eve_node_t *n)
{
    n->u.handler.assigned = true;
    if (kind(p) == EVE_T_LBRACKET)
        parse_perms(p, &n->u.handler.perms);
    parse_params(p, &n->u.handler.params, false, "in the handler's assignment (name = [perms] (params) type:)");
    if (kind(p) == EVE_T_IDENT)
        n->u.handler.ret = parse_type(p, "for the handler's result");
    expect(p, EVE_T_COLON, "after the handler's head");
    parse_body(p, &n->u.handler.body, "as the handler's body");
}

/* A call's handler block entry: name [params] [perms] ':' body, or
 * name '=' [perms] params [type] ':' body. */
static eve_node_t *parse_handler(parser_t *p, void *arg)
{
    (void)arg;
    const eve_tok_t *t = cur(p);
    if (t->kind != EVE_T_IDENT)
        expected(p, "a callback (name [(params)] [perms]: or name = [perms] (params) [type]:)",
                 "in the call's handler block");
    enter(p, t->pos);
    advance(p);
    eve_node_t *n = node(p, EVE_N_HANDLER, t->pos);
    n->u.handler.name = t->text;
    if (accept(p, EVE_T_ASSIGN)) {
        parse_assigned_handler(p, n);
        leave(p);
        return n;
    }
    if (kind(p) == EVE_T_LPAREN)
        parse_params(p, &n->u.handler.params, false, NULL);
    if (kind(p) == EVE_T_LBRACKET)
        parse_perms(p, &n->u.handler.perms);
    expect(p, EVE_T_COLON, "after the callback's head");
    parse_body(p, &n->u.handler.body, "as the callback's body");
    leave(p);
    return n;
}

/* Appends s to a list built with exact sizes (a handler's body). */
static void append(parser_t *p, eve_list_t *l, eve_node_t *s)
{
    eve_node_t **v = alloc(p, (l->n + 1) * sizeof *v);
    if (l->n)
        memcpy(v, l->v, l->n * sizeof *v);
    v[l->n++] = s;
    l->v = v;
}

/* The handlers of call (its block is open: INDENT taken) up to the DEDENT.
 * A 'return' at the block's own indentation, right after a handler, is
 * taken as that handler's last statement: the paper's Program 2 prints
 * `return true` so (docs/eve.md, "The paper's listings"), with a warning. */
static void parse_handler_block(parser_t *p, eve_node_t *call)
{
    eve_list_t *out = &call->u.expr.handlers;
    size_t cap = 0;
    while (kind(p) != EVE_T_DEDENT && kind(p) != EVE_T_EOF) {
        if (kind(p) == EVE_T_RETURN && out->n > 0) {
            eve_node_t *h = out->v[out->n - 1];
            eve_node_t *r = try_parse(p, parse_stmt, NULL);
            if (r) {
                eve_warning(p->cx, r->pos,
                            "'return' at the indentation of the handler block: taken as the last statement "
                            "of the handler '%s' above it", h->u.handler.name);
                append(p, &h->u.handler.body, r);
            }
            continue;
        }
        eve_node_t *s = try_parse(p, parse_handler, NULL);
        if (s)
            push(p, &out->v, &out->n, &cap, &s, sizeof s);
    }
    accept(p, EVE_T_DEDENT);
}

/* names ':' type ['=' expr] */
static eve_node_t *parse_var(parser_t *p)
{
    eve_node_t *n = node(p, EVE_N_VAR, cur(p)->pos);
    size_t cap = 0;
    for (;;) {
        list_room(p, n->u.var.nnames, "names in one declaration");
        const eve_tok_t *t = cur(p);
        const char *name = expect_ident(p, "a variable name", NULL);
        for (size_t k = 0; k < n->u.var.nnames; k++)
            if (strcmp(n->u.var.names[k], name) == 0)
                syntax_error_at(p, t->pos, "'%s' declared twice in one declaration", name);
        push(p, &n->u.var.names, &n->u.var.nnames, &cap, &name, sizeof name);
        if (!accept(p, EVE_T_COMMA))
            break;
    }
    expect(p, EVE_T_COLON, "after the variable names");
    if (kind(p) == EVE_T_LPAREN)
        syntax_error_at(p, cur(p)->pos,
                        "functions are declared at the top level or in a class, not in a block");
    n->u.var.type = parse_type(p, "in the declaration");
    if (accept(p, EVE_T_ASSIGN))
        n->u.var.init = parse_expr(p);
    end_of_statement(p, "after the declaration");
    return n;
}

/* name ':' '(' params ')' [type] [perms] ':' body */
static eve_node_t *parse_func(parser_t *p)
{
    const eve_tok_t *t = advance(p);
    eve_node_t *n = node(p, EVE_N_FUNC, t->pos);
    n->u.func.name = t->text;
    expect(p, EVE_T_COLON, NULL);
    parse_params(p, &n->u.func.params, true, NULL);
    if (kind(p) == EVE_T_IDENT)
        n->u.func.ret = parse_type(p, "for the result");
    if (kind(p) == EVE_T_LBRACKET)
        parse_perms(p, &n->u.func.perms);
    expect(p, EVE_T_COLON, "after the function's head");
    parse_body(p, &n->u.func.body, "as the function's body");
    return n;
}

static bool starts_decl(const parser_t *p)
{
    return kind(p) == EVE_T_IDENT &&
           (kind_at(p, 1) == EVE_T_COLON || kind_at(p, 1) == EVE_T_COMMA);
}

static bool starts_func(const parser_t *p)
{
    return kind(p) == EVE_T_IDENT && kind_at(p, 1) == EVE_T_COLON && kind_at(p, 2) == EVE_T_LPAREN;
}

static eve_node_t *parse_simple(parser_t *p)
{
    eve_pos_t pos = cur(p)->pos;
    eve_node_t *e = parse_expr(p);
    if (line_ended(p)) {
        eve_node_t *n = node(p, EVE_N_EXPR, pos);
        n->u.expr.expr = e;
        return n;
    }
    switch (kind(p)) {
    case EVE_T_ASSIGN:
    case EVE_T_PLUS_ASSIGN:
    case EVE_T_MINUS_ASSIGN:
    case EVE_T_STAR_ASSIGN:
    case EVE_T_SLASH_ASSIGN:
    case EVE_T_PERCENT_ASSIGN: {
        const eve_tok_t *op = advance(p);
        if (e->kind != EVE_N_NAME && e->kind != EVE_N_MEMBER && e->kind != EVE_N_INDEX)
            syntax_error_at(p, op->pos, "cannot assign to this expression: only to a name, a member or an element");
        eve_node_t *n = node(p, EVE_N_ASSIGN, op->pos);
        n->u.assign.op = op->kind;
        n->u.assign.target = e;
        n->u.assign.value = parse_expr(p);
        end_of_statement(p, "after the assignment");
        return n;
    }
    case EVE_T_COLON: {
        const eve_tok_t *c = advance(p);
        if (e->kind != EVE_N_CALL)
            syntax_error_at(p, c->pos, "only a call can be followed by a block of callbacks");
        eve_node_t *n = node(p, EVE_N_EXPR, pos);
        n->u.expr.expr = e;
        expect(p, EVE_T_NEWLINE, "after ':' (callbacks go on the lines below)");
        if (kind(p) != EVE_T_INDENT)
            expected(p, "an indented block of callbacks", NULL);
        advance(p);
        parse_handler_block(p, n);
        return n;
    }
    default: {
        eve_node_t *n = node(p, EVE_N_EXPR, pos);
        n->u.expr.expr = e;
        end_of_statement(p, "after the expression");
        return n;
    }
    }
}

/* Any statement that can appear in a block (arg unused). */
static eve_node_t *parse_stmt(parser_t *p, void *arg)
{
    (void)arg;
    const eve_tok_t *t = cur(p);
    eve_node_t *n;
    enter(p, t->pos);
    switch (t->kind) {
    case EVE_T_RETURN:
        advance(p);
        n = node(p, EVE_N_RETURN, t->pos);
        if (kind(p) != EVE_T_NEWLINE && kind(p) != EVE_T_EOF)
            n->u.ret.value = parse_expr(p);
        end_of_statement(p, "after 'return'");
        break;
    case EVE_T_IF:
        n = parse_if(p);
        break;
    case EVE_T_WHILE:
        advance(p);
        n = node(p, EVE_N_WHILE, t->pos);
        n->u.while_.cond = parse_expr(p);
        expect(p, EVE_T_COLON, "after the condition of 'while'");
        parse_body(p, &n->u.while_.body, "after 'while'");
        break;
    case EVE_T_FOR:
        advance(p);
        n = node(p, EVE_N_FOR, t->pos);
        parse_for_head(p, n);
        expect(p, EVE_T_COLON, "after the head of 'for'");
        parse_body(p, &n->u.for_.body, "after 'for'");
        break;
    case EVE_T_AT:
        advance(p);
        if (kind(p) == EVE_T_FOR) {
            advance(p);
            n = node(p, EVE_N_FOR, t->pos);
            n->u.for_.parallel = true;
            parse_for_head(p, n);
            if (kind(p) == EVE_T_LBRACKET)
                parse_perms(p, &n->u.for_.perms);
            expect(p, EVE_T_COLON, "after the head of the parallel 'for'");
            parse_body(p, &n->u.for_.body, "after the parallel 'for'");
        } else {
            n = node(p, EVE_N_TASK, t->pos);
            if (kind(p) == EVE_T_LBRACKET)
                parse_perms(p, &n->u.task.perms);
            expect(p, EVE_T_COLON, "after the task's permissions");
            parse_body(p, &n->u.task.body, "as the task's body");
        }
        break;
    case EVE_T_FINISH:
        advance(p);
        n = node(p, EVE_N_FINISH, t->pos);
        expect(p, EVE_T_COLON, "after 'finish'");
        parse_body(p, &n->u.finish.body, "after 'finish'");
        break;
    case EVE_T_ON:
        advance(p);
        n = node(p, EVE_N_ON, t->pos);
        n->u.on.obj = parse_postfix(p);
        n->u.on.event = expect_ident(p, "an event name", "after the object in 'on'");
        if (kind(p) == EVE_T_LPAREN)
            parse_params(p, &n->u.on.params, false, NULL);
        if (kind(p) == EVE_T_LBRACKET)
            parse_perms(p, &n->u.on.perms);
        expect(p, EVE_T_COLON, "after the head of 'on'");
        parse_body(p, &n->u.on.body, "as the callback's body");
        break;
    case EVE_T_PASS:
    case EVE_T_BREAK:
    case EVE_T_CONTINUE:
        advance(p);
        n = node(p, t->kind == EVE_T_PASS    ? EVE_N_PASS
                    : t->kind == EVE_T_BREAK ? EVE_N_BREAK
                                             : EVE_N_CONTINUE,
                 t->pos);
        end_of_statement(p, NULL);
        break;
    case EVE_T_IMPORT:
        syntax_error_at(p, t->pos, "'import' only at the top level");
    case EVE_T_CLASS:
        syntax_error_at(p, t->pos, "classes are declared at the top level");
    case EVE_T_INDENT:
        syntax_error_at(p, t->pos, "unexpected indent");
    default:
        if (starts_decl(p))
            n = parse_var(p);
        else
            n = parse_simple(p);
        break;
    }
    leave(p);
    return n;
}

/* ---- declarations ------------------------------------------------------------------ */

static eve_node_t *parse_member(parser_t *p, void *arg)
{
    const char *cls = arg;
    const eve_tok_t *t = cur(p);
    enter(p, t->pos);
    eve_node_t *n;
    if (starts_func(p)) {
        n = parse_func(p);
    } else if (starts_decl(p)) {
        n = parse_var(p);
    } else if (t->kind == EVE_T_PASS) {
        advance(p);
        n = node(p, EVE_N_PASS, t->pos);
        end_of_statement(p, NULL);
    } else {
        char what[EVE_MAX_IDENT + 64];
        snprintf(what, sizeof what, "a field (name: type) or a method (name: (params) type:) in class %s", cls);
        expected(p, what, NULL);
    }
    leave(p);
    return n;
}

static eve_node_t *parse_top(parser_t *p, void *arg)
{
    (void)arg;
    const eve_tok_t *t = cur(p);
    if (t->kind == EVE_T_IMPORT) {
        advance(p);
        eve_node_t *n = node(p, EVE_N_IMPORT, t->pos);
        char path[EVE_MAX_IDENT + 1];
        size_t len = 0;
        for (;;) {
            const eve_tok_t *s = cur(p);
            expect_ident(p, "a module name", "after 'import'");
            if (len + s->len + 1 > sizeof path)
                syntax_error_at(p, t->pos, "module path longer than %d bytes", EVE_MAX_IDENT);
            if (len)
                path[len++] = '.';
            memcpy(path + len, s->text, s->len);
            len += s->len;
            if (!accept(p, EVE_T_DOT))
                break;
            if (kind(p) == EVE_T_STAR) { /* import a.b.*: every name of a.b */
                advance(p);
                memcpy(path + len, ".*", 2);
                len += 2;
                break;
            }
        }
        n->u.import.path = eve_arena_strndup(p->cx->arena, path, len);
        if (!n->u.import.path)
            fatal(p);
        end_of_statement(p, "after the import");
        return n;
    }
    if (t->kind == EVE_T_CLASS) {
        advance(p);
        enter(p, t->pos);
        eve_node_t *n = node(p, EVE_N_CLASS, t->pos);
        n->u.class_.name = expect_ident(p, "a class name", "after 'class'");
        expect(p, EVE_T_COLON, "after the class name");
        expect(p, EVE_T_NEWLINE, "after 'class NAME:' (members go on the lines below)");
        if (kind(p) != EVE_T_INDENT)
            expected(p, "an indented block of members", "in the class");
        advance(p);
        parse_block_items(p, &n->u.class_.members, parse_member, (void *)n->u.class_.name);
        leave(p);
        return n;
    }
    if (starts_func(p))
        return parse_func(p);
    return parse_stmt(p, NULL);
}

static eve_node_t *parse_program(parser_t *p)
{
    eve_node_t *prog = node(p, EVE_N_PROGRAM, (eve_pos_t){1, 1});
    size_t cap = 0;
    while (kind(p) != EVE_T_EOF) {
        if (kind(p) == EVE_T_DEDENT || kind(p) == EVE_T_NEWLINE) {
            advance(p); /* cannot happen with a well-formed token stream */
            continue;
        }
        eve_node_t *item = try_parse(p, parse_top, NULL);
        if (item && !attach_assigned_handler(p, &prog->u.program.items, item))
            push(p, &prog->u.program.items.v, &prog->u.program.items.n, &cap, &item,
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
