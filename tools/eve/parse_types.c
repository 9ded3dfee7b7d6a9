/* yard-eve's parser (parse.c): types as written (`vector<int>`, `T@`,
 * `T&`), parameter lists, and permission lists. */
#include "parse_int.h"

#include <string.h>

/* ---- types, parameters, permissions ---------------------------------------------- */

/* Takes a '>' for a generic's close, splitting '>>' and '>=' in two. */
static bool take_close_angle(parser_t *p)
{
    eve_tok_t *t = &p->t[p->i];
    if (t->kind == EVE_T_GT) {
        parse_advance(p);
        return true;
    }
    if (t->kind == EVE_T_SHR || t->kind == EVE_T_GE) {
        t->kind = t->kind == EVE_T_SHR ? EVE_T_GT : EVE_T_ASSIGN;
        t->pos.col++;
        return true;
    }
    return false;
}

eve_type_t *parse_type(parser_t *p, const char *context)
{
    const eve_tok_t *t = parse_cur(p);
    if (t->kind != EVE_T_IDENT)
        parse_expected(p, "a type", context);
    parse_enter(p, t->pos);
    parse_advance(p);
    eve_type_t *ty = parse_alloc(p, sizeof *ty);
    ty->pos = t->pos;
    ty->name = t->text;
    if (parse_accept(p, EVE_T_LT)) {
        size_t cap = 0;
        do {
            eve_type_t *a = parse_type(p, "as a type argument");
            parse_push(p, &ty->args, &ty->nargs, &cap, &a, sizeof a);
        } while (parse_accept(p, EVE_T_COMMA));
        if (!take_close_angle(p))
            parse_expected(p, "',' or '>'", "in the type arguments");
    }
    if (parse_accept(p, EVE_T_AT))
        ty->shared = true;
    if (parse_accept(p, EVE_T_AMP))
        ty->ref = true;
    parse_leave(p);
    return ty;
}

/* '(' [param {',' param}] ')'; param = name [':' type] (the type required
 * when typed). */
void parse_params(parser_t *p, eve_params_t *out, bool typed, const char *context)
{
    size_t cap = 0;
    parse_expect(p, EVE_T_LPAREN, context);
    if (parse_accept(p, EVE_T_RPAREN))
        return;
    do {
        parse_list_room(p, out->n, "parameters");
        eve_param_t prm = {.pos = parse_cur(p)->pos};
        prm.name = parse_expect_ident(p, "a parameter name", NULL);
        for (size_t k = 0; k < out->n; k++)
            if (strcmp(out->v[k].name, prm.name) == 0)
                parse_syntax_error_at(p, prm.pos, "parameter '%s' appears twice", prm.name);
        if (typed || parse_kind(p) == EVE_T_COLON) {
            parse_expect(p, EVE_T_COLON, "after the parameter name");
            prm.type = parse_type(p, "for the parameter");
        }
        parse_push(p, &out->v, &out->n, &cap, &prm, sizeof prm);
    } while (parse_accept(p, EVE_T_COMMA));
    parse_expect(p, EVE_T_RPAREN, "after the parameters");
}

/* '[' [perm {',' perm}] ']'; perm = ['+'|'-'|'='|'&'] name {'.' name}. */
void parse_perms(parser_t *p, eve_perms_t *out)
{
    size_t cap = 0;
    parse_expect(p, EVE_T_LBRACKET, NULL);
    out->has = true;
    if (parse_accept(p, EVE_T_RBRACKET))
        return;
    for (;;) {
        parse_list_room(p, out->n, "entries in a permission list");
        eve_perm_t pm = {.pos = parse_cur(p)->pos, .kind = EVE_PERM_READ};
        switch (parse_kind(p)) {
        case EVE_T_PLUS: pm.kind = EVE_PERM_FULL; parse_advance(p); break;
        case EVE_T_MINUS: pm.kind = EVE_PERM_NULL; parse_advance(p); break;
        case EVE_T_ASSIGN: pm.kind = EVE_CAPTURE_COPY; parse_advance(p); break;
        case EVE_T_AMP: pm.kind = EVE_CAPTURE_REF; parse_advance(p); break;
        default: break;
        }
        if (parse_kind(p) != EVE_T_IDENT)
            parse_expected(p, pm.kind == EVE_PERM_READ ? "a permission (x, +x, -x, =x or &x)"
                                                  : "a name after the permission's sign",
                     "in the permission list");
        /* A dotted path, joined into one string. */
        char path[EVE_MAX_IDENT + 3];
        size_t len = 0;
        for (;;) {
            const eve_tok_t *t = parse_advance(p);
            if (len + t->len + 1 > sizeof path)
                parse_syntax_error_at(p, pm.pos, "permission path longer than %d bytes", EVE_MAX_IDENT);
            if (len)
                path[len++] = '.';
            memcpy(path + len, t->text, t->len);
            len += t->len;
            if (parse_kind(p) != EVE_T_DOT)
                break;
            parse_advance(p);
            if (parse_kind(p) != EVE_T_IDENT)
                parse_expected(p, "a name after '.'", "in the permission list");
        }
        pm.name = eve_arena_strndup(p->cx->arena, path, len);
        if (!pm.name)
            parse_fatal(p);
        for (size_t k = 0; k < out->n; k++)
            if (strcmp(out->v[k].name, pm.name) == 0)
                parse_syntax_error_at(p, pm.pos, "'%s' appears twice in the permission list", pm.name);
        parse_push(p, &out->v, &out->n, &cap, &pm, sizeof pm);
        if (parse_accept(p, EVE_T_RBRACKET))
            return;
        if (parse_kind(p) != EVE_T_COMMA)
            parse_expected(p, "',' or ']'", "in the permission list");
        parse_advance(p);
    }
}
