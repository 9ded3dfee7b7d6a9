/* yard-eve's static checker (issue 23, docs/eve.md "The checker"): names,
 * types and permissions of a parsed program, and the standard library's
 * table the checker reads the library from (stdlib.c).
 *
 * eve_check is a pure pass over the tree eve_parse built: no I/O, no global
 * state, everything it makes (types, symbols) in the same arena. It records
 * each expression's type in node->type and each resolved name's symbol in
 * node->sym, for the code generator; its errors go into the context sorted
 * by position. It accepts any tree the parser accepts without crashing. */
#ifndef YARD_EVE_CHECK_H
#define YARD_EVE_CHECK_H

#include "eve.h"

/* ---- types ----------------------------------------------------------------- */

typedef enum {
    EVE_TY_ERROR,    /* an error was reported: compatible with everything */
    EVE_TY_VOID,
    EVE_TY_INT,      /* 64-bit signed */
    EVE_TY_BOOL,
    EVE_TY_FLOAT,    /* 64-bit */
    EVE_TY_CHAR,     /* one byte */
    EVE_TY_STRING,   /* bytes, a value */
    EVE_TY_VECTOR,   /* vector<a> */
    EVE_TY_SET,      /* set<a> */
    EVE_TY_MAP,      /* map<a, b> */
    EVE_TY_EMITTER,  /* emitter<a>: an event carrying an a (void: nothing) */
    EVE_TY_CLASS,    /* a user class or a library object type (tcp_socket, ...) */
    EVE_TY_FUNC,     /* a function or lambda value */
    /* only in the library's signatures: */
    EVE_TY_BASIC,    /* any of int, bool, float, char, string */
    EVE_TY_BYTES,    /* string, read_buffer or write_buffer */
    EVE_TY_GENERIC,  /* T or K (index 0), V (index 1) of the receiver's type */
} eve_ty_kind_t;

typedef struct eve_ty eve_ty_t;
typedef struct eve_class eve_class_t;

struct eve_ty {
    eve_ty_kind_t kind;
    const eve_ty_t *a, *b;     /* type arguments (vector, set, map, emitter) */
    eve_class_t *cls;          /* EVE_TY_CLASS */
    const eve_ty_t **params;   /* EVE_TY_FUNC */
    size_t nparams;
    const eve_ty_t *ret;       /* EVE_TY_FUNC */
    int index;                 /* EVE_TY_GENERIC */
};

/* Values are copied on assignment (int bool float char string, functions);
 * every other type is an object, passed and assigned by reference. */
bool eve_ty_is_value(const eve_ty_t *t);
/* "int", "vector<string>", "(int) bool" into buf; returns buf. */
const char *eve_ty_name(const eve_ty_t *t, char *buf, size_t size);

/* ---- symbols ------------------------------------------------------------------- */

typedef enum {
    EVE_SYM_VAR,      /* global, local, parameter, loop variable */
    EVE_SYM_FUNC,     /* a user function or a library function */
    EVE_SYM_CLASS,    /* a user class or a library type name */
    EVE_SYM_MODULE,   /* an imported library module */
    EVE_SYM_FIELD,    /* a field of the class whose method is being checked */
    EVE_SYM_METHOD,   /* a method of that class */
    EVE_SYM_LIBOBJ,   /* a library object: stdout, stderr, args, signals */
} eve_sym_kind_t;

typedef struct eve_sym eve_sym_t;
typedef struct eve_member eve_member_t;

struct eve_sym {
    const char *name;
    eve_sym_kind_t kind;
    eve_pos_t pos;            /* where it is declared (0:0 for the library's) */
    const eve_ty_t *ty;       /* VAR, FUNC, FIELD, METHOD, LIBOBJ */
    bool shared;              /* VAR: declared T@ */
    bool global;              /* VAR: declared at the top level */
    bool accepts;             /* VAR: a `connection` parameter: c() accepts it, giving its socket */
    const eve_node_t *decl;   /* FUNC, METHOD: the EVE_N_FUNC; CLASS: the EVE_N_CLASS */
    eve_class_t *cls;         /* CLASS */
    eve_member_t *member;     /* FIELD, METHOD */
    const char *module;       /* MODULE: its name */
    /* the checker's bookkeeping */
    void *owner;              /* VAR: the permission scope whose body declares it */
    int own;                  /* VAR: what that scope holds on it (a hold level) */
    eve_sym_t *alias;         /* VAR: the object this name is an element or a copy of the reference of */
    const char *alias_path;
    struct eve_grant *grants; /* VAR: permissions granted on it by open scopes, innermost first */
    size_t order;             /* globals: index of the top-level item declaring it */
    eve_sym_t *next;          /* in the symbol table's bucket */
    size_t depth;             /* lexical depth of its scope */
    struct eve_fninfo *fn;    /* FUNC (user): parameters and permission list, resolved */
};

/* A class's member: a field (its type), a method (a function type; decl is
 * the EVE_N_FUNC for a user class), or an event (its payload type). */
typedef enum { EVE_MEM_FIELD, EVE_MEM_METHOD, EVE_MEM_STATIC, EVE_MEM_EVENT } eve_member_kind_t;

struct eve_member {
    const char *name;
    eve_member_kind_t kind;
    const eve_ty_t *ty;
    bool mut;                 /* METHOD: modifies its receiver (library: the table; user: [+self]) */
    const eve_node_t *decl;   /* user members */
    eve_member_t *next;
    struct eve_fninfo *fn;    /* user methods: parameters and permission list, resolved */
};

struct eve_class {
    const char *name;
    bool lib;                 /* a library type */
    const eve_node_t *decl;   /* user classes */
    eve_member_t *members;    /* fields, methods, statics and events, newest first */
};

/* ---- the checker ---------------------------------------------------------------- */

/* Checks a program eve_parse returned (in the same context). True when it is
 * well-formed; otherwise the errors are in cx (sorted by position, at most
 * EVE_MAX_DIAGS kept, all counted). */
bool eve_check(eve_ctx_t *cx, eve_node_t *program);

/* ---- the standard library (stdlib.c) ---------------------------------------------
 * One row per name. Signatures are written as Eve writes them:
 *   TYPE     owner NULL, sig: "value", "object", "object<T>" or "object<K,V>"
 *   MODULE   a module `import NAME` brings in; sig NULL
 *   GLOBAL   a library object: sig is its type
 *   FUNC     owner NULL or a module: "(name: type, ...) result"
 *   METHOD   owner a type: "(params) result"; mut: it modifies the receiver
 *   STATIC   owner a type, called on the type's name: tcp_socket.listen(...)
 *   EVENT    owner a type: sig is the type each event carries ("void": none)
 * In signatures T, K and V are the owner's type arguments, `basic` is any of
 * int bool float char string, `bytes` is string, read_buffer or write_buffer. */
typedef enum {
    EVE_LIB_TYPE,
    EVE_LIB_MODULE,
    EVE_LIB_GLOBAL,
    EVE_LIB_FUNC,
    EVE_LIB_METHOD,
    EVE_LIB_STATIC,
    EVE_LIB_EVENT,
} eve_lib_kind_t;

typedef struct {
    eve_lib_kind_t kind;
    const char *owner;
    const char *name;
    const char *sig;
    bool mut;
} eve_lib_entry_t;

extern const eve_lib_entry_t eve_stdlib[];
extern const size_t eve_stdlib_count;

#endif
