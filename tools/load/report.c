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

void load_count_status(load_endpoint_t *e, int status, uint64_t n)
{
    for (int k = 0; k < LOAD_STATUS_SLOTS; k++) {
        if (e->status_code[k] == status || !e->status_code[k]) {
            e->status_code[k] = status;
            e->status_count[k] += n;
            return;
        }
    }
    e->status_other += n;
}

static void json_endpoints(const load_result_t *r)
{
    printf("\"endpoints\": {");
    int first = 1;
    for (int i = 0; i < LOAD_HTTP_ENDPOINTS; i++) {
        const load_endpoint_t *e = &r->ep[i];
        if (!e->requests)
            continue;
        printf("%s\"%s\": {\"requests\": %llu, \"ok\": %llu, \"failed\": %llu, \"status\": {",
               first ? "" : ", ", load_http_endpoint_name(i), (unsigned long long)e->requests,
               (unsigned long long)e->ok, (unsigned long long)e->failed);
        first = 0;
        for (int k = 0; k < LOAD_STATUS_SLOTS && e->status_code[k]; k++)
            printf("%s\"%d\": %llu", k ? ", " : "", e->status_code[k],
                   (unsigned long long)e->status_count[k]);
        if (e->status_other)
            printf("%s\"other\": %llu", e->status_code[0] ? ", " : "",
                   (unsigned long long)e->status_other);
        const yard_hist_t *h = &e->latency;
        printf("}, \"latency_us\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, "
               "\"max\": %.3f, \"mean\": %.3f}}",
               us(yard_hist_percentile(h, 50)), us(yard_hist_percentile(h, 90)),
               us(yard_hist_percentile(h, 99)), us(yard_hist_percentile(h, 100)),
               yard_hist_mean(h) / 1000.0);
    }
    printf("}, ");
}

static void human_endpoints(const load_result_t *r)
{
    for (int i = 0; i < LOAD_HTTP_ENDPOINTS; i++) {
        const load_endpoint_t *e = &r->ep[i];
        if (!e->requests)
            continue;
        printf("  %-15s %llu ok, %llu failed; p50 %.1f us  p99 %.1f us  max %.1f us; status",
               load_http_endpoint_name(i), (unsigned long long)e->ok,
               (unsigned long long)e->failed, us(yard_hist_percentile(&e->latency, 50)),
               us(yard_hist_percentile(&e->latency, 99)),
               us(yard_hist_percentile(&e->latency, 100)));
        for (int k = 0; k < LOAD_STATUS_SLOTS && e->status_code[k]; k++)
            printf(" %d x%llu", e->status_code[k], (unsigned long long)e->status_count[k]);
        printf("\n");
    }
}

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
    int saturated = cpu_pct >= 95.0 * (o->threads > 0 ? o->threads : 1);
    bool open = r->target_rate > 0;
    int behind = (rate || open) && r->behind_max_ms > 0.01 * secs * 1e3;
    int invalid = saturated || behind;
    bool chat = !strcmp(o->mode, "chat");
    double target = rate ? r->target_bps : r->target_rate, achieved = rate ? r->achieved_bps : tput;
    if (chat)
        achieved = secs > 0 ? (double)r->sent_msgs / secs : 0;
    double cpu_per_100k = r->messages ? cpu_s * 1e5 / (double)r->messages : 0;
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
               "\"generator_cpu_s_per_100k\": %.4f, \"generator_saturated\": %s, "
               "\"invalid\": %s, ",
               cpu_s, cpu_pct, cpu_per_100k, saturated ? "true" : "false",
               invalid ? "true" : "false");
        printf("\"loop\": \"%s\", \"pipeline\": %zu, \"threads\": %d, ",
               rate ? "rate" : open ? "open" : "closed", o->pipeline, o->threads);
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
        if (chat)
            printf("\"messages_sent\": %llu, \"deliveries\": %llu, ",
                   (unsigned long long)r->sent_msgs, (unsigned long long)r->messages);
        if (!strcmp(o->mode, "http")) {
            printf("\"scenario\": \"%s\", \"think_time_s\": %.3f, ",
                   o->scenario ? o->scenario : "root", (double)o->think_ns / 1e9);
            json_endpoints(r);
        }
        printf("\"first_error\": ");
        if (r->first_error[0]) {
            putchar('"');
            for (const char *c = r->first_error; *c; c++)
                if (*c == '"' || *c == '\\')
                    printf("\\%c", *c);
                else if ((unsigned char)*c < 0x20 || *c == 0x7f)
                    printf("\\u%04x", (unsigned char)*c);
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
            printf("%s %s: %d connections, %s%s, pipeline %zu, %d thread%s\n", o->mode,
                   o->target_text, o->connections, open ? "open loop" : "closed loop",
                   o->duration_ns ? " for a duration" : "", o->pipeline, o->threads,
                   o->threads == 1 ? "" : "s");
            if (chat)
                printf("  sent          %llu messages = %.0f/s (asked for %.0f/s); %llu "
                       "deliveries = %.0f/s\n",
                       (unsigned long long)r->sent_msgs, achieved, r->target_rate,
                       (unsigned long long)r->messages, tput);
            else
                printf("  round trips   %llu in %.3f s = %.0f/s", (unsigned long long)r->messages,
                       secs, tput);
            if (open && !chat)
                printf(" (asked for %.0f/s)", r->target_rate);
            if (!chat)
                printf("\n");
            if (open)
                printf("  behind        the generator was at most %.2f ms late%s\n",
                       r->behind_max_ms, behind ? " -- more than 1% of the run: INVALID" : "");
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
        human_endpoints(r);
        printf("  errors        %llu%s%s\n", (unsigned long long)r->errors,
               r->first_error[0] ? ": " : "", r->first_error);
        printf("  generator CPU %.3f s (%.0f%% of one core", cpu_s, cpu_pct);
        if (!rate && r->messages)
            printf("; %.3f s per 100k round trips", cpu_per_100k);
        printf(")%s\n",
               saturated ? " -- saturated: this run measured the generator, not the server" : "");
    }
    if (o->hist_out) {
        FILE *f = fopen(o->hist_out, "w");
        if (!f || (yard_hist_write_percentiles(h, f, 1000.0), fclose(f) != 0))
            fprintf(stderr, "yard-load: cannot write --hist-out %s\n", o->hist_out);
    }
}
