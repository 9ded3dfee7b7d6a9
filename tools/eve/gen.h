/* yard-eve's code generator (issue 23, docs/eve.md "How code is
 * generated"): C11 for a checked program, calling the Eve runtime
 * (src/eve_rt/eve_rt.h, eve_gen.h) on the coro runtime. Pure: no I/O. */
#ifndef YARD_EVE_GEN_H_
#define YARD_EVE_GEN_H_

#include "check.h"
#include "eve.h"

/* C for `program`, which eve_check accepted in the same context. `source`
 * is the path #line directives and run-time error positions name; `name`
 * the program's name for its messages. Returns malloc'd text (the caller
 * frees) and its length, or NULL with errors in cx (a construct the
 * generator does not support, or out of memory). */
char *eve_gen_c(eve_ctx_t *cx, const eve_node_t *program, const char *source, const char *name, size_t *len);

#endif
