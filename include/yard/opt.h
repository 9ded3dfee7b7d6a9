/* Command-line options declared as data. Whoever owns a setting (the engine,
 * a model, an app) declares its flags in a table of yard_opt_t: the flag's
 * name, the form of its value, how to parse and check it, which field of a
 * settings struct it fills, its default and its help. The same table then
 * drives parsing, defaults, usage errors, --help and the JSON listings, so
 * none of them can drift from what the owner accepts.
 *
 * A table is an array ended by an entry whose name is NULL. Fields are
 * named by their byte offset in the settings struct (YARD_OPT_FIELD). */
#ifndef YARD_OPT_H
#define YARD_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum yard_opt_type {
    YARD_OPT_SWITCH,   /* no value; sets a bool field to true */
    YARD_OPT_INT,      /* a whole number from min to max; any integer field */
    YARD_OPT_SIZE,     /* bytes: a whole number, K/M/G (1024-based) allowed */
    YARD_OPT_DURATION, /* "30s", "500ms", "2m" into a uint64_t of ns; a bare
                        * number is in unit_ns */
    YARD_OPT_MS,       /* a whole number of milliseconds from min to max, stored
                        * as a uint64_t of ns (the -ms flags) */
    YARD_OPT_RATE,     /* "N/DUR" into a yard_rate_t (yard_parse_rate) */
    YARD_OPT_ENUM,     /* one of choices' names; its value into an int field */
    YARD_OPT_STRING,   /* any text (a path, a name) into a const char *; the
                        * pointer is the argument's own, not a copy */
    YARD_OPT_CUSTOM,   /* parse() fills the field */
} yard_opt_type_t;

/* N at once, then N per some duration: a token bucket. */
typedef struct yard_rate {
    double burst; /* tokens when full */
    double per_s; /* tokens added per second */
} yard_rate_t;

typedef struct yard_opt_choice {
    const char *name;
    int value;
    bool hidden; /* accepted (an alias), but not offered in help or errors */
} yard_opt_choice_t;

typedef struct yard_opt {
    const char *name;  /* the long name, without "--" */
    const char *form;  /* the value as help shows it: "N", "DUR", "MODE"; NULL
                        * for a switch */
    yard_opt_type_t type;
    size_t offset;     /* of the field in the settings struct */
    size_t size;       /* of the field (INT, SIZE: 1, 2, 4 or 8 bytes) */
    long long min, max;               /* INT, SIZE, MS: the accepted range */
    uint64_t unit_ns;                 /* DURATION: a bare number's unit */
    const yard_opt_choice_t *choices; /* ENUM: ended by a NULL name */
    /* CUSTOM: parse text into field; on error, say what was expected (the
     * flag's name is added by the caller) and return -1. */
    int (*parse)(const char *text, void *field, char *err, size_t errlen);
    /* The default, as the text a user would give: parsed like one at
     * start-up, and shown in help. NULL: the field stays zero and the help
     * text says what that means. */
    const char *def;
    const char *help;
    /* Non-NULL: the flag is required; the text says what it is for. */
    const char *required;
    /* Non-NULL: the whole usage error given when the flag comes with an app
     * or model that does not declare it (else a generic one names who does). */
    const char *misplaced;
    char short_name; /* a one-letter alias ('h' for help), or 0 */
} yard_opt_t;

#define YARD_OPT_FIELD(type, member) .offset = offsetof(type, member), \
                                     .size = sizeof(((type *)0)->member)
#define YARD_OPT_END {.name = NULL}
#define YARD_OPT_CHOICE(n, v) {.name = (n), .value = (v)}
#define YARD_OPT_CHOICE_ALIAS(n, v) {.name = (n), .value = (v), .hidden = true}
#define YARD_OPT_CHOICES_END {.name = NULL}

/* The entries of a table (NULL counts as an empty table). */
size_t yard_opt_count(const yard_opt_t *opts);
const yard_opt_t *yard_opt_find(const yard_opt_t *opts, const char *name);

/* Parse text as opt's value into its field of settings. On an error, err
 * names what was expected and what came ("expected a whole number from 4 to
 * 31, got 'x'"), without the flag's name. */
int yard_opt_set(const yard_opt_t *opt, void *settings, const char *text, char *err,
                 size_t errlen);
/* Apply every default of a table to settings. -1 (err says which) only if a
 * default does not parse: a mistake in the table. */
int yard_opt_defaults(const yard_opt_t *opts, void *settings, char *err, size_t errlen);

/* One option found on a command line: the first entry with its name in the
 * tables given to yard_opt_scan, and its value (NULL for a switch). */
typedef struct yard_opt_arg {
    const yard_opt_t *opt;
    const char *value;
} yard_opt_arg_t;

/* Split a command line into options, with getopt_long built from the
 * tables (ntables of them; entries with the same name must agree on taking
 * a value). args needs room for argc entries; *nargs receives how many were
 * found, in command-line order. -1 on an unknown option, a missing value or
 * a stray argument, with err saying which. Permutes argv as getopt does. */
int yard_opt_scan(int argc, char **argv, const yard_opt_t *const *tables, size_t ntables,
                  yard_opt_arg_t *args, size_t *nargs, char *err, size_t errlen);

/* The whole job for a program with one table: defaults, then every option
 * of argv. given (optional, one bool per entry) records which were given.
 * -1 with err as "--flag: what was wrong" on any error, including a
 * required flag left out. */
int yard_opt_parse_argv(int argc, char **argv, const yard_opt_t *opts, void *settings,
                        bool *given, char *err, size_t errlen);

/* What the accepted values look like, for errors and listings: "a whole
 * number from 1 to 1024", "'each' or 'buffered'". */
void yard_opt_describe(const yard_opt_t *opt, char *buf, size_t len);
/* The type's name in the JSON listing: "switch", "integer", "size", ... */
const char *yard_opt_type_name(yard_opt_type_t type);

/* Help for a table, one entry per flag: "  --name FORM" and the help text,
 * word-wrapped before column 88 at column 23, then "(default X)". after,
 * if given, runs after each entry (to print what only the caller knows). */
void yard_opt_help(FILE *f, const yard_opt_t *opts, void (*after)(FILE *f, const yard_opt_t *opt));
/* Prints text word-wrapped before column 88; col is the column the cursor
 * is at, continuation lines start at column indent. Ends the line. */
void yard_opt_print_wrapped(FILE *f, const char *text, int col, int indent);

/* The table as a JSON array of {"flag", "value", "type", "default", "help"}
 * objects (with "min"/"max", "choices" and "required" where they apply). */
void yard_opt_json(FILE *f, const yard_opt_t *opts);
/* s as a JSON string, quoted; control characters and DEL as \u escapes. */
void yard_json_string(FILE *f, const char *s);

#endif
