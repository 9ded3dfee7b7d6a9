/* yard-eve's lexer: Eve source bytes to tokens with line:col, and the
 * indentation of each logical line to INDENT/DEDENT tokens, as Python's
 * tokenizer does (docs/eve.md, "Lexical rules"):
 *
 *  - blank lines and lines holding only a comment ('#' to the end of the
 *    line) do not count;
 *  - indentation is spaces only: a tab there is an error ("mixed" when the
 *    same indentation also has spaces);
 *  - a dedent must land on a column some enclosing line started at;
 *  - inside (...) and [...] newlines and indentation mean nothing: a line
 *    continues until its brackets close.
 *
 * Pure: no I/O, no global state; tokens go into the context's arena. */
#include "eve.h"

#include <string.h>

typedef struct {
    eve_ctx_t *cx;
    const char *src;
    size_t len, i;
    uint32_t line;
    size_t line_start;
    eve_tok_t *toks;
    size_t ntoks, cap;
    bool oom;
    bool fatal;
    /* indentation columns of the enclosing blocks, [0] == 0 */
    uint32_t indents[EVE_MAX_NESTING + 1];
    int nindents;
    /* open brackets */
    struct {
        eve_tok_kind_t kind;
        eve_pos_t pos;
    } brackets[EVE_MAX_NESTING];
    int nbrackets;
    size_t line_toks;     /* tokens on this logical line so far */
    eve_pos_t last_end;   /* end of the last token: where a NEWLINE is */
} lexer_t;

static eve_pos_t here(const lexer_t *L)
{
    return (eve_pos_t){L->line, (uint32_t)(L->i - L->line_start + 1)};
}

static eve_pos_t pos_at(const lexer_t *L, size_t i)
{
    return (eve_pos_t){L->line, (uint32_t)(i - L->line_start + 1)};
}

static eve_tok_t *emit(lexer_t *L, eve_tok_kind_t kind, eve_pos_t pos, eve_pos_t end)
{
    if (L->oom)
        return NULL;
    if (L->ntoks == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        eve_tok_t *t = eve_arena_alloc(L->cx->arena, cap * sizeof *t);
        if (!t) {
            L->oom = true;
            return NULL;
        }
        if (L->ntoks)
            memcpy(t, L->toks, L->ntoks * sizeof *t);
        L->toks = t;
        L->cap = cap;
    }
    eve_tok_t *t = &L->toks[L->ntoks++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->pos = pos;
    t->end = end;
    if (kind != EVE_T_NEWLINE && kind != EVE_T_INDENT && kind != EVE_T_DEDENT &&
        kind != EVE_T_EOF) {
        L->line_toks++;
        L->last_end = end;
    }
    return t;
}

static const struct {
    const char *word;
    eve_tok_kind_t kind;
} keywords[] = {
    {"import", EVE_T_IMPORT}, {"class", EVE_T_CLASS},   {"return", EVE_T_RETURN},
    {"if", EVE_T_IF},         {"else", EVE_T_ELSE},     {"for", EVE_T_FOR},
    {"in", EVE_T_IN},         {"while", EVE_T_WHILE},   {"finish", EVE_T_FINISH},
    {"on", EVE_T_ON},         {"true", EVE_T_TRUE},     {"false", EVE_T_FALSE},
    {"pass", EVE_T_PASS},     {"break", EVE_T_BREAK},   {"continue", EVE_T_CONTINUE},
};

static bool is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int peek(const lexer_t *L, size_t k)
{
    return L->i + k < L->len ? (unsigned char)L->src[L->i + k] : -1;
}

static void bad_char(lexer_t *L, eve_pos_t pos, int c)
{
    if (c > 0x20 && c < 0x7f)
        eve_error(L->cx, pos, "unexpected character '%c'", c);
    else
        eve_error(L->cx, pos, "unexpected byte 0x%02x", (unsigned)c);
}

/* At the start of a physical line outside brackets: measure the indentation
 * and emit INDENT/DEDENT for a line that holds a token. */
static void line_start(lexer_t *L)
{
    size_t j = L->i;
    size_t first_tab = (size_t)-1;
    bool spaces = false;
    while (j < L->len && (L->src[j] == ' ' || L->src[j] == '\t')) {
        if (L->src[j] == '\t') {
            if (first_tab == (size_t)-1)
                first_tab = j;
        } else {
            spaces = true;
        }
        j++;
    }
    /* Blank or comment-only line: its indentation does not count. */
    if (j >= L->len || L->src[j] == '\n' || L->src[j] == '#' ||
        (L->src[j] == '\r' && j + 1 < L->len && L->src[j + 1] == '\n')) {
        L->i = j;
        return;
    }
    uint32_t width = (uint32_t)(j - L->i);
    if (first_tab != (size_t)-1) {
        /* Reported, and the line's indentation ignored: no cascade of
         * unindent errors after it. */
        eve_error(L->cx, pos_at(L, first_tab),
                  spaces ? "mixed tabs and spaces in indentation: indent with spaces only"
                         : "tab in indentation: indent with spaces only");
        L->i = j;
        return;
    }
    L->i = j;
    eve_pos_t pos = here(L);
    uint32_t top = L->indents[L->nindents];
    if (width > top) {
        if (L->nindents >= EVE_MAX_NESTING) {
            eve_error(L->cx, pos, "blocks nested too deeply (the limit is %d)", EVE_MAX_NESTING);
            L->fatal = true;
            return;
        }
        L->indents[++L->nindents] = width;
        emit(L, EVE_T_INDENT, pos, pos);
    } else if (width < top) {
        while (L->nindents > 0 && L->indents[L->nindents] > width) {
            L->nindents--;
            emit(L, EVE_T_DEDENT, pos, pos);
        }
        if (L->indents[L->nindents] != width) {
            eve_error(L->cx, pos,
                      "unindent to column %u does not match any enclosing block (column %u)",
                      (unsigned)width + 1, (unsigned)L->indents[L->nindents] + 1);
            /* Carry on as if this line opened a block at its column. */
            if (L->nindents < EVE_MAX_NESTING)
                L->indents[++L->nindents] = width;
        }
    }
}

static void lex_number(lexer_t *L)
{
    size_t start = L->i;
    eve_pos_t pos = here(L);
    bool is_float = false, bad = false, overflow = false;
    uint64_t v = 0;
    if (peek(L, 0) == '0' && (peek(L, 1) == 'x' || peek(L, 1) == 'X')) {
        L->i += 2;
        size_t digits = 0;
        int h;
        while ((h = hexval(peek(L, 0))) >= 0) {
            if (v > (UINT64_MAX >> 4))
                overflow = true;
            v = v << 4 | (uint64_t)h;
            L->i++;
            digits++;
        }
        if (!digits) {
            eve_error(L->cx, pos, "hexadecimal literal without digits");
            bad = true;
        }
    } else {
        while (is_digit(peek(L, 0))) {
            uint64_t d = (uint64_t)(peek(L, 0) - '0');
            if (v > (UINT64_MAX - d) / 10)
                overflow = true;
            v = v * 10 + d;
            L->i++;
        }
        if (peek(L, 0) == '.' && is_digit(peek(L, 1))) {
            is_float = true;
            L->i++;
            while (is_digit(peek(L, 0)))
                L->i++;
        }
        if ((peek(L, 0) == 'e' || peek(L, 0) == 'E') &&
            (is_digit(peek(L, 1)) ||
             ((peek(L, 1) == '+' || peek(L, 1) == '-') && is_digit(peek(L, 2))))) {
            is_float = true;
            L->i += 2;
            while (is_digit(peek(L, 0)))
                L->i++;
        }
    }
    if (is_alpha(peek(L, 0)) || is_digit(peek(L, 0))) {
        eve_error(L->cx, here(L), "invalid character '%c' in number", peek(L, 0));
        bad = true;
        while (is_alpha(peek(L, 0)) || is_digit(peek(L, 0)))
            L->i++;
    }
    if (L->i - start > EVE_MAX_IDENT) {
        eve_error(L->cx, pos, "number longer than %d characters", EVE_MAX_IDENT);
        bad = true;
    }
    if (!is_float && overflow && !bad) {
        eve_error(L->cx, pos, "integer literal does not fit in 64 bits");
        bad = true;
    }
    eve_tok_t *t = emit(L, is_float ? EVE_T_FLOAT : EVE_T_INT, pos, here(L));
    if (!t)
        return;
    t->ival = bad ? 0 : v;
    if (is_float) {
        t->text = eve_arena_strndup(L->cx->arena, L->src + start, L->i - start);
        t->len = L->i - start;
        if (!t->text)
            L->oom = true;
    }
}

/* A string or character literal starting at the quote; decodes escapes. */
static void lex_quoted(lexer_t *L)
{
    char quote = L->src[L->i];
    eve_pos_t pos = here(L);
    size_t start = ++L->i;
    /* Find the end first, to size the buffer. */
    size_t j = start;
    while (j < L->len && L->src[j] != quote && L->src[j] != '\n') {
        if (L->src[j] == '\\' && j + 1 < L->len && L->src[j + 1] != '\n')
            j++;
        j++;
    }
    if (j >= L->len || L->src[j] != quote) {
        eve_error(L->cx, pos, quote == '"' ? "unterminated string" : "unterminated character literal");
        L->i = j;
        return;
    }
    size_t raw = j - start;
    if (raw > EVE_MAX_STRING) {
        eve_error(L->cx, pos, "string literal longer than %u bytes", EVE_MAX_STRING);
        L->i = j + 1;
        return;
    }
    char *buf = eve_arena_alloc(L->cx->arena, raw + 1);
    if (!buf) {
        L->oom = true;
        return;
    }
    size_t n = 0;
    bool bad = false;
    while (L->i < j) {
        char c = L->src[L->i];
        if (c != '\\') {
            buf[n++] = c;
            L->i++;
            continue;
        }
        eve_pos_t epos = here(L);
        int e = peek(L, 1);
        L->i += 2;
        switch (e) {
        case 'n': buf[n++] = '\n'; break;
        case 't': buf[n++] = '\t'; break;
        case 'r': buf[n++] = '\r'; break;
        case '0': buf[n++] = 0; break;
        case '\\': buf[n++] = '\\'; break;
        case '\'': buf[n++] = '\''; break;
        case '"': buf[n++] = '"'; break;
        case 'x': {
            int h1 = L->i < j ? hexval((unsigned char)L->src[L->i]) : -1;
            int h2 = L->i + 1 < j ? hexval((unsigned char)L->src[L->i + 1]) : -1;
            if (h1 < 0 || h2 < 0) {
                eve_error(L->cx, epos, "'\\x' needs two hexadecimal digits");
                bad = true;
            } else {
                buf[n++] = (char)(h1 << 4 | h2);
                L->i += 2;
            }
            break;
        }
        default:
            if (e > 0x20 && e < 0x7f)
                eve_error(L->cx, epos, "unknown escape '\\%c'", e);
            else
                eve_error(L->cx, epos, "unknown escape: '\\' followed by byte 0x%02x",
                          (unsigned)(e & 0xff));
            bad = true;
            break;
        }
    }
    L->i = j + 1;
    buf[n] = 0;
    if (quote == '\'') {
        if (!bad && n == 0)
            eve_error(L->cx, pos, "empty character literal");
        else if (!bad && n > 1)
            eve_error(L->cx, pos, "character literal must hold one byte");
        eve_tok_t *t = emit(L, EVE_T_CHAR, pos, here(L));
        if (t)
            t->ival = n ? (unsigned char)buf[0] : 0;
    } else {
        eve_tok_t *t = emit(L, EVE_T_STRING, pos, here(L));
        if (t) {
            t->text = buf;
            t->len = n;
        }
    }
}

static void open_bracket(lexer_t *L, eve_tok_kind_t kind, eve_pos_t pos)
{
    if (L->nbrackets >= EVE_MAX_NESTING) {
        eve_error(L->cx, pos, "brackets nested too deeply (the limit is %d)", EVE_MAX_NESTING);
        L->fatal = true;
        return;
    }
    L->brackets[L->nbrackets].kind = kind;
    L->brackets[L->nbrackets].pos = pos;
    L->nbrackets++;
    emit(L, kind, pos, (eve_pos_t){pos.line, pos.col + 1});
}

static void close_bracket(lexer_t *L, eve_tok_kind_t kind, eve_pos_t pos)
{
    eve_tok_kind_t want = kind == EVE_T_RPAREN ? EVE_T_LPAREN : EVE_T_LBRACKET;
    if (L->nbrackets == 0) {
        eve_error(L->cx, pos, "unmatched %s", eve_tok_name(kind));
    } else {
        L->nbrackets--;
        if (L->brackets[L->nbrackets].kind != want) {
            eve_pos_t o = L->brackets[L->nbrackets].pos;
            eve_error(L->cx, pos, "%s does not match %s opened at %u:%u", eve_tok_name(kind),
                      eve_tok_name(L->brackets[L->nbrackets].kind), (unsigned)o.line,
                      (unsigned)o.col);
        }
    }
    emit(L, kind, pos, (eve_pos_t){pos.line, pos.col + 1});
}

/* One- and two-character operators, longest first. */
static const struct {
    const char *text;
    eve_tok_kind_t kind;
} operators[] = {
    {"<<", EVE_T_SHL},          {">>", EVE_T_SHR},           {"<=", EVE_T_LE},
    {">=", EVE_T_GE},           {"==", EVE_T_EQ},            {"!=", EVE_T_NE},
    {"&&", EVE_T_ANDAND},       {"||", EVE_T_OROR},          {"+=", EVE_T_PLUS_ASSIGN},
    {"-=", EVE_T_MINUS_ASSIGN}, {"*=", EVE_T_STAR_ASSIGN},   {"/=", EVE_T_SLASH_ASSIGN},
    {"%=", EVE_T_PERCENT_ASSIGN},
    {",", EVE_T_COMMA},         {":", EVE_T_COLON},          {".", EVE_T_DOT},
    {"@", EVE_T_AT},            {"+", EVE_T_PLUS},           {"-", EVE_T_MINUS},
    {"*", EVE_T_STAR},          {"/", EVE_T_SLASH},          {"%", EVE_T_PERCENT},
    {"&", EVE_T_AMP},           {"|", EVE_T_PIPE},           {"^", EVE_T_CARET},
    {"~", EVE_T_TILDE},         {"!", EVE_T_BANG},           {"<", EVE_T_LT},
    {">", EVE_T_GT},            {"=", EVE_T_ASSIGN},
};

bool eve_lex(eve_ctx_t *cx, const char *src, size_t len, eve_tok_t **toks, size_t *ntoks)
{
    size_t errors_before = cx->nerrors;
    lexer_t L = {.cx = cx, .src = src, .len = len, .line = 1};
    *toks = NULL;
    *ntoks = 0;
    if (len > EVE_MAX_SOURCE) {
        eve_error(cx, (eve_pos_t){1, 1}, "source is larger than %u MiB", EVE_MAX_SOURCE >> 20);
        return false;
    }
    bool at_line_start = true;
    while (L.i < L.len && !L.oom && !L.fatal) {
        if (at_line_start) {
            at_line_start = false;
            if (L.nbrackets == 0) {
                line_start(&L);
                if (L.fatal)
                    break;
                if (L.i >= L.len)
                    break;
            }
        }
        int c = (unsigned char)L.src[L.i];
        eve_pos_t pos = here(&L);
        if (c == '\n') {
            if (L.nbrackets == 0 && L.line_toks) {
                emit(&L, EVE_T_NEWLINE, L.last_end, L.last_end);
                L.line_toks = 0;
            }
            L.i++;
            L.line++;
            L.line_start = L.i;
            at_line_start = true;
            continue;
        }
        if (c == ' ' || c == '\t') {
            L.i++;
            continue;
        }
        if (c == '\r') {
            if (peek(&L, 1) != '\n')
                eve_error(cx, pos, "carriage return not followed by a newline");
            L.i++;
            continue;
        }
        if (c == '#') {
            while (L.i < L.len && L.src[L.i] != '\n')
                L.i++;
            continue;
        }
        if (is_alpha(c)) {
            size_t start = L.i;
            while (is_alpha(peek(&L, 0)) || is_digit(peek(&L, 0)))
                L.i++;
            size_t n = L.i - start;
            eve_tok_kind_t kind = EVE_T_IDENT;
            for (size_t k = 0; k < sizeof keywords / sizeof keywords[0]; k++)
                if (strlen(keywords[k].word) == n && memcmp(keywords[k].word, src + start, n) == 0)
                    kind = keywords[k].kind;
            if (n > EVE_MAX_IDENT) {
                eve_error(cx, pos, "identifier longer than %d bytes", EVE_MAX_IDENT);
                continue;
            }
            eve_tok_t *t = emit(&L, kind, pos, here(&L));
            if (t && kind == EVE_T_IDENT) {
                t->text = eve_arena_strndup(cx->arena, src + start, n);
                t->len = n;
                if (!t->text)
                    L.oom = true;
            }
            continue;
        }
        if (is_digit(c)) {
            lex_number(&L);
            continue;
        }
        if (c == '"' || c == '\'') {
            lex_quoted(&L);
            continue;
        }
        if (c == '(' || c == '[') {
            L.i++;
            open_bracket(&L, c == '(' ? EVE_T_LPAREN : EVE_T_LBRACKET, pos);
            continue;
        }
        if (c == ')' || c == ']') {
            L.i++;
            close_bracket(&L, c == ')' ? EVE_T_RPAREN : EVE_T_RBRACKET, pos);
            continue;
        }
        bool matched = false;
        for (size_t k = 0; k < sizeof operators / sizeof operators[0]; k++) {
            size_t n = strlen(operators[k].text);
            if (L.i + n <= L.len && memcmp(src + L.i, operators[k].text, n) == 0) {
                L.i += n;
                emit(&L, operators[k].kind, pos, here(&L));
                matched = true;
                break;
            }
        }
        if (matched)
            continue;
        bad_char(&L, pos, c);
        L.i++;
    }
    if (L.oom) {
        eve_error(cx, here(&L), "out of memory");
        return false;
    }
    if (L.fatal)
        return false;
    if (L.nbrackets > 0) {
        int k = L.nbrackets - 1;
        eve_error(cx, L.brackets[k].pos, "%s is never closed", eve_tok_name(L.brackets[k].kind));
    }
    if (L.line_toks)
        emit(&L, EVE_T_NEWLINE, L.last_end, L.last_end);
    eve_pos_t end = here(&L);
    while (L.nindents > 0) {
        L.nindents--;
        emit(&L, EVE_T_DEDENT, end, end);
    }
    emit(&L, EVE_T_EOF, end, end);
    if (L.oom) {
        eve_error(cx, end, "out of memory");
        return false;
    }
    *toks = L.toks;
    *ntoks = L.ntoks;
    return cx->nerrors == errors_before;
}
