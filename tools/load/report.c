/* The report: a human summary, or one JSON object (docs/load.md). This
 * file prints what every mode has; the mode's hooks add the rest. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>

#include "load.h"
#include "yard/opt.h"

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

/* The figures every report line is made of: the defaults of a
 * request/response run, then the mode's changes, then what follows. */
static load_report_t figures(const load_mode_t *mode, const load_opts_t *o,
                             const load_result_t *r, double cpu_s)
{
    load_report_t rep = {.o = o, .r = r, .cpu_s = cpu_s};
    rep.secs = (double)(r->end_ns - r->start_ns) / 1e9;
    rep.tput = rep.secs > 0 ? (double)r->messages / rep.secs : 0;
    rep.open = r->target_rate > 0;
    rep.wall_s = rep.secs;
    rep.loop = rep.open ? "open" : "closed";
    rep.target = r->target_rate;
    rep.achieved = rep.tput;
    rep.unit = "requests/s";
    rep.on_schedule = rep.open;
    rep.round_trips = true;
    if (mode->figures)
        mode->figures(&rep);
    rep.cpu_pct = rep.wall_s > 0 ? 100.0 * cpu_s / rep.wall_s : 0;
    /* A generator that used a whole core measured itself, not the server;
     * one that fell behind its schedule by over 1% of the run did not send
     * the load it claims. */
    rep.saturated = rep.cpu_pct >= 95.0 * (o->threads > 0 ? o->threads : 1);
    rep.behind = rep.on_schedule && r->behind_max_ms > 0.01 * rep.secs * 1e3;
    rep.invalid = rep.saturated || rep.behind;
    rep.cpu_per_100k = r->messages ? cpu_s * 1e5 / (double)r->messages : 0;
    return rep;
}

/* "tls": null without --tls; else the handshakes (each timed from its TCP
 * connect's start) and the failures. */
static void json_tls(const load_report_t *rep)
{
    const load_result_t *r = rep->r;
    if (!rep->o->tls) {
        printf("\"tls\": null, ");
        return;
    }
    const yard_hist_t *t = &r->tls_handshake;
    printf("\"tls\": {\"full_handshakes\": %llu, \"resumed_handshakes\": %llu, "
           "\"failures\": %llu, \"handshake_us\": {\"p50\": %.3f, \"p90\": %.3f, "
           "\"p99\": %.3f, \"max\": %.3f}}, ",
           (unsigned long long)r->tls_full, (unsigned long long)r->tls_resumed,
           (unsigned long long)r->tls_failures, us(yard_hist_percentile(t, 50)),
           us(yard_hist_percentile(t, 90)), us(yard_hist_percentile(t, 99)),
           us(yard_hist_percentile(t, 100)));
}

static void json_report(const load_mode_t *mode, const load_report_t *rep)
{
    const load_opts_t *o = rep->o;
    const load_result_t *r = rep->r;
    const yard_hist_t *h = &r->latency;
    printf("{\"mode\": \"%s\", \"target\": \"%s\", \"connections\": %d, \"size\": %zu, ", o->mode,
           o->target_text, o->connections, o->size);
    printf("\"messages\": %llu, \"errors\": %llu, \"duration_s\": %.6f, "
           "\"throughput_per_s\": %.1f, ",
           (unsigned long long)r->messages, (unsigned long long)r->errors, rep->secs, rep->tput);
    printf("\"latency_us\": {\"min\": %.3f, \"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, "
           "\"p999\": %.3f, \"max\": %.3f, \"mean\": %.3f}, ",
           us(yard_hist_percentile(h, 0)), us(yard_hist_percentile(h, 50)),
           us(yard_hist_percentile(h, 90)), us(yard_hist_percentile(h, 99)),
           us(yard_hist_percentile(h, 99.9)), us(yard_hist_percentile(h, 100)),
           yard_hist_mean(h) / 1000.0);
    printf("\"bytes_sent\": %llu, \"bytes_received\": %llu, ", (unsigned long long)r->bytes_sent,
           (unsigned long long)r->bytes_received);
    printf("\"generator_setup_cpu_s\": %.3f, ", r->setup_cpu_s);
    printf("\"generator_cpu_s\": %.3f, \"generator_cpu_pct\": %.1f, "
           "\"generator_cpu_s_per_100k\": %.4f, \"generator_saturated\": %s, "
           "\"behind_schedule\": %s, \"invalid\": %s, ",
           rep->cpu_s, rep->cpu_pct, rep->cpu_per_100k, rep->saturated ? "true" : "false",
           rep->behind ? "true" : "false", rep->invalid ? "true" : "false");
    printf("\"loop\": \"%s\", \"pipeline\": %zu, \"threads\": %d, \"io\": \"%s\", ", rep->loop,
           o->pipeline, o->threads, r->io ? r->io : "epoll");
    printf("\"target_rate\": %.1f, \"achieved_rate\": %.1f, \"rate_unit\": \"%s\", "
           "\"behind_schedule_max_ms\": %.3f, \"unsent\": %llu, ",
           rep->target, rep->achieved, rep->unit, r->behind_max_ms,
           (unsigned long long)r->unsent);
    if (mode->json)
        mode->json(rep);
    json_tls(rep);
    if (o->hist_log) {
        printf("\"hist_log\": ");
        yard_json_string(stdout, o->hist_log);
        printf(", \"hist_log_intervals\": %zu, ", load_hist_log_intervals(r));
    } else
        printf("\"hist_log\": null, \"hist_log_intervals\": 0, ");
    if (o->start_at > 0)
        printf("\"start_at\": %.6f, ", o->start_at);
    else
        printf("\"start_at\": null, ");
    printf("\"started_at_epoch_s\": %.6f, ", r->t0_real);
    printf("\"first_error\": ");
    if (r->first_error[0])
        yard_json_string(stdout, r->first_error);
    else
        printf("null");
    printf(", ");
    json_spectrum(h);
    printf("}\n");
}

void load_text_header(const load_report_t *rep)
{
    const load_opts_t *o = rep->o;
    printf("%s %s: %d connections, %s%s, pipeline %zu, %d thread%s, %s\n", o->mode,
           o->target_text, o->connections, rep->open ? "open loop" : "closed loop",
           o->duration_ns ? " for a duration" : "", o->pipeline, o->threads,
           o->threads == 1 ? "" : "s", rep->r->io ? rep->r->io : "epoll");
}

void load_text_behind(const load_report_t *rep)
{
    if (rep->open)
    {
        printf("  behind        the generator was at most %.2f ms late%s\n",
               rep->r->behind_max_ms, rep->behind ? " -- more than 1% of the run: INVALID" : "");
        if (rep->r->unsent)
            printf("  unsent        %llu requests due in the window never left (the run "
                   "stops one window after its end)\n",
                   (unsigned long long)rep->r->unsent);
    }
}

void load_text_head(const load_report_t *rep)
{
    const load_result_t *r = rep->r;
    load_text_header(rep);
    printf("  round trips   %llu in %.3f s = %.0f/s", (unsigned long long)r->messages, rep->secs,
           rep->tput);
    if (rep->open)
        printf(" (asked for %.0f/s)", r->target_rate);
    printf("\n");
    load_text_behind(rep);
}

static void text_report(const load_mode_t *mode, const load_report_t *rep)
{
    const load_result_t *r = rep->r;
    const yard_hist_t *h = &r->latency;
    (mode->text_head ? mode->text_head : load_text_head)(rep);
    if (rep->round_trips)
        printf("  latency (us)  min %.1f  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  "
               "mean %.1f\n",
               us(yard_hist_percentile(h, 0)), us(yard_hist_percentile(h, 50)),
               us(yard_hist_percentile(h, 90)), us(yard_hist_percentile(h, 99)),
               us(yard_hist_percentile(h, 99.9)), us(yard_hist_percentile(h, 100)),
               yard_hist_mean(h) / 1000.0);
    if (mode->text_tail)
        mode->text_tail(rep);
    if (rep->o->tls) {
        const yard_hist_t *t = &r->tls_handshake;
        printf("  TLS           %llu full and %llu resumed handshakes, %llu failed; handshake "
               "(us) p50 %.1f  p99 %.1f  max %.1f\n",
               (unsigned long long)r->tls_full, (unsigned long long)r->tls_resumed,
               (unsigned long long)r->tls_failures, us(yard_hist_percentile(t, 50)),
               us(yard_hist_percentile(t, 99)), us(yard_hist_percentile(t, 100)));
    }
    printf("  errors        %llu%s%s\n", (unsigned long long)r->errors,
           r->first_error[0] ? ": " : "", r->first_error);
    printf("  generator CPU %.3f s (%.0f%% of one core", rep->cpu_s, rep->cpu_pct);
    if (rep->round_trips && r->messages)
        printf("; %.3f s per 100k round trips", rep->cpu_per_100k);
    printf(")%s\n",
           rep->saturated ? " -- saturated: this run measured the generator, not the server" : "");
}

void load_report(const load_mode_t *mode, const load_opts_t *o, const load_result_t *r,
                 double cpu_s)
{
    load_report_t rep = figures(mode, o, r, cpu_s);
    if (o->json)
        json_report(mode, &rep);
    else
        text_report(mode, &rep);
    if (o->hist_out) {
        FILE *f = fopen(o->hist_out, "w");
        if (!f || (yard_hist_write_percentiles(&r->latency, f, 1000.0), fclose(f) != 0))
            fprintf(stderr, "yard-load: cannot write --hist-out %s\n", o->hist_out);
    }
}
