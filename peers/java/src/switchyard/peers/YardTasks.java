package switchyard.peers;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.RecursiveTask;
import java.util.concurrent.TimeUnit;

/**
 * {@code yard-tasks fib} for the JVM: the Eve study's Program 1, parallel Fibonacci, with a
 * {@link ForkJoinPool} of W workers and a {@link RecursiveTask}, written the way the
 * fork/join framework is meant to be used: a call above the cutoff makes a task for each
 * child, forks one, computes the other itself and joins the first. It prints the JSON of
 * yard-tasks (tools/tasks) with {@code "runtime":"forkjoin"} (issue 22, docs/peers.md).
 *
 * <p>Usage: {@code fib N --workers W [--cutoff C] [--repeat K] [--json]}. The K repetitions
 * run in one JVM, each with a new pool, and every one is reported: the first ones run
 * interpreted or half-compiled, so {@code min_s} is the warmed figure.
 */
public final class YardTasks {
    static final int MAX_N = 92; // fib(92) is the largest that fits in a long
    static final int DEFAULT_CUTOFF = 20;
    static final int DEFAULT_REPEAT = 5;

    private YardTasks() {
    }

    /** Program 1 as a fork/join task. */
    static final class Fib extends RecursiveTask<Long> {
        private static final long serialVersionUID = 1L;
        private final int n;
        private final int cutoff;

        Fib(int n, int cutoff) {
            this.n = n;
            this.cutoff = cutoff;
        }

        @Override
        protected Long compute() {
            if (n < 2) {
                return (long) n;
            }
            if (n <= cutoff) {
                return sequential(n);
            }
            Fib first = new Fib(n - 1, cutoff);
            first.fork();
            long second = new Fib(n - 2, cutoff).compute();
            return first.join() + second;
        }
    }

    /** Below the cutoff: plain recursion, as in the study. */
    static long sequential(int n) {
        return n < 2 ? n : sequential(n - 1) + sequential(n - 2);
    }

    /** The reference value, computed iteratively. */
    static long exact(int n) {
        long a = 0;
        long b = 1;
        for (int i = 0; i < n; i++) {
            long t = a + b;
            a = b;
            b = t;
        }
        return a;
    }

    /**
     * Tasks one run creates: two for every call with n >= 2 and n > cutoff (one forked, one
     * computed by its parent). The call tree is fixed, so this is exact without a counter.
     */
    static long tasks(int n, int cutoff) {
        long[] memo = new long[Math.max(n + 1, 2)];
        for (int i = 2; i <= n; i++) {
            memo[i] = i <= cutoff ? 0 : 2 + memo[i - 1] + memo[i - 2];
        }
        return memo[n];
    }

    static final class UsageError extends Exception {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }

    static final class Options {
        int n = -1;
        int workers = Runtime.getRuntime().availableProcessors();
        int cutoff = DEFAULT_CUTOFF;
        int repeat = DEFAULT_REPEAT;
        boolean json;
    }

    static String usage() {
        return "usage: yard-peer-java fib N --workers W [--cutoff C] [--repeat K] [--json]\n\n"
                + "The Eve study's Program 1 on a ForkJoinPool: fib(n) makes a RecursiveTask for\n"
                + "each child, forks one, computes the other and joins, down to the cutoff, below\n"
                + "which it recurses sequentially.\n\n"
                + "  N               0.." + MAX_N + "\n"
                + "  --workers W     the pool's parallelism, >= 1 (default: the CPUs this JVM may use, "
                + Runtime.getRuntime().availableProcessors() + ")\n"
                + "  --cutoff C      n <= C is computed sequentially; 0 = tasks for every call with\n"
                + "                  n >= 2 (default " + DEFAULT_CUTOFF + ")\n"
                + "  --repeat K      repetitions in this JVM, each with a new pool, each timed\n"
                + "                  (default " + DEFAULT_REPEAT + "); the first ones warm the JIT up\n"
                + "  --json          one JSON object, the schema of yard-tasks (see docs/peers.md)\n\n"
                + "Exit status: 0 ok, 1 a wrong result, 2 a usage error.\n";
    }

    static int intValue(String flag, String v, int min, int max) throws UsageError {
        try {
            int x = Integer.parseInt(v);
            if (x >= min && x <= max) {
                return x;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new UsageError(flag + " " + quote(v) + ": expected an integer "
                + (max == Integer.MAX_VALUE ? ">= " + min : min + ".." + max));
    }

    static Options parse(String[] args) throws UsageError {
        if (args.length == 0 || !args[0].equals("fib")) {
            throw new UsageError(args.length == 0 ? "expected a program: fib"
                    : "unknown program " + quote(args[0]) + ": expected fib");
        }
        Options o = new Options();
        List<String> positional = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            String value = null;
            int eq = a.indexOf('=');
            if (a.startsWith("--") && eq > 0) {
                value = a.substring(eq + 1);
                a = a.substring(0, eq);
            }
            switch (a) {
                case "--json":
                    if (value != null) {
                        throw new UsageError("--json takes no value");
                    }
                    o.json = true;
                    continue;
                case "--workers":
                case "--cutoff":
                case "--repeat":
                    if (value == null) {
                        if (i + 1 >= args.length) {
                            throw new UsageError(a + " needs a value");
                        }
                        value = args[++i];
                    }
                    if (a.equals("--workers")) {
                        o.workers = intValue(a, value, 1, 32767); // ForkJoinPool's limit
                    } else if (a.equals("--cutoff")) {
                        o.cutoff = intValue(a, value, 0, Integer.MAX_VALUE);
                    } else {
                        o.repeat = intValue(a, value, 1, Integer.MAX_VALUE);
                    }
                    continue;
                default:
                    if (a.startsWith("-") && a.length() > 1) {
                        throw new UsageError("unknown flag " + quote(a));
                    }
                    positional.add(a);
            }
        }
        if (positional.size() != 1) {
            throw new UsageError("expected one argument N (0.." + MAX_N + "), got "
                    + positional.size());
        }
        o.n = intValue("N", positional.get(0), 0, MAX_N);
        return o;
    }

    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static double median(double[] xs) {
        double[] s = xs.clone();
        Arrays.sort(s);
        int m = s.length / 2;
        return s.length % 2 == 1 ? s[m] : (s[m - 1] + s[m]) / 2;
    }

    static String list(double[] xs) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < xs.length; i++) {
            b.append(i > 0 ? "," : "").append(xs[i]);
        }
        return b.append(']').toString();
    }

    public static void main(String[] args) throws InterruptedException {
        for (String a : args) {
            if (a.equals("--help") || a.equals("-h")) {
                System.out.print(usage());
                return;
            }
        }
        Options o;
        try {
            o = parse(args);
        } catch (UsageError e) {
            System.err.println("yard-peer-java: " + e.getMessage() + " (see --help)");
            System.exit(2);
            return;
        }
        long expected = exact(o.n);
        long result = 0;
        boolean correct = true;
        long steals = 0;
        double[] times = new double[o.repeat];
        double[] walls = new double[o.repeat];
        for (int i = 0; i < o.repeat; i++) {
            // wall_s: the pool's creation (its workers start on the first task), the run,
            // and shutting the pool down until every worker has ended; times_s: invoke alone.
            long w0 = System.nanoTime();
            ForkJoinPool pool = new ForkJoinPool(o.workers);
            long t0 = System.nanoTime();
            long got = pool.invoke(new Fib(o.n, o.cutoff));
            long t1 = System.nanoTime();
            pool.shutdown();
            if (!pool.awaitTermination(1, TimeUnit.MINUTES)) {
                System.err.println("yard-peer-java: the pool did not terminate in a minute");
                System.exit(1);
            }
            long w1 = System.nanoTime();
            // Once the workers have ended, their counts are in the pool's total: exact.
            steals = pool.getStealCount();
            times[i] = (t1 - t0) / 1e9;
            walls[i] = (w1 - w0) / 1e9;
            result = got;
            correct &= got == expected;
        }
        double min = Arrays.stream(times).min().getAsDouble();
        double med = median(times);
        long tasks = tasks(o.n, o.cutoff);
        String nsPerTask = tasks > 0 ? Double.toString(med * 1e9 / tasks) : "null";
        int cpus = Runtime.getRuntime().availableProcessors();
        if (o.json) {
            System.out.println("{\"tool\":\"yard-tasks\",\"program\":\"fib\",\"n\":" + o.n
                    + ",\"runtime\":\"forkjoin\",\"workers\":" + o.workers + ",\"cutoff\":" + o.cutoff
                    + ",\"repeat\":" + o.repeat + ",\"result\":" + result + ",\"expected\":" + expected
                    + ",\"correct\":" + correct + ",\"times_s\":" + list(times) + ",\"min_s\":" + min
                    + ",\"median_s\":" + med + ",\"wall_s\":" + list(walls) + ",\"tasks\":" + tasks
                    + ",\"steals\":" + steals + ",\"ns_per_task\":" + nsPerTask
                    + ",\"inline_fallbacks\":0,\"cpus\":" + cpus + "}");
        } else {
            System.out.printf("fib(%d) = %d (expected %d) runtime forkjoin, %d workers, cutoff %d%n",
                    o.n, result, expected, o.workers, o.cutoff);
            System.out.printf("min %.6f s, median %.6f s over %d repetitions; %d tasks, %d stolen"
                    + " (last repetition)%s%n", min, med, o.repeat, tasks, steals,
                    tasks > 0 ? String.format(", %.1f ns per task (median)", med * 1e9 / tasks) : "");
        }
        if (!correct) {
            System.err.println("yard-peer-java: fib(" + o.n + "): got " + result + ", expected "
                    + expected);
            System.exit(1);
        }
    }
}
