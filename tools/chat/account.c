/* yard-chat account add|remove|list and yard-chat oper add|del|list: the
 * accounts and operators files of a data directory
 * (include/yard/chat_accounts.h). The password never comes from argv,
 * where other users could read it in /proc. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "chat.h"
#include "yard/cli.h"
#include "yard/chat_accounts.h"


/* One line from f, without its newline; false at EOF or when too long. */
static bool read_line(FILE *f, char *buf, size_t cap)
{
    if (!fgets(buf, (int)cap, f))
        return false;
    size_t n = strcspn(buf, "\n");
    if (buf[n] != '\n' && !feof(f))
        return false; /* longer than the buffer */
    buf[n] = 0;
    if (n && buf[n - 1] == '\r')
        buf[n - 1] = 0;
    return true;
}

static bool prompt(const char *what, char *buf, size_t cap)
{
    struct termios old, quiet;
    tcgetattr(STDIN_FILENO, &old);
    quiet = old;
    quiet.c_lflag &= ~(tcflag_t)ECHO;
    fprintf(stderr, "%s", what);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    bool ok = read_line(stdin, buf, cap);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
    fputc('\n', stderr);
    return ok;
}

static int read_password(const char *who, char *pw, size_t cap)
{
    if (isatty(STDIN_FILENO)) {
        char again[YARD_ACCOUNT_PASSWORD_MAX + 2];
        if (!prompt("Password: ", pw, cap) || !prompt("Again: ", again, sizeof again)) {
            fprintf(stderr, "%s: no password\n", who);
            return -1;
        }
        bool same = strcmp(pw, again) == 0;
        explicit_bzero(again, sizeof again);
        if (!same) {
            fprintf(stderr, "%s: the passwords differ\n", who);
            return -1;
        }
        return 0;
    }
    if (!read_line(stdin, pw, cap)) {
        fprintf(stderr, "%s: expected the password on the first line of stdin "
                        "(1-%d bytes)\n",
                who, YARD_ACCOUNT_PASSWORD_MAX);
        return -1;
    }
    return 0;
}

static void print_name(const char *name, void *arg)
{
    (void)arg;
    printf("%s\n", name);
}

/* yard-chat account certfp add|list|del NAME [SHA256] --data DIR: the
 * client certificates an account logs in with (SASL EXTERNAL). */
static int certfp_main(int argc, char **argv)
{
    static const char who[] = "yard-chat account certfp";
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    if (argc < 3)
        return yard_usage_error(who, "expected add, list or del%s", "");
    const char *verb = argv[2], *dir = NULL;
    optind = 3;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'h':
            printf("usage: yard-chat account certfp add NAME SHA256 --data DIR\n"
                   "       yard-chat account certfp list NAME --data DIR\n"
                   "       yard-chat account certfp del NAME SHA256 --data DIR\n");
            return 0;
        case ':': return yard_usage_error(who, "%s needs a value", argv[optind - 1]);
        default: return yard_usage_error(who, "unknown option '%s'", argv[optind - 1]);
        }
    }
    bool list = !strcmp(verb, "list");
    if (!list && strcmp(verb, "add") && strcmp(verb, "del"))
        return yard_usage_error(who, "unknown action '%s' (add, list or del)", verb);
    if (!dir)
        return yard_usage_error(who, "--data DIR is required%s", "");
    int want = list ? 1 : 2;
    if (argc - optind != want)
        return yard_usage_error(who, "%s needs %s", verb, list ? "an account NAME" :
                                "an account NAME and a SHA-256 fingerprint");
    const char *name = argv[optind], *fp = list ? NULL : argv[optind + 1];
    char err[512];
    int rc = list ? yard_accounts_certfp_list(dir, name, print_name, NULL, err, sizeof err)
         : !strcmp(verb, "add") ? yard_accounts_certfp_add(dir, name, fp, err, sizeof err)
                                : yard_accounts_certfp_remove(dir, name, fp, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "%s %s: %s\n", who, verb, err);
        return rc == -EINVAL ? 2 : 1;
    }
    return 0;
}

/* What one of the name:hash files (accounts, operators) is changed with. */
struct names_tool {
    const char *who;    /* "yard-chat account" */
    const char *what;   /* "account" */
    const char *remove; /* the verb that removes one ("remove", "del") */
    int (*add)(const char *dir, const char *const *names, const char *const *passwords,
               size_t count, int cost, char *err, size_t errlen);
    int (*del)(const char *dir, const char *name, char *err, size_t errlen);
    int (*list)(const char *dir, void (*fn)(const char *name, void *arg), void *arg, char *err,
                size_t errlen);
};

/* The --data DIR and --cost N options after argv[1] (the action); optind is
 * left at the first operand. -1 to go on; else the exit status: 0 after
 * --help (usage printed), 2 after a usage error (said). */
static int dir_cost_options(int argc, char **argv, const char *who, const char *usage,
                            const char **dir, int *cost)
{
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},
        {"cost", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *dir = NULL;
    *cost = 12;
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) { /* before any action */
        fputs(usage, stdout);
        return 0;
    }
    optind = 2;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': *dir = optarg; break;
        case 'c': {
            long long v;
            if (yard_parse_int(optarg, 4, 31, &v) < 0)
                return yard_usage_error(who, "--cost: expected a bcrypt cost from 4 to 31, got '%s'",
                                        optarg);
            *cost = (int)v;
            break;
        }
        case 'h': fputs(usage, stdout); return 0;
        case ':': return yard_usage_error(who, "%s needs a value", argv[optind - 1]);
        default: return yard_usage_error(who, "unknown option '%s'", argv[optind - 1]);
        }
    }
    return -1;
}

/* add NAME...: each name's password read in turn (read_password: the
 * terminal, twice, or one line of stdin per name, in order), then every
 * entry written at once. 0, or -errno with err; 1 or 2 when the problem
 * (a password, a name) was said already. */
static int add_names(const struct names_tool *t, const char *dir, const char *const *names,
                     size_t count, int cost, char *err, size_t errlen)
{
    for (size_t k = 0; k < count; k++)
        if (!yard_account_name_valid(names[k], strlen(names[k]))) {
            yard_usage_error(t->who, "'%s' is not a valid %s name (1-30 characters: a letter "
                             "or one of [\\]^_`{|} first, then also digits and '-')",
                             names[k], t->what);
            return 2;
        }
    enum { CAP = YARD_ACCOUNT_PASSWORD_MAX + 2 };
    char *pw = calloc(count, CAP);
    const char **pws = calloc(count, sizeof *pws);
    int rc = pw && pws ? 0 : -ENOMEM;
    if (rc)
        snprintf(err, errlen, "out of memory for %zu passwords", count);
    for (size_t k = 0; !rc && k < count; k++) {
        if (count > 1 && isatty(STDIN_FILENO))
            fprintf(stderr, "%s %s:\n", t->what, names[k]);
        pws[k] = pw + k * CAP;
        if (read_password(t->who, pw + k * CAP, CAP) < 0) {
            if (count > 1)
                fprintf(stderr, "%s: that was the password of '%s', name %zu of %zu (one "
                                "line each, in the names' order); nothing was added\n",
                        t->who, names[k], k + 1, count);
            rc = 1;
        }
    }
    if (!rc)
        rc = t->add(dir, names, pws, count, cost, err, errlen);
    if (pw)
        explicit_bzero(pw, count * CAP);
    free(pw);
    free(pws);
    return rc;
}

static int names_main(int argc, char **argv, const struct names_tool *t)
{
    const char *who = t->who;
    if (argc < 2)
        return yard_usage_error(who, "expected add, %s or list", t->remove);
    const char *verb = argv[1];
    char usage[256];
    snprintf(usage, sizeof usage,
             "usage: %s add NAME... | %s NAME | list  --data DIR [--cost N]\n"
             "  add: each NAME's password from the terminal (twice), or one line of\n"
             "  stdin per NAME, in order; every NAME is added, or none\n",
             who, t->remove);
    const char *dir;
    int cost;
    int done = dir_cost_options(argc, argv, who, usage, &dir, &cost);
    if (done >= 0)
        return done;
    if (!dir)
        return yard_usage_error(who, "--data DIR is required%s", "");
    const char *name = optind < argc ? argv[optind] : NULL;
    bool removes = !strcmp(verb, t->remove), adds = !strcmp(verb, "add");
    bool wants_name = adds || removes;
    if (strcmp(verb, "list") && !wants_name)
        return yard_usage_error(who, "unknown action '%s' (add, %s or list)", verb, t->remove);
    if (wants_name && !name)
        return yard_usage_error(who, "%s needs a NAME", verb);
    /* add takes several names; list none, remove one. */
    int extra = optind + (adds ? argc - optind : wants_name ? 1 : 0);
    if (extra < argc)
        return yard_usage_error(who, "unexpected argument '%s'", argv[extra]);
    char err[512];
    int rc;
    if (!strcmp(verb, "list"))
        rc = t->list(dir, print_name, NULL, err, sizeof err);
    else if (removes)
        rc = t->del(dir, name, err, sizeof err);
    else
        rc = add_names(t, dir, (const char *const *)&argv[optind], (size_t)(argc - optind), cost,
                       err, sizeof err);
    if (rc == 1)
        return 1; /* a password that could not be read: already said */
    if (rc == 2)
        return 2; /* a usage error: already said */
    if (rc < 0) {
        fprintf(stderr, "%s %s: %s\n", who, verb, err);
        return 1;
    }
    return 0;
}

int chat_account_main(int argc, char **argv)
{
    static const struct names_tool accounts = {"yard-chat account", "account", "remove",
                                               yard_accounts_add_many, yard_accounts_remove,
                                               yard_accounts_list};
    if (argc >= 2 && !strcmp(argv[1], "certfp"))
        return certfp_main(argc, argv);
    return names_main(argc, argv, &accounts);
}

/* yard-chat oper add|del|list: the server operators (DIR/opers), whose
 * names and passwords OPER takes. */
int chat_oper_main(int argc, char **argv)
{
    static const struct names_tool opers = {"yard-chat oper", "operator", "del",
                                            yard_opers_add_many, yard_opers_remove,
                                            yard_opers_list};
    return names_main(argc, argv, &opers);
}

/* yard-chat server-password set|clear --data DIR [--cost N]: the password
 * every client gives with PASS before it registers, on a server started
 * with --server-password-required (DIR/server-password, a bcrypt hash). */
int chat_server_password_main(int argc, char **argv)
{
    static const char who[] = "yard-chat server-password";
    if (argc < 2)
        return yard_usage_error(who, "expected set or clear%s", "");
    const char *verb = argv[1], *dir;
    int cost;
    int done = dir_cost_options(argc, argv, who, "usage: yard-chat server-password set|clear "
                                "--data DIR [--cost N]\n", &dir, &cost);
    if (done >= 0)
        return done;
    bool set = !strcmp(verb, "set");
    if (!set && strcmp(verb, "clear"))
        return yard_usage_error(who, "unknown action '%s' (set or clear)", verb);
    if (!dir)
        return yard_usage_error(who, "--data DIR is required%s", "");
    if (optind < argc)
        return yard_usage_error(who, "unexpected argument '%s' (the password is read from the "
                                     "terminal or stdin, never from the command line)",
                                argv[optind]);
    char err[512];
    int rc;
    if (set) {
        char pw[YARD_ACCOUNT_PASSWORD_MAX + 2];
        if (read_password(who, pw, sizeof pw) < 0)
            return 1;
        rc = yard_server_password_set(dir, pw, cost, err, sizeof err);
        explicit_bzero(pw, sizeof pw);
    } else {
        rc = yard_server_password_clear(dir, err, sizeof err);
    }
    if (rc < 0) {
        fprintf(stderr, "%s %s: %s\n", who, verb, err);
        return 1;
    }
    return 0;
}
