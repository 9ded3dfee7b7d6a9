/* yard-eve's checker's insides, shared by its files (check.h is its API):
 * check.c owns memory, errors, functions and the program; check_types.c the
 * types; check_scope.c the symbol table and class members; check_lib.c the
 * library; check_perms.c permission scopes and holdings; check_expr.c
 * expressions; check_stmt.c statements. Not a public interface. */
#ifndef YARD_EVE_CHECK_INT_H
#define YARD_EVE_CHECK_INT_H

#include "check.h"

/* ---- permission levels and access modes ------------------------------------- */

/* What a scope holds on a variable, weakest first. */
enum {
    H_NONE,     /* nothing: the name may not be used */
    H_NULL,     /* -x: may be passed on, not used */
    H_IMPLICIT, /* a value variable of an outer scope, copied implicitly: read only */
    H_COPY,     /* =x: the scope's own copy, read only */
    H_READ,     /* x */
    H_REF,      /* &x: the variable itself, unchecked (as C++) */
    H_FULL,     /* +x, or the scope's own variable */
};

/* How an expression uses an object. DEFER: a method's receiver, whose mode
 * is known once the method is. */
enum { A_REFER, A_READ, A_WRITE, A_DEFER };

/* One permission a scope holds on a variable (its list's entry). */
typedef struct eve_grant {
    struct pscope *ps;
    eve_perm_kind_t kind;
    const char *path;         /* the dotted path as written ("x", "self.sock") */
    eve_sym_t *sym;
    struct eve_grant *next;   /* on the symbol: the next (outer) grant */
    struct eve_grant *undo;   /* on the scope: the grant pushed before it */
} grant_t;

typedef enum { PS_ROOT, PS_FUNC, PS_METHOD, PS_TASK, PS_PFOR, PS_CALLBACK, PS_LAMBDA } ps_kind_t;

/* A permission scope: the program's top level, a function or method body,
 * a task, a parallel for's body, a callback or a lambda. */
typedef struct pscope {
    struct pscope *parent;    /* the scope that spawned it (tasks); NULL otherwise */
    ps_kind_t kind;
    size_t finish;            /* finish blocks open in its body */
    bool in_finish;           /* a task spawned inside a finish block of parent */
    const eve_ty_t *ret;      /* what 'return' takes; NULL: no return here */
    const char *fname;        /* for messages about returns */
    size_t loops;             /* loops open in its body */
    grant_t *granted;         /* its grants, newest first */
} pscope_t;

/* A permission a function's or method's list asks of its callers. */
typedef struct {
    eve_sym_t *sym;           /* a global, or one of the parameters */
    eve_perm_kind_t kind;
    const char *path;
    long param;               /* index of the parameter, -1: a global, -2: self */
} req_t;

struct eve_fninfo {
    const char *name;
    eve_sym_t **params;
    size_t nparams;
    eve_sym_t *self;          /* methods */
    req_t *reqs;
    size_t nreqs;
    const eve_ty_t *ret;
    const eve_ty_t *type;     /* its function type */
};

typedef struct {
    eve_pos_t pos;
    size_t seq;
    char msg[EVE_MAX_MSG];
} err_t;

#define MAX_ERRS 10000  /* kept for sorting; further ones are counted */

typedef struct memnode {
    const eve_class_t *cls;
    eve_member_t *m;
    struct memnode *next;
} memnode_t;

typedef struct {
    eve_sym_t *sym;
    const char *path;
    eve_pos_t pos;
    bool set;
} pending_t;

typedef struct {
    eve_ctx_t *cx;
    eve_arena_t *ar;
    bool oom;
    /* the symbol table: hash chains, newest first; a stack to close scopes */
    eve_sym_t **buckets;
    size_t nbuckets, nsyms;
    eve_sym_t **stack;
    size_t nstack, capstack;
    size_t depth;
    /* members of classes by (class, name) */
    memnode_t **mbuckets;
    size_t nmbuckets;
    /* errors, sorted at the end */
    err_t *errs;
    size_t nerrs, caperrs, dropped;
    /* where we are */
    pscope_t root;
    pscope_t *ps;
    eve_class_t *cls;          /* the class whose method is being checked */
    bool toplevel;             /* checking top-level statements (not a function) */
    size_t item;               /* the top-level item being checked */
    pending_t pending;         /* a deferred receiver access */
    /* the library */
    eve_class_t **libcls;
    size_t nlibcls;
    eve_class_t *kind_cls[EVE_TY_GENERIC + 1]; /* string, vector, ...: their methods */
    eve_sym_t *exit_sym;
    const eve_ty_t *t_err, *t_void, *t_int, *t_bool, *t_float, *t_char, *t_string;
    const eve_ty_t *t_basic, *t_bytes, *t_generic[2];
    /* a T& may be written here: a parameter's type being resolved */
    bool allow_ref;
    /* the callback being checked: its event's name and its one parameter's
     * (the paper writes `error` for the error handler's parameter `e`) */
    const char *handler_name, *handler_param;
} chk_t;

/* check.c */
void *chk_alloc(chk_t *c, size_t n);
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void chk_err(chk_t *c, eve_pos_t pos, const char *fmt, ...);
eve_pos_t chk_start_pos(const eve_node_t *n);

/* check_types.c */
const eve_ty_t *chk_mkty(chk_t *c, eve_ty_kind_t k, const eve_ty_t *a, const eve_ty_t *b);
size_t chk_put(char *buf, size_t size, size_t at, const char *s);
const char *chk_tn(const eve_ty_t *t, char *buf);
bool chk_ty_eq(const eve_ty_t *x, const eve_ty_t *y);
bool chk_is_err(const eve_ty_t *t);
bool chk_assignable(const eve_ty_t *to, const eve_ty_t *from);
const eve_ty_t *chk_subst(chk_t *c, const eve_ty_t *t, const eve_ty_t *recv);
void chk_shared_element(chk_t *c, const eve_type_t *t, const eve_ty_t *r, const char *where);
const eve_ty_t *chk_resolve_type(chk_t *c, const eve_type_t *t, bool allow_void, bool allow_shared);
const eve_ty_t *chk_resolve_param_type(chk_t *c, const eve_type_t *t, bool allow_shared);

/* check_scope.c */
eve_sym_t *chk_lookup(chk_t *c, const char *name);
bool chk_bind(chk_t *c, eve_sym_t *s);
void chk_open_scope(chk_t *c);
void chk_close_scope(chk_t *c);
eve_sym_t *chk_declare(chk_t *c, const char *name, eve_sym_kind_t kind, eve_pos_t pos);
void chk_add_member(chk_t *c, eve_class_t *cls, eve_member_t *m);
eve_member_t *chk_find_member(chk_t *c, const eve_class_t *cls, const char *name, bool events);
eve_class_t *chk_lib_class(chk_t *c, const char *name);
eve_class_t *chk_class_of(chk_t *c, const eve_ty_t *t);

/* check_lib.c */
const eve_ty_t *chk_basic_kind(chk_t *c, const char *name);
int chk_container_kind(const char *name);
const eve_ty_t *chk_class_type(chk_t *c, eve_class_t *cls);
void chk_load_stdlib(chk_t *c);
bool chk_is_lib_module(const char *name);

/* check_perms.c */
const char *chk_ps_noun(const pscope_t *ps);
void chk_check_access(chk_t *c, eve_pos_t pos, eve_sym_t *sym, const char *path, int mode, const char *via);
void chk_flush_pending(chk_t *c, int mode, const char *via);
void chk_push_grant(chk_t *c, pscope_t *ps, eve_sym_t *sym, eve_perm_kind_t kind, const char *path);
void chk_pop_grants(pscope_t *ps);
const char *chk_perm_sigil(eve_perm_kind_t k);
eve_sym_t *chk_perm_sym(chk_t *c, const eve_perm_t *pm);
void chk_open_perms(chk_t *c, pscope_t *ps, const eve_perms_t *perms, eve_sym_t *loopvar);

/* check_expr.c */
int chk_self_mode(const struct eve_fninfo *fn);
eve_node_t *chk_mknode(chk_t *c, eve_node_kind_t k, eve_pos_t pos);
const eve_ty_t *chk_binop(chk_t *c, eve_pos_t pos, eve_tok_kind_t op, const eve_ty_t *l, const eve_ty_t *r);
const eve_ty_t *chk_value(chk_t *c, eve_node_t *n, int mode, const char *sub);

/* check_stmt.c */
bool chk_always_returns(chk_t *c, const eve_list_t *body);
void chk_var_stmt(chk_t *c, eve_node_t *n, bool toplevel_item);
void chk_stmt(chk_t *c, eve_node_t *n);
void chk_stmts(chk_t *c, eve_list_t *body);

#endif
