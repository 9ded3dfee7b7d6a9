/* yard-eve's code generator's insides, shared by its files (gen.h is its
 * API): gen.c owns text buffers, memory and errors, the tables of
 * variables and frames, and the program; gen_types.c Eve types as C;
 * gen_analysis.c pass 1 (frames and captures); gen_expr.c emission's
 * helpers and expressions; gen_call.c calls; gen_stmt.c closures and
 * statements; gen_frame.c frames as C functions. Not a public interface. */
#ifndef YARD_EVE_GEN_INT_H
#define YARD_EVE_GEN_INT_H

#include <stdarg.h>

#include "gen.h"

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sb_t;
/* ---- frames and variables ------------------------------------------------------------------- */

enum { F_TOP, F_FUNC, F_METHOD, F_TASK, F_PFOR, F_CB, F_LAMBDA };
enum { CAP_COPY, CAP_REF, CAP_OBJ };

typedef struct frame frame_t;

typedef struct vinfo {
    const char *name;
    eve_pos_t pos;
    const eve_ty_t *ty;
    bool global;
    frame_t *decl;
    bool cell;          /* a value variable with a permission cell */
    bool box;           /* ... on the heap */
    bool loopvar;       /* a parallel for's element (in its task's env) */
    bool assigned;      /* the program assigns it (a parameter then needs its own reference) */
    char *cname;
    struct vinfo *next; /* hash chain (by name) */
} vinfo_t;

typedef struct {
    vinfo_t *v;
    int mode;
} cap_t;

struct frame {
    int kind;
    frame_t *parent;    /* the frame whose body holds it */
    bool in_finish;     /* a task spawned inside a finish of parent */
    const eve_node_t *node;
    char *cname;
    cap_t *caps;
    size_t ncaps, capcaps;
    const eve_perms_t *perms;
    vinfo_t *loopvar;
    eve_class_t *cls;   /* methods */
    const eve_ty_t *fty; /* functions and methods: the function type */
    frame_t *hnext;     /* node -> frame hash chain */
};

#define NBUCKETS 4096

/* The cleanup stack of the C function being emitted: what to run, in
 * reverse, on each way out of a scope. */
typedef struct {
    char *code;
} cleanup_t;

typedef struct {
    size_t outer;  /* cleanups before the loop variable (break runs down to here) */
    size_t body;   /* cleanups before the body (continue runs down to here) */
    int label;
    bool continued; /* a continue jumps to the label */
} loop_t;

typedef struct {
    eve_ctx_t *cx;
    eve_arena_t *ar;
    const char *source;  /* for #line and positions (C-escaped) */
    bool failed;
    vinfo_t *vb[NBUCKETS];
    frame_t *fb[NBUCKETS];
    frame_t *top;
    int nlabel;
    int nlit;
    /* output sections */
    sb_t lits, types, protos, funcs;
    /* the function being emitted */
    frame_t *f;
    sb_t *out;
    int ind;
    cleanup_t *cl;
    size_t ncl, capcl;
    loop_t *loops;
    size_t nloops, caploops;
    char **fins;          /* open finish scopes' C names */
    size_t nfins, capfins;
    const eve_ty_t *ret;  /* the function's result (NULL: void) */
    sb_t *decls;          /* the function's sequencing temporaries' declarations */
    bool made_tmp;        /* the function registers temporaries (else it needs no draining) */
    int ntemp;
    struct ovr { const eve_node_t *n; char *c; } *ovr; /* operands already evaluated into temporaries */
    size_t novr, capovr;
} gen_t;
typedef struct {
    frame_t *f;
    sb_t *out;
    int ind;
    cleanup_t *cl;
    size_t ncl, capcl;
    loop_t *loops;
    size_t nloops, caploops;
    char **fins;
    size_t nfins, capfins;
    const eve_ty_t *ret;
    sb_t *decls;
    size_t novr;
    bool made_tmp;
} saved_t;

#define DECLS_MARK "    /*@decls@*/\n"

/* gen.c */
void gen_sb_putn(sb_t *b, const char *s, size_t n);
void gen_sb_puts(sb_t *b, const char *s);
void gen_sb_vprintf(sb_t *b, const char *fmt, va_list ap);
void gen_sb_printf(sb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *gen_alloc(gen_t *g, size_t n);
char *gen_fmt(gen_t *g, const char *f, ...) __attribute__((format(printf, 2, 3)));
void gen_err(gen_t *g, eve_pos_t pos, const char *f, ...) __attribute__((format(printf, 3, 4)));
vinfo_t *gen_vget(gen_t *g, const char *name, eve_pos_t pos);
vinfo_t *gen_vsym(gen_t *g, const eve_sym_t *s);
vinfo_t *gen_vadd(gen_t *g, const char *name, eve_pos_t pos, const eve_ty_t *ty, frame_t *decl);
frame_t *gen_frame_of(gen_t *g, const eve_node_t *n);
frame_t *gen_frame_new(gen_t *g, int kind, frame_t *parent, const eve_node_t *n, const char *prefix);

/* gen_types.c */
bool gen_ty_is(const eve_ty_t *t, const char *libname);
bool gen_ty_user(const eve_ty_t *t);
bool gen_ty_ref(const eve_ty_t *t);
bool gen_ty_obj(const eve_ty_t *t);
const char *gen_ctype(gen_t *g, const eve_ty_t *t);
const char *gen_vfield(const eve_ty_t *t);
char *gen_to_val(gen_t *g, const char *e, const eve_ty_t *t);
char *gen_from_val(gen_t *g, const char *e, const eve_ty_t *t);
char *gen_fresh(gen_t *g, const eve_ty_t *t, eve_pos_t pos);
char *gen_zero(gen_t *g, const eve_ty_t *t);

/* gen_analysis.c */
void gen_an_stmt(gen_t *g, frame_t *f, const eve_node_t *n, size_t finish);
void gen_an_func(gen_t *g, const eve_node_t *fn, eve_class_t *cls);

/* gen_expr.c */
void gen_line(gen_t *g, const char *f, ...) __attribute__((format(printf, 2, 3)));
void gen_hash_line(gen_t *g, eve_pos_t pos);
char *gen_posstr(gen_t *g, eve_pos_t pos);
void *gen_grown(gen_t *g, void *arr, size_t *cap, size_t size);
void gen_push_cleanup(gen_t *g, char *code);
void gen_run_cleanups(gen_t *g, size_t to);
void gen_close_scope(gen_t *g, size_t to);
char *gen_vaccess(gen_t *g, frame_t *f, vinfo_t *v);
char *gen_vread(gen_t *g, frame_t *f, vinfo_t *v);
char *gen_vcell(gen_t *g, frame_t *f, vinfo_t *v);
const char *gen_bytes_kind(const eve_ty_t *t);
char *gen_tmp_owned(gen_t *g, const eve_ty_t *t, const char *owned);
const char *gen_binop_c(eve_tok_kind_t op);
char *gen_binop(gen_t *g, eve_tok_kind_t op, const char *a, const char *b, const eve_ty_t *lt, eve_pos_t pos);
char *gen_expr(gen_t *g, const eve_node_t *n);

/* gen_call.c */
char *gen_call_args(gen_t *g, const eve_node_t *call, bool lead_comma);
char *gen_call_value(gen_t *g, const eve_node_t *n);

/* gen_stmt.c */
void gen_emit_env_struct(gen_t *g, frame_t *f);
void gen_release_env(gen_t *g, frame_t *f);
bool gen_own_local(const vinfo_t *v);
void gen_decl_local(gen_t *g, vinfo_t *v, const char *init, eve_pos_t pos);
void gen_drain(gen_t *g);
void gen_stmt(gen_t *g, const eve_node_t *n);
void gen_stmts(gen_t *g, const eve_list_t *l);

/* gen_frame.c */
void gen_save(gen_t *g, saved_t *s);
void gen_restore(gen_t *g, const saved_t *s);
void gen_place_decls(gen_t *g, sb_t *body, sb_t *decls);
void gen_frame_fn(gen_t *g, frame_t *f);
char *gen_lambda_call(gen_t *g, const eve_node_t *call);
void gen_func(gen_t *g, const eve_node_t *fn, eve_class_t *cls);
void gen_class(gen_t *g, const eve_node_t *cn);

#endif
