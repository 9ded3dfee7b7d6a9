/* yard-eve's front end (issue 23, docs/eve.md): the Eve language's tokens,
 * its syntax tree, and the pure functions that build and print them.
 *
 * Everything of one compilation lives in one eve_ctx_t: the file's name for
 * messages, an arena that holds the tokens and the tree (nothing is freed on
 * its own; eve_ctx_free drops it all at once), and the diagnostics. The lexer
 * and the parser do no I/O, keep no global state and never exit: they take a
 * buffer, return a tree or NULL, and leave their errors in the context. */
#ifndef YARD_EVE_H
#define YARD_EVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- limits: bounded input, bounded recursion -------------------------- */

#define EVE_MAX_SOURCE (16u << 20)   /* bytes of one source file */
#define EVE_MAX_NESTING 200          /* blocks, brackets and expressions within each other */
#define EVE_MAX_IDENT 255            /* bytes of one identifier */
#define EVE_MAX_STRING (1u << 20)    /* bytes of one string literal */
#define EVE_MAX_LIST 1000            /* names in one permission, parameter or declaration list */
#define EVE_MAX_DIAGS 20             /* errors kept; further ones are counted */
#define EVE_MAX_MSG 200              /* bytes of one message */
#define EVE_MAX_ARENA (512u << 20)   /* bytes one compilation may allocate */

/* ---- source positions and diagnostics ---------------------------------- */

typedef struct {
    uint32_t line; /* 1-based */
    uint32_t col;  /* 1-based, in bytes */
} eve_pos_t;

typedef struct {
    eve_pos_t pos;
    char msg[EVE_MAX_MSG];
} eve_diag_t;

typedef struct eve_arena eve_arena_t;

typedef struct {
    const char *file;  /* the name messages give (not opened) */
    eve_arena_t *arena;
    eve_diag_t diags[EVE_MAX_DIAGS];
    size_t ndiags;     /* kept, at most EVE_MAX_DIAGS */
    size_t nerrors;    /* reported, kept or not */
    /* Warnings: what the compiler assumed where a program is ambiguous (the
     * paper's listings, docs/eve.md); a program with warnings still builds.
     * The same message at the same place is kept once. */
    eve_diag_t warnings[EVE_MAX_DIAGS];
    size_t nwarnings;
} eve_ctx_t;

/* A context for one compilation; false when out of memory. */
bool eve_ctx_init(eve_ctx_t *cx, const char *file);
void eve_ctx_free(eve_ctx_t *cx);
/* Records an error at pos (printf-style message). */
void eve_error(eve_ctx_t *cx, eve_pos_t pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Writes diagnostic i as "file:line:col: error: message" (no newline) into
 * out; returns what snprintf returns. */
int eve_diag_format(const eve_ctx_t *cx, size_t i, char *out, size_t size);
void eve_warning(eve_ctx_t *cx, eve_pos_t pos, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* "FILE:LINE:COL: warning: MESSAGE" of warning i into out. */
int eve_warning_format(const eve_ctx_t *cx, size_t i, char *out, size_t size);

/* ---- the arena ---------------------------------------------------------- */

eve_arena_t *eve_arena_new(void);
void eve_arena_free(eve_arena_t *a);
/* Zeroed, aligned for any object; NULL when out of memory or past EVE_MAX_ARENA. */
void *eve_arena_alloc(eve_arena_t *a, size_t size);
/* A NUL-terminated copy of n bytes. */
char *eve_arena_strndup(eve_arena_t *a, const char *s, size_t n);

/* ---- tokens -------------------------------------------------------------- */

typedef enum {
    EVE_T_EOF,
    EVE_T_NEWLINE,
    EVE_T_INDENT,
    EVE_T_DEDENT,
    EVE_T_IDENT,
    EVE_T_INT,
    EVE_T_FLOAT,
    EVE_T_CHAR,
    EVE_T_STRING,
    /* keywords */
    EVE_T_IMPORT,
    EVE_T_CLASS,
    EVE_T_RETURN,
    EVE_T_IF,
    EVE_T_ELSE,
    EVE_T_FOR,
    EVE_T_IN,
    EVE_T_WHILE,
    EVE_T_FINISH,
    EVE_T_ON,
    EVE_T_TRUE,
    EVE_T_FALSE,
    EVE_T_PASS,
    EVE_T_BREAK,
    EVE_T_CONTINUE,
    /* punctuation */
    EVE_T_LPAREN,
    EVE_T_RPAREN,
    EVE_T_LBRACKET,
    EVE_T_RBRACKET,
    EVE_T_COMMA,
    EVE_T_COLON,
    EVE_T_DOT,
    EVE_T_AT,
    /* operators */
    EVE_T_PLUS,
    EVE_T_MINUS,
    EVE_T_STAR,
    EVE_T_SLASH,
    EVE_T_PERCENT,
    EVE_T_AMP,
    EVE_T_PIPE,
    EVE_T_CARET,
    EVE_T_TILDE,
    EVE_T_BANG,
    EVE_T_SHL,
    EVE_T_SHR,
    EVE_T_LT,
    EVE_T_LE,
    EVE_T_GT,
    EVE_T_GE,
    EVE_T_EQ,
    EVE_T_NE,
    EVE_T_ANDAND,
    EVE_T_OROR,
    EVE_T_ASSIGN,
    EVE_T_PLUS_ASSIGN,
    EVE_T_MINUS_ASSIGN,
    EVE_T_STAR_ASSIGN,
    EVE_T_SLASH_ASSIGN,
    EVE_T_PERCENT_ASSIGN,
    EVE_T_COUNT
} eve_tok_kind_t;

typedef struct {
    eve_tok_kind_t kind;
    eve_pos_t pos;
    eve_pos_t end;     /* just past the token's last byte */
    const char *text;  /* IDENT, FLOAT: NUL-terminated copy; STRING: decoded bytes + NUL */
    size_t len;        /* bytes of text */
    uint64_t ival;     /* INT, CHAR */
} eve_tok_t;

/* The spelling of a token kind for messages and dumps ("'('", "newline"). */
const char *eve_tok_name(eve_tok_kind_t k);

/* Tokenizes src[0..len). The tokens (ending with EVE_T_EOF) are in the
 * context's arena. Returns false if any lexical error was reported (the
 * tokens are then still there, bad bytes skipped) or memory ran out. */
bool eve_lex(eve_ctx_t *cx, const char *src, size_t len, eve_tok_t **toks, size_t *ntoks);

/* ---- the syntax tree ----------------------------------------------------- */

/* A type: a name with optional generic arguments, maybe shared (T@). The
 * basic types (int, bool, float, char, void, string) and the library's
 * (vector, set, map, emitter, tcp_socket, ...) are names like any other:
 * the checker resolves them. */
typedef struct eve_type eve_type_t;
struct eve_type {
    eve_pos_t pos;
    const char *name;
    eve_type_t **args;
    size_t nargs;
    bool shared; /* T@ */
    bool ref;    /* T& (a parameter only): a reference to the caller's value or object */
};

/* One entry of a permission list: x (read), +x (full), -x (null), =x (copy
 * capture), &x (reference capture). The name is a dotted path ("a.b"). */
typedef enum {
    EVE_PERM_READ,
    EVE_PERM_FULL,
    EVE_PERM_NULL,
    EVE_CAPTURE_COPY,
    EVE_CAPTURE_REF,
} eve_perm_kind_t;

struct eve_sym;

typedef struct {
    eve_pos_t pos;
    eve_perm_kind_t kind;
    const char *name;
    struct eve_sym *sym; /* set by the checker: the variable the path starts at */
} eve_perm_t;

/* Present, maybe empty ([]), or absent (no list written: has == false). */
typedef struct {
    eve_perm_t *v;
    size_t n;
    bool has;
} eve_perms_t;

typedef struct {
    eve_pos_t pos;
    const char *name;
    eve_type_t *type; /* NULL where a type may be left out (callback parameters) */
} eve_param_t;

typedef struct {
    eve_param_t *v;
    size_t n;
} eve_params_t;

typedef struct eve_node eve_node_t;

typedef struct {
    eve_node_t **v;
    size_t n;
} eve_list_t;

typedef enum {
    /* declarations */
    EVE_N_PROGRAM,
    EVE_N_IMPORT,
    EVE_N_CLASS,
    EVE_N_FUNC,
    EVE_N_VAR,
    /* statements */
    EVE_N_EXPR,     /* an expression statement, maybe a call with handlers */
    EVE_N_ASSIGN,
    EVE_N_RETURN,
    EVE_N_IF,
    EVE_N_WHILE,
    EVE_N_FOR,      /* parallel for too */
    EVE_N_FINISH,
    EVE_N_TASK,
    EVE_N_ON,
    EVE_N_HANDLER,  /* one named callback in a call's handler block */
    EVE_N_PASS,
    EVE_N_BREAK,
    EVE_N_CONTINUE,
    /* expressions */
    EVE_N_INT,
    EVE_N_FLOAT,
    EVE_N_CHAR,
    EVE_N_STRING,
    EVE_N_BOOL,
    EVE_N_NAME,
    EVE_N_UNARY,
    EVE_N_BINARY,
    EVE_N_CALL,
    EVE_N_INDEX,
    EVE_N_MEMBER,
    EVE_N_LAMBDA,
} eve_node_kind_t;

struct eve_ty;
struct eve_sym;

struct eve_node {
    eve_node_kind_t kind;
    eve_pos_t pos;
    /* Set by the checker (check.h), NULL before: an expression's type, and
     * the symbol a name (or a call's function, or a declaration) resolved to. */
    const struct eve_ty *type;
    struct eve_sym *sym;
    union {
        struct { eve_list_t items; } program;
        struct { const char *path; } import;                   /* dotted; "a.b.*": every name of a.b */
        struct { const char *name; eve_list_t members; } class_; /* VAR and FUNC */
        struct {
            const char *name;
            eve_params_t params;
            eve_type_t *ret;      /* NULL: void */
            eve_perms_t perms;
            eve_list_t body;
        } func;
        struct {
            const char **names;
            size_t nnames;
            eve_type_t *type;
            eve_node_t *init;     /* NULL: none */
        } var;
        struct {
            eve_node_t *expr;
            eve_list_t handlers;  /* EVE_N_HANDLER, after "call(...):" */
        } expr;
        struct {
            eve_tok_kind_t op;    /* EVE_T_ASSIGN, EVE_T_PLUS_ASSIGN, ... */
            eve_node_t *target, *value;
        } assign;
        struct { eve_node_t *value; } ret; /* value NULL: bare return */
        struct {
            eve_node_t *cond;
            eve_list_t then, else_; /* else_ empty: no else; "else if" is an else_ of one IF */
            bool has_else;
        } if_;
        struct { eve_node_t *cond; eve_list_t body; } while_;
        struct {
            const char *var;
            eve_type_t *type;     /* NULL: not written */
            eve_node_t *coll;
            bool parallel;        /* @ for */
            eve_perms_t perms;    /* parallel for only */
            eve_list_t body;
        } for_;
        struct { eve_list_t body; } finish;
        struct { eve_perms_t perms; eve_list_t body; } task;
        struct {
            eve_node_t *obj;
            const char *event;
            eve_params_t params;
            eve_perms_t perms;
            eve_list_t body;
        } on;
        struct {
            const char *name;
            eve_params_t params;
            eve_perms_t perms;
            eve_list_t body;
            eve_type_t *ret;      /* NULL: void; a handler given as `name = [perms] (params) T:` */
            bool assigned;        /* given in that form (the paper's), not `name (params) [perms]:` */
        } handler;
        struct { uint64_t value; } int_;
        struct { const char *text; } float_; /* as written */
        struct { uint64_t value; } char_;
        struct { const char *bytes; size_t len; } string;
        struct { bool value; } bool_;
        struct { const char *name; } name;
        struct { eve_tok_kind_t op; eve_node_t *operand; } unary;
        struct { eve_tok_kind_t op; eve_node_t *lhs, *rhs; } binary;
        struct { eve_node_t *callee; eve_list_t args; } call;
        struct { eve_node_t *obj, *index; } index;
        struct { eve_node_t *obj; const char *name; } member;
        struct {
            eve_perms_t perms;    /* always present: a lambda starts with its list */
            eve_params_t params;
            eve_type_t *ret;      /* NULL: not written */
            eve_node_t *expr;     /* a one-line body, or */
            eve_list_t body;      /* a block (expr == NULL) */
        } lambda;
    } u;
};

/* Parses src[0..len) into a program (in the context's arena), or returns
 * NULL with at least one error in the context. */
eve_node_t *eve_parse(eve_ctx_t *cx, const char *src, size_t len);

/* The tree as an indented S-expression, one node per line where it has
 * children; deterministic (no addresses, no positions). malloc'd, the
 * caller frees; NULL when out of memory. */
char *eve_dump(const eve_node_t *program, size_t *len);

#endif
