/* yard-eve's parser (parse.c): statements and blocks: if, while, for,
 * finish, tasks, handlers and their blocks, declarations, assignments,
 * and the simple statements. */
#include "parse_int.h"

#include <string.h>

/* ---- statements ------------------------------------------------------------------- */

/* The statements of a block up to its DEDENT (consumed). */
static void append(parser_t *p, eve_list_t *l, eve_node_t *s);

/* `name = [perms] (params) [type]: block` right after a call with a handler
 * block, in the same block: the paper's Program 2 assigns its listener's
 * `error` handler so, at the indentation of the call rather than inside
 * its block. A lambda cannot be stored in a variable, so the statement can
 * mean nothing else: it is taken as one more handler of that call, with a
 * warning (docs/eve.md, "The paper's listings"). True when s was taken. */
bool parse_attach_assigned_handler(parser_t *p, eve_list_t *items, eve_node_t *s)
{
    if (s->kind != EVE_N_ASSIGN || s->u.assign.op != EVE_T_ASSIGN || s->u.assign.target->kind != EVE_N_NAME ||
        s->u.assign.value->kind != EVE_N_LAMBDA || items->n == 0)
        return false;
    eve_node_t *call = items->v[items->n - 1];
    if (call->kind != EVE_N_EXPR || call->u.expr.handlers.n == 0)
        return false;
    const eve_node_t *target = s->u.assign.target, *lam = s->u.assign.value;
    eve_node_t *h = parse_node(p, EVE_N_HANDLER, target->pos);
    h->u.handler.name = target->u.name.name;
    h->u.handler.params = lam->u.lambda.params;
    h->u.handler.perms = lam->u.lambda.perms;
    h->u.handler.ret = lam->u.lambda.ret;
    h->u.handler.assigned = true;
    if (lam->u.lambda.expr) {
        eve_node_t *r = parse_node(p, EVE_N_RETURN, lam->u.lambda.expr->pos);
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

void parse_block_items(parser_t *p, eve_list_t *out, stmt_fn fn, void *arg)
{
    size_t cap = 0;
    while (parse_kind(p) != EVE_T_DEDENT && parse_kind(p) != EVE_T_EOF) {
        eve_node_t *s = parse_try_parse(p, fn, arg);
        if (s && !parse_attach_assigned_handler(p, out, s))
            parse_push(p, &out->v, &out->n, &cap, &s, sizeof s);
    }
    parse_accept(p, EVE_T_DEDENT);
}

/* After a ':': an indented block, or one statement on the same line. */
void parse_body(parser_t *p, eve_list_t *out, const char *context)
{
    if (parse_accept(p, EVE_T_NEWLINE)) {
        if (parse_kind(p) != EVE_T_INDENT)
            parse_expected(p, "an indented block", context);
        parse_advance(p);
        parse_block_items(p, out, parse_stmt, NULL);
        return;
    }
    eve_node_t *s = parse_stmt(p, NULL);
    out->v = parse_alloc(p, sizeof *out->v);
    out->v[0] = s;
    out->n = 1;
}

static eve_node_t *parse_if(parser_t *p)
{
    const eve_tok_t *t = parse_advance(p); /* if */
    parse_enter(p, t->pos);
    eve_node_t *n = parse_node(p, EVE_N_IF, t->pos);
    n->u.if_.cond = parse_expr(p);
    parse_expect(p, EVE_T_COLON, "after the condition of 'if'");
    parse_body(p, &n->u.if_.then, "after 'if'");
    if (parse_kind(p) == EVE_T_ELSE) {
        parse_advance(p);
        n->u.if_.has_else = true;
        if (parse_kind(p) == EVE_T_IF) {
            eve_node_t *e = parse_if(p);
            n->u.if_.else_.v = parse_alloc(p, sizeof *n->u.if_.else_.v);
            n->u.if_.else_.v[0] = e;
            n->u.if_.else_.n = 1;
        } else {
            parse_expect(p, EVE_T_COLON, "after 'else'");
            parse_body(p, &n->u.if_.else_, "after 'else'");
        }
    }
    parse_leave(p);
    return n;
}

/* '(' name [':' type] 'in' expr ')' */
static void parse_for_head(parser_t *p, eve_node_t *n)
{
    parse_expect(p, EVE_T_LPAREN, "after 'for'");
    n->u.for_.var = parse_expect_ident(p, "the loop variable", "in 'for'");
    if (parse_accept(p, EVE_T_COLON))
        n->u.for_.type = parse_type(p, "for the loop variable");
    parse_expect(p, EVE_T_IN, "in 'for'");
    n->u.for_.coll = parse_expr(p);
    parse_expect(p, EVE_T_RPAREN, "after the collection of 'for'");
}

/* The assigned form of a handler, after "name =" (the paper's Program 2):
 * [perms] '(' params ')' [type] ':' body, the lambda's order. */
static void parse_assigned_handler(parser_t *p, eve_node_t *n)
{
    n->u.handler.assigned = true;
    if (parse_kind(p) == EVE_T_LBRACKET)
        parse_perms(p, &n->u.handler.perms);
    parse_params(p, &n->u.handler.params, false, "in the handler's assignment (name = [perms] (params) type:)");
    if (parse_kind(p) == EVE_T_IDENT)
        n->u.handler.ret = parse_type(p, "for the handler's result");
    parse_expect(p, EVE_T_COLON, "after the handler's head");
    parse_body(p, &n->u.handler.body, "as the handler's body");
}

/* A call's handler block entry: name [params] [perms] ':' body, or
 * name '=' [perms] params [type] ':' body. */
static eve_node_t *parse_handler(parser_t *p, void *arg)
{
    (void)arg;
    const eve_tok_t *t = parse_cur(p);
    if (t->kind != EVE_T_IDENT)
        parse_expected(p, "a callback (name [(params)] [perms]: or name = [perms] (params) [type]:)",
                 "in the call's handler block");
    parse_enter(p, t->pos);
    parse_advance(p);
    eve_node_t *n = parse_node(p, EVE_N_HANDLER, t->pos);
    n->u.handler.name = t->text;
    if (parse_accept(p, EVE_T_ASSIGN)) {
        parse_assigned_handler(p, n);
        parse_leave(p);
        return n;
    }
    if (parse_kind(p) == EVE_T_LPAREN)
        parse_params(p, &n->u.handler.params, false, NULL);
    if (parse_kind(p) == EVE_T_LBRACKET)
        parse_perms(p, &n->u.handler.perms);
    parse_expect(p, EVE_T_COLON, "after the callback's head");
    parse_body(p, &n->u.handler.body, "as the callback's body");
    parse_leave(p);
    return n;
}

/* Appends s to a list built with exact sizes (a handler's body). */
static void append(parser_t *p, eve_list_t *l, eve_node_t *s)
{
    eve_node_t **v = parse_alloc(p, (l->n + 1) * sizeof *v);
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
    while (parse_kind(p) != EVE_T_DEDENT && parse_kind(p) != EVE_T_EOF) {
        if (parse_kind(p) == EVE_T_RETURN && out->n > 0) {
            eve_node_t *h = out->v[out->n - 1];
            eve_node_t *r = parse_try_parse(p, parse_stmt, NULL);
            if (r) {
                eve_warning(p->cx, r->pos,
                            "'return' at the indentation of the handler block: taken as the last statement "
                            "of the handler '%s' above it", h->u.handler.name);
                append(p, &h->u.handler.body, r);
            }
            continue;
        }
        eve_node_t *s = parse_try_parse(p, parse_handler, NULL);
        if (s)
            parse_push(p, &out->v, &out->n, &cap, &s, sizeof s);
    }
    parse_accept(p, EVE_T_DEDENT);
}

/* names ':' type ['=' expr] */
eve_node_t *parse_var(parser_t *p)
{
    eve_node_t *n = parse_node(p, EVE_N_VAR, parse_cur(p)->pos);
    size_t cap = 0;
    for (;;) {
        parse_list_room(p, n->u.var.nnames, "names in one declaration");
        const eve_tok_t *t = parse_cur(p);
        const char *name = parse_expect_ident(p, "a variable name", NULL);
        for (size_t k = 0; k < n->u.var.nnames; k++)
            if (strcmp(n->u.var.names[k], name) == 0)
                parse_syntax_error_at(p, t->pos, "'%s' declared twice in one declaration", name);
        parse_push(p, &n->u.var.names, &n->u.var.nnames, &cap, &name, sizeof name);
        if (!parse_accept(p, EVE_T_COMMA))
            break;
    }
    parse_expect(p, EVE_T_COLON, "after the variable names");
    if (parse_kind(p) == EVE_T_LPAREN)
        parse_syntax_error_at(p, parse_cur(p)->pos,
                        "functions are declared at the top level or in a class, not in a block");
    n->u.var.type = parse_type(p, "in the declaration");
    if (parse_accept(p, EVE_T_ASSIGN))
        n->u.var.init = parse_expr(p);
    parse_end_of_statement(p, "after the declaration");
    return n;
}

/* name ':' '(' params ')' [type] [perms] ':' body */
eve_node_t *parse_func(parser_t *p)
{
    const eve_tok_t *t = parse_advance(p);
    eve_node_t *n = parse_node(p, EVE_N_FUNC, t->pos);
    n->u.func.name = t->text;
    parse_expect(p, EVE_T_COLON, NULL);
    parse_params(p, &n->u.func.params, true, NULL);
    if (parse_kind(p) == EVE_T_IDENT)
        n->u.func.ret = parse_type(p, "for the result");
    if (parse_kind(p) == EVE_T_LBRACKET)
        parse_perms(p, &n->u.func.perms);
    parse_expect(p, EVE_T_COLON, "after the function's head");
    parse_body(p, &n->u.func.body, "as the function's body");
    return n;
}

bool parse_starts_decl(const parser_t *p)
{
    return parse_kind(p) == EVE_T_IDENT &&
           (parse_kind_at(p, 1) == EVE_T_COLON || parse_kind_at(p, 1) == EVE_T_COMMA);
}

bool parse_starts_func(const parser_t *p)
{
    return parse_kind(p) == EVE_T_IDENT && parse_kind_at(p, 1) == EVE_T_COLON && parse_kind_at(p, 2) == EVE_T_LPAREN;
}

static eve_node_t *parse_simple(parser_t *p)
{
    eve_pos_t pos = parse_cur(p)->pos;
    eve_node_t *e = parse_expr(p);
    if (parse_line_ended(p)) {
        eve_node_t *n = parse_node(p, EVE_N_EXPR, pos);
        n->u.expr.expr = e;
        return n;
    }
    switch (parse_kind(p)) {
    case EVE_T_ASSIGN:
    case EVE_T_PLUS_ASSIGN:
    case EVE_T_MINUS_ASSIGN:
    case EVE_T_STAR_ASSIGN:
    case EVE_T_SLASH_ASSIGN:
    case EVE_T_PERCENT_ASSIGN: {
        const eve_tok_t *op = parse_advance(p);
        if (e->kind != EVE_N_NAME && e->kind != EVE_N_MEMBER && e->kind != EVE_N_INDEX)
            parse_syntax_error_at(p, op->pos, "cannot assign to this expression: only to a name, a member or an element");
        eve_node_t *n = parse_node(p, EVE_N_ASSIGN, op->pos);
        n->u.assign.op = op->kind;
        n->u.assign.target = e;
        n->u.assign.value = parse_expr(p);
        parse_end_of_statement(p, "after the assignment");
        return n;
    }
    case EVE_T_COLON: {
        const eve_tok_t *c = parse_advance(p);
        if (e->kind != EVE_N_CALL)
            parse_syntax_error_at(p, c->pos, "only a call can be followed by a block of callbacks");
        eve_node_t *n = parse_node(p, EVE_N_EXPR, pos);
        n->u.expr.expr = e;
        parse_expect(p, EVE_T_NEWLINE, "after ':' (callbacks go on the lines below)");
        if (parse_kind(p) != EVE_T_INDENT)
            parse_expected(p, "an indented block of callbacks", NULL);
        parse_advance(p);
        parse_handler_block(p, n);
        return n;
    }
    default: {
        eve_node_t *n = parse_node(p, EVE_N_EXPR, pos);
        n->u.expr.expr = e;
        parse_end_of_statement(p, "after the expression");
        return n;
    }
    }
}

/* Any statement that can appear in a block (arg unused). */
eve_node_t *parse_stmt(parser_t *p, void *arg)
{
    (void)arg;
    const eve_tok_t *t = parse_cur(p);
    eve_node_t *n;
    parse_enter(p, t->pos);
    switch (t->kind) {
    case EVE_T_RETURN:
        parse_advance(p);
        n = parse_node(p, EVE_N_RETURN, t->pos);
        if (parse_kind(p) != EVE_T_NEWLINE && parse_kind(p) != EVE_T_EOF)
            n->u.ret.value = parse_expr(p);
        parse_end_of_statement(p, "after 'return'");
        break;
    case EVE_T_IF:
        n = parse_if(p);
        break;
    case EVE_T_WHILE:
        parse_advance(p);
        n = parse_node(p, EVE_N_WHILE, t->pos);
        n->u.while_.cond = parse_expr(p);
        parse_expect(p, EVE_T_COLON, "after the condition of 'while'");
        parse_body(p, &n->u.while_.body, "after 'while'");
        break;
    case EVE_T_FOR:
        parse_advance(p);
        n = parse_node(p, EVE_N_FOR, t->pos);
        parse_for_head(p, n);
        parse_expect(p, EVE_T_COLON, "after the head of 'for'");
        parse_body(p, &n->u.for_.body, "after 'for'");
        break;
    case EVE_T_AT:
        parse_advance(p);
        if (parse_kind(p) == EVE_T_FOR) {
            parse_advance(p);
            n = parse_node(p, EVE_N_FOR, t->pos);
            n->u.for_.parallel = true;
            parse_for_head(p, n);
            if (parse_kind(p) == EVE_T_LBRACKET)
                parse_perms(p, &n->u.for_.perms);
            parse_expect(p, EVE_T_COLON, "after the head of the parallel 'for'");
            parse_body(p, &n->u.for_.body, "after the parallel 'for'");
        } else {
            n = parse_node(p, EVE_N_TASK, t->pos);
            if (parse_kind(p) == EVE_T_LBRACKET)
                parse_perms(p, &n->u.task.perms);
            parse_expect(p, EVE_T_COLON, "after the task's permissions");
            parse_body(p, &n->u.task.body, "as the task's body");
        }
        break;
    case EVE_T_FINISH:
        parse_advance(p);
        n = parse_node(p, EVE_N_FINISH, t->pos);
        parse_expect(p, EVE_T_COLON, "after 'finish'");
        parse_body(p, &n->u.finish.body, "after 'finish'");
        break;
    case EVE_T_ON:
        parse_advance(p);
        n = parse_node(p, EVE_N_ON, t->pos);
        n->u.on.obj = parse_postfix(p);
        n->u.on.event = parse_expect_ident(p, "an event name", "after the object in 'on'");
        if (parse_kind(p) == EVE_T_LPAREN)
            parse_params(p, &n->u.on.params, false, NULL);
        if (parse_kind(p) == EVE_T_LBRACKET)
            parse_perms(p, &n->u.on.perms);
        parse_expect(p, EVE_T_COLON, "after the head of 'on'");
        parse_body(p, &n->u.on.body, "as the callback's body");
        break;
    case EVE_T_PASS:
    case EVE_T_BREAK:
    case EVE_T_CONTINUE:
        parse_advance(p);
        n = parse_node(p, t->kind == EVE_T_PASS    ? EVE_N_PASS
                    : t->kind == EVE_T_BREAK ? EVE_N_BREAK
                                             : EVE_N_CONTINUE,
                 t->pos);
        parse_end_of_statement(p, NULL);
        break;
    case EVE_T_IMPORT:
        parse_syntax_error_at(p, t->pos, "'import' only at the top level");
    case EVE_T_CLASS:
        parse_syntax_error_at(p, t->pos, "classes are declared at the top level");
    case EVE_T_INDENT:
        parse_syntax_error_at(p, t->pos, "unexpected indent");
    default:
        if (parse_starts_decl(p))
            n = parse_var(p);
        else
            n = parse_simple(p);
        break;
    }
    parse_leave(p);
    return n;
}
