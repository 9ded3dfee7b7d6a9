/* yard-eve's parser's insides, shared by its files (eve.h is its API,
 * eve_parse): parse.c owns the plumbing (tokens, errors, nesting, nodes),
 * error recovery, declarations and the program; parse_types.c types,
 * parameters and permissions; parse_expr.c expressions; parse_stmt.c
 * statements. Not a public interface. */
#ifndef YARD_EVE_PARSE_INT_H
#define YARD_EVE_PARSE_INT_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>

#include "eve.h"

typedef struct {
    eve_ctx_t *cx;
    eve_tok_t *t;
    size_t n, i;
    int depth;
    jmp_buf *recover; /* the statement being parsed */
    jmp_buf fatal;    /* the whole parse */
} parser_t;

typedef eve_node_t *(*stmt_fn)(parser_t *p, void *arg);

/* parse.c */
_Noreturn void parse_fatal(parser_t *p);
void *parse_alloc(parser_t *p, size_t size);
void parse_push(parser_t *p, void *vp, size_t *n, size_t *cap, const void *item, size_t elem);
const eve_tok_t *parse_cur(const parser_t *p);
eve_tok_kind_t parse_kind(const parser_t *p);
eve_tok_kind_t parse_kind_at(const parser_t *p, size_t k);
const eve_tok_t *parse_advance(parser_t *p);
bool parse_accept(parser_t *p, eve_tok_kind_t k);
bool parse_line_ended(const parser_t *p);
_Noreturn void parse_syntax_error_at(parser_t *p, eve_pos_t pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
_Noreturn void parse_expected(parser_t *p, const char *what, const char *context);
const eve_tok_t *parse_expect(parser_t *p, eve_tok_kind_t k, const char *context);
const char *parse_expect_ident(parser_t *p, const char *what, const char *context);
void parse_list_room(parser_t *p, size_t n, const char *what);
void parse_enter(parser_t *p, eve_pos_t pos);
void parse_leave(parser_t *p);
eve_node_t *parse_node(parser_t *p, eve_node_kind_t k, eve_pos_t pos);
void parse_end_of_statement(parser_t *p, const char *context);
eve_node_t *parse_try_parse(parser_t *p, stmt_fn fn, void *arg);

/* parse_types.c */
eve_type_t *parse_type(parser_t *p, const char *context);
void parse_params(parser_t *p, eve_params_t *out, bool typed, const char *context);
void parse_perms(parser_t *p, eve_perms_t *out);

/* parse_expr.c */
eve_node_t *parse_postfix(parser_t *p);
eve_node_t *parse_expr(parser_t *p);

/* parse_stmt.c */
bool parse_attach_assigned_handler(parser_t *p, eve_list_t *items, eve_node_t *s);
void parse_block_items(parser_t *p, eve_list_t *out, stmt_fn fn, void *arg);
void parse_body(parser_t *p, eve_list_t *out, const char *context);
eve_node_t *parse_var(parser_t *p);
eve_node_t *parse_func(parser_t *p);
bool parse_starts_decl(const parser_t *p);
bool parse_starts_func(const parser_t *p);
eve_node_t *parse_stmt(parser_t *p, void *arg);

#endif
