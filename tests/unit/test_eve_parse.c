/* yard-eve's front end (tools/eve, docs/eve.md): the lexer's tokens and
 * positions, golden dumps of small programs covering every construct, the
 * exact messages of syntax errors, the nesting limits, and every program of
 * examples/eve parsing (and every prefix of each failing cleanly). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eve.h"
#include "test.h"

#ifndef EVE_EXAMPLES_DIR
#error "EVE_EXAMPLES_DIR must name examples/eve"
#endif

/* Parses src as "t.eve"; returns the dump (malloc'd) or NULL, and the
 * first diagnostic, formatted, in first (if any). */
static char *parse(const char *src, size_t len, char *first, size_t size, size_t *nerrors)
{
    eve_ctx_t cx;
    ASSERT(eve_ctx_init(&cx, "t.eve"));
    eve_node_t *prog = eve_parse(&cx, src, len);
    char *dump = NULL;
    if (first && size)
        first[0] = 0;
    if (prog) {
        ASSERT_EQ(cx.nerrors, 0);
        dump = eve_dump(prog, NULL);
        ASSERT(dump);
        /* Deterministic: a second dump of the same tree is the same text. */
        char *again = eve_dump(prog, NULL);
        ASSERT(again);
        ASSERT_STR_EQ(again, dump);
        free(again);
    } else {
        ASSERT_GT(cx.nerrors, 0);
        ASSERT_GT(cx.ndiags, 0);
        if (first)
            eve_diag_format(&cx, 0, first, size);
    }
    if (nerrors)
        *nerrors = cx.nerrors;
    eve_ctx_free(&cx);
    return dump;
}

static void expect_dump(const char *src, const char *want)
{
    char err[512];
    char *dump = parse(src, strlen(src), err, sizeof err, NULL);
    if (!dump)
        TEST_FAIL("did not parse: %s\n--- source:\n%s", err, src);
    if (strcmp(dump, want) != 0)
        TEST_FAIL("dump differs\n--- got:\n%s--- want:\n%s", dump, want);
    free(dump);
}

static void expect_error(const char *src, const char *want)
{
    char err[512];
    char *dump = parse(src, strlen(src), err, sizeof err, NULL);
    if (dump)
        TEST_FAIL("parsed, expected the error %s\n--- source:\n%s", want, src);
    ASSERT_STR_EQ(err, want);
}

/* ---- the lexer ---------------------------------------------------------------- */

static void test_lex_tokens(void)
{
    static const char src[] = "f: (a,\n"
                              "      b) int:  # comment\n"
                              "\n"
                              "    # only a comment, any indentation\n"
                              "    x = a >> 2\r\n"
                              "    y = \"s\\n\" + 'c' + 0x1F + 2.5e3\n"
                              "z\n";
    eve_ctx_t cx;
    ASSERT(eve_ctx_init(&cx, "t.eve"));
    eve_tok_t *t;
    size_t n;
    ASSERT(eve_lex(&cx, src, sizeof src - 1, &t, &n));
    static const struct {
        eve_tok_kind_t kind;
        unsigned line, col;
    } want[] = {
        {EVE_T_IDENT, 1, 1},   {EVE_T_COLON, 1, 2},   {EVE_T_LPAREN, 1, 4},
        {EVE_T_IDENT, 1, 5},   {EVE_T_COMMA, 1, 6},   {EVE_T_IDENT, 2, 7},
        {EVE_T_RPAREN, 2, 8},  {EVE_T_IDENT, 2, 10},  {EVE_T_COLON, 2, 13},
        {EVE_T_NEWLINE, 2, 14}, {EVE_T_INDENT, 5, 5}, {EVE_T_IDENT, 5, 5},
        {EVE_T_ASSIGN, 5, 7},  {EVE_T_IDENT, 5, 9},   {EVE_T_SHR, 5, 11},
        {EVE_T_INT, 5, 14},    {EVE_T_NEWLINE, 5, 15}, {EVE_T_IDENT, 6, 5},
        {EVE_T_ASSIGN, 6, 7},  {EVE_T_STRING, 6, 9},  {EVE_T_PLUS, 6, 15},
        {EVE_T_CHAR, 6, 17},   {EVE_T_PLUS, 6, 21},   {EVE_T_INT, 6, 23},
        {EVE_T_PLUS, 6, 28},   {EVE_T_FLOAT, 6, 30},  {EVE_T_NEWLINE, 6, 35},
        {EVE_T_DEDENT, 7, 1},  {EVE_T_IDENT, 7, 1},   {EVE_T_NEWLINE, 7, 2},
        {EVE_T_EOF, 8, 1},
    };
    ASSERT_EQ(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n; i++) {
        if (t[i].kind != want[i].kind || t[i].pos.line != want[i].line ||
            t[i].pos.col != want[i].col)
            TEST_FAIL("token %zu: %s at %u:%u, want %s at %u:%u", i, eve_tok_name(t[i].kind),
                      (unsigned)t[i].pos.line, (unsigned)t[i].pos.col,
                      eve_tok_name(want[i].kind), want[i].line, want[i].col);
    }
    ASSERT_STR_EQ(t[0].text, "f");
    ASSERT_EQ(t[15].ival, 2);
    ASSERT_EQ(t[19].len, 2);
    ASSERT_MEM_EQ(t[19].text, "s\n", 2);
    ASSERT_EQ(t[21].ival, 'c');
    ASSERT_EQ(t[23].ival, 31);
    ASSERT_STR_EQ(t[25].text, "2.5e3");
    eve_ctx_free(&cx);
}

static void test_lex_dedent_at_eof(void)
{
    /* No final newline, two blocks open: NEWLINE, two DEDENTs, EOF. */
    static const char src[] = "a:\n  b:\n    c";
    eve_ctx_t cx;
    ASSERT(eve_ctx_init(&cx, "t.eve"));
    eve_tok_t *t;
    size_t n;
    ASSERT(eve_lex(&cx, src, sizeof src - 1, &t, &n));
    static const eve_tok_kind_t want[] = {
        EVE_T_IDENT,  EVE_T_COLON,  EVE_T_NEWLINE, EVE_T_INDENT, EVE_T_IDENT,
        EVE_T_COLON,  EVE_T_NEWLINE, EVE_T_INDENT, EVE_T_IDENT,  EVE_T_NEWLINE,
        EVE_T_DEDENT, EVE_T_DEDENT, EVE_T_EOF,
    };
    ASSERT_EQ(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n; i++)
        ASSERT_EQ(t[i].kind, want[i]);
    eve_ctx_free(&cx);
}

/* ---- golden dumps ---------------------------------------------------------------- */

static const char decls_src[] =
    "import net.tcp\n"
    "limit : int = 10\n"
    "a, b : float\n"
    "table : map<string, vector<int>>@\n"
    "names : set<string>\n"
    "add: (x: int, y: int) int:\n"
    "    return x + y\n"
    "log: (msg: string) [+out]:\n"
    "    out.write(msg)\n"
    "class point:\n"
    "    x, y : int\n"
    "    moved : emitter<point>\n"
    "    norm: () int:\n"
    "        return x * x + y * y\n"
    "    pass\n";
static const char decls_dump[] =
    "(program\n"
    "  (import net.tcp)\n"
    "  (var (limit) int 10)\n"
    "  (var (a b) float)\n"
    "  (var (table) map<string, vector<int>>@)\n"
    "  (var (names) set<string>)\n"
    "  (func add (params (x int) (y int)) (returns int)\n"
    "    (return (+ x y)))\n"
    "  (func log (params (msg string)) (returns void) (perms +out)\n"
    "    (expr (call (. out write) msg)))\n"
    "  (class point\n"
    "    (var (x y) int)\n"
    "    (var (moved) emitter<point>)\n"
    "    (func norm (params) (returns int)\n"
    "      (return (+ (* x x) (* y y))))\n"
    "    (pass)))\n";

static const char stmts_src[] =
    "f: (n: int) int:\n"
    "    if n < 0:\n"
    "        return -n\n"
    "    else if n == 0:\n"
    "        return 0\n"
    "    else:\n"
    "        pass\n"
    "    while n > 10:\n"
    "        n -= 10\n"
    "        if n == 3: break\n"
    "        continue\n"
    "    for (i: int in range(0, n)):\n"
    "        total += i\n"
    "    for (c in \"abc\"): count *= 2\n"
    "    v[0] = 1\n"
    "    p.x /= 2\n"
    "    q %= 3\n"
    "    return\n";
static const char stmts_dump[] =
    "(program\n"
    "  (func f (params (n int)) (returns int)\n"
    "    (if (< n 0)\n"
    "      (then\n"
    "        (return (- n)))\n"
    "      (else\n"
    "        (if (== n 0)\n"
    "          (then\n"
    "            (return 0))\n"
    "          (else\n"
    "            (pass)))))\n"
    "    (while (> n 10)\n"
    "      (-= n 10)\n"
    "      (if (== n 3)\n"
    "        (then\n"
    "          (break)))\n"
    "      (continue))\n"
    "    (for (i int) (call range 0 n)\n"
    "      (+= total i))\n"
    "    (for (c) \"abc\"\n"
    "      (*= count 2))\n"
    "    (= (index v 0) 1)\n"
    "    (/= (. p x) 2)\n"
    "    (%= q 3)\n"
    "    (return)))\n";

static const char tasks_src[] =
    "work: (xs: vector<int>@, n: int) [+xs]:\n"
    "    r1, r2 : int@\n"
    "    finish:\n"
    "        @ [+r1, n, -xs]:\n"
    "            r1 = n * 2\n"
    "        @ [+r2, =n, &xs]: r2 = n + 1\n"
    "        @: log(\"plain\")\n"
    "    finish:\n"
    "        @ for (x: int in xs) [+x]:\n"
    "            x += 1\n"
    "    @ for (k in keys):\n"
    "        pass\n";
static const char tasks_dump[] =
    "(program\n"
    "  (func work (params (xs vector<int>@) (n int)) (returns void) (perms +xs)\n"
    "    (var (r1 r2) int@)\n"
    "    (finish\n"
    "      (task (perms +r1 n -xs)\n"
    "        (= r1 (* n 2)))\n"
    "      (task (perms +r2 =n &xs)\n"
    "        (= r2 (+ n 1)))\n"
    "      (task\n"
    "        (expr (call log \"plain\"))))\n"
    "    (finish\n"
    "      (parallel-for (x int) xs (perms +x)\n"
    "        (+= x 1)))\n"
    "    (parallel-for (k) keys\n"
    "      (pass))))\n";

static const char events_src[] =
    "tcp_socket.listen(8080):\n"
    "    connection (s: tcp_socket) [+clients]:\n"
    "        clients.push(s)\n"
    "        on s data (buf: read_buffer) [+s, clients]:\n"
    "            s.write(buf)\n"
    "        on s close:\n"
    "            pass\n"
    "    error (e):\n"
    "        stderr.write_line(e)\n"
    "every : timer\n"
    "on every tick [+ticks]: ticks += 1\n"
    "on self.sock data (b) [-other]: pass\n";
static const char events_dump[] =
    "(program\n"
    "  (expr (call (. tcp_socket listen) 8080)\n"
    "    (handler connection (params (s tcp_socket)) (perms +clients)\n"
    "      (expr (call (. clients push) s))\n"
    "      (on s data (params (buf read_buffer)) (perms +s clients)\n"
    "        (expr (call (. s write) buf)))\n"
    "      (on s close (params)\n"
    "        (pass)))\n"
    "    (handler error (params (e))\n"
    "      (expr (call (. stderr write_line) e))))\n"
    "  (var (every) timer)\n"
    "  (on every tick (params) (perms +ticks)\n"
    "    (+= ticks 1))\n"
    "  (on (. self sock) data (params (b)) (perms -other)\n"
    "    (pass)))\n";

static const char exprs_src[] =
    "x = a + b * c - d / e % f\n"
    "y = a || b && c == d < e | f ^ g & h << i + j * k\n"
    "z = -!~w\n"
    "u = a.b(c, d)[e].f()\n"
    "v = (a + b) * (c - d)\n"
    "w = 'a' + '\\n' + '\\x7f' + '\\''\n"
    "s = \"tab\\there \\\"q\\\" \\\\ \\x01 \\0\"\n"
    "t = 1.5 + 2e10 + 3.25e-2 + 0xff + 0\n"
    "b = true != false\n"
    "l = [=k, &m, r] (p: int, q) int: p + q + k\n"
    "h = [+acc] (x: int):\n"
    "    acc += x\n"
    "    return\n";
static const char exprs_dump[] =
    "(program\n"
    "  (= x (- (+ a (* b c)) (% (/ d e) f)))\n"
    "  (= y (|| a (&& b (== c (< d (| e (^ f (& g (<< h (+ i (* j k)))))))))))\n"
    "  (= z (- (! (~ w))))\n"
    "  (= u (call (. (index (call (. a b) c d) e) f)))\n"
    "  (= v (* (+ a b) (- c d)))\n"
    "  (= w (+ (+ (+ 'a' '\\n') '\\x7f') '\\''))\n"
    "  (= s \"tab\\there \\\"q\\\" \\\\ \\x01 \\0\")\n"
    "  (= t (+ (+ (+ (+ 1.5 2e10) 3.25e-2) 255) 0))\n"
    "  (= b (!= true false))\n"
    "  (= l (lambda (perms =k &m r) (params (p int) (q)) (returns int) (+ (+ p q) k)))\n"
    "  (= h (lambda (perms +acc) (params (x int))\n"
    "    (+= acc x)\n"
    "    (return))))\n";

static void test_dump_decls(void)
{
    expect_dump(decls_src, decls_dump);
}

static void test_dump_stmts(void)
{
    expect_dump(stmts_src, stmts_dump);
}

static void test_dump_tasks(void)
{
    expect_dump(tasks_src, tasks_dump);
}

static void test_dump_events(void)
{
    expect_dump(events_src, events_dump);
}

static void test_dump_exprs(void)
{
    expect_dump(exprs_src, exprs_dump);
}

static void test_dump_misc(void)
{
    /* Generic closes split from '>>' and '>='; an empty program; CRLF. */
    expect_dump("m : map<int, set<int>>= x\r\n", "(program\n  (var (m) map<int, set<int>> x))\n");
    expect_dump("", "(program)\n");
    expect_dump("# nothing but a comment\n\n", "(program)\n");
    expect_dump("f(1,\n  2,\n      3)\n", "(program\n  (expr (call f 1 2 3)))\n");
    expect_dump("@ [a.b, +c.d.e]: pass\n", "(program\n  (task (perms a.b +c.d.e)\n    (pass)))\n");
}

/* ---- errors ---------------------------------------------------------------------- */

static void test_error_indentation(void)
{
    expect_error("if x:\n    y = 1\n  z = 2\n",
                 "t.eve:3:3: error: unindent to column 3 does not match any enclosing block (column 1)");
    expect_error("if x:\n\ty = 1\n", "t.eve:2:1: error: tab in indentation: indent with spaces only");
    expect_error("if x:\n  \ty = 1\n",
                 "t.eve:2:3: error: mixed tabs and spaces in indentation: indent with spaces only");
    expect_error("x = 1\n    y = 2\n", "t.eve:2:5: error: unexpected indent");
    expect_error("if x:\ny = 2\n",
                 "t.eve:2:1: error: expected an indented block after 'if', found identifier 'y'");
}

static void test_error_unclosed(void)
{
    expect_error("x = f(1,\n  2\ny = 3\n", "t.eve:1:6: error: '(' is never closed");
    expect_error("x = [a, (b]\n", "t.eve:1:11: error: ']' does not match '(' opened at 1:9");
    expect_error("x = a)\n", "t.eve:1:6: error: unmatched ')'");
    expect_error("s = \"abc\n", "t.eve:1:5: error: unterminated string");
}

static void test_error_unknown_token(void)
{
    expect_error("x = a $ b\n", "t.eve:1:7: error: unexpected character '$'");
    expect_error("x = a; y = b\n", "t.eve:1:6: error: unexpected character ';'");
    expect_error("x = \x01\n", "t.eve:1:5: error: unexpected byte 0x01");
    expect_error("x = 12ab\n", "t.eve:1:7: error: invalid character 'a' in number");
    expect_error("x = 99999999999999999999\n",
                 "t.eve:1:5: error: integer literal does not fit in 64 bits");
    expect_error("c = 'ab'\n", "t.eve:1:5: error: character literal must hold one byte");
    expect_error("s = \"\\q\"\n", "t.eve:1:6: error: unknown escape '\\q'");
}

static void test_error_permissions(void)
{
    expect_error("@ [+a b]: pass\n",
                 "t.eve:1:7: error: expected ',' or ']' in the permission list, found identifier 'b'");
    expect_error("@ [+]: pass\n",
                 "t.eve:1:5: error: expected a name after the permission's sign in the permission "
                 "list, found ']'");
    expect_error("@ [a,]: pass\n",
                 "t.eve:1:6: error: expected a permission (x, +x, -x, =x or &x) in the permission "
                 "list, found ']'");
    expect_error("@ [a, +a]: pass\n", "t.eve:1:7: error: 'a' appears twice in the permission list");
    expect_error("@ [1]: pass\n",
                 "t.eve:1:4: error: expected a permission (x, +x, -x, =x or &x) in the permission "
                 "list, found integer 1");
    expect_error("@ [*a]: pass\n",
                 "t.eve:1:4: error: expected a permission (x, +x, -x, =x or &x) in the permission "
                 "list, found '*'");
    expect_error("on s data [+s:\n    pass\n", "t.eve:1:11: error: '[' is never closed");
}

static void test_error_missing_colon(void)
{
    expect_error("if x > 0\n    y = 1\n",
                 "t.eve:1:9: error: expected ':' after the condition of 'if', found newline");
    expect_error("f: (n: int) int\n    return n\n",
                 "t.eve:1:16: error: expected ':' after the function's head, found newline");
    expect_error("finish\n    pass\n", "t.eve:1:7: error: expected ':' after 'finish', found newline");
    expect_error("@ [+a]\n    a = 1\n",
                 "t.eve:1:7: error: expected ':' after the task's permissions, found newline");
    expect_error("for (x in xs)\n    pass\n",
                 "t.eve:1:14: error: expected ':' after the head of 'for', found newline");
    expect_error("class c\n    x : int\n",
                 "t.eve:1:8: error: expected ':' after the class name, found newline");
    expect_error("on s data [+s]\n    pass\n",
                 "t.eve:1:15: error: expected ':' after the head of 'on', found newline");
}

static void test_error_misc(void)
{
    expect_error("g: () int:\n    h: (a: int) int:\n        return a\n",
                 "t.eve:2:8: error: functions are declared at the top level or in a class, not in "
                 "a block");
    expect_error("f(x) = 2\n",
                 "t.eve:1:6: error: cannot assign to this expression: only to a name, a member or "
                 "an element");
    expect_error("x + 1:\n    pass\n",
                 "t.eve:1:6: error: only a call can be followed by a block of callbacks");
    expect_error("class c:\n    x = 1\n",
                 "t.eve:2:5: error: expected a field (name: type) or a method (name: (params) "
                 "type:) in class c, found identifier 'x'");
    expect_error("x : vector<int\n", "t.eve:1:15: error: expected ',' or '>' in the type arguments, found newline");
    expect_error("f: (a: int, a: int):\n    pass\n", "t.eve:1:13: error: parameter 'a' appears twice");
}

static void test_several_errors(void)
{
    /* One error per bad statement; the good ones between still parse. */
    static const char src[] = "if x > 1\n"
                              "    y = 2\n"
                              "z = 3 +\n"
                              "ok = 1\n"
                              "w = [+a b]: 1\n"
                              "@ [+a, -]: x = 1\n"
                              "f: (a: int) int:\n"
                              "    return a +\n"
                              "    return a\n";
    eve_ctx_t cx;
    ASSERT(eve_ctx_init(&cx, "t.eve"));
    ASSERT(!eve_parse(&cx, src, sizeof src - 1));
    static const char *const want[] = {
        "t.eve:1:9: error: expected ':' after the condition of 'if', found newline",
        "t.eve:3:8: error: expected an expression, found newline",
        "t.eve:5:9: error: expected ',' or ']' in the permission list, found identifier 'b'",
        ("t.eve:6:9: error: expected a name after the permission's sign in the permission list, "
         "found ']'"),
        "t.eve:8:15: error: expected an expression, found newline",
    };
    ASSERT_EQ(cx.ndiags, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < cx.ndiags; i++) {
        char line[512];
        eve_diag_format(&cx, i, line, sizeof line);
        ASSERT_STR_EQ(line, want[i]);
    }
    eve_ctx_free(&cx);
}

/* ---- limits ---------------------------------------------------------------------- */

static char *repeat(const char *head, const char *unit, size_t times, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(hl + ul * times + tl + 1);
    ASSERT(s);
    memcpy(s, head, hl);
    for (size_t i = 0; i < times; i++)
        memcpy(s + hl + i * ul, unit, ul);
    memcpy(s + hl + ul * times, tail, tl + 1);
    return s;
}

static void test_nesting_limits(void)
{
    char err[512];
    /* Brackets: the lexer's limit. */
    char *s = repeat("x = ", "(", 100000, "1");
    ASSERT(!parse(s, strlen(s), err, sizeof err, NULL));
    ASSERT_STR_EQ(err, "t.eve:1:205: error: brackets nested too deeply (the limit is 200)");
    free(s);
    /* Prefix operators: the parser's. */
    s = repeat("x = ", "-", 100000, "1\n");
    ASSERT(!parse(s, strlen(s), err, sizeof err, NULL));
    ASSERT_STR_EQ(err, "t.eve:1:204: error: nesting too deep: more than 200 blocks, expressions "
                       "or types within each other");
    free(s);
    /* Statements on one line within each other. */
    s = repeat("", "if x: ", 100000, "pass\n");
    ASSERT(!parse(s, strlen(s), err, sizeof err, NULL));
    ASSERT(strstr(err, "error: nesting too deep"));
    free(s);
    /* Indented blocks: the lexer's. */
    size_t cap = 300 * 320, len = 0;
    s = malloc(cap);
    ASSERT(s);
    for (int i = 0; i < 300; i++)
        len += (size_t)snprintf(s + len, cap - len, "%*sif x:\n", i, "");
    len += (size_t)snprintf(s + len, cap - len, "%*spass\n", 300, "");
    ASSERT(!parse(s, len, err, sizeof err, NULL));
    ASSERT_STR_EQ(err, "t.eve:202:202: error: blocks nested too deeply (the limit is 200)");
    free(s);
    /* A long flat chain builds a deep tree: bounded too. */
    s = repeat("x = 1", " + 1", 100000, "\n");
    ASSERT(!parse(s, strlen(s), err, sizeof err, NULL));
    ASSERT(strstr(err, "error: nesting too deep"));
    free(s);
    /* Types within types. */
    s = repeat("x : ", "vector<", 250, "int");
    char *t = repeat(s, ">", 250, "\n");
    ASSERT(!parse(t, strlen(t), err, sizeof err, NULL));
    ASSERT(strstr(err, "error: nesting too deep"));
    free(s);
    free(t);
    /* Under the limits, all of these parse. */
    s = repeat("x = ", "(", 150, "1");
    t = repeat(s, ")", 150, "\n");
    char *d = parse(t, strlen(t), err, sizeof err, NULL);
    ASSERT(d);
    ASSERT_STR_EQ(d, "(program\n  (= x 1))\n");
    free(d);
    free(s);
    free(t);
}

static void test_long_lists(void)
{
    /* Lists checked for repeated names are bounded (no quadratic time); the
     * error is at the 1001st entry, x1000, after 5893 bytes. */
    size_t cap = 20 * 2000 + 64, len = 0;
    char *s = malloc(cap);
    ASSERT(s);
    len += (size_t)snprintf(s + len, cap - len, "@ [");
    for (int i = 0; i < 2000; i++)
        len += (size_t)snprintf(s + len, cap - len, "%sx%d", i ? ", " : "", i);
    snprintf(s + len, cap - len, "]: pass\n");
    char err[512];
    ASSERT(!parse(s, strlen(s), err, sizeof err, NULL));
    ASSERT_STR_EQ(err, "t.eve:1:5894: error: more than 1000 entries in a permission list");
    free(s);
}

static void test_many_errors_capped(void)
{
    char *s = repeat("", "x = $\n", 1000, "");
    eve_ctx_t cx;
    ASSERT(eve_ctx_init(&cx, "t.eve"));
    ASSERT(!eve_parse(&cx, s, strlen(s)));
    ASSERT_EQ(cx.ndiags, EVE_MAX_DIAGS);
    ASSERT_EQ(cx.nerrors, 1000);
    eve_ctx_free(&cx);
    free(s);
}

/* ---- the examples ---------------------------------------------------------------- */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        TEST_FAIL("cannot open %s", path);
    ASSERT_EQ(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    ASSERT_GE(n, 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    ASSERT(buf);
    ASSERT_EQ(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

static void test_examples(void)
{
    static const char *const names[] = {"fib.eve", "chat.eve", "echo.eve", "counter.eve"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char path[1024], err[512];
        snprintf(path, sizeof path, "%s/%s", EVE_EXAMPLES_DIR, names[k]);
        size_t len;
        char *src = slurp(path, &len);
        char *d = parse(src, len, err, sizeof err, NULL);
        if (!d)
            TEST_FAIL("%s: %s", path, err);
        free(d);
        /* Every prefix either parses or fails with a message: no crash, no hang. */
        for (size_t cut = 0; cut < len; cut++) {
            char *copy = malloc(cut ? cut : 1);
            ASSERT(copy);
            memcpy(copy, src, cut);
            size_t nerr = 0;
            d = parse(copy, cut, err, sizeof err, &nerr);
            ASSERT(d || (nerr > 0 && strncmp(err, "t.eve:", 6) == 0));
            free(d);
            free(copy);
        }
        free(src);
    }
}

/* ---- the paper's forms (issue 42, docs/eve.md "The paper's listings") ----------------------- */

/* Parses src (must succeed) and returns its warnings, one "L:C: message" a line. */
static void expect_warnings(const char *src, const char *want)
{
    eve_ctx_t cx;
    ASSERT(eve_ctx_init(&cx, "t.eve"));
    eve_node_t *prog = eve_parse(&cx, src, strlen(src));
    ASSERT(prog);
    char got[4096];
    size_t at = 0;
    got[0] = 0;
    for (size_t i = 0; i < cx.nwarnings && at < sizeof got; i++) {
        char line[512];
        eve_warning_format(&cx, i, line, sizeof line);
        at += (size_t)snprintf(got + at, sizeof got - at, "%s\n", line + strlen("t.eve:"));
    }
    ASSERT_STR_EQ(got, want);
    eve_ctx_free(&cx);
}

static const char paper_src[] =
    "import io.socket.*\n"
    "import util.timeout\n"
    "main: () void:\n"
    "  tcp_socket.listen(8080):\n"
    "    connection = [+clients] (c: connection&) bool:\n"
    "      clients.insert(c())\n"
    "    return true\n"
    "  error = [+stderr] (e: error&) bool:\n"
    "    return false\n";
static const char paper_dump[] =
    "(program\n"
    "  (import io.socket.*)\n"
    "  (import util.timeout)\n"
    "  (func main (params) (returns void)\n"
    "    (expr (call (. tcp_socket listen) 8080)\n"
    "      (handler connection (params (c connection&)) (perms +clients) (returns bool)\n"
    "        (expr (call (. clients insert) (call c)))\n"
    "        (return true))\n"
    "      (handler error (params (e error&)) (perms +stderr) (returns bool)\n"
    "        (return false)))))\n";

static void test_paper_forms(void)
{
    /* wildcard imports, a handler assigned a lambda, T&, the `return` at
     * the handler block's indentation and the handler assigned after the
     * block: all one call's handlers */
    char err[512];
    char *dump = parse(paper_src, strlen(paper_src), err, sizeof err, NULL);
    if (!dump)
        TEST_FAIL("did not parse: %s", err);
    if (strcmp(dump, paper_dump) != 0)
        TEST_FAIL("dump differs\n--- got:\n%s--- want:\n%s", dump, paper_dump);
    free(dump);
    expect_warnings(paper_src,
                    "7:5: warning: 'return' at the indentation of the handler block: taken as the last statement "
                    "of the handler 'connection' above it\n"
                    "8:3: warning: the handler 'error' is assigned after the handler block of the call on line 4: "
                    "taken as one more handler of that call\n");
    /* the written forms keep their meaning: no warning */
    expect_warnings("f: (x: int&) int:\n    return x\n", "");
    /* a one-expression lambda assigned after the block is a handler returning it */
    expect_dump("tcp_socket.listen(\"a\"):\n"
                "    listening (a): pass\n"
                "error = [] (e: string) bool: true\n",
                "(program\n"
                "  (expr (call (. tcp_socket listen) \"a\")\n"
                "    (handler listening (params (a))\n"
                "      (pass))\n"
                "    (handler error (params (e string)) (perms) (returns bool)\n"
                "      (return true))))\n");
    /* an assigned lambda that follows no handler block stays an assignment
     * (which the checker refuses: a lambda is no value to store) */
    expect_dump("h = [] (x: int): x\n", "(program\n  (= h (lambda (perms) (params (x int)) x)))\n");
    /* a 'return' first in a handler block has no handler to belong to */
    expect_error("f(1):\n    return 1\n",
                 "t.eve:2:5: error: expected a callback (name [(params)] [perms]: or name = [perms] (params) "
                 "[type]:) in the call's handler block, found 'return'");
    expect_error("import a.*.b\n", "t.eve:1:11: error: expected newline after the import, found '.'");
    expect_error("tcp_socket.listen(\"a\"):\n    error = [] e:\n        pass\n",
                 "t.eve:2:16: error: expected '(' in the handler's assignment (name = [perms] (params) type:), "
                 "found identifier 'e'");
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"lex_tokens", test_lex_tokens},
        {"lex_dedent_at_eof", test_lex_dedent_at_eof},
        {"dump_decls", test_dump_decls},
        {"dump_stmts", test_dump_stmts},
        {"dump_tasks", test_dump_tasks},
        {"dump_events", test_dump_events},
        {"dump_exprs", test_dump_exprs},
        {"dump_misc", test_dump_misc},
        {"error_indentation", test_error_indentation},
        {"error_unclosed", test_error_unclosed},
        {"error_unknown_token", test_error_unknown_token},
        {"error_permissions", test_error_permissions},
        {"error_missing_colon", test_error_missing_colon},
        {"error_misc", test_error_misc},
        {"several_errors", test_several_errors},
        {"nesting_limits", test_nesting_limits},
        {"long_lists", test_long_lists},
        {"many_errors_capped", test_many_errors_capped},
        {"examples", test_examples},
        {"paper_forms", test_paper_forms},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
