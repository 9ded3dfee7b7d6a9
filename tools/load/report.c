/* The report: a human summary, or one JSON object (docs/load.md). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>

#include "load.h"

void load_error(load_result_t *r, const char *fmt, ...)
{
    if (r->first_error[0])
        return; /* the first error explains the run; the rest are counted */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->first_error, sizeof r->first_error, fmt, ap);
    va_end(ap);
}

static double us(uint64_t ns) { return (double)ns / 1000.0; }

/* HdrHistogram's percentile steps: 5 ticks per halving of the distance to
 * 100%, ending at 100. */
static void json_spectrum(const yard_hist_t *h)
{
    printf("\"latency_spectrum_us\": [");
    double p = 0;
    int first = 1;
    while (p < 99.9999) {
        printf("%s{\"percentile\": %.6g, \"value_us\": %.3f}", first ? "" : ", ", p,
               us(yard_hist_percentile(h, p)));
        first = 0;
        double halvings = floor(log2(100.0 / (100.0 - p)));
        p += 100.0 / (5.0 * pow(2.0, halvings + 1));
    }
    printf(", {\"percentile\": 100, \"value_us\": %.3f}]", us(yard_hist_percentile(h, 100)));
}

void load_report(const load_opts_t *o, const load_result_t *r, double cpu_s)
{
    const yard_hist_t *h = &r->latency;
    bool rate = !strcmp(o->mode, "rate");
    double secs = (double)(r->end_ns - r->start_ns) / 1e9;
    double tput = secs > 0 ? (double)r->messages / secs : 0;
    /* CPU is measured over the whole run (the ramp-up of rate included). */
    double wall = rate ? secs + (double)o->ramp_ns / 1e9 : secs;
    double cpu_pct = wall > 0 ? 100.0 * cpu_s / wall : 0;
    /* A generator that used a whole core measured itself, not the server;
     * one that fell behind its schedule by over 1% of the run did not send
     * the load it claims. */
    int saturated = cpu_pct >= 95.0;
    int behind = rate && r->behind_max_ms > 0.01 * secs * 1e3;
    int invalid = saturated || behind;
    double target = rate ? r->target_bps : 0, achieved = rate ? r->achieved_bps : tput;
    if (o->json) {
        printf("{\"mode\": \"%s\", \"target\": \"%s\", \"connections\": %d, \"size\": %zu, ", o->mode,
               o->target_text, o->connections, o->size);
        printf("\"messages\": %llu, \"errors\": %llu, \"duration_s\": %.6f, "
               "\"throughput_per_s\": %.1f, ",
               (unsigned long long)r->messages, (unsigned long long)r->errors, secs, tput);
        printf("\"latency_us\": {\"min\": %.3f, \"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, "
               "\"p999\": %.3f, \"max\": %.3f, \"mean\": %.3f}, ",
               us(yard_hist_percentile(h, 0)), us(yard_hist_percentile(h, 50)),
               us(yard_hist_percentile(h, 90)), us(yard_hist_percentile(h, 99)),
               us(yard_hist_percentile(h, 99.9)), us(yard_hist_percentile(h, 100)),
               yard_hist_mean(h) / 1000.0);
        printf("\"bytes_sent\": %llu, \"bytes_received\": %llu, ",
               (unsigned long long)r->bytes_sent, (unsigned long long)r->bytes_received);
        printf("\"generator_cpu_s\": %.3f, \"generator_cpu_pct\": %.1f, "
               "\"generator_saturated\": %s, \"invalid\": %s, ",
               cpu_s, cpu_pct, saturated ? "true" : "false", invalid ? "true" : "false");
        printf("\"target_rate\": %.1f, \"achieved_rate\": %.1f, \"rate_unit\": \"%s\", "
               "\"behind_schedule_max_ms\": %.3f, ",
               target, achieved, rate ? "bit/s" : "requests/s", r->behind_max_ms);
        if (rate)
            printf("\"per_connection_bps\": {\"target\": %.1f, \"min\": %.1f, \"max\": %.1f}, "
                   "\"ramp_up_s\": %.3f, ",
                   o->byte_rate * 8.0, r->conn_min_bps, r->conn_max_bps, (double)o->ramp_ns / 1e9);
        if (r->count_checked)
            printf("\"read_ratio\": %.4f, \"increments\": %llu, \"count_initial\": %llu, "
                   "\"count_final\": %llu, ",
                   o->read_ratio, (unsigned long long)r->increments,
                   (unsigned long long)r->count_initial, (unsigned long long)r->count_final);
        printf("\"first_error\": ");
        if (r->first_error[0]) {
            putchar('"');
            for (const char *c = r->first_error; *c; c++)
                if (*c == '"' || *c == '\\')
                    printf("\\%c", *c);
                else
                    putchar(*c);
            putchar('"');
        } else {
            printf("null");
        }
        printf(", ");
        json_spectrum(h);
        printf("}\n");
    } else {
        if (rate) {
            printf("rate %s: %d connections x %.3f Mbit/s for %.1f s (ramp-up %.1f s not "
                   "measured)\n",
                   o->target_text, o->connections, o->byte_rate * 8e-6, secs,
                   (double)o->ramp_ns / 1e9);
            printf("  achieved      %.3f Mbit/s of %.3f (%.2f%%); per connection %.3f..%.3f "
                   "Mbit/s\n",
                   r->achieved_bps * 1e-6, r->target_bps * 1e-6,
                   r->target_bps > 0 ? 100.0 * r->achieved_bps / r->target_bps : 0,
                   r->conn_min_bps * 1e-6, r->conn_max_bps * 1e-6);
            printf("  behind        at most %.2f ms behind schedule%s\n", r->behind_max_ms,
                   behind ? " -- more than 1% of the run: INVALID" : "");
        } else {
            printf("%s %s: %d connections, %s\n", o->mode, o->target_text, o->connections,
                   o->duration_ns ? "closed loop for a duration" : "closed loop");
            printf("  round trips   %llu in %.3f s = %.0f/s\n", (unsigned long long)r->messages,
                   secs, tput);
        }
        if (r->count_checked)
            printf("  count         %llu -> %llu with %llu increments (read ratio %.2f)\n",
                   (unsigned long long)r->count_initial, (unsigned long long)r->count_final,
                   (unsigned long long)r->increments, o->read_ratio);
        if (!rate)
            printf("  latency (us)  min %.1f  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  "
               "mean %.1f\n",
               us(yard_hist_percentile(h, 0)), us(yard_hist_percentile(h, 50)),
               us(yard_hist_percentile(h, 90)), us(yard_hist_percentile(h, 99)),
               us(yard_hist_percentile(h, 99.9)), us(yard_hist_percentile(h, 100)),
               yard_hist_mean(h) / 1000.0);
        printf("  errors        %llu%s%s\n", (unsigned long long)r->errors,
               r->first_error[0] ? ": " : "", r->first_error);
        printf("  generator CPU %.3f s (%.0f%% of one core)%s\n", cpu_s, cpu_pct,
               saturated ? " -- saturated: this run measured the generator, not the server" : "");
    }
    if (o->hist_out) {
        FILE *f = fopen(o->hist_out, "w");
        if (!f || (yard_hist_write_percentiles(h, f, 1000.0), fclose(f) != 0))
            fprintf(stderr, "yard-load: cannot write --hist-out %s\n", o->hist_out);
    }
}
