/* yard-eve: the Eve language's compiler (issue 23, docs/eve.md).
 *
 *   yard-eve parse FILE.eve [--dump]   parse; --dump prints the tree
 *   yard-eve check FILE.eve            parse and check names, types, permissions
 *
 * Later steps add build and run: each is one entry of the command
 * table below, with its own function, on the same front end (read_source,
 * eve_parse, print_diags). Exit status: 0 success, 1 a bad program (each
 * error as "file:line:col: error: message" on stderr) or an unreadable
 * file, 2 a usage error. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "eve.h"

#define PROG "yard-eve"

enum { EXIT_BAD_PROGRAM = 1, EXIT_USAGE = 2 };

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command's name */
    const char *usage;
    const char *summary;
} command_t;

static int cmd_parse(int argc, char **argv);
static int cmd_check(int argc, char **argv);

static const command_t commands[] = {
    {"parse", cmd_parse, "parse FILE.eve [--dump]",
     "parse FILE.eve; with --dump print its syntax tree as an S-expression"},
    {"check", cmd_check, "check FILE.eve",
     "parse FILE.eve and check its names, types and permissions (silent when well-formed)"},
    /* build and run: later steps of issue 23 */
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: " PROG " COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  " PROG " %-28s %s\n", commands[i].usage, commands[i].summary);
    fprintf(f, "\n  " PROG " --help                       this text\n"
               "\nexit status: 0 ok, 1 errors in the program (file:line:col: error: ...),\n"
               "2 usage error. The language: docs/eve.md.\n");
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry '" PROG " --help'.\n");
    return EXIT_USAGE;
}

/* Reads a whole file (at most EVE_MAX_SOURCE + 1 bytes: the lexer reports
 * a larger one). NULL with a message on failure. */
static char *read_source(const char *path, size_t *len)
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
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            char fmt[64];
            snprintf(fmt, sizeof fmt, "%s: unknown option '%%s'", cmd);
            return usage_error(fmt, argv[i]);
        } else if (file) {
            char fmt[64];
            snprintf(fmt, sizeof fmt, "%s: one file only ('%%s' is a second)", cmd);
            return usage_error(fmt, argv[i]);
        } else
            file = argv[i];
    }
    if (!file) {
        char fmt[64];
        snprintf(fmt, sizeof fmt, "%s: %%s", cmd);
        char what[160];
        snprintf(what, sizeof what, "which file? usage: " PROG " %s", usage_line);
        return usage_error(fmt, what);
    }
    size_t len;
    char *src = read_source(file, &len);
    if (!src)
        return EXIT_BAD_PROGRAM;
    eve_ctx_t cx;
    if (!eve_ctx_init(&cx, file)) {
        fprintf(stderr, PROG ": out of memory\n");
        free(src);
        return EXIT_BAD_PROGRAM;
    }
    eve_node_t *prog = eve_parse(&cx, src, len);
    int rc = 0;
    if (!prog || (check && !eve_check(&cx, prog))) {
        print_diags(&cx);
        rc = EXIT_BAD_PROGRAM;
    } else if (dump) {
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
    if (fflush(stdout) != 0) {
        fprintf(stderr, PROG ": writing the output: %s\n", strerror(errno));
        rc = EXIT_BAD_PROGRAM;
    }
    return rc;
}

static int cmd_parse(int argc, char **argv)
{
    return front_end(argc, argv, commands[0].usage, true, false);
}

static int cmd_check(int argc, char **argv)
{
    return front_end(argc, argv, commands[1].usage, false, true);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    return usage_error("unknown command '%s' (commands: parse, check)", argv[1]);
}
