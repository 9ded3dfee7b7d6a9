/* yard-eve build and run (main.c has the table of commands): the generated
 * C written out and compiled with the C compiler this build names, against
 * the runtime found beside an installed yard-eve or in the build tree; run
 * builds into a temporary directory, starts the program and passes on the
 * signals it is sent. */
#define _DEFAULT_SOURCE /* mkdtemp, realpath, readlink */
#include "main_int.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "yard/cli.h"

static bool write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    bool ok = fwrite(data, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        fprintf(stderr, PROG ": writing %s: %s\n", path, strerror(errno));
    return ok;
}

#if HAVE_RUNTIME
/* Runs argv, waits; its exit status, or -1 (a message printed). */
static int spawn_wait(char *const argv[])
{
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, PROG ": cannot run the C compiler '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, PROG ": waitpid: %s\n", strerror(errno));
            return -1;
        }
    if (WIFSIGNALED(st)) {
        fprintf(stderr, PROG ": the C compiler was killed by signal %d\n", WTERMSIG(st));
        return -1;
    }
    return WEXITSTATUS(st);
}

#define MAX_CC_ARGS 96

/* Splits s (space-separated; no quoting) into av from *n on. */
static bool add_words(char *s, char **av, int *n)
{
    for (char *w = strtok(s, " \t"); w; w = strtok(NULL, " \t")) {
        if (*n >= MAX_CC_ARGS - 2)
            return false;
        av[(*n)++] = w;
    }
    return true;
}

#endif

#if HAVE_RUNTIME
/* Where the runtime's headers and archives are. */
typedef struct {
    char rt_include[4200];  /* eve_rt.h, eve_gen.h */
    char include[4200];     /* yard/coro.h and the rest of yard/ */
    char libs[16384];       /* the archives in link order, then the system's libraries */
} runtime_t;

static bool readable(const char *dir, const char *file)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return access(path, R_OK) == 0;
}

/* An installed yard-eve finds its runtime beside its own binary, in
 * BINDIR/../lib/switchyard; otherwise (run from the build tree) it uses the
 * build's own paths, compiled in. False with a message when neither has it. */
static bool find_runtime(runtime_t *rt)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            char dir[4200], real[PATH_MAX];
            snprintf(dir, sizeof dir, "%s/" YARD_EVE_INSTALL_DIR, exe);
            if (realpath(dir, real) && readable(real, "include/eve_rt.h")) {
                snprintf(rt->rt_include, sizeof rt->rt_include, "%s/include", real);
                snprintf(rt->include, sizeof rt->include, "%s/include", real);
                char names[] = YARD_EVE_LIB_NAMES;
                size_t used = 0;
                rt->libs[0] = 0;
                for (char *w = strtok(names, " "); w; w = strtok(NULL, " ")) {
                    int k = snprintf(rt->libs + used, sizeof rt->libs - used, "%s/%s ", real, w);
                    if (k < 0 || (size_t)k >= sizeof rt->libs - used) {
                        fprintf(stderr, PROG ": the runtime's path %s is too long\n", real);
                        return false;
                    }
                    used += (size_t)k;
                }
                snprintf(rt->libs + used, sizeof rt->libs - used, "%s", YARD_EVE_SYSTEM_LIBS);
                return true;
            }
        }
    }
    if (readable(YARD_EVE_RT_DIR, "eve_rt.h")) {
        snprintf(rt->rt_include, sizeof rt->rt_include, "%s", YARD_EVE_RT_DIR);
        snprintf(rt->include, sizeof rt->include, "%s", YARD_EVE_INCLUDE_DIR);
        snprintf(rt->libs, sizeof rt->libs, "%s %s", YARD_EVE_LIBS, YARD_EVE_SYSTEM_LIBS);
        return true;
    }
    fprintf(stderr,
            PROG ": cannot find the Eve runtime: not installed beside this program (BINDIR/" YARD_EVE_INSTALL_DIR
                 "/include/eve_rt.h) and not in the build tree it was built in (" YARD_EVE_RT_DIR ")\n");
    return false;
}
#endif

/* Compiles the C in c_path to bin with the runtime. 0 or EXIT_BAD_PROGRAM. */
static int compile_c(const char *c_path, const char *bin, bool debug)
{
#if HAVE_RUNTIME
    static runtime_t rt;
    if (!find_runtime(&rt))
        return EXIT_BAD_PROGRAM;
    char inc_rt[4300], inc[4300];
    snprintf(inc_rt, sizeof inc_rt, "-I%s", rt.rt_include);
    snprintf(inc, sizeof inc, "-I%s", rt.include);
    char *av[MAX_CC_ARGS];
    int n = 0;
    const char *cc_env = getenv("YARD_EVE_CC");
    char *cc = strdup(cc_env && *cc_env ? cc_env : YARD_EVE_CC);
    char *flags = strdup(YARD_EVE_SANITIZE);
    const char *extra_env = getenv("YARD_EVE_CFLAGS");
    char *extra = strdup(extra_env ? extra_env : "");
    char *libs = strdup(rt.libs);
    if (!cc || !flags || !extra || !libs) {
        fprintf(stderr, PROG ": out of memory\n");
        free(cc), free(flags), free(extra), free(libs);
        return EXIT_BAD_PROGRAM;
    }
    bool ok = add_words(cc, av, &n);
    const char *fixed[] = {"-std=c11", "-D_POSIX_C_SOURCE=200809L", debug ? "-O0" : "-O2", "-g", "-fwrapv",
                           "-pthread", inc_rt, inc};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && ok; i++)
        av[n++] = (char *)fixed[i];
    ok = ok && add_words(flags, av, &n) && add_words(extra, av, &n);
    if (ok && n + 4 < MAX_CC_ARGS) {
        av[n++] = "-o";
        av[n++] = (char *)bin;
        av[n++] = (char *)c_path;
    } else
        ok = false;
    ok = ok && add_words(libs, av, &n);
    int rc = EXIT_BAD_PROGRAM;
    if (!ok) {
        fprintf(stderr, PROG ": too many compiler flags\n");
    } else {
        av[n] = NULL;
        int st = spawn_wait(av);
        if (st == 0)
            rc = 0;
        else if (st > 0)
            fprintf(stderr, PROG ": the C compiler failed (exit status %d) on %s\n", st, c_path);
    }
    free(cc), free(flags), free(extra), free(libs);
    return rc;
#else
    (void)c_path, (void)bin, (void)debug;
    fprintf(stderr, PROG ": this yard-eve was built without the Eve runtime: it can check, not build\n");
    return EXIT_BAD_PROGRAM;
#endif
}

void main_remove_dir(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.c", dir, name);
    unlink(path);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
    rmdir(dir);
}

/* Generates (unless c_text, malloc'd, is given: it is taken and freed)
 * and compiles file into bin (or into dir/NAME when bin is NULL,
 * then *bin_out says where). The C goes to dir/NAME.c, kept on failure. */
int main_build(const char *file, char *c_text, size_t c_len, const char *bin, const char *emit_c, bool debug,
               char *dir, char *bin_out, size_t bin_size)
{
    size_t len = c_len;
    char *c = c_text ? c_text : main_generate(file, &len);
    if (!c)
        return EXIT_BAD_PROGRAM;
    if (emit_c && !write_file(emit_c, c, len)) {
        free(c);
        return EXIT_BAD_PROGRAM;
    }
    char name[256], c_path[4200];
    main_program_name(file, name, sizeof name);
    if (!name[0])
        snprintf(name, sizeof name, "program");
    snprintf(c_path, sizeof c_path, "%s/%s.c", dir, name);
    bool ok = write_file(c_path, c, len);
    free(c);
    if (!ok)
        return EXIT_BAD_PROGRAM;
    if (!bin) {
        snprintf(bin_out, bin_size, "%s/%s", dir, name);
        bin = bin_out;
    }
    int rc = compile_c(c_path, bin, debug);
    if (rc) {
        fprintf(stderr, PROG ": the generated C is kept in %s\n", c_path);
        return rc;
    }
    unlink(c_path);
    return 0;
}

bool main_make_tmpdir(char *dir, size_t size)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, size, "%s/yard-eve.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, PROG ": cannot make a temporary directory in %s: %s\n", t && *t ? t : "/tmp",
                strerror(errno));
        return false;
    }
    return true;
}

int main_cmd_build(int argc, char **argv)
{
    const char *file = NULL, *out = NULL, *emit_c = NULL;
    bool debug = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--emit-c") == 0) {
            if (i + 1 >= argc)
                return yard_usage_error(PROG, "build: %s needs a file name", argv[i]);
            if (argv[i][1] == 'o')
                out = argv[++i];
            else
                emit_c = argv[++i];
        } else if (strcmp(argv[i], "--debug") == 0) {
            debug = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            main_usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return yard_usage_error(PROG, "build: unknown option '%s'", argv[i]);
        } else if (file) {
            return yard_usage_error(PROG, "build: one file only ('%s' is a second)", argv[i]);
        } else {
            file = argv[i];
        }
    }
    if (!file || !out)
        return yard_usage_error(PROG, "build: %s", "usage: " PROG " build FILE.eve -o BIN [--emit-c FILE.c] [--debug]");
    char dir[4096];
    if (!main_make_tmpdir(dir, sizeof dir))
        return EXIT_BAD_PROGRAM;
    char unused[8];
    int rc = main_build(file, NULL, 0, out, emit_c, debug, dir, unused, sizeof unused);
    if (rc == 0)
        rmdir(dir);
    return rc;
}

static volatile sig_atomic_t child_pid;

static void forward_signal(int sig)
{
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

/* Starts the built program bin with av (its stdout into out[1] when out is
 * given), passing on SIGTERM, SIGINT and SIGHUP sent to us, so that a
 * harness can stop it through us. Its pid, or -1 (a message printed). */
int main_run_program(const char *bin, char **av, int *out)
{
    struct sigaction sa = {0};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, PROG ": fork: %s\n", strerror(errno));
        if (out)
            close(out[0]), close(out[1]);
        return -1;
    }
    if (pid == 0) {
        if (out) {
            dup2(out[1], STDOUT_FILENO);
            close(out[0]);
            close(out[1]);
        }
        execv(bin, av);
        fprintf(stderr, PROG ": cannot run %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    if (out)
        close(out[1]);
    child_pid = pid;
    return (int)pid;
}

/* Waits for what run_program started: its status (128+N when killed by
 * signal N), EXIT_BAD_PROGRAM when it could not be started. */
int main_wait_program(int pid)
{
    if (pid < 0)
        return EXIT_BAD_PROGRAM;
    int st = 0;
    while (waitpid((pid_t)pid, &st, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, PROG ": waitpid: %s\n", strerror(errno));
            return EXIT_BAD_PROGRAM;
        }
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

int main_cmd_run(int argc, char **argv)
{
    bool debug = false;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        if (strcmp(argv[i], "--debug") == 0)
            debug = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            main_usage(stdout);
            return 0;
        } else
            return yard_usage_error(PROG, "run: unknown option '%s' (the program's own arguments go after FILE.eve)",
                               argv[i]);
    }
    if (i >= argc)
        return yard_usage_error(PROG, "run: %s", "usage: " PROG " run [--debug] FILE.eve [ARGS]");
    const char *file = argv[i];
    char dir[4096], bin[4400];
    if (!main_make_tmpdir(dir, sizeof dir))
        return EXIT_BAD_PROGRAM;
    int rc = main_build(file, NULL, 0, NULL, NULL, debug, dir, bin, sizeof bin);
    if (rc)
        return rc;
    char **av = argv + i;
    av[0] = bin;
    rc = main_wait_program(main_run_program(bin, av, NULL));
    main_remove_dir(dir, bin + strlen(dir) + 1);
    return rc;
}
