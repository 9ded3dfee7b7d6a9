/* The command line's edge, shared by the tools (yard-serve, yard-load,
 * yard-chat, yard-cswitch, yard-tasks, yard-eve, yard-corobench): how a
 * usage error is told, and whole numbers from flags. Flags declared in a
 * yard_opt_t table (opt.h) are parsed there; these are for the tools'
 * hand-written flags and positional arguments. */
#ifndef YARD_CLI_H
#define YARD_CLI_H

#define YARD_EXIT_USAGE 2

/* Prints "PROG: <message>" and "Try 'TOOL --help'." on stderr (TOOL is
 * PROG up to its first space: "yard-chat account" points at yard-chat
 * --help); returns YARD_EXIT_USAGE. */
int yard_usage_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* yard_usage_error, then exit(YARD_EXIT_USAGE). */
_Noreturn void yard_usage_exit(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A whole decimal number from min to max and nothing else (a sign, then
 * digits: no blank, no suffix): 0, -EINVAL when text is not one, -ERANGE
 * when it is outside [min, max]. */
int yard_parse_int(const char *text, long long min, long long max, long long *out);
/* flag's value read by yard_parse_int, or yard_usage_exit(prog, "FLAG:
 * expected a whole number from MIN to MAX, got 'TEXT'"): the wording of
 * yard_opt_set's errors. */
long long yard_int_flag(const char *prog, const char *flag, const char *text, long long min,
                        long long max);

#endif
