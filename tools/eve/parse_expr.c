/* yard-eve's parser (parse.c): expressions: lambdas, primaries, postfix
 * calls, members and indexes, unary operators, and binary operators by
 * precedence climbing. */
#include "parse_int.h"

/* ---- expressions ----------------------------------------------------------------- */

static eve_node_t *parse_lambda(parser_t *p)
{
    eve_node_t *n = parse_node(p, EVE_N_LAMBDA, parse_cur(p)->pos);
    parse_perms(p, &n->u.lambda.perms);
    parse_params(p, &n->u.lambda.params, false, "after the lambda's permission list");
    if (parse_kind(p) == EVE_T_IDENT)
        n->u.lambda.ret = parse_type(p, "for the lambda's result");
    parse_expect(p, EVE_T_COLON, "before the lambda's body");
    if (parse_kind(p) == EVE_T_NEWLINE)
        parse_body(p, &n->u.lambda.body, "as the lambda's body");
    else
        n->u.lambda.expr = parse_expr(p);
    return n;
}

static eve_node_t *parse_primary(parser_t *p)
{
    const eve_tok_t *t = parse_cur(p);
    eve_node_t *n;
    switch (t->kind) {
    case EVE_T_INT:
        n = parse_node(p, EVE_N_INT, t->pos);
        n->u.int_.value = t->ival;
        parse_advance(p);
        return n;
    case EVE_T_FLOAT:
        n = parse_node(p, EVE_N_FLOAT, t->pos);
        n->u.float_.text = t->text;
        parse_advance(p);
        return n;
    case EVE_T_CHAR:
        n = parse_node(p, EVE_N_CHAR, t->pos);
        n->u.char_.value = t->ival;
        parse_advance(p);
        return n;
    case EVE_T_STRING:
        n = parse_node(p, EVE_N_STRING, t->pos);
        n->u.string.bytes = t->text;
        n->u.string.len = t->len;
        parse_advance(p);
        return n;
    case EVE_T_TRUE:
    case EVE_T_FALSE:
        n = parse_node(p, EVE_N_BOOL, t->pos);
        n->u.bool_.value = t->kind == EVE_T_TRUE;
        parse_advance(p);
        return n;
    case EVE_T_IDENT:
        n = parse_node(p, EVE_N_NAME, t->pos);
        n->u.name.name = t->text;
        parse_advance(p);
        return n;
    case EVE_T_LPAREN:
        parse_advance(p);
        n = parse_expr(p);
        parse_expect(p, EVE_T_RPAREN, "to close the parenthesis");
        return n;
    case EVE_T_LBRACKET:
        return parse_lambda(p);
    default:
        parse_expected(p, "an expression", NULL);
    }
}

eve_node_t *parse_postfix(parser_t *p)
{
    eve_node_t *n = parse_primary(p);
    int extra = 0;
    for (;;) {
        if (parse_line_ended(p))
            break;
        const eve_tok_t *t = parse_cur(p);
        eve_node_t *m;
        if (t->kind == EVE_T_DOT) {
            parse_advance(p);
            m = parse_node(p, EVE_N_MEMBER, t->pos);
            m->u.member.obj = n;
            m->u.member.name = parse_expect_ident(p, "a member name", "after '.'");
        } else if (t->kind == EVE_T_LPAREN) {
            parse_advance(p);
            m = parse_node(p, EVE_N_CALL, t->pos);
            m->u.call.callee = n;
            size_t cap = 0;
            if (!parse_accept(p, EVE_T_RPAREN)) {
                do {
                    eve_node_t *a = parse_expr(p);
                    parse_push(p, &m->u.call.args.v, &m->u.call.args.n, &cap, &a, sizeof a);
                } while (parse_accept(p, EVE_T_COMMA));
                parse_expect(p, EVE_T_RPAREN, "after the arguments");
            }
        } else if (t->kind == EVE_T_LBRACKET) {
            parse_advance(p);
            m = parse_node(p, EVE_N_INDEX, t->pos);
            m->u.index.obj = n;
            m->u.index.index = parse_expr(p);
            parse_expect(p, EVE_T_RBRACKET, "after the index");
        } else {
            break;
        }
        parse_enter(p, t->pos);
        extra++;
        n = m;
    }
    p->depth -= extra;
    return n;
}

static eve_node_t *parse_unary(parser_t *p)
{
    const eve_tok_t *t = parse_cur(p);
    if (t->kind == EVE_T_MINUS || t->kind == EVE_T_BANG || t->kind == EVE_T_TILDE) {
        parse_enter(p, t->pos);
        parse_advance(p);
        eve_node_t *n = parse_node(p, EVE_N_UNARY, t->pos);
        n->u.unary.op = t->kind;
        n->u.unary.operand = parse_unary(p);
        parse_leave(p);
        return n;
    }
    parse_enter(p, t->pos);
    eve_node_t *n = parse_postfix(p);
    parse_leave(p);
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
        if (parse_line_ended(p))
            break;
        const eve_tok_t *t = parse_cur(p);
        int prec = precedence(t->kind);
        if (prec == 0 || prec < min)
            break;
        parse_advance(p);
        parse_enter(p, t->pos);
        extra++;
        eve_node_t *rhs = parse_binary(p, prec + 1);
        eve_node_t *n = parse_node(p, EVE_N_BINARY, t->pos);
        n->u.binary.op = t->kind;
        n->u.binary.lhs = lhs;
        n->u.binary.rhs = rhs;
        lhs = n;
    }
    p->depth -= extra;
    return lhs;
}

eve_node_t *parse_expr(parser_t *p)
{
    return parse_binary(p, 1);
}
