/* yard-eve call (main.c has the table of commands): one function of a
 * program called from the command line: its arguments converted to its
 * parameters' types, the call written as a program's top level, built and
 * run; the result printed, or with --json a record of each call's time. */
#define _DEFAULT_SOURCE /* mkdtemp, realpath, readlink */
#include "main_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "yard/cli.h"

/* ---- call: one function of a program, called from the command line ------------------------ */

/* The basic type a parameter or result is written with ("void" for none),
 * or NULL when it is one a command line cannot give or print. */
static const char *basic_type(const eve_type_t *t)
{
    static const char *const basics[] = {"int", "float", "bool", "char", "string"};
    if (!t)
        return "void";
    if (t->nargs || t->ref || t->shared)
        return NULL;
    for (size_t i = 0; i < sizeof basics / sizeof basics[0]; i++)
        if (strcmp(t->name, basics[i]) == 0)
            return basics[i];
    return strcmp(t->name, "void") == 0 ? "void" : NULL;
}

/* A growing text: the program's source followed by the call. */
typedef struct {
    char *s;
    size_t n, cap;
    bool failed;
} text_t;

static void put(text_t *t, const char *s, size_t n)
{
    if (t->failed)
        return;
    if (t->n + n + 1 > t->cap) {
        size_t cap = (t->n + n + 1) * 2;
        char *b = realloc(t->s, cap);
        if (!b) {
            t->failed = true;
            return;
        }
        t->s = b;
        t->cap = cap;
    }
    memcpy(t->s + t->n, s, n);
    t->n += n;
    t->s[t->n] = 0;
}

static void put_str(text_t *t, const char *s)
{
    put(t, s, strlen(s));
}

/* bytes inside an Eve literal quoted with q: printable ASCII as it is,
 * everything else (and the quote and backslash) \xHH. */
static void put_escaped(text_t *t, const char *s, size_t n, char q)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char buf[8];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != (unsigned char)q)
            buf[0] = (char)c, buf[1] = 0;
        else
            snprintf(buf, sizeof buf, "\\x%02x", c);
        put_str(t, buf);
    }
}

/* The argument text as an Eve expression of type `type`, or false with the
 * usage error printed. */
static bool put_argument(text_t *t, const char *type, const char *arg, const char *fname, size_t k)
{
    if (strcmp(type, "int") == 0) {
        long long v;
        if (yard_parse_int(arg, INT64_MIN, INT64_MAX, &v) < 0) {
            yard_usage_error(PROG, "call: argument %zu of '%s' is an int; '%s' is not a whole number from "
                             "-9223372036854775808 to 9223372036854775807", k, fname, arg);
            return false;
        }
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", v);
        put_str(t, buf);
    } else if (strcmp(type, "float") == 0) {
        char *end;
        errno = 0;
        double v = strtod(arg, &end);
        if (!*arg || *end || end == arg || v != v || v - v != 0 || errno == ERANGE) {
            yard_usage_error(PROG, "call: argument %zu of '%s' is a float; '%s' is not a finite number", k, fname,
                             arg);
            return false;
        }
        char buf[64];
        snprintf(buf, sizeof buf, "%.17g", v);
        put_str(t, "to_float(\""), put_str(t, buf), put_str(t, "\")");
    } else if (strcmp(type, "bool") == 0) {
        if (strcmp(arg, "true") != 0 && strcmp(arg, "false") != 0) {
            yard_usage_error(PROG, "call: argument %zu of '%s' is a bool: true or false, not '%s'", k, fname, arg);
            return false;
        }
        put_str(t, arg);
    } else if (strcmp(type, "char") == 0) {
        if (strlen(arg) != 1) {
            yard_usage_error(PROG, "call: argument %zu of '%s' is a char: exactly one byte, not '%s'", k, fname,
                             arg);
            return false;
        }
        put_str(t, "'"), put_escaped(t, arg, 1, '\''), put_str(t, "'");
    } else {
        size_t n = strlen(arg);
        if (n > EVE_MAX_STRING / 4) {
            yard_usage_error(PROG, "call: argument %zu of '%s' is longer than %u bytes", k, fname,
                             EVE_MAX_STRING / 4);
            return false;
        }
        put_str(t, "\""), put_escaped(t, arg, n, '"'), put_str(t, "\"");
    }
    return true;
}

#define CALL_MARK "\x1eyard-eve-call "

/* Appends to the program the statements that call the function fn with
 * args: print its result; or (timed) call it repeat times and report each
 * time and the last result on marked lines for report_timed to read. */
static bool put_call(text_t *t, const eve_node_t *fn, char **args, int nargs, long long repeat, bool timed)
{
    const char *ret = basic_type(fn->u.func.ret);
    text_t callx = {0};
    put_str(&callx, fn->u.func.name);
    put_str(&callx, "(");
    for (int k = 0; k < nargs; k++) {
        if (k)
            put_str(&callx, ", ");
        if (!put_argument(&callx, basic_type(fn->u.func.params.v[k].type), args[k], fn->u.func.name,
                          (size_t)k + 1)) {
            free(callx.s);
            return false;
        }
    }
    put_str(&callx, ")");
    if (callx.failed) {
        t->failed = true;
        free(callx.s);
        return true;
    }
    bool is_void = strcmp(ret, "void") == 0;
    put_str(t, "\n");
    if (!timed) {
        if (is_void)
            put_str(t, callx.s), put_str(t, "\n");
        else
            put_str(t, "stdout.write_line(to_string("), put_str(t, callx.s), put_str(t, "))\n");
    } else {
        char buf[160];
        snprintf(buf, sizeof buf, "yard_call_r_ : int = 0\nwhile yard_call_r_ < %lld:\n", repeat);
        put_str(t, buf);
        put_str(t, "    yard_call_t0_ : int = clock_ns()\n    ");
        if (!is_void)
            put_str(t, "yard_call_v_ : "), put_str(t, ret), put_str(t, " = ");
        put_str(t, callx.s);
        put_str(t, "\n    yard_call_ns_ : int = clock_ns() - yard_call_t0_\n");
        put_str(t, "    stdout.write_line(\"\\x1eyard-eve-call ns \" + to_string(yard_call_ns_))\n");
        snprintf(buf, sizeof buf, "    if yard_call_r_ == %lld:\n", repeat - 1);
        put_str(t, buf);
        put_str(t, "        stdout.write_line(\"\\x1eyard-eve-call result \"");
        put_str(t, is_void ? ")\n" : " + to_string(yard_call_v_))\n");
        put_str(t, "    yard_call_r_ += 1\n");
    }
    free(callx.s);
    return true;
}

/* A JSON string of n bytes (control bytes escaped; other bytes as they are). */
static void json_string(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Reads the timed program's output from fd: marked lines are its times and
 * result, the rest (the function's own output) goes to stderr. Prints the
 * JSON record; false when the program did not report every call. */
static bool report_timed(int fd, const eve_node_t *fn, char **args, int nargs, long long repeat)
{
    text_t out = {0};
    char buf[65536];
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        put(&out, buf, (size_t)r);
    }
    if (out.failed) {
        fprintf(stderr, PROG ": out of memory\n");
        free(out.s);
        return false;
    }
    double *times = calloc((size_t)repeat, sizeof *times);
    long long ntimes = 0;
    const char *result = NULL;
    size_t result_len = 0;
    const size_t mark = strlen(CALL_MARK);
    for (size_t i = 0; times && i < out.n && !result;) {
        const char *line = out.s + i;
        const char *nl = memchr(line, '\n', out.n - i);
        size_t len = nl ? (size_t)(nl - line) : out.n - i;
        if (len >= mark && memcmp(line, CALL_MARK, mark) == 0) {
            const char *what = line + mark;
            if (strncmp(what, "ns ", 3) == 0 && ntimes < repeat) {
                times[ntimes++] = strtod(what + 3, NULL) / 1e9;
            } else if (strncmp(what, "result ", 7) == 0) {
                /* the rest of the output is the result (a string may hold newlines) */
                result = what + 7;
                result_len = out.n - (size_t)(result - out.s);
                if (result_len && result[result_len - 1] == '\n')
                    result_len--;
            }
        } else {
            fwrite(line, 1, nl ? len + 1 : len, stderr);
        }
        i += nl ? len + 1 : len;
    }
    bool ok = times && result && ntimes == repeat;
    if (!ok) {
        fprintf(stderr, PROG ": call: the program ended before it reported every call\n");
    } else {
        const char *ret = basic_type(fn->u.func.ret);
        printf("{\"function\": ");
        json_string(stdout, fn->u.func.name, strlen(fn->u.func.name));
        printf(", \"args\": [");
        for (int k = 0; k < nargs; k++) {
            printf("%s", k ? ", " : "");
            json_string(stdout, args[k], strlen(args[k]));
        }
        printf("], \"result\": ");
        if (strcmp(ret, "void") == 0)
            printf("null");
        else if (strcmp(ret, "int") == 0 || strcmp(ret, "float") == 0 || strcmp(ret, "bool") == 0)
            fwrite(result, 1, result_len, stdout);
        else
            json_string(stdout, result, result_len);
        const char *w = getenv("YARD_EVE_WORKERS");
        long long workers = 0;
        if (w && yard_parse_int(w, 1, 1024, &workers) == 0)
            printf(", \"workers\": %lld", workers);
        printf(", \"repeat\": %lld, \"times_s\": [", repeat);
        for (long long k = 0; k < repeat; k++)
            printf("%s%.9f", k ? ", " : "", times[k]);
        qsort(times, (size_t)repeat, sizeof *times, cmp_double);
        printf("], \"min_s\": %.9f, \"median_s\": %.9f}\n", times[0], times[repeat / 2]);
    }
    free(times);
    free(out.s);
    return ok;
}

/* The top-level function fname of prog, or NULL; *names lists them all. */
static const eve_node_t *find_function(const eve_node_t *prog, const char *fname, text_t *names)
{
    const eve_node_t *fn = NULL;
    for (size_t k = 0; k < prog->u.program.items.n; k++) {
        const eve_node_t *it = prog->u.program.items.v[k];
        if (it->kind != EVE_N_FUNC)
            continue;
        if (strcmp(it->u.func.name, fname) == 0)
            fn = it;
        put_str(names, names->n ? ", " : "");
        put_str(names, it->u.func.name);
    }
    return fn;
}

/* Whether fn can be called from a command line with nargs arguments (a
 * usage error printed when not). */
static bool callable(const eve_node_t *fn, const char *file, const char *fname, int nargs, const text_t *names)
{
    if (!fn) {
        yard_usage_error(PROG, "call: %s has no function '%s' (its functions: %s)", file, fname,
                         names->n ? names->s : "none");
        return false;
    }
    if ((size_t)nargs != fn->u.func.params.n) {
        yard_usage_error(PROG, "call: '%s' takes %zu argument%s, %d given", fname, fn->u.func.params.n,
                         fn->u.func.params.n == 1 ? "" : "s", nargs);
        return false;
    }
    for (size_t k = 0; k < fn->u.func.params.n; k++) {
        const char *b = basic_type(fn->u.func.params.v[k].type);
        if (!b || strcmp(b, "void") == 0) {
            yard_usage_error(PROG, "call: parameter '%s' of '%s' is not an int, float, bool, char or string: "
                             "a command line cannot give it", fn->u.func.params.v[k].name, fname);
            return false;
        }
    }
    if (!basic_type(fn->u.func.ret)) {
        yard_usage_error(PROG, "call: '%s' returns an object, which call cannot print (it prints an int, "
                         "float, bool, char or string)", fname);
        return false;
    }
    return true;
}

int main_cmd_call(int argc, char **argv)
{
    bool debug = false, json = false;
    long long repeat = 0;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        if (strcmp(argv[i], "--debug") == 0)
            debug = true;
        else if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--repeat") == 0) {
            if (i + 1 >= argc)
                return yard_usage_error(PROG, "call: %s", "--repeat needs a count");
            if (yard_parse_int(argv[++i], 1, 1000000, &repeat) < 0)
                return yard_usage_error(PROG, "call: --repeat: expected a whole number from 1 to 1000000, got '%s'",
                                        argv[i]);
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            main_usage(stdout);
            return 0;
        } else
            return yard_usage_error(PROG, "call: unknown option '%s' (the function's arguments go after NAME)",
                                    argv[i]);
    }
    if (repeat && !json)
        return yard_usage_error(PROG, "call: %s", "--repeat needs --json (the times are reported in its record)");
    if (argc - i < 2)
        return yard_usage_error(PROG, "call: %s",
                                "usage: " PROG " call [--json [--repeat K]] FILE.eve NAME [ARGS]");
    const char *file = argv[i], *fname = argv[i + 1];
    char **args = argv + i + 2;
    int nargs = argc - i - 2;
    if (repeat == 0)
        repeat = 1;

    eve_ctx_t cx;
    eve_node_t *prog;
    size_t srclen;
    char *src = main_read_source(file, &srclen); /* its bytes, not NUL-terminated */
    if (!src)
        return EXIT_BAD_PROGRAM;
    main_quiet_warnings = true;
    int rc = main_load_text(file, src, srclen, true, &cx, &prog);
    main_quiet_warnings = false;
    if (rc) {
        free(src);
        return rc;
    }
    text_t names = {0}, t = {0};
    const eve_node_t *fn = find_function(prog, fname, &names);
    rc = YARD_EXIT_USAGE;
    if (callable(fn, file, fname, nargs, &names)) {
        put(&t, src, srclen);
        if (put_call(&t, fn, args, nargs, repeat, json))
            rc = 0;
        if (t.failed) {
            fprintf(stderr, PROG ": out of memory\n");
            rc = EXIT_BAD_PROGRAM;
        }
    }
    free(names.s);
    char *c = NULL;
    size_t clen = 0;
    char dir[4096], bin[4400];
    if (rc == 0) {
        /* the program again, with the call: a new tree, in a context of its own */
        c = main_generate_text(file, t.s, t.n, &clen);
        if (!c) {
            rc = EXIT_BAD_PROGRAM;
        } else if (!main_make_tmpdir(dir, sizeof dir)) {
            free(c);
            rc = EXIT_BAD_PROGRAM;
        } else {
            rc = main_build(file, c, clen, NULL, NULL, debug, dir, bin, sizeof bin); /* frees c */
        }
    }
    free(t.s);
    if (rc) {
        eve_ctx_free(&cx);
        free(src);
        return rc;
    }
    int fds[2] = {-1, -1};
    if (json && pipe(fds) < 0) {
        fprintf(stderr, PROG ": pipe: %s\n", strerror(errno));
        rc = EXIT_BAD_PROGRAM;
    } else {
        char *av[] = {bin, NULL};
        int pid = main_run_program(bin, av, json ? fds : NULL);
        bool ok = true;
        if (json && pid > 0)
            ok = report_timed(fds[0], fn, args, nargs, repeat);
        if (json && pid > 0)
            close(fds[0]);
        rc = main_wait_program(pid);
        if (rc == 0 && !ok)
            rc = EXIT_BAD_PROGRAM;
    }
    main_remove_dir(dir, bin + strlen(dir) + 1);
    eve_ctx_free(&cx);
    free(src);
    return main_flush_stdout(rc);
}
