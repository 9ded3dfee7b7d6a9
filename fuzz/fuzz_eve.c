/* yard-eve's front end (tools/eve) on arbitrary bytes: lexing and parsing
 * never crash, hang or overflow the stack (nesting is bounded); a rejected
 * program has at least one error, every one with a position inside the
 * input; the tokens come in source order and end with EOF; an accepted
 * program's dump is deterministic (two dumps of the tree are the same text).
 * An accepted program is then checked (tools/eve/check.c): the checker never
 * crashes, its verdict matches its errors, and every error is positioned
 * inside the input and sorted by position. A program the checker accepts
 * goes to the code generator (tools/eve/gen.c), which makes C of the length
 * it says or refuses with an error, never crashes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "eve.h"
#include "gen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_positions(const eve_ctx_t *cx, size_t size)
{
    for (size_t i = 0; i < cx->ndiags; i++) {
        const eve_diag_t *d = &cx->diags[i];
        if (d->pos.line < 1 || d->pos.col < 1 || d->pos.line > size + 1 || d->pos.col > size + 1)
            abort();
        if (!memchr(d->msg, 0, sizeof d->msg) || !d->msg[0])
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *src = (const char *)data;
    eve_ctx_t cx;
    if (!eve_ctx_init(&cx, "fuzz.eve"))
        return 0;
    eve_tok_t *toks;
    size_t n;
    bool lexed = eve_lex(&cx, src, size, &toks, &n);
    if (lexed) {
        if (n == 0 || toks[n - 1].kind != EVE_T_EOF)
            abort();
        for (size_t i = 1; i < n; i++) {
            eve_pos_t a = toks[i - 1].pos, b = toks[i].pos;
            if (b.line < a.line || (b.line == a.line && b.col < a.col))
                abort(); /* out of source order */
        }
    } else if (cx.nerrors == 0) {
        abort();
    }
    check_positions(&cx, size);
    eve_ctx_free(&cx);

    if (!eve_ctx_init(&cx, "fuzz.eve"))
        return 0;
    eve_node_t *prog = eve_parse(&cx, src, size);
    check_positions(&cx, size);
    if (!prog) {
        if (cx.nerrors == 0 || cx.ndiags == 0)
            abort();
    } else {
        if (cx.nerrors != 0 || prog->kind != EVE_N_PROGRAM)
            abort();
        size_t l1, l2;
        char *d1 = eve_dump(prog, &l1);
        char *d2 = eve_dump(prog, &l2);
        if (d1 && d2 && (l1 != l2 || memcmp(d1, d2, l1) != 0 || strlen(d1) != l1))
            abort();
        free(d1);
        free(d2);
        bool ok = eve_check(&cx, prog);
        if (ok != (cx.nerrors == 0) || (!ok && cx.ndiags == 0))
            abort();
        check_positions(&cx, size);
        for (size_t i = 1; i < cx.ndiags; i++) {
            eve_pos_t a = cx.diags[i - 1].pos, b = cx.diags[i].pos;
            if (b.line < a.line || (b.line == a.line && b.col < a.col))
                abort(); /* not sorted by position */
        }
        if (ok) {
            /* a checked program: the generator makes C, or refuses with an error */
            size_t before = cx.nerrors, len = 0;
            char *c = eve_gen_c(&cx, prog, "fuzz.eve", "fuzz", &len);
            if (c ? (cx.nerrors != before || strlen(c) != len) : cx.nerrors == before)
                abort();
            free(c);
        }
    }
    eve_ctx_free(&cx);
    return 0;
}
