/* yard-eve: the Eve language's compiler (issue 23, docs/eve.md).
 *
 *   yard-eve parse FILE.eve [--dump]          parse; --dump prints the tree
 *   yard-eve check FILE.eve                   parse and check names, types, permissions
 *   yard-eve c FILE.eve                       print the C the compiler generates
 *   yard-eve build FILE.eve -o BIN [OPTIONS]  compile to a program
 *   yard-eve run [OPTIONS] FILE.eve [ARGS]    compile and run it with ARGS
 *   yard-eve call FILE.eve NAME [ARGS]        compile it, call its function NAME, print the result
 *
 * Each command is one entry of the table below, on the same front end
 * (read_source, eve_parse, eve_check, print_diags). Exit status: 0 success,
 * 1 a bad program (each error as "file:line:col: error: message" on stderr),
 * an unreadable file or a failed C compiler, 2 a usage error; run exits
 * with the program's status. */
#define _DEFAULT_SOURCE /* mkdtemp, realpath, readlink */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yard/cli.h"

#include "gen.h"
#include "main_int.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command's name */
    const char *usage;
    const char *summary;
} command_t;

static int cmd_parse(int argc, char **argv);
static int cmd_check(int argc, char **argv);
static int cmd_c(int argc, char **argv);

static const command_t commands[] = {
    {"parse", cmd_parse, "parse FILE.eve [--dump]",
     "parse FILE.eve; with --dump print its syntax tree as an S-expression"},
    {"check", cmd_check, "check FILE.eve",
     "parse FILE.eve and check its names, types and permissions (silent when well-formed)"},
    {"c", cmd_c, "c FILE.eve", "print the C11 that build compiles (readable, with #line to FILE.eve)"},
    {"build", main_cmd_build, "build FILE.eve -o BIN [OPTS]",
     "compile FILE.eve to the program BIN (OPTS: --emit-c FILE.c keeps the C; --debug: -O0)"},
    {"run", main_cmd_run, "run [--debug] FILE.eve [ARGS]",
     "compile FILE.eve into a temporary directory and run it with ARGS; exit with its status"},
    {"call", main_cmd_call, "call [OPTS] FILE.eve NAME [ARGS]",
     "compile FILE.eve, call its function NAME with ARGS as its parameters' types, print the result\n"
     "                                         (OPTS: --debug; --json [--repeat K]: a record of the result and each call's time)"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

void main_usage(FILE *f)
{
    fprintf(f, "usage: " PROG " COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  " PROG " %-28s %s\n", commands[i].usage, commands[i].summary);
    fprintf(f, "\n  " PROG " --help                       this text\n"
               "\nexit status: 0 ok, 1 errors in the program (file:line:col: error: ...) or a\n"
               "failed C compiler, 2 usage error (call: also an unknown function, a wrong count\n"
               "of arguments, a value that does not convert); run and call: the program's own status.\n"
               "\nenvironment: YARD_EVE_CC the C compiler (default: the one yard was built with);\n"
               "YARD_EVE_CFLAGS more flags for it; a built program reads YARD_EVE_WORKERS\n"
               "(worker threads; default: the CPUs it may use). The language: docs/eve.md.\n");
}

/* Reads a whole file (at most EVE_MAX_SOURCE + 1 bytes: the lexer reports
 * a larger one). NULL with a message on failure. */
char *main_read_source(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, PROG ": cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            if (cap > EVE_MAX_SOURCE)
                break;
            cap *= 2;
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (r == 0)
            break;
        n += r;
    }
    if (!buf || ferror(f)) {
        fprintf(stderr, PROG ": cannot read %s: %s\n", path, buf ? strerror(errno) : "out of memory");
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Set while a program is read a first time only to be read again (call):
 * its warnings are printed once, by the second reading. */
bool main_quiet_warnings;

static void print_warnings(const eve_ctx_t *cx)
{
    if (main_quiet_warnings)
        return;
    char line[EVE_MAX_MSG + 512];
    for (size_t i = 0; i < cx->nwarnings; i++) {
        eve_warning_format(cx, i, line, sizeof line);
        fprintf(stderr, "%s\n", line);
    }
}

static void print_diags(const eve_ctx_t *cx)
{
    char line[EVE_MAX_MSG + 512];
    for (size_t i = 0; i < cx->ndiags; i++) {
        eve_diag_format(cx, i, line, sizeof line);
        fprintf(stderr, "%s\n", line);
    }
    if (cx->nerrors > cx->ndiags)
        fprintf(stderr, "%s: %zu more errors not shown\n", cx->file, cx->nerrors - cx->ndiags);
}

/* One program's text through the front end: parse, and check when asked.
 * On success *prog is the tree (in cx; the caller frees it with
 * eve_ctx_free); otherwise the errors are printed and the result is
 * EXIT_BAD_PROGRAM. Warnings are printed either way. src must outlive the tree. */
int main_load_text(const char *file, const char *src, size_t len, bool check, eve_ctx_t *cx, eve_node_t **prog)
{
    if (!eve_ctx_init(cx, file)) {
        fprintf(stderr, PROG ": out of memory\n");
        return EXIT_BAD_PROGRAM;
    }
    *prog = eve_parse(cx, src, len);
    bool ok = *prog && (!check || eve_check(cx, *prog));
    print_warnings(cx);
    if (!ok) {
        print_diags(cx);
        eve_ctx_free(cx);
        return EXIT_BAD_PROGRAM;
    }
    return 0;
}

/* The same for a file: *src is its text (the caller frees it). */
static int load(const char *file, bool check, eve_ctx_t *cx, char **src, eve_node_t **prog)
{
    size_t len;
    *src = main_read_source(file, &len);
    if (!*src)
        return EXIT_BAD_PROGRAM;
    int rc = main_load_text(file, *src, len, check, cx, prog);
    if (rc)
        free(*src);
    return rc;
}

int main_flush_stdout(int rc)
{
    if (fflush(stdout) != 0) {
        fprintf(stderr, PROG ": writing the output: %s\n", strerror(errno));
        return EXIT_BAD_PROGRAM;
    }
    return rc;
}

/* What parse and check share: the command line (one FILE.eve, and --dump
 * where the command takes it) and the pipeline: read, parse, then check
 * when asked, then dump when asked. */
static int front_end(int argc, char **argv, const char *usage_line, bool may_dump, bool check)
{
    const char *cmd = argv[0], *file = NULL;
    bool dump = false;
    for (int i = 1; i < argc; i++) {
        if (may_dump && strcmp(argv[i], "--dump") == 0)
            dump = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            main_usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            char fmt[64];
            snprintf(fmt, sizeof fmt, "%s: unknown option '%%s'", cmd);
            return yard_usage_error(PROG, fmt, argv[i]);
        } else if (file) {
            char fmt[64];
            snprintf(fmt, sizeof fmt, "%s: one file only ('%%s' is a second)", cmd);
            return yard_usage_error(PROG, fmt, argv[i]);
        } else
            file = argv[i];
    }
    if (!file) {
        char fmt[64];
        snprintf(fmt, sizeof fmt, "%s: %%s", cmd);
        char what[160];
        snprintf(what, sizeof what, "which file? usage: " PROG " %s", usage_line);
        return yard_usage_error(PROG, fmt, what);
    }
    eve_ctx_t cx;
    char *src;
    eve_node_t *prog;
    int rc = load(file, check, &cx, &src, &prog);
    if (rc)
        return rc;
    if (dump) {
        size_t n;
        char *text = eve_dump(prog, &n);
        if (!text) {
            fprintf(stderr, PROG ": out of memory\n");
            rc = EXIT_BAD_PROGRAM;
        } else {
            fwrite(text, 1, n, stdout);
            free(text);
        }
    }
    eve_ctx_free(&cx);
    free(src);
    return main_flush_stdout(rc);
}

static int cmd_parse(int argc, char **argv)
{
    return front_end(argc, argv, commands[0].usage, true, false);
}

static int cmd_check(int argc, char **argv)
{
    return front_end(argc, argv, commands[1].usage, false, true);
}

/* The program's name: FILE's base name without ".eve". */
void main_program_name(const char *file, char *out, size_t size)
{
    const char *b = strrchr(file, '/');
    b = b ? b + 1 : file;
    size_t n = strlen(b);
    if (n > 4 && strcmp(b + n - 4, ".eve") == 0)
        n -= 4;
    if (n >= size)
        n = size - 1;
    memcpy(out, b, n);
    out[n] = 0;
}

/* The C for the program src (malloc'd), or NULL with the errors printed. */
char *main_generate_text(const char *file, const char *src, size_t srclen, size_t *len)
{
    eve_ctx_t cx;
    eve_node_t *prog;
    if (main_load_text(file, src, srclen, true, &cx, &prog))
        return NULL;
    char name[256];
    main_program_name(file, name, sizeof name);
    char *c = eve_gen_c(&cx, prog, file, name, len);
    if (!c)
        print_diags(&cx);
    eve_ctx_free(&cx);
    return c;
}

/* The C for FILE (malloc'd), or NULL with the errors printed. */
char *main_generate(const char *file, size_t *len)
{
    size_t srclen;
    char *src = main_read_source(file, &srclen);
    if (!src)
        return NULL;
    char *c = main_generate_text(file, src, srclen, len);
    free(src);
    return c;
}

static int cmd_c(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        main_usage(stdout);
        return 0;
    }
    if (argc != 2 || (argv[1][0] == '-' && argv[1][1]))
        return yard_usage_error(PROG, "c: %s", "usage: " PROG " c FILE.eve");
    size_t len;
    char *c = main_generate(argv[1], &len);
    if (!c)
        return EXIT_BAD_PROGRAM;
    fwrite(c, 1, len, stdout);
    free(c);
    return main_flush_stdout(0);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        main_usage(stderr);
        return YARD_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        main_usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    return yard_usage_error(PROG, "unknown command '%s' (commands: parse, check, c, build, run, call)", argv[1]);
}
