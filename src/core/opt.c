/* Options declared as data (yard/opt.h): parsing, defaults, help, JSON. */
#include "yard/opt.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "yard/clock.h"

#define HELP_WIDTH 88 /* the help's lines end before this column */
#define HELP_INDENT 23 /* where help texts start */

size_t yard_opt_count(const yard_opt_t *opts)
{
    size_t n = 0;
    while (opts && opts[n].name)
        n++;
    return n;
}

const yard_opt_t *yard_opt_find(const yard_opt_t *opts, const char *name)
{
    for (size_t i = 0; opts && opts[i].name; i++)
        if (strcmp(opts[i].name, name) == 0)
            return &opts[i];
    return NULL;
}

const char *yard_opt_type_name(yard_opt_type_t type)
{
    switch (type) {
    case YARD_OPT_SWITCH: return "switch";
    case YARD_OPT_INT: return "integer";
    case YARD_OPT_SIZE: return "size";
    case YARD_OPT_DURATION: return "duration";
    case YARD_OPT_MS: return "milliseconds";
    case YARD_OPT_RATE: return "rate";
    case YARD_OPT_ENUM: return "enum";
    case YARD_OPT_STRING: return "string";
    case YARD_OPT_CUSTOM: return "custom";
    }
    return "?";
}

/* The choices offered to a user: "'a', 'b' or 'c'". */
static void describe_choices(const yard_opt_choice_t *c, char *buf, size_t len)
{
    size_t shown = 0, total = 0, used = 0;
    for (const yard_opt_choice_t *p = c; p && p->name; p++)
        total += !p->hidden;
    buf[0] = 0;
    for (const yard_opt_choice_t *p = c; p && p->name && used < len; p++) {
        if (p->hidden)
            continue;
        const char *sep = shown == 0 ? "" : shown + 1 == total ? " or " : ", ";
        int w = snprintf(buf + used, len - used, "%s'%s'", sep, p->name);
        used += w > 0 ? (size_t)w : 0;
        shown++;
    }
}

void yard_opt_describe(const yard_opt_t *opt, char *buf, size_t len)
{
    switch (opt->type) {
    case YARD_OPT_SWITCH: snprintf(buf, len, "no value"); break;
    case YARD_OPT_INT:
        snprintf(buf, len, "a whole number from %lld to %lld", opt->min, opt->max);
        break;
    case YARD_OPT_SIZE:
        snprintf(buf, len, "a whole number of bytes from %lld to %lld (K, M and G multiply by 1024)",
                 opt->min, opt->max);
        break;
    case YARD_OPT_DURATION: snprintf(buf, len, "a duration such as 30s, 500ms or 2m"); break;
    case YARD_OPT_MS:
        snprintf(buf, len, "a whole number of milliseconds from %lld to %lld", opt->min, opt->max);
        break;
    case YARD_OPT_RATE:
        snprintf(buf, len, "N/DURATION such as 10/10m (N at once, then N per DURATION)");
        break;
    case YARD_OPT_ENUM: describe_choices(opt->choices, buf, len); break;
    case YARD_OPT_STRING: snprintf(buf, len, "%s", opt->form ? opt->form : "a value"); break;
    case YARD_OPT_CUSTOM: snprintf(buf, len, "%s", opt->form ? opt->form : "a value"); break;
    }
}

/* Stores v in an integer field of size bytes. v is in the range the table
 * declares, which the field's type must hold, so the bit pattern is right
 * for signed and unsigned fields alike. */
static void store_int(void *field, size_t size, long long v)
{
    switch (size) {
    case 1: *(int8_t *)field = (int8_t)v; break;
    case 2: *(int16_t *)field = (int16_t)v; break;
    case 4: *(int32_t *)field = (int32_t)v; break;
    default: *(int64_t *)field = (int64_t)v; break;
    }
}

/* A whole number, with a K, M or G suffix if suffixes is set. */
static int parse_whole(const char *s, bool suffixes, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s)
        return -1;
    if (suffixes && *end) {
        const char *units = "KMG";
        const char *u = strchr(units, *end);
        if (!u || end[1])
            return -1;
        for (int shift = (int)(u - units) + 1; shift > 0; shift--) {
            if (v > LLONG_MAX / 1024 || v < LLONG_MIN / 1024)
                return -1;
            v *= 1024;
        }
        end++;
    }
    if (*end)
        return -1;
    *out = v;
    return 0;
}

static int set_number(const yard_opt_t *opt, void *field, const char *text)
{
    long long v;
    if (parse_whole(text, opt->type == YARD_OPT_SIZE, &v) < 0 || v < opt->min || v > opt->max)
        return -1;
    if (opt->type == YARD_OPT_MS)
        *(uint64_t *)field = (uint64_t)v * YARD_NS_PER_MS;
    else
        store_int(field, opt->size, v);
    return 0;
}

static int set_enum(const yard_opt_t *opt, void *field, const char *text)
{
    for (const yard_opt_choice_t *c = opt->choices; c && c->name; c++) {
        if (strcmp(c->name, text) == 0) {
            *(int *)field = c->value;
            return 0;
        }
    }
    return -1;
}

int yard_opt_set(const yard_opt_t *opt, void *settings, const char *text, char *err,
                 size_t errlen)
{
    void *field = (char *)settings + opt->offset;
    int rc = 0;
    switch (opt->type) {
    case YARD_OPT_SWITCH: *(bool *)field = true; return 0;
    case YARD_OPT_INT:
    case YARD_OPT_SIZE:
    case YARD_OPT_MS: rc = set_number(opt, field, text); break;
    case YARD_OPT_DURATION:
        rc = yard_parse_duration_ns(text, opt->unit_ns ? opt->unit_ns : YARD_NS_PER_S, field);
        break;
    case YARD_OPT_RATE: {
        yard_rate_t *r = field;
        rc = yard_parse_rate(text, &r->burst, &r->per_s);
        break;
    }
    case YARD_OPT_ENUM: rc = set_enum(opt, field, text); break;
    case YARD_OPT_STRING: *(const char **)field = text; return 0;
    case YARD_OPT_CUSTOM:
        err[0] = 0;
        if (opt->parse(text, field, err, errlen) == 0)
            return 0;
        if (!err[0])
            snprintf(err, errlen, "expected %s, got '%s'", opt->form ? opt->form : "a value", text);
        return -1;
    }
    if (rc == 0)
        return 0;
    char what[256];
    yard_opt_describe(opt, what, sizeof what);
    /* Bounded, so that the message fits a caller's 256 bytes whole (and -O3's
     * -Wformat-truncation sees it does). */
    snprintf(err, errlen, "expected %.100s, got '%.100s'", what, text);
    return -1;
}

int yard_opt_defaults(const yard_opt_t *opts, void *settings, char *err, size_t errlen)
{
    for (size_t i = 0; opts && opts[i].name; i++) {
        if (!opts[i].def)
            continue;
        char why[256];
        if (yard_opt_set(&opts[i], settings, opts[i].def, why, sizeof why) < 0) {
            snprintf(err, errlen, "--%s: its default does not parse: %s", opts[i].name, why);
            return -1;
        }
    }
    return 0;
}

/* ---- the command line ------------------------------------------------- */

/* The distinct names of the tables, first entry first. */
static int collect_names(const yard_opt_t *const *tables, size_t ntables, const yard_opt_t ***out,
                         size_t *nout, char *err, size_t errlen)
{
    size_t cap = 0, n = 0;
    for (size_t t = 0; t < ntables; t++)
        cap += yard_opt_count(tables[t]);
    const yard_opt_t **names = calloc(cap + 1, sizeof *names);
    if (!names) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t t = 0; t < ntables; t++) {
        for (const yard_opt_t *o = tables[t]; o && o->name; o++) {
            size_t j = 0;
            while (j < n && strcmp(names[j]->name, o->name) != 0)
                j++;
            if (j < n && (names[j]->type == YARD_OPT_SWITCH) != (o->type == YARD_OPT_SWITCH)) {
                snprintf(err, errlen, "--%s is declared both with and without a value", o->name);
                free(names);
                return -1;
            }
            if (j == n)
                names[n++] = o;
        }
    }
    *out = names;
    *nout = n;
    return 0;
}

static const yard_opt_t *by_short(const yard_opt_t **names, size_t n, int c)
{
    for (size_t i = 0; i < n; i++)
        if (names[i]->short_name == c)
            return names[i];
    return NULL;
}

/* What went wrong at getopt's return value c. */
static void scan_error(int c, int argc, char **argv, const yard_opt_t **names, size_t n,
                       char *err, size_t errlen)
{
    const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
    if (c == ':') {
        const yard_opt_t *o = optopt >= 256 ? names[optopt - 256] : by_short(names, n, optopt);
        snprintf(err, errlen, "--%s needs a value (%s)", o ? o->name : arg,
                 o && o->form ? o->form : "a value");
    } else if (optopt >= 256) {
        snprintf(err, errlen, "--%s takes no value, got '%s'", names[optopt - 256]->name, arg);
    } else if (optopt > 0 && optopt < 256) {
        snprintf(err, errlen, "unknown option '-%c'", optopt);
    } else {
        snprintf(err, errlen, "unknown option '%s'", arg);
    }
}

int yard_opt_scan(int argc, char **argv, const yard_opt_t *const *tables, size_t ntables,
                  yard_opt_arg_t *args, size_t *nargs, char *err, size_t errlen)
{
    const yard_opt_t **names;
    size_t n;
    *nargs = 0;
    if (collect_names(tables, ntables, &names, &n, err, errlen) < 0)
        return -1;
    struct option *longs = calloc(n + 1, sizeof *longs);
    char shorts[64] = ":"; /* ':' first: a missing value is told apart from an unknown flag */
    size_t ns = 1;
    for (size_t i = 0; longs && i < n; i++) {
        longs[i] = (struct option){names[i]->name,
                                   names[i]->type == YARD_OPT_SWITCH ? no_argument
                                                                     : required_argument,
                                   NULL, 256 + (int)i};
        if (names[i]->short_name && ns + 2 < sizeof shorts) {
            shorts[ns++] = names[i]->short_name;
            if (names[i]->type != YARD_OPT_SWITCH)
                shorts[ns++] = ':';
        }
    }
    int rc = longs ? 0 : -1;
    if (!longs)
        snprintf(err, errlen, "out of memory");
    opterr = 0;
    optind = 0; /* glibc: start afresh, even if getopt ran before */
    int c;
    while (rc == 0 && (c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        const yard_opt_t *o = c >= 256 ? names[c - 256] : by_short(names, n, c);
        if (c == ':' || c == '?' || !o) {
            scan_error(c, argc, argv, names, n, err, errlen);
            rc = -1;
            break;
        }
        args[(*nargs)++] = (yard_opt_arg_t){o, o->type == YARD_OPT_SWITCH ? NULL : optarg};
    }
    if (rc == 0 && optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
        rc = -1;
    }
    free(longs);
    free(names);
    return rc;
}

int yard_opt_parse_argv(int argc, char **argv, const yard_opt_t *opts, void *settings,
                        bool *given, char *err, size_t errlen)
{
    size_t n = yard_opt_count(opts);
    if (given)
        memset(given, 0, n * sizeof *given);
    if (yard_opt_defaults(opts, settings, err, errlen) < 0)
        return -1;
    yard_opt_arg_t *args = calloc((size_t)argc + 1, sizeof *args);
    size_t nargs;
    if (!args) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = yard_opt_scan(argc, argv, &opts, 1, args, &nargs, err, errlen);
    bool seen[n + 1];
    memset(seen, 0, sizeof seen);
    for (size_t i = 0; rc == 0 && i < nargs; i++) {
        char why[256];
        if (yard_opt_set(args[i].opt, settings, args[i].value, why, sizeof why) < 0) {
            snprintf(err, errlen, "--%s: %s", args[i].opt->name, why);
            rc = -1;
        }
        seen[args[i].opt - opts] = true;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (opts[i].required && !seen[i]) {
            snprintf(err, errlen, "--%s %s is required (%s)", opts[i].name,
                     opts[i].form ? opts[i].form : "", opts[i].required);
            rc = -1;
        }
    }
    if (given)
        memcpy(given, seen, n * sizeof *given);
    free(args);
    return rc;
}

/* ---- help and JSON ---------------------------------------------------- */

/* fresh: the cursor is where a word may start (no space needed first). */
static void wrap(FILE *f, const char *text, int col, int indent, bool fresh)
{
    const char *p = text;
    while (*p) {
        int word = (int)strcspn(p, " ");
        if (col > indent && col + (fresh ? 0 : 1) + word > HELP_WIDTH) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
            fresh = true;
        }
        if (!fresh) {
            fputc(' ', f);
            col++;
        }
        fresh = false;
        fprintf(f, "%.*s", word, p);
        col += word;
        p += word;
        p += strspn(p, " ");
    }
    fputc('\n', f);
}

void yard_opt_print_wrapped(FILE *f, const char *text, int col, int indent)
{
    wrap(f, text, col, indent, col <= indent);
}

void yard_opt_help(FILE *f, const yard_opt_t *opts, void (*after)(FILE *f, const yard_opt_t *opt))
{
    for (size_t i = 0; opts && opts[i].name; i++) {
        const yard_opt_t *o = &opts[i];
        char head[128], text[1024];
        char alias[8] = "";
        if (o->short_name)
            snprintf(alias, sizeof alias, "-%c, ", o->short_name);
        int col = snprintf(head, sizeof head, "  %s--%s%s%s", alias, o->name, o->form ? " " : "",
                           o->form ? o->form : "");
        /* The text at its column, or two spaces after a long flag. */
        int pad = col <= HELP_INDENT - 2 ? HELP_INDENT - col : 2;
        fprintf(f, "%s%*s", head, pad, "");
        col += pad;
        snprintf(text, sizeof text, "%s%s%s%s%s", o->help ? o->help : "", o->def ? " (default " : "",
                 o->def ? o->def : "", o->def ? ")" : "", o->required ? " (required)" : "");
        wrap(f, text, col, HELP_INDENT, true);
        if (after)
            after(f, o);
    }
}

void yard_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20 || *s == 0x7f)
            fprintf(f, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_string_or_null(FILE *f, const char *s)
{
    if (s)
        yard_json_string(f, s);
    else
        fputs("null", f);
}

static void json_choices(FILE *f, const yard_opt_choice_t *c)
{
    fputs(", \"choices\": [", f);
    bool first = true;
    for (; c && c->name; c++) {
        if (c->hidden)
            continue;
        fputs(first ? "" : ", ", f);
        yard_json_string(f, c->name);
        first = false;
    }
    fputc(']', f);
}

void yard_opt_json(FILE *f, const yard_opt_t *opts)
{
    fputc('[', f);
    for (size_t i = 0; opts && opts[i].name; i++) {
        const yard_opt_t *o = &opts[i];
        char flag[128];
        snprintf(flag, sizeof flag, "--%s", o->name);
        fputs(i ? ", {\"flag\": " : "{\"flag\": ", f);
        yard_json_string(f, flag);
        fputs(", \"value\": ", f);
        json_string_or_null(f, o->form);
        fprintf(f, ", \"type\": \"%s\", \"default\": ", yard_opt_type_name(o->type));
        json_string_or_null(f, o->def);
        if (o->type == YARD_OPT_INT || o->type == YARD_OPT_SIZE || o->type == YARD_OPT_MS)
            fprintf(f, ", \"min\": %lld, \"max\": %lld", o->min, o->max);
        if (o->type == YARD_OPT_ENUM)
            json_choices(f, o->choices);
        if (o->required)
            fputs(", \"required\": true", f);
        fputs(", \"help\": ", f);
        json_string_or_null(f, o->help);
        fputc('}', f);
    }
    fputc(']', f);
}
