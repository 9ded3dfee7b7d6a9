/* yard-eve's checker (tools/eve/check.c, docs/eve.md "The checker"): every
 * example checks clean; each rule has a program that fails with its exact
 * message and position and a minimally different one that passes; errors
 * come sorted by position; the library's table is well-formed; and the
 * checker survives every program of the fuzz corpus and every prefix of the
 * examples. */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "eve.h"
#include "test.h"

#ifndef EVE_EXAMPLES_DIR
#error "EVE_EXAMPLES_DIR must name examples/eve"
#endif
#ifndef EVE_CORPUS_DIR
#error "EVE_CORPUS_DIR must name fuzz/corpus/eve"
#endif

/* Parses (must succeed) and checks src as "t.eve". Returns whether it
 * checked clean; out gets every error, one per line. */
static bool check(const char *src, char *out, size_t size)
{
    eve_ctx_t cx;
    ASSERT(eve_ctx_init(&cx, "t.eve"));
    eve_node_t *prog = eve_parse(&cx, src, strlen(src));
    if (!prog) {
        char first[512];
        eve_diag_format(&cx, 0, first, sizeof first);
        TEST_FAIL("does not parse: %s\n--- source:\n%s", first, src);
    }
    bool ok = eve_check(&cx, prog);
    ASSERT_EQ(ok, cx.nerrors == 0);
    size_t at = 0;
    out[0] = 0;
    for (size_t i = 0; i < cx.ndiags && at < size; i++) {
        char line[512];
        eve_diag_format(&cx, i, line, sizeof line);
        at += (size_t)snprintf(out + at, size - at, "%s\n", line);
    }
    eve_ctx_free(&cx);
    return ok;
}

static void expect_ok(const char *src)
{
    char errs[8192];
    if (!check(src, errs, sizeof errs))
        TEST_FAIL("expected no errors, got:\n%s--- source:\n%s", errs, src);
}

/* want: every error, each "L:C: message" on its own line ("t.eve:" and
 * "error: " are added). */
static void expect_errors(const char *src, const char *want)
{
    char errs[8192], full[8192];
    size_t at = 0;
    for (const char *p = want; *p && at < sizeof full;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        const char *colon = memchr(p, ':', n);
        colon = colon ? memchr(colon + 1, ':', n - (size_t)(colon + 1 - p)) : NULL;
        ASSERT(colon);
        at += (size_t)snprintf(full + at, sizeof full - at, "t.eve:%.*s: error:%.*s\n", (int)(colon - p), p,
                               (int)(n - (size_t)(colon + 1 - p)), colon + 1);
        p += n + (nl ? 1 : 0);
    }
    if (check(src, errs, sizeof errs))
        TEST_FAIL("checked clean, expected:\n%s--- source:\n%s", full, src);
    if (strcmp(errs, full) != 0)
        TEST_FAIL("errors differ\n--- got:\n%s--- want:\n%s--- source:\n%s", errs, full, src);
}

/* Checks clean, with exactly these warnings ("L:C: message\n" each). */
static void expect_warnings(const char *src, const char *want)
{
    eve_ctx_t cx;
    ASSERT(eve_ctx_init(&cx, "t.eve"));
    eve_node_t *prog = eve_parse(&cx, src, strlen(src));
    ASSERT(prog);
    bool ok = eve_check(&cx, prog);
    char got[4096];
    size_t at = 0;
    got[0] = 0;
    for (size_t i = 0; !ok && i < cx.ndiags && at < sizeof got; i++) {
        char line[512];
        eve_diag_format(&cx, i, line, sizeof line);
        at += (size_t)snprintf(got + at, sizeof got - at, "%s\n", line);
    }
    if (!ok)
        TEST_FAIL("expected no errors, got:\n%s--- source:\n%s", got, src);
    for (size_t i = 0; i < cx.nwarnings && at < sizeof got; i++) {
        char line[512];
        eve_warning_format(&cx, i, line, sizeof line);
        const char *w = strstr(line, ": warning: ");
        ASSERT(w);
        at += (size_t)snprintf(got + at, sizeof got - at, "%.*s%s\n", (int)(w - line - strlen("t.eve:")),
                               line + strlen("t.eve:"), w + strlen(": warning"));
    }
    if (strcmp(got, want) != 0)
        TEST_FAIL("warnings differ\n--- got:\n%s--- want:\n%s--- source:\n%s", got, want, src);
    eve_ctx_free(&cx);
}

/* ---- names ------------------------------------------------------------------------ */

static void test_names(void)
{
    expect_errors("n : int = 1\n"
                  "n = m + 1\n",
                  "2:5: unknown name 'm'");
    expect_ok("n : int = 1\n"
              "m : int = 2\n"
              "n = m + 1\n");
    expect_errors("x : integer\n", "1:5: unknown type 'integer'");
    expect_errors("import net.tcp\n",
                  "1:1: unknown module 'net.tcp' (the library's modules: text, io.socket, util.timeout)");
    expect_errors("i : int = text.find(\"ab\", 'b')\n", "1:11: unknown name 'text' (a library module: import text)");
    expect_ok("import text\n"
              "i : int = text.find(\"ab\", 'b')\n");
    expect_errors("import text\n"
                  "i : int = text.index(\"ab\", 'b')\n",
                  "2:15: module 'text' has no function 'index'");
    /* top-level code runs in order; functions see every global */
    expect_errors("n = 2\n"
                  "n : int = 1\n",
                  "1:1: 'n' is used before its declaration (at 2:1)");
    expect_ok("f: () int:\n"
              "    return n\n"
              "n : int = 1\n");
    expect_errors("f: (a: int):\n"
                  "    b : int = a\n"
                  "    b : string\n",
                  "3:5: 'b' is already declared in this scope (at 2:5)");
    expect_ok("f: (a: int):\n" /* shadowing an outer scope is allowed */
              "    b : int = a\n"
              "    if a > 0:\n"
              "        b : string\n");
    expect_errors("f: (a: int) int:\n"
                  "    return a\n"
                  "g : int = f\n",
                  "3:11: 'f' is a function: call it (only lambdas are values)");
    expect_errors("s : string = tcp_socket\n", "1:14: 'tcp_socket' is a type, not a value");
    expect_errors("p : vector<int>\n"
                  "n : int = p.length()\n",
                  "2:12: vector<int> has no method 'length'");
    expect_errors("class pt:\n"
                  "    x : int\n"
                  "p : pt\n"
                  "p.z = 1\n",
                  "4:2: pt has no field 'z'");
    expect_errors("class pt:\n"
                  "    x : int\n"
                  "    x : string\n",
                  "3:5: class 'pt' already has a member 'x'");
    expect_errors("f: () [room]:\n"
                  "    pass\n",
                  "1:8: unknown name 'room'");
    expect_warnings("@ [stdout]: stdout.write_line(\"x\")\n",
                    "1:4: 'stdout' belongs to the library and needs no permission: 'stdout' is ignored\n");
}

/* ---- types -------------------------------------------------------------------------- */

static void test_types(void)
{
    expect_errors("n : int = 0\n"
                  "s : string = \"x\"\n"
                  "n = s\n",
                  "3:1: cannot assign string to int 'n'");
    expect_ok("n : int = 0\n"
              "s : string = \"x\"\n"
              "n = to_int(s)\n");
    expect_errors("x : float = 1\n", "1:13: cannot initialize float 'x' with int");
    expect_errors("n : int = 1 + 2.5\n",
                  "1:13: the operands of '+' have different types: int and float (to_int and to_float convert)");
    /* + concatenates two strings, nothing else */
    expect_ok("s : string = \"a\" + \"b\" + to_string(3)\n");
    expect_errors("s : string = \"a\" + 3\n",
                  "1:18: '+' needs two numbers or two strings, not string and int (to_string converts)");
    expect_errors("b : bool = 'a' & 1\n", "1:16: '&' needs int operands, not char and int");
    expect_errors("n : int = 3\n"
                  "if n:\n"
                  "    pass\n",
                  "2:4: the condition of 'if' is int, not bool");
    expect_errors("n : int = 3\n"
                  "while n - 1:\n"
                  "    n -= 1\n",
                  "2:7: the condition of 'while' is int, not bool");
    expect_ok("n : int = 3\n"
              "while n > 0:\n"
              "    n -= 1\n");
    expect_errors("b : bool = 1 == \"1\"\n", "1:14: cannot compare int with string");
    expect_errors("f: (a: int, b: string) int:\n"
                  "    return a\n"
                  "n : int = f(1)\n"
                  "m : int = f(1, 2)\n",
                  "3:12: 'f' takes 2 arguments, 1 given\n"
                  "4:16: argument 2 of 'f' is int, expected string");
    expect_errors("f: (a: int) int:\n"
                  "    if a > 0:\n"
                  "        return 1\n",
                  "1:1: 'f' returns int but may reach its end without a return");
    expect_ok("f: (a: int) int:\n"
              "    if a > 0:\n"
              "        return 1\n"
              "    else:\n"
              "        return 2\n");
    expect_ok("f: (a: int) int:\n" /* exit() does not return */
              "    if a > 0:\n"
              "        return 1\n"
              "    exit(1)\n");
    expect_errors("f: (a: int):\n"
                  "    return a\n",
                  "2:5: function 'f' returns void: 'return' takes no value here");
    expect_errors("f: (a: int) int:\n"
                  "    return\n",
                  "2:5: 'f' returns int: 'return' needs a value");
    expect_errors("f: () string:\n"
                  "    return 'c'\n",
                  "2:12: 'f' returns string, not char");
    expect_errors("return\n", "1:1: 'return' outside a function, task or callback");
    expect_errors("n : int = 3\n"
                  "for (c: char in n):\n"
                  "    pass\n",
                  "2:17: cannot iterate over int");
    expect_errors("v : vector<string>\n"
                  "for (c: char in v):\n"
                  "    pass\n",
                  "2:9: loop variable 'c' is declared char but the elements are string");
    expect_ok("v : vector<string>\n"
              "m : map<string, int>\n"
              "for (s: string in v):\n"
              "    m[s] = m[s] + 1\n"
              "for (k in m):\n"
              "    v.push(k)\n"
              "for (c: char in \"abc\"):\n"
              "    pass\n");
    expect_errors("m : map<string, int>\n"
                  "m[1] = 2\n",
                  "2:3: the index is int, expected string");
    expect_errors("x : vector<int, int>\n", "1:5: 'vector' takes 1 type argument, 2 given");
    expect_errors("x : void\n", "1:5: 'void' is only a result type or an event's payload (emitter<void>)");
    expect_errors("x : vector<int@>\n", "1:12: '@' (shared) marks a variable or a parameter, not this type");
    expect_errors("n : int = 9223372036854775808\n", "1:11: 9223372036854775808 does not fit in an int");
    expect_ok("n : int = -9223372036854775808\n");
    expect_errors("n : int = 1\n"
                  "n == 2\n",
                  "2:1: this expression does nothing: only a call may stand as a statement");
    expect_errors("break\n", "1:1: 'break' outside a loop");
    expect_errors("while true:\n"
                  "    @: break\n",
                  "1:1: this loop never ends ('while true' with no 'break'): Eve code may not loop forever\n"
                  "2:8: 'break' outside a loop (a task or callback cannot leave the loop around it)");
    expect_ok("n : int = 0\n"
              "while true:\n"
              "    n += 1\n"
              "    if n > 10:\n"
              "        break\n");
    /* lambdas (the grammar has no function types: called where they are made) */
    expect_ok("k : int = 2\n"
              "n : int = ([=k] (x: int) int: x + k)(3)\n");
    expect_errors("n : int = ([] (x: int) int: x)(\"3\")\n",
                  "1:32: argument 1 of 'the lambda' is string, expected int");
    expect_errors("n : int = ([] (x) int: 1)(3)\n", "1:16: lambda parameter 'x' needs a type");
    expect_errors("s : string = ([] (x: int) string: x)(3)\n",
                  "1:35: the lambda returns string but its body is int");
}

/* ---- events and the library --------------------------------------------------------- */

static void test_events(void)
{
    expect_ok("t : timer\n"
              "t.start(1000)\n"
              "on t tick:\n"
              "    stdout.write_line(\"tick\")\n"
              "on signals terminate:\n"
              "    exit(0)\n");
    expect_errors("t : timer\n"
                  "on t data (b: read_buffer):\n"
                  "    pass\n",
                  "2:1: timer has no event 'data'");
    expect_errors("s : tcp_socket\n"
                  "on s data (b: string):\n"
                  "    pass\n",
                  "2:15: parameter 'b' is string but event 'data' carries read_buffer");
    expect_ok("s : tcp_socket\n" /* an untyped parameter takes the event's type */
              "on s data (b):\n"
              "    n : int = b.size()\n");
    expect_errors("s : tcp_socket\n"
                  "on s close (why):\n"
                  "    pass\n",
                  "2:13: event 'close' carries nothing: its callback takes no parameter");
    expect_errors("tcp_socket.listen(\"127.0.0.1:0\"):\n"
                  "    accepted (c: tcp_socket):\n"
                  "        pass\n",
                  "2:5: tcp_listener has no event 'accepted'");
    /* a user class's events are its emitter fields */
    expect_ok("class button:\n"
              "    pressed : emitter<int>\n"
              "    closed : emitter<void>\n"
              "    press: (n: int):\n"
              "        pressed.emit(n)\n"
              "        closed.emit()\n"
              "b : button\n"
              "on b pressed (n: int):\n"
              "    stdout.write_line(to_string(n))\n"
              "on b closed:\n"
              "    pass\n");
    expect_errors("args.push(\"x\")\n", "1:1: cannot modify 'args': it belongs to the library");
    expect_ok("n : int = args.size()\n"
              "@: stdout.write_line(args[0])\n");
}

/* ---- permissions ----------------------------------------------------------------------- */

static void test_modify_without_full(void)
{
    expect_errors("x : int@ = 0\n"
                  "@ [x]: x = 1\n",
                  "2:8: 'x' is modified but the task has only read permission (write [+x])");
    expect_ok("x : int@ = 0\n"
              "@ [+x]: x = 1\n");
    expect_errors("x : int@ = 0\n"
                  "@ [x]: x += 1\n",
                  "2:8: 'x' is modified but the task has only read permission (write [+x])");
    /* a method that modifies its receiver */
    expect_errors("room : vector<int>@\n"
                  "@ [room]: room.push(1)\n",
                  "2:11: 'room' is modified but the task has only read permission (write [+room])");
    expect_ok("room : vector<int>@\n"
              "@ [room]: n : int = room.size()\n");
    /* a field, and a path permission */
    expect_errors("class pt:\n"
                  "    x, y : int\n"
                  "p : pt@\n"
                  "@ [p]: p.x = 1\n",
                  "4:8: 'p' is modified but the task has only read permission (write [+p])");
    expect_ok("class pt:\n"
              "    x, y : int\n"
              "p : pt@\n"
              "@ [+p.x]: p.x = p.x + 1\n");
    expect_errors("class pt:\n"
                  "    x, y : int\n"
                  "p : pt@\n"
                  "@ [+p.x]: p.y = 1\n",
                  "4:11: 'p.y' is used but not declared in the task's permissions");
    /* passing it where the full permission is needed: a function's [+param] */
    expect_errors("fill: (b: write_buffer) [+b]:\n"
                  "    b.append_byte(1)\n"
                  "out : write_buffer@\n"
                  "@ [out]: fill(out)\n",
                  "4:15: 'out' is modified but the task has only read permission (write [+out])");
    expect_ok("fill: (b: write_buffer) [+b]:\n"
              "    b.append_byte(1)\n"
              "out : write_buffer@\n"
              "@ [+out]: fill(out)\n");
    /* a function modifies an object parameter only with [+param] */
    expect_errors("fill: (b: write_buffer):\n"
                  "    b.append_byte(1)\n",
                  "2:5: 'b' is modified but the function has only read permission (write [+b])");
    /* a method modifies its object only with [+self] */
    expect_errors("class counter:\n"
                  "    n : int\n"
                  "    bump: ():\n"
                  "        n += 1\n",
                  "4:9: 'self.n' is modified but the method has only read permission (write [+self.n])");
    expect_errors("class counter:\n"
                  "    n : int\n"
                  "    bump: () [+self]:\n"
                  "        n += 1\n"
                  "c : counter@\n"
                  "@ [c]: c.bump()\n",
                  "6:8: 'c' is modified but the task has only read permission (write [+c])");
    expect_ok("class counter:\n"
              "    n : int\n"
              "    bump: () [+self]:\n"
              "        n += 1\n"
              "c : counter@\n"
              "@ [+c]: c.bump()\n");
    /* elements: a permission on a container covers them */
    expect_errors("room : vector<tcp_socket>@\n"
                  "@ [room]:\n"
                  "    for (m: tcp_socket in room):\n"
                  "        m.write(\"hi\")\n",
                  "4:9: 'room' is modified but the task has only read permission (write [+room])");
    expect_ok("room : vector<tcp_socket>@\n"
              "@ [+room]:\n"
              "    for (m: tcp_socket in room):\n"
              "        m.write(\"hi\")\n");
    /* ... except in a parallel for, whose tasks each take their own element */
    expect_ok("room : vector<tcp_socket>@\n"
              "@ [room]:\n"
              "    finish:\n"
              "        @ for (m: tcp_socket in room) [+m]:\n"
              "            m.write(\"hi\")\n");
    expect_errors("room : vector<tcp_socket>@\n"
                  "@ [room]:\n"
                  "    finish:\n"
                  "        @ for (m: tcp_socket in room):\n"
                  "            m.write(\"hi\")\n",
                  "5:13: 'm' is modified but the task has only read permission (write [+m])");
    /* an element that is a value is written into the collection */
    expect_errors("xs : vector<int>@\n"
                  "@ [xs]:\n"
                  "    @ for (x: int in xs) [+x]: x += 1\n",
                  "3:22: 'xs' is modified but the task has only read permission (write [+xs])");
    expect_ok("xs : vector<int>@\n"
              "@ [+xs]:\n"
              "    @ for (x: int in xs) [+x]: x += 1\n");
    /* another name for the same object has the same permission */
    expect_errors("s : tcp_socket@\n"
                  "@ [s]:\n"
                  "    t : tcp_socket = s\n"
                  "    t.close()\n",
                  "4:5: 's' is modified but the task has only read permission (write [+s])");
}

static void test_undeclared(void)
{
    expect_errors("x : int@ = 0\n"
                  "@: stdout.write_line(to_string(x))\n",
                  "2:32: 'x' is used but not declared in the task's permissions");
    expect_errors("x : int@ = 0\n"
                  "@: stdout.write_line(to_string(x))\n"
                  "@ [x]: stdout.write_line(to_string(x))\n",
                  "2:32: 'x' is used but not declared in the task's permissions");
    /* an object that is not shared must be named too: tasks may share it;
     * the source of an `on` is read without naming it, not written */
    expect_errors("f: (s: tcp_socket):\n"
                  "    on s data (b):\n"
                  "        s.write(b)\n",
                  "3:9: 's' is modified but the callback has only read permission (write [+s])");
    expect_errors("f: (s: tcp_socket, t: tcp_socket):\n"
                  "    on s data (b):\n"
                  "        t.write(b)\n",
                  "3:9: 't' is used but not declared in the callback's permissions");
    expect_ok("f: (s: tcp_socket):\n"
              "    on s data (b) [+s]:\n"
              "        s.write(b)\n");
    /* a function names the globals it uses; its callers must hold them */
    expect_errors("room : vector<tcp_socket>@\n"
                  "f: () int:\n"
                  "    return room.size()\n",
                  "3:12: 'room' is used but not declared in the function's permissions");
    expect_errors("room : vector<tcp_socket>@\n"
                  "f: () int [room]:\n"
                  "    return room.size()\n"
                  "@: n : int = f()\n",
                  "4:14: 'room' is used but not declared in the task's permissions (calling 'f' needs it)");
    expect_ok("room : vector<tcp_socket>@\n"
              "f: () int [room]:\n"
              "    return room.size()\n"
              "@ [room]: n : int = f()\n"
              "n : int = f()\n"); /* the top level holds every global */
    /* a function's list names globals and its own parameters, captures nothing */
    expect_errors("n : int = 1\n"
                  "f: () [=n]:\n"
                  "    pass\n",
                  "2:8: a function captures nothing: '=n' has no place in its permission list");
}

static void test_null_permission(void)
{
    expect_errors("x : int@ = 0\n"
                  "@ [-x]: stdout.write_line(to_string(x))\n",
                  "2:37: 'x' has only the null permission in the task (-x): it may be passed on, not used");
    /* -x may be passed on: to a task of its own, or to a [-param] */
    expect_ok("x : int@ = 0\n"
              "@ [-x]:\n"
              "    @ [x]: stdout.write_line(to_string(x))\n");
    expect_ok("keep: (s: tcp_socket) [-s]:\n"
              "    pass\n"
              "s : tcp_socket@\n"
              "@ [-s]: keep(s)\n");
    expect_errors("keep: (s: tcp_socket):\n"
                  "    pass\n"
                  "s : tcp_socket@\n"
                  "@ [-s]: keep(s)\n",
                  "4:14: 's' has only the null permission in the task (-s): it may be passed on, not used");
}

static void test_finish_subset(void)
{
    expect_errors("x : int@ = 0\n"
                  "@ [x]:\n"
                  "    finish:\n"
                  "        @ [+x]: x = 1\n",
                  "4:12: the task asks for '+x' but its parent holds only 'x' (inside 'finish' a task may ask only "
                  "for permissions its parent holds)");
    expect_ok("x : int@ = 0\n"
              "@ [+x]:\n"
              "    finish:\n"
              "        @ [+x]: x = 1\n");
    expect_errors("x : int@ = 0\n"
                  "@ [-x]:\n"
                  "    finish:\n"
                  "        @ [x]: stdout.write_line(to_string(x))\n",
                  "4:12: the task asks for 'x' but its parent holds only '-x' (inside 'finish' a task may ask only "
                  "for permissions its parent holds)");
    expect_errors("x : int@ = 0\n"
                  "f: ():\n"
                  "    finish:\n"
                  "        @ [x]: stdout.write_line(to_string(x))\n",
                  "4:12: the task asks for 'x' but its parent does not hold 'x' (inside 'finish' a task may ask only "
                  "for permissions its parent holds)");
    expect_ok("x : int@ = 0\n"
              "f: () [x]:\n"
              "    finish:\n"
              "        @ [x]: stdout.write_line(to_string(x))\n");
    /* outside finish a task is on its own: it waits for its permissions */
    expect_ok("x : int@ = 0\n"
              "@ [x]:\n"
              "    @ [+x]: x = 1\n");
    /* the parent's own locals are its to give */
    expect_ok("f: (n: int) int:\n"
              "    a, b : int@\n"
              "    finish:\n"
              "        @ [+a, n]: a = n\n"
              "        @ [+b, n]: b = n\n"
              "    return a + b\n");
}

static void test_captures(void)
{
    expect_errors("f: (n: int):\n"
                  "    @ [=n]: n = 2\n",
                  "2:13: 'n' is a copy in the task (=n): it cannot be modified");
    expect_ok("f: (n: int):\n"
              "    @ [=n]: stdout.write_line(to_string(n))\n");
    expect_errors("x : int@ = 0\n"
                  "@ [=x]: pass\n",
                  "2:4: 'x' is shared: name it with a permission (x, +x or -x), not =x");
    /* &x: the variable itself; it must outlive the task */
    expect_errors("f: ():\n"
                  "    n : int = 0\n"
                  "    @ [&n]: n = 1\n",
                  "3:8: '&n' refers to a variable the task may outlive: capture a copy (=n), or spawn the task "
                  "inside 'finish'");
    expect_ok("f: ():\n"
              "    n : int = 0\n"
              "    finish:\n"
              "        @ [&n]: n = 1\n");
    expect_errors("f: (s: tcp_socket) [+s]:\n"
                  "    n : int = 0\n"
                  "    on s data (b) [&n]: n += 1\n",
                  "3:20: '&n' refers to a variable the callback may outlive: capture a copy (=n) or make it "
                  "shared (T@) and name it");
    expect_ok("total : int = 0\n" /* a global outlives everything */
              "t : timer\n"
              "on t tick [&total]: total += 1\n");
    /* values of an enclosing scope are copied implicitly: read, not written */
    expect_ok("f: (n: int):\n"
              "    @: stdout.write_line(to_string(n))\n");
    expect_errors("f: (n: int):\n"
                  "    @: n = 2\n",
                  "2:8: 'n' is modified but the task has only a copy of it (write [+n])");
    expect_ok("f: (n: int):\n"
              "    finish:\n"
              "        @ [+n]: n = 2\n");
    expect_errors("x : int@ = 0\n"
                  "n : int = ([] () int: x)()\n",
                  "2:23: 'x' is used but not declared in the lambda's permissions");
    expect_ok("x : int@ = 0\n"
              "n : int = ([x] () int: x)()\n");
}

/* ---- errors are sorted; nodes are annotated ------------------------------------------------ */

static void test_sorted(void)
{
    /* the declarations' types are checked before the statements: the
     * second line's error is found first, reported second */
    expect_errors("x = 1\n"
                  "y : nothing\n"
                  "f: () int:\n"
                  "    return \"s\"\n",
                  "1:1: unknown name 'x'\n"
                  "2:5: unknown type 'nothing'\n"
                  "4:12: 'f' returns int, not string");
}

static void test_annotations(void)
{
    static const char src[] = "n : int = 1 + 2\n"
                              "s : string = to_string(n)\n";
    eve_ctx_t cx;
    ASSERT(eve_ctx_init(&cx, "t.eve"));
    eve_node_t *prog = eve_parse(&cx, src, strlen(src));
    ASSERT(prog);
    ASSERT(eve_check(&cx, prog));
    eve_node_t *v0 = prog->u.program.items.v[0], *v1 = prog->u.program.items.v[1];
    ASSERT(v0->sym && v0->sym->kind == EVE_SYM_VAR && v0->sym->global);
    ASSERT(v0->u.var.init->type && v0->u.var.init->type->kind == EVE_TY_INT);
    eve_node_t *call = v1->u.var.init;
    ASSERT(call->type->kind == EVE_TY_STRING);
    ASSERT(call->u.call.callee->sym && call->u.call.callee->sym->kind == EVE_SYM_FUNC);
    ASSERT(call->u.call.args.v[0]->sym == v0->sym);
    char buf[96];
    ASSERT_STR_EQ(eve_ty_name(call->u.call.callee->sym->ty, buf, sizeof buf), "(basic) string");
    eve_ctx_free(&cx);
}

/* ---- the library's table ------------------------------------------------------------------ */

static bool lib_has(eve_lib_kind_t kind, const char *name)
{
    for (size_t i = 0; i < eve_stdlib_count; i++)
        if (eve_stdlib[i].kind == kind && strcmp(eve_stdlib[i].name, name) == 0)
            return true;
    return false;
}

static void test_stdlib_table(void)
{
    for (size_t i = 0; i < eve_stdlib_count; i++) {
        const eve_lib_entry_t *e = &eve_stdlib[i];
        ASSERT(e->name && e->name[0]);
        switch (e->kind) {
        case EVE_LIB_TYPE:
        case EVE_LIB_MODULE:
            ASSERT(!e->owner);
            break;
        case EVE_LIB_FUNC:
            ASSERT(e->sig && e->sig[0] == '(');
            ASSERT(!e->owner || lib_has(EVE_LIB_MODULE, e->owner));
            break;
        case EVE_LIB_METHOD:
        case EVE_LIB_STATIC:
            ASSERT(e->sig && e->sig[0] == '(');
            ASSERT(e->owner && lib_has(EVE_LIB_TYPE, e->owner));
            break;
        case EVE_LIB_EVENT:
        case EVE_LIB_GLOBAL:
            ASSERT(e->sig && e->sig[0] != '(');
            ASSERT(e->kind == EVE_LIB_GLOBAL || (e->owner && lib_has(EVE_LIB_TYPE, e->owner)));
            break;
        }
    }
    /* every signature names known types: a program using each checks clean */
    expect_ok("import text\n"
              "w : write_buffer\n"
              "w.append(\"x\")\n"
              "w.append_byte(10)\n"
              "n : int = text.find(text.trim(\" a \"), 'a') + w.size() + to_int(\"1\") + range(0, 3).size()\n"
              "f : float = to_float(n)\n"
              "v : vector<string>\n"
              "v.push(\"a\")\n"
              "last : string = v.pop()\n"
              "b : bool = v.contains(\"a\")\n"
              "v.remove(\"a\")\n"
              "st : set<int>\n"
              "st.add(1)\n"
              "m : map<string, int>\n"
              "m.remove(\"k\")\n"
              "stderr.write(\"e\")\n"
              "t : timer\n"
              "t.once(5)\n"
              "t.stop()\n"
              "on signals hangup:\n"
              "    pass\n"
              "tcp_socket.listen(\"127.0.0.1:0\"):\n"
              "    listening (addr):\n"
              "        stdout.write_line(addr.substring(0, addr.find(':')))\n"
              "    connection (c):\n"
              "        on c data (input) [+c]:\n"
              "            c.write(input)\n"
              "            s : string = input.to_string()\n"
              "        on c close:\n"
              "            pass\n"
              "    error (why):\n"
              "        stderr.write_line(why)\n");
}

/* ---- the examples and the fuzz corpus --------------------------------------------------------- */

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

/* Parses and, if that succeeds, checks src: never crashes; the verdict
 * agrees with the errors, which are sorted. Returns 1 clean, 0 errors,
 * -1 did not parse. */
static int robust(const char *src, size_t len)
{
    eve_ctx_t cx;
    ASSERT(eve_ctx_init(&cx, "t.eve"));
    eve_node_t *prog = eve_parse(&cx, src, len);
    int r = -1;
    if (prog) {
        bool ok = eve_check(&cx, prog);
        ASSERT_EQ(ok, cx.nerrors == 0);
        ASSERT(ok || cx.ndiags > 0);
        for (size_t i = 1; i < cx.ndiags; i++) {
            eve_pos_t a = cx.diags[i - 1].pos, b = cx.diags[i].pos;
            ASSERT(a.line < b.line || (a.line == b.line && a.col <= b.col));
        }
        r = ok;
    }
    eve_ctx_free(&cx);
    return r;
}

static void test_examples(void)
{
    DIR *d = opendir(EVE_EXAMPLES_DIR);
    ASSERT(d);
    size_t n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".eve") != 0)
            continue;
        char path[1024], errs[8192];
        snprintf(path, sizeof path, "%s/%s", EVE_EXAMPLES_DIR, de->d_name);
        size_t len;
        char *src = slurp(path, &len);
        if (!check(src, errs, sizeof errs))
            TEST_FAIL("%s does not check clean:\n%s", path, errs);
        /* every prefix that parses checks without crashing */
        for (size_t cut = 0; cut < len; cut++)
            robust(src, cut);
        free(src);
        n++;
    }
    closedir(d);
    ASSERT_GE(n, 4);
}

static void test_corpus(void)
{
    DIR *d = opendir(EVE_CORPUS_DIR);
    ASSERT(d);
    size_t n = 0, parsed = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (de->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", EVE_CORPUS_DIR, de->d_name);
        size_t len;
        char *src = slurp(path, &len);
        if (robust(src, len) >= 0)
            parsed++;
        free(src);
        n++;
    }
    closedir(d);
    ASSERT_GT(n, 0);
    ASSERT_GT(parsed, 0);
}

/* ---- the paper's forms (issue 42, docs/eve.md "The paper's listings") ------------------------ */

static void test_paper_forms(void)
{
    /* imports: the paper's modules, and a.b.* for a module */
    expect_ok("import io.socket.*\nimport util.timeout\nimport text.*\ni : int = text.find(\"ab\", 'b')\n");
    expect_errors("import net.*\n",
                  "1:1: unknown module 'net' (the library's modules: text, io.socket, util.timeout)");
    /* socket, connection and error name the library's types */
    expect_ok("f: (s: socket) [+s]:\n    s.write(\"x\")\n");
    /* T& in a parameter only */
    expect_ok("f: (x: int&) int:\n    return x\n");
    expect_errors("x : int& = 1\n", "1:5: '&' (a reference) marks a parameter's type, not this type");
    expect_errors("f: (v: vector<int&>):\n    pass\n",
                  "1:15: '&' (a reference) marks a parameter's type, not this type");
    /* '@' on an element: an object is taken as it is (warned); a value not */
    expect_warnings("s : set<tcp_socket@>@\n",
                    "1:9: 'tcp_socket@' as a type argument: taken as tcp_socket (an object is reached by "
                    "reference; a task's permission on it is what its list names)\n");
    expect_errors("s : set<int@>\n", "1:9: '@' (shared) marks a variable or a parameter, not this type");
    /* a handler given by assignment, with a result: c() accepts */
    static const char server[] =
        "clients : set<tcp_socket>@\n"
        "tcp_socket.listen(8080):\n"
        "    connection = [+clients] (c: connection&) bool:\n"
        "        client : tcp_socket = c()\n"
        "        clients.insert(client)\n"
        "        on client data [clients]:\n"
        "            message : vector<char>@ = client.read_buffer()\n"
        "            @ for (m: tcp_socket in clients) [message, +m]:\n"
        "                m.write_buffer(message)\n"
        "        on client close [+clients]:\n"
        "            clients.remove(client)\n"
        "        return true\n"
        "    error = (e: error&) bool:\n"
        "        stderr.write(\"no: %s (%d%%)\", error, 5)\n"
        "        return true\n";
    expect_warnings(server, "14:39: 'error' is the handler's name, not a variable: taken as its parameter 'e'\n");
    /* the source of `on client data` is read without naming it; writing it is not */
    expect_errors("tcp_socket.listen(\"a\"):\n"
                  "    connection (c):\n"
                  "        on c data:\n"
                  "            c.write(\"x\")\n",
                  "4:13: 'c' is modified but the callback has only read permission (write [+c])");
    /* a handler with a result must return it */
    expect_errors("tcp_socket.listen(\"a\"):\n"
                  "    connection = (c: connection) bool:\n"
                  "        c().close()\n",
                  "2:5: the handler 'connection' returns bool but may reach its end without a return");
    expect_errors("tcp_socket.listen(\"a\"):\n"
                  "    connection = (c: connection) bool:\n"
                  "        return 1\n",
                  "3:16: 'connection' returns bool, not int");
    /* only a connection is accepted by calling it */
    expect_errors("tcp_socket.listen(\"a\"):\n"
                  "    connection (c: tcp_socket):\n"
                  "        s : tcp_socket = c()\n",
                  "3:26: cannot call a value of type tcp_socket");
    /* read_buffer() and write_buffer(v) take and give vector<char> */
    expect_errors("f: (c: tcp_socket) [+c]:\n"
                  "    v : vector<int>\n"
                  "    c.write_buffer(v)\n",
                  "3:20: argument 1 of 'write_buffer' is vector<int>, expected vector<char>");
    /* write with a format */
    expect_ok("stdout.write(\"%s=%d %c %f 100%%\\n\", \"x\", 1, 'c', 1.5)\n");
    expect_errors("stdout.write(\"%s %s\", 1)\n",
                  "1:14: write: the format has more conversions than the 1 argument after it");
    expect_errors("stdout.write(\"%s\", 1, 2)\n", "1:23: write: 2 arguments after the format, which has 1 conversion");
    expect_errors("stdout.write(\"%x\", 1)\n",
                  "1:14: write: unknown conversion '%x' in the format (it knows %s, %d, %f, %c and %%)");
    expect_errors("f : string = \"%s\"\nstdout.write(f, 1)\n",
                  "2:14: write with arguments takes a format that is a string literal");
    expect_errors("v : vector<int>\nstdout.write(\"%s\", v)\n",
                  "2:20: argument 1 of 'to_string' is vector<int>, expected basic");
    /* listen on a port */
    expect_ok("tcp_socket.listen(8080):\n    listening (a): pass\n");
    expect_errors("tcp_socket.listen(65536):\n    listening (a): pass\n", "1:19: port 65536 is not from 0 to 65535");
    /* main runs when the program has no statement of its own */
    {
        eve_ctx_t cx;
        ASSERT(eve_ctx_init(&cx, "t.eve"));
        const char *src = "import text\nn : int = 1\nmain: () void:\n    m : int = 2\n";
        eve_node_t *prog = eve_parse(&cx, src, strlen(src));
        ASSERT(prog && eve_check(&cx, prog));
        ASSERT_EQ(prog->u.program.items.n, (size_t)4);
        const eve_node_t *last = prog->u.program.items.v[3];
        ASSERT_EQ(last->kind, EVE_N_EXPR);
        ASSERT_STR_EQ(last->u.expr.expr->u.call.callee->u.name.name, "main");
        eve_ctx_free(&cx);
        ASSERT(eve_ctx_init(&cx, "t.eve"));
        src = "main: () void:\n    pass\nstdout.write(\"x\")\n";
        prog = eve_parse(&cx, src, strlen(src));
        ASSERT(prog && eve_check(&cx, prog));
        ASSERT_EQ(prog->u.program.items.n, (size_t)2); /* a statement of its own: main is not called */
        eve_ctx_free(&cx);
    }
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"names", test_names},
        {"types", test_types},
        {"events", test_events},
        {"modify_without_full", test_modify_without_full},
        {"undeclared", test_undeclared},
        {"null_permission", test_null_permission},
        {"finish_subset", test_finish_subset},
        {"captures", test_captures},
        {"sorted", test_sorted},
        {"annotations", test_annotations},
        {"stdlib_table", test_stdlib_table},
        {"examples", test_examples},
        {"corpus", test_corpus},
        {"paper_forms", test_paper_forms},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
