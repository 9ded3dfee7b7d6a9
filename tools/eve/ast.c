/* yard-eve's front end: the compilation context (arena, diagnostics), token
 * names, and the tree dumper (docs/eve.md, "The dump"). */
#include "eve.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ----------------------------------------------------------------
 * A list of blocks; allocation bumps a pointer in the newest block. A request
 * larger than a quarter block gets a block of its own (so a few big arrays do
 * not waste the rest of a block). Nothing is freed before eve_arena_free. */

#define ARENA_BLOCK (64u << 10)
#define ARENA_ALIGN (sizeof(max_align_t))

struct arena_block {
    struct arena_block *next;
    size_t used, size;
    max_align_t data[];
};

struct eve_arena {
    struct arena_block *head;
    size_t total;
};

eve_arena_t *eve_arena_new(void)
{
    return calloc(1, sizeof(eve_arena_t));
}

void eve_arena_free(eve_arena_t *a)
{
    if (!a)
        return;
    for (struct arena_block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(a);
}

void *eve_arena_alloc(eve_arena_t *a, size_t size)
{
    if (!a || size > EVE_MAX_ARENA)
        return NULL;
    size = (size + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (size == 0)
        size = ARENA_ALIGN;
    struct arena_block *b = a->head;
    if (!b || b->size - b->used < size) {
        size_t bsize = size > ARENA_BLOCK / 4 ? size : ARENA_BLOCK;
        if (a->total + bsize > EVE_MAX_ARENA)
            return NULL;
        struct arena_block *nb = malloc(sizeof *nb + bsize);
        if (!nb)
            return NULL;
        nb->used = 0;
        nb->size = bsize;
        a->total += bsize;
        if (bsize == ARENA_BLOCK || !b) {
            nb->next = b;
            a->head = nb;
        } else {
            /* A private block for a big request: keep bumping in the current one. */
            nb->next = b->next;
            b->next = nb;
        }
        b = nb;
    }
    void *p = (char *)b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

char *eve_arena_strndup(eve_arena_t *a, const char *s, size_t n)
{
    if (n >= EVE_MAX_ARENA)
        return NULL;
    char *p = eve_arena_alloc(a, n + 1);
    if (p) {
        if (n)
            memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

/* ---- context and diagnostics ---------------------------------------------- */

bool eve_ctx_init(eve_ctx_t *cx, const char *file)
{
    memset(cx, 0, sizeof *cx);
    cx->file = file ? file : "<input>";
    cx->arena = eve_arena_new();
    return cx->arena != NULL;
}

void eve_ctx_free(eve_ctx_t *cx)
{
    eve_arena_free(cx->arena);
    cx->arena = NULL;
}

void eve_error(eve_ctx_t *cx, eve_pos_t pos, const char *fmt, ...)
{
    cx->nerrors++;
    if (cx->ndiags >= EVE_MAX_DIAGS)
        return;
    eve_diag_t *d = &cx->diags[cx->ndiags++];
    d->pos = pos;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
}

int eve_diag_format(const eve_ctx_t *cx, size_t i, char *out, size_t size)
{
    const eve_diag_t *d = &cx->diags[i];
    return snprintf(out, size, "%s:%u:%u: error: %s", cx->file, (unsigned)d->pos.line,
                    (unsigned)d->pos.col, d->msg);
}

void eve_warning(eve_ctx_t *cx, eve_pos_t pos, const char *fmt, ...)
{
    eve_diag_t d = {.pos = pos};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d.msg, sizeof d.msg, fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < cx->nwarnings; i++)
        if (cx->warnings[i].pos.line == pos.line && cx->warnings[i].pos.col == pos.col &&
            strcmp(cx->warnings[i].msg, d.msg) == 0)
            return;
    if (cx->nwarnings < EVE_MAX_DIAGS)
        cx->warnings[cx->nwarnings++] = d;
}

int eve_warning_format(const eve_ctx_t *cx, size_t i, char *out, size_t size)
{
    const eve_diag_t *d = &cx->warnings[i];
    return snprintf(out, size, "%s:%u:%u: warning: %s", cx->file, (unsigned)d->pos.line,
                    (unsigned)d->pos.col, d->msg);
}

/* ---- token names ----------------------------------------------------------- */

static const char *const tok_names[EVE_T_COUNT] = {
    [EVE_T_EOF] = "end of file",
    [EVE_T_NEWLINE] = "newline",
    [EVE_T_INDENT] = "indent",
    [EVE_T_DEDENT] = "dedent",
    [EVE_T_IDENT] = "identifier",
    [EVE_T_INT] = "integer",
    [EVE_T_FLOAT] = "float",
    [EVE_T_CHAR] = "character",
    [EVE_T_STRING] = "string",
    [EVE_T_IMPORT] = "'import'",
    [EVE_T_CLASS] = "'class'",
    [EVE_T_RETURN] = "'return'",
    [EVE_T_IF] = "'if'",
    [EVE_T_ELSE] = "'else'",
    [EVE_T_FOR] = "'for'",
    [EVE_T_IN] = "'in'",
    [EVE_T_WHILE] = "'while'",
    [EVE_T_FINISH] = "'finish'",
    [EVE_T_ON] = "'on'",
    [EVE_T_TRUE] = "'true'",
    [EVE_T_FALSE] = "'false'",
    [EVE_T_PASS] = "'pass'",
    [EVE_T_BREAK] = "'break'",
    [EVE_T_CONTINUE] = "'continue'",
    [EVE_T_LPAREN] = "'('",
    [EVE_T_RPAREN] = "')'",
    [EVE_T_LBRACKET] = "'['",
    [EVE_T_RBRACKET] = "']'",
    [EVE_T_COMMA] = "','",
    [EVE_T_COLON] = "':'",
    [EVE_T_DOT] = "'.'",
    [EVE_T_AT] = "'@'",
    [EVE_T_PLUS] = "'+'",
    [EVE_T_MINUS] = "'-'",
    [EVE_T_STAR] = "'*'",
    [EVE_T_SLASH] = "'/'",
    [EVE_T_PERCENT] = "'%'",
    [EVE_T_AMP] = "'&'",
    [EVE_T_PIPE] = "'|'",
    [EVE_T_CARET] = "'^'",
    [EVE_T_TILDE] = "'~'",
    [EVE_T_BANG] = "'!'",
    [EVE_T_SHL] = "'<<'",
    [EVE_T_SHR] = "'>>'",
    [EVE_T_LT] = "'<'",
    [EVE_T_LE] = "'<='",
    [EVE_T_GT] = "'>'",
    [EVE_T_GE] = "'>='",
    [EVE_T_EQ] = "'=='",
    [EVE_T_NE] = "'!='",
    [EVE_T_ANDAND] = "'&&'",
    [EVE_T_OROR] = "'||'",
    [EVE_T_ASSIGN] = "'='",
    [EVE_T_PLUS_ASSIGN] = "'+='",
    [EVE_T_MINUS_ASSIGN] = "'-='",
    [EVE_T_STAR_ASSIGN] = "'*='",
    [EVE_T_SLASH_ASSIGN] = "'/='",
    [EVE_T_PERCENT_ASSIGN] = "'%='",
};

const char *eve_tok_name(eve_tok_kind_t k)
{
    if ((unsigned)k >= EVE_T_COUNT || !tok_names[k])
        return "?";
    return tok_names[k];
}

/* An operator's spelling without quotes, for the dump. */
static const char *op_text(eve_tok_kind_t k)
{
    const char *s = eve_tok_name(k);
    static const char *const bare[] = {"+", "-", "*", "/", "%", "&", "|", "^", "~", "!",
                                       "<<", ">>", "<", "<=", ">", ">=", "==", "!=", "&&", "||",
                                       "=", "+=", "-=", "*=", "/=", "%="};
    for (size_t i = 0; i < sizeof bare / sizeof bare[0]; i++) {
        size_t n = strlen(bare[i]);
        if (s[0] == '\'' && strncmp(s + 1, bare[i], n) == 0 && s[n + 1] == '\'' && !s[n + 2])
            return bare[i];
    }
    return "?";
}

/* ---- the dumper ------------------------------------------------------------ */

typedef struct {
    char *buf;
    size_t len, cap;
    bool oom;
} out_t;

static void put(out_t *o, const char *s, size_t n)
{
    if (o->oom)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 1024;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *b = realloc(o->buf, cap);
        if (!b) {
            o->oom = true;
            return;
        }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = 0;
}

static void puts_(out_t *o, const char *s)
{
    put(o, s, strlen(s));
}

static void putf(out_t *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void putf(out_t *o, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(o, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void newline(out_t *o, int indent)
{
    put(o, "\n", 1);
    for (int i = 0; i < indent; i++)
        put(o, "  ", 2);
}

static void put_escaped_byte(out_t *o, unsigned char c, char quote)
{
    switch (c) {
    case '\n': puts_(o, "\\n"); return;
    case '\t': puts_(o, "\\t"); return;
    case '\r': puts_(o, "\\r"); return;
    case '\\': puts_(o, "\\\\"); return;
    case 0: puts_(o, "\\0"); return;
    default: break;
    }
    if (c == (unsigned char)quote) {
        char e[2] = {'\\', quote};
        put(o, e, 2);
    } else if (c < 0x20 || c >= 0x7f) {
        putf(o, "\\x%02x", c);
    } else {
        char ch = (char)c;
        put(o, &ch, 1);
    }
}

static void dump_type(out_t *o, const eve_type_t *t)
{
    if (!t) {
        puts_(o, "?");
        return;
    }
    puts_(o, t->name);
    if (t->nargs) {
        puts_(o, "<");
        for (size_t i = 0; i < t->nargs; i++) {
            if (i)
                puts_(o, ", ");
            dump_type(o, t->args[i]);
        }
        puts_(o, ">");
    }
    if (t->shared)
        puts_(o, "@");
    if (t->ref)
        puts_(o, "&");
}

static void dump_perms(out_t *o, const eve_perms_t *p)
{
    if (!p->has)
        return;
    puts_(o, " (perms");
    static const char *const sigil[] = {"", "+", "-", "=", "&"};
    for (size_t i = 0; i < p->n; i++) {
        puts_(o, " ");
        puts_(o, sigil[p->v[i].kind]);
        puts_(o, p->v[i].name);
    }
    puts_(o, ")");
}

static void dump_params(out_t *o, const eve_params_t *p)
{
    puts_(o, " (params");
    for (size_t i = 0; i < p->n; i++) {
        puts_(o, " (");
        puts_(o, p->v[i].name);
        if (p->v[i].type) {
            puts_(o, " ");
            dump_type(o, p->v[i].type);
        }
        puts_(o, ")");
    }
    puts_(o, ")");
}

static void dump_node(out_t *o, const eve_node_t *n, int indent);

static void dump_stmts(out_t *o, const eve_list_t *l, int indent)
{
    for (size_t i = 0; i < l->n; i++) {
        newline(o, indent);
        dump_node(o, l->v[i], indent);
    }
}

static void dump_node(out_t *o, const eve_node_t *n, int indent)
{
    if (!n) {
        puts_(o, "<null>");
        return;
    }
    switch (n->kind) {
    case EVE_N_PROGRAM:
        puts_(o, "(program");
        dump_stmts(o, &n->u.program.items, indent + 1);
        puts_(o, ")");
        break;
    case EVE_N_IMPORT:
        puts_(o, "(import ");
        puts_(o, n->u.import.path);
        puts_(o, ")");
        break;
    case EVE_N_CLASS:
        puts_(o, "(class ");
        puts_(o, n->u.class_.name);
        dump_stmts(o, &n->u.class_.members, indent + 1);
        puts_(o, ")");
        break;
    case EVE_N_FUNC:
        puts_(o, "(func ");
        puts_(o, n->u.func.name);
        dump_params(o, &n->u.func.params);
        puts_(o, " (returns ");
        if (n->u.func.ret)
            dump_type(o, n->u.func.ret);
        else
            puts_(o, "void");
        puts_(o, ")");
        dump_perms(o, &n->u.func.perms);
        dump_stmts(o, &n->u.func.body, indent + 1);
        puts_(o, ")");
        break;
    case EVE_N_VAR:
        puts_(o, "(var (");
        for (size_t i = 0; i < n->u.var.nnames; i++) {
            if (i)
                puts_(o, " ");
            puts_(o, n->u.var.names[i]);
        }
        puts_(o, ") ");
        dump_type(o, n->u.var.type);
        if (n->u.var.init) {
            puts_(o, " ");
            dump_node(o, n->u.var.init, indent);
        }
        puts_(o, ")");
        break;
    case EVE_N_EXPR:
        puts_(o, "(expr ");
        dump_node(o, n->u.expr.expr, indent);
        dump_stmts(o, &n->u.expr.handlers, indent + 1);
        puts_(o, ")");
        break;
    case EVE_N_ASSIGN:
        putf(o, "(%s ", op_text(n->u.assign.op));
        dump_node(o, n->u.assign.target, indent);
        puts_(o, " ");
        dump_node(o, n->u.assign.value, indent);
        puts_(o, ")");
        break;
    case EVE_N_RETURN:
        puts_(o, "(return");
        if (n->u.ret.value) {
            puts_(o, " ");
            dump_node(o, n->u.ret.value, indent);
        }
        puts_(o, ")");
        break;
    case EVE_N_IF:
        puts_(o, "(if ");
        dump_node(o, n->u.if_.cond, indent);
        newline(o, indent + 1);
        puts_(o, "(then");
        dump_stmts(o, &n->u.if_.then, indent + 2);
        puts_(o, ")");
        if (n->u.if_.has_else) {
            newline(o, indent + 1);
            puts_(o, "(else");
            dump_stmts(o, &n->u.if_.else_, indent + 2);
            puts_(o, ")");
        }
        puts_(o, ")");
        break;
    case EVE_N_WHILE:
        puts_(o, "(while ");
        dump_node(o, n->u.while_.cond, indent);
        dump_stmts(o, &n->u.while_.body, indent + 1);
        puts_(o, ")");
        break;
    case EVE_N_FOR:
        puts_(o, n->u.for_.parallel ? "(parallel-for (" : "(for (");
        puts_(o, n->u.for_.var);
        if (n->u.for_.type) {
            puts_(o, " ");
            dump_type(o, n->u.for_.type);
        }
        puts_(o, ") ");
        dump_node(o, n->u.for_.coll, indent);
        dump_perms(o, &n->u.for_.perms);
        dump_stmts(o, &n->u.for_.body, indent + 1);
        puts_(o, ")");
        break;
    case EVE_N_FINISH:
        puts_(o, "(finish");
        dump_stmts(o, &n->u.finish.body, indent + 1);
        puts_(o, ")");
        break;
    case EVE_N_TASK:
        puts_(o, "(task");
        dump_perms(o, &n->u.task.perms);
        dump_stmts(o, &n->u.task.body, indent + 1);
        puts_(o, ")");
        break;
    case EVE_N_ON:
        puts_(o, "(on ");
        dump_node(o, n->u.on.obj, indent);
        puts_(o, " ");
        puts_(o, n->u.on.event);
        dump_params(o, &n->u.on.params);
        dump_perms(o, &n->u.on.perms);
        dump_stmts(o, &n->u.on.body, indent + 1);
        puts_(o, ")");
        break;
    case EVE_N_HANDLER:
        puts_(o, "(handler ");
        puts_(o, n->u.handler.name);
        dump_params(o, &n->u.handler.params);
        dump_perms(o, &n->u.handler.perms);
        if (n->u.handler.ret) {
            puts_(o, " (returns ");
            dump_type(o, n->u.handler.ret);
            puts_(o, ")");
        }
        dump_stmts(o, &n->u.handler.body, indent + 1);
        puts_(o, ")");
        break;
    case EVE_N_PASS:
        puts_(o, "(pass)");
        break;
    case EVE_N_BREAK:
        puts_(o, "(break)");
        break;
    case EVE_N_CONTINUE:
        puts_(o, "(continue)");
        break;
    case EVE_N_INT:
        putf(o, "%llu", (unsigned long long)n->u.int_.value);
        break;
    case EVE_N_FLOAT:
        puts_(o, n->u.float_.text);
        break;
    case EVE_N_CHAR:
        puts_(o, "'");
        put_escaped_byte(o, (unsigned char)n->u.char_.value, '\'');
        puts_(o, "'");
        break;
    case EVE_N_STRING:
        puts_(o, "\"");
        for (size_t i = 0; i < n->u.string.len; i++)
            put_escaped_byte(o, (unsigned char)n->u.string.bytes[i], '"');
        puts_(o, "\"");
        break;
    case EVE_N_BOOL:
        puts_(o, n->u.bool_.value ? "true" : "false");
        break;
    case EVE_N_NAME:
        puts_(o, n->u.name.name);
        break;
    case EVE_N_UNARY:
        putf(o, "(%s ", op_text(n->u.unary.op));
        dump_node(o, n->u.unary.operand, indent);
        puts_(o, ")");
        break;
    case EVE_N_BINARY:
        putf(o, "(%s ", op_text(n->u.binary.op));
        dump_node(o, n->u.binary.lhs, indent);
        puts_(o, " ");
        dump_node(o, n->u.binary.rhs, indent);
        puts_(o, ")");
        break;
    case EVE_N_CALL:
        puts_(o, "(call ");
        dump_node(o, n->u.call.callee, indent);
        for (size_t i = 0; i < n->u.call.args.n; i++) {
            puts_(o, " ");
            dump_node(o, n->u.call.args.v[i], indent);
        }
        puts_(o, ")");
        break;
    case EVE_N_INDEX:
        puts_(o, "(index ");
        dump_node(o, n->u.index.obj, indent);
        puts_(o, " ");
        dump_node(o, n->u.index.index, indent);
        puts_(o, ")");
        break;
    case EVE_N_MEMBER:
        puts_(o, "(. ");
        dump_node(o, n->u.member.obj, indent);
        puts_(o, " ");
        puts_(o, n->u.member.name);
        puts_(o, ")");
        break;
    case EVE_N_LAMBDA:
        puts_(o, "(lambda");
        dump_perms(o, &n->u.lambda.perms);
        dump_params(o, &n->u.lambda.params);
        if (n->u.lambda.ret) {
            puts_(o, " (returns ");
            dump_type(o, n->u.lambda.ret);
            puts_(o, ")");
        }
        if (n->u.lambda.expr) {
            puts_(o, " ");
            dump_node(o, n->u.lambda.expr, indent);
        } else {
            dump_stmts(o, &n->u.lambda.body, indent + 1);
        }
        puts_(o, ")");
        break;
    }
}

char *eve_dump(const eve_node_t *program, size_t *len)
{
    out_t o = {0};
    dump_node(&o, program, 0);
    put(&o, "\n", 1);
    if (o.oom) {
        free(o.buf);
        return NULL;
    }
    if (len)
        *len = o.len;
    return o.buf;
}
