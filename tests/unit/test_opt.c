/* The option tables (yard/opt.h): every type, its bounds, defaults, the
 * command-line errors, help and JSON. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "yard/clock.h"
#include "yard/opt.h"

struct settings {
    bool verbose;
    int count;
    unsigned small;
    long big;
    size_t bytes;
    uint64_t wait_ns;
    uint64_t poll_ns;
    yard_rate_t rate;
    int mode;
    const char *dir;
    int custom;
};

enum { MODE_FAST = 7, MODE_SAFE = 9 };

static const yard_opt_choice_t modes[] = {YARD_OPT_CHOICE("fast", MODE_FAST),
                                          YARD_OPT_CHOICE("safe", MODE_SAFE),
                                          YARD_OPT_CHOICE_ALIAS("quick", MODE_FAST),
                                          YARD_OPT_CHOICES_END};

/* Accepts only "even" numbers: a stand-in for an odd format. */
static int parse_even(const char *text, void *field, char *err, size_t errlen)
{
    int v = atoi(text);
    if (v % 2 || !*text) {
        snprintf(err, errlen, "expected an even number, got '%s'", text);
        return -1;
    }
    *(int *)field = v;
    return 0;
}

#define F(member) YARD_OPT_FIELD(struct settings, member)

static const yard_opt_t opts[] = {
    {.name = "verbose", .type = YARD_OPT_SWITCH, F(verbose), .help = "say more", .short_name = 'v'},
    {.name = "count", .form = "N", .type = YARD_OPT_INT, F(count), .min = 1, .max = 10,
     .def = "3", .help = "how many"},
    {.name = "small", .form = "N", .type = YARD_OPT_INT, F(small), .min = 0, .max = 4000000000,
     .def = "4000000000", .help = "an unsigned field"},
    {.name = "big", .form = "N", .type = YARD_OPT_INT, F(big), .min = -5, .max = 1LL << 40,
     .help = "a long field"},
    {.name = "bytes", .form = "BYTES", .type = YARD_OPT_SIZE, F(bytes), .min = 4096,
     .max = 1LL << 34, .def = "8M", .help = "a size"},
    {.name = "wait", .form = "DUR", .type = YARD_OPT_DURATION, F(wait_ns), .unit_ns = YARD_NS_PER_S,
     .def = "30s", .help = "a duration"},
    {.name = "poll-ms", .form = "N", .type = YARD_OPT_MS, F(poll_ns), .min = 0, .max = 60000,
     .def = "250", .help = "milliseconds"},
    {.name = "rate", .form = "N/DUR", .type = YARD_OPT_RATE, F(rate), .def = "10/10m",
     .help = "a rate"},
    {.name = "mode", .form = "MODE", .type = YARD_OPT_ENUM, F(mode), .choices = modes,
     .def = "safe", .help = "fast or safe"},
    {.name = "dir", .form = "DIR", .type = YARD_OPT_STRING, F(dir), .help = "where",
     .required = "the data lives there"},
    {.name = "even", .form = "EVEN", .type = YARD_OPT_CUSTOM, F(custom), .parse = parse_even,
     .def = "2", .help = "a custom format"},
    YARD_OPT_END,
};

#define N_OPTS (sizeof opts / sizeof opts[0] - 1)

static char err[512];

/* Parses the arguments after argv[0] into s; returns what parse_argv did. */
static int parse(struct settings *s, bool *given, const char *first, ...)
{
    char *argv[32] = {"test"};
    int argc = 1;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    memset(s, 0, sizeof *s);
    err[0] = 0;
    return yard_opt_parse_argv(argc, argv, opts, s, given, err, sizeof err);
}

#define ASSERT_ERR(needle)                                                                         \
    do {                                                                                           \
        if (!strstr(err, needle))                                                                  \
            TEST_FAIL("error '%s' lacks '%s'", err, needle);                                       \
    } while (0)

static void test_defaults_are_applied(void)
{
    struct settings s;
    bool given[N_OPTS];
    ASSERT_EQ(parse(&s, given, "--dir", "/d", NULL), 0);
    ASSERT(!s.verbose);
    ASSERT_EQ(s.count, 3);
    ASSERT_U64_EQ(s.small, 4000000000u);
    ASSERT_EQ(s.big, 0); /* no default: stays zero */
    ASSERT_U64_EQ(s.bytes, 8u << 20);
    ASSERT_U64_EQ(s.wait_ns, 30 * YARD_NS_PER_S);
    ASSERT_U64_EQ(s.poll_ns, 250 * YARD_NS_PER_MS);
    /* The cast drops the excess precision i386 (x87, FLT_EVAL_METHOD 2) gives the
     * constant under ISO C: the field holds a double. */
    ASSERT(s.rate.burst == 10 && s.rate.per_s == (double)(10.0 / 600));
    ASSERT_EQ(s.mode, MODE_SAFE);
    ASSERT_STR_EQ(s.dir, "/d");
    ASSERT_EQ(s.custom, 2);
    for (size_t i = 0; i < N_OPTS; i++)
        ASSERT_EQ(given[i], strcmp(opts[i].name, "dir") == 0);
}

static void test_every_type_parses(void)
{
    struct settings s;
    bool given[N_OPTS];
    ASSERT_EQ(parse(&s, given, "-v", "--count", "10", "--small=7", "--big", "-5", "--bytes", "64K",
                    "--wait", "500ms", "--poll-ms", "0", "--rate", "3/1s", "--mode", "quick",
                    "--dir", "x", "--even", "8", NULL),
              0);
    ASSERT(s.verbose);
    ASSERT_EQ(s.count, 10);
    ASSERT_EQ(s.small, 7);
    ASSERT_EQ(s.big, -5);
    ASSERT_U64_EQ(s.bytes, 65536);
    ASSERT_U64_EQ(s.wait_ns, 500 * YARD_NS_PER_MS);
    ASSERT_U64_EQ(s.poll_ns, 0);
    ASSERT(s.rate.burst == 3 && s.rate.per_s == 3);
    ASSERT_EQ(s.mode, MODE_FAST); /* through the hidden alias */
    ASSERT_EQ(s.custom, 8);
    for (size_t i = 0; i < N_OPTS; i++)
        ASSERT(given[i]);
    /* A bare duration is in the declared unit; the last of a repeated flag wins. */
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--wait", "2", "--count", "4", "--count", "5", NULL), 0);
    ASSERT_U64_EQ(s.wait_ns, 2 * YARD_NS_PER_S);
    ASSERT_EQ(s.count, 5);
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--bytes", "1G", NULL), 0);
    ASSERT_U64_EQ(s.bytes, 1u << 30);
}

static void test_bounds_and_bad_values_name_flag_and_form(void)
{
    struct settings s;
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--count", "11", NULL), -1);
    ASSERT_STR_EQ(err, "--count: expected a whole number from 1 to 10, got '11'");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--count", "0", NULL), -1);
    ASSERT_ERR("--count: expected a whole number from 1 to 10, got '0'");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--count", "3x", NULL), -1);
    ASSERT_ERR("got '3x'");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--big", "-6", NULL), -1);
    ASSERT_ERR("--big: expected a whole number from -5 to 1099511627776");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--small", "4000000001", NULL), -1);
    ASSERT_ERR("--small: expected a whole number from 0 to 4000000000");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--bytes", "1K", NULL), -1);
    ASSERT_ERR("--bytes: expected a whole number of bytes from 4096 to 17179869184");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--bytes", "4T", NULL), -1);
    ASSERT_ERR("--bytes: expected");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--wait", "soon", NULL), -1);
    ASSERT_STR_EQ(err, "--wait: expected a duration such as 30s, 500ms or 2m, got 'soon'");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--poll-ms", "60001", NULL), -1);
    ASSERT_ERR("--poll-ms: expected a whole number of milliseconds from 0 to 60000, got '60001'");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--rate", "10", NULL), -1);
    ASSERT_ERR("--rate: expected N/DURATION such as 10/10m");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--rate", "0/1s", NULL), -1);
    ASSERT_ERR("--rate: expected N/DURATION");
    /* The hidden alias is accepted but not offered. */
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--mode", "slow", NULL), -1);
    ASSERT_STR_EQ(err, "--mode: expected 'fast' or 'safe', got 'slow'");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--even", "3", NULL), -1);
    ASSERT_STR_EQ(err, "--even: expected an even number, got '3'");
}

static void test_command_line_errors(void)
{
    struct settings s;
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--bogus", NULL), -1);
    ASSERT_STR_EQ(err, "unknown option '--bogus'");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "-q", NULL), -1);
    ASSERT_STR_EQ(err, "unknown option '-q'");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--count", NULL), -1);
    ASSERT_STR_EQ(err, "--count needs a value (N)");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "--verbose=yes", NULL), -1);
    ASSERT_ERR("--verbose takes no value");
    ASSERT_EQ(parse(&s, NULL, "--dir", "x", "stray", NULL), -1);
    ASSERT_STR_EQ(err, "unexpected argument 'stray'");
    ASSERT_EQ(parse(&s, NULL, "--count", "2", NULL), -1);
    ASSERT_STR_EQ(err, "--dir DIR is required (the data lives there)");
}

static void test_scan_over_several_tables(void)
{
    static const yard_opt_t other[] = {
        {.name = "count", .form = "N", .type = YARD_OPT_INT, .min = 0, .max = 1},
        {.name = "extra", .type = YARD_OPT_SWITCH},
        YARD_OPT_END,
    };
    const yard_opt_t *tables[] = {opts, other};
    char *argv[] = {"test", "--extra", "--count", "5", NULL};
    yard_opt_arg_t args[4];
    size_t n;
    ASSERT_EQ(yard_opt_scan(4, argv, tables, 2, args, &n, err, sizeof err), 0);
    ASSERT_EQ(n, 2);
    ASSERT(args[0].opt == &other[1] && args[0].value == NULL);
    ASSERT(args[1].opt == yard_opt_find(opts, "count")); /* the first table's entry */
    ASSERT_STR_EQ(args[1].value, "5");
    /* Two tables that disagree on whether a flag takes a value are a bug. */
    static const yard_opt_t clash[] = {{.name = "verbose", .form = "N", .type = YARD_OPT_INT},
                                       YARD_OPT_END};
    const yard_opt_t *bad[] = {opts, clash};
    ASSERT_EQ(yard_opt_scan(4, argv, bad, 2, args, &n, err, sizeof err), -1);
    ASSERT_ERR("--verbose is declared both with and without a value");
}

static void test_a_bad_default_is_reported(void)
{
    static const yard_opt_t broken[] = {
        {.name = "n", .form = "N", .type = YARD_OPT_INT, .offset = 0, .size = sizeof(int),
         .min = 1, .max = 2, .def = "3"},
        YARD_OPT_END,
    };
    int v = 0;
    ASSERT_EQ(yard_opt_defaults(broken, &v, err, sizeof err), -1);
    ASSERT_ERR("--n: its default does not parse");
}

/* The help and JSON of the table, captured from a memory stream. */
static char *capture(void (*fn)(FILE *f))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ASSERT(f);
    fn(f);
    fclose(f);
    return buf;
}

static void help_of_opts(FILE *f)
{
    yard_opt_help(f, opts, NULL);
}

static void json_of_opts(FILE *f)
{
    yard_opt_json(f, opts);
}

static void test_help_shows_forms_and_defaults(void)
{
    char *h = capture(help_of_opts);
    ASSERT(strstr(h, "  -v, --verbose        say more\n"));
    ASSERT(strstr(h, "  --count N            how many (default 3)\n"));
    ASSERT(strstr(h, "  --mode MODE          fast or safe (default safe)\n"));
    ASSERT(strstr(h, "  --dir DIR            where (required)\n"));
    for (char *line = h; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        ASSERT_LT(strcspn(line, "\n"), 88);
    free(h);
}

static void test_json_lists_each_option(void)
{
    char *j = capture(json_of_opts);
    ASSERT(j[0] == '[');
    ASSERT(strstr(j, "{\"flag\": \"--count\", \"value\": \"N\", \"type\": \"integer\", "
                     "\"default\": \"3\", \"min\": 1, \"max\": 10, \"help\": \"how many\"}"));
    ASSERT(strstr(j, "\"choices\": [\"fast\", \"safe\"]")); /* not the alias */
    ASSERT(strstr(j, "\"flag\": \"--dir\", \"value\": \"DIR\", \"type\": \"string\", "
                     "\"default\": null, \"required\": true"));
    ASSERT(strstr(j, "\"flag\": \"--verbose\", \"value\": null, \"type\": \"switch\""));
    free(j);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"defaults_are_applied", test_defaults_are_applied},
        {"every_type_parses", test_every_type_parses},
        {"bounds_and_bad_values_name_flag_and_form", test_bounds_and_bad_values_name_flag_and_form},
        {"command_line_errors", test_command_line_errors},
        {"scan_over_several_tables", test_scan_over_several_tables},
        {"a_bad_default_is_reported", test_a_bad_default_is_reported},
        {"help_shows_forms_and_defaults", test_help_shows_forms_and_defaults},
        {"json_lists_each_option", test_json_lists_each_option},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
