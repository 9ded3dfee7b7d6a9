/* The HTTP/1.1 request parser: see include/yard/proto_http.h for the
 * contract. Every function here is pure: bytes in, a verdict out. */
#include "yard/proto_http.h"

#include <string.h>

#define CHUNK_LINE_LIMIT 256 /* a chunk-size line with its extensions */
#define METHOD_LIMIT 32

static bool is_tchar(uint8_t c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_vchar(uint8_t c)
{
    return c >= 0x21 && c <= 0x7e;
}

/* A field value byte (RFC 9110 field-vchar, SP, HTAB, obs-text). */
static bool is_value_char(uint8_t c)
{
    return c == ' ' || c == '\t' || is_vchar(c) || c >= 0x80;
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static bool ieq(const uint8_t *p, size_t n, const char *lit)
{
    size_t m = strlen(lit);
    if (n != m)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(p[i]) != lit[i])
            return false;
    return true;
}

static int fail(yard_http_req_t *req, int status)
{
    req->status = status;
    return YARD_HTTP_ERROR;
}

/* Offset just past the next CRLF at or after from, or 0 if there is none in
 * [from, n). A LF without its CR is reported as -1. */
static long line_end(const uint8_t *in, size_t from, size_t n)
{
    for (size_t i = from; i < n; i++) {
        if (in[i] == '\n')
            return (i > from && in[i - 1] == '\r') ? (long)(i + 1) : -1;
    }
    return 0;
}

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (uint8_t)lower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Walk a chunked body starting at in[0]; copy data to out when non-NULL.
 * On COMPLETE, *raw is the encoded length and *body the decoded one. */
static int chunked_walk(const uint8_t *in, size_t n, uint8_t *out, size_t *raw, size_t *body,
                        yard_http_req_t *req)
{
    size_t pos = 0, total = 0;
    for (;;) {
        /* chunk-size [ chunk-ext ] CRLF */
        size_t limit = n - pos < CHUNK_LINE_LIMIT ? n : pos + CHUNK_LINE_LIMIT;
        long end = line_end(in, pos, limit);
        if (end < 0)
            return fail(req, 400);
        if (end == 0) {
            if (limit < n || n - pos >= CHUNK_LINE_LIMIT)
                return fail(req, 400);
            for (size_t i = pos; i < n; i++) /* reject garbage before it is complete */
                if (!is_value_char(in[i]) && in[i] != '\r')
                    return fail(req, 400);
            return n > YARD_HTTP_CHUNKED_RAW_LIMIT ? fail(req, 413) : YARD_HTTP_PARTIAL;
        }
        size_t i = pos, size = 0;
        int digits = 0;
        for (; i < (size_t)end - 2 && hexval(in[i]) >= 0; i++, digits++) {
            if (digits >= 8)
                return fail(req, 413); /* more than 4 GiB: far over the limit */
            size = size * 16 + (size_t)hexval(in[i]);
        }
        if (digits == 0)
            return fail(req, 400);
        if (i < (size_t)end - 2) {
            if (in[i] != ';' && in[i] != ' ' && in[i] != '\t')
                return fail(req, 400);
            for (; i < (size_t)end - 2; i++)
                if (!is_value_char(in[i]))
                    return fail(req, 400);
        }
        pos = (size_t)end;
        if (size > YARD_HTTP_BODY_LIMIT || total + size > YARD_HTTP_BODY_LIMIT)
            return fail(req, 413);
        if (size == 0)
            break;
        if (n - pos < size + 2)
            return pos + size + 2 > YARD_HTTP_CHUNKED_RAW_LIMIT ? fail(req, 413)
                                                                 : YARD_HTTP_PARTIAL;
        if (in[pos + size] != '\r' || in[pos + size + 1] != '\n')
            return fail(req, 400);
        if (out)
            memcpy(out + total, in + pos, size);
        total += size;
        pos += size + 2;
        if (pos > YARD_HTTP_CHUNKED_RAW_LIMIT)
            return fail(req, 413);
    }
    /* trailer-section CRLF: fields we read past and ignore. */
    size_t trailer_start = pos;
    for (;;) {
        long end = line_end(in, pos, n);
        if (end < 0)
            return fail(req, 400);
        if (end == 0)
            return n - trailer_start > YARD_HTTP_HEAD_LIMIT ? fail(req, 431) : YARD_HTTP_PARTIAL;
        if ((size_t)end - trailer_start > YARD_HTTP_HEAD_LIMIT)
            return fail(req, 431);
        if ((size_t)end == pos + 2)
            break;
        size_t j = pos;
        while (j < (size_t)end - 2 && is_tchar(in[j]))
            j++;
        if (j == pos || in[j] != ':')
            return fail(req, 400);
        for (j++; j < (size_t)end - 2; j++)
            if (!is_value_char(in[j]))
                return fail(req, 400);
        pos = (size_t)end;
    }
    *raw = (size_t)pos + 2;
    *body = total;
    return YARD_HTTP_COMPLETE;
}

/* Parse the request line in[0..end) (CRLF included). */
static int parse_request_line(const uint8_t *in, size_t end, yard_http_req_t *req)
{
    size_t i = 0;
    while (i < end && is_tchar(in[i]))
        i++;
    if (i == 0 || i > METHOD_LIMIT || in[i] != ' ')
        return fail(req, 400);
    req->method = (const char *)in;
    req->method_len = i;
    size_t t = ++i;
    while (i < end && is_vchar(in[i]))
        i++;
    if (i == t || in[t] != '/' || in[i] != ' ')
        return fail(req, 400);
    req->target = (const char *)in + t;
    req->target_len = i - t;
    i++;
    /* "HTTP/" DIGIT "." DIGIT CRLF */
    if (end - i != 10 || memcmp(in + i, "HTTP/", 5) != 0 || in[i + 5] < '0' || in[i + 5] > '9' ||
        in[i + 6] != '.' || in[i + 7] < '0' || in[i + 7] > '9')
        return fail(req, 400);
    if (in[i + 5] != '1' || in[i + 7] > '1')
        return fail(req, 505);
    req->minor = in[i + 7] - '0';
    return YARD_HTTP_COMPLETE;
}

/* Find the end of the head, rejecting what can never become a valid head
 * early (so a garbage stream fails at once, not after 8 KiB). */
static int find_head_end(const uint8_t *in, size_t n, size_t *head_len, yard_http_req_t *req)
{
    size_t scan = n < YARD_HTTP_HEAD_LIMIT ? n : YARD_HTTP_HEAD_LIMIT;
    for (size_t i = 0; i < scan; i++) {
        uint8_t c = in[i];
        if (c == '\n') {
            if (i == 0 || in[i - 1] != '\r')
                return fail(req, 400);
            if (i >= 3 && in[i - 2] == '\n' && in[i - 3] == '\r') {
                *head_len = i + 1;
                return YARD_HTTP_COMPLETE;
            }
        } else if (c == '\r') {
            if (i + 1 < n && in[i + 1] != '\n')
                return fail(req, 400);
        } else if (c < 0x20 && c != '\t') {
            return fail(req, 400);
        } else if (c == 0x7f) {
            return fail(req, 400);
        }
    }
    if (n >= YARD_HTTP_HEAD_LIMIT)
        return fail(req, 431);
    return YARD_HTTP_PARTIAL;
}

static bool parse_content_length(const uint8_t *v, size_t n, size_t *out)
{
    if (n == 0 || n > 18)
        return false;
    size_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        x = x * 10 + (size_t)(v[i] - '0');
    }
    *out = x;
    return true;
}

/* Connection: a comma-separated list of tokens. */
static void parse_connection(const uint8_t *v, size_t n, bool *close, bool *keep)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
            i++;
        if (ieq(v + s, i - s, "close"))
            *close = true;
        else if (ieq(v + s, i - s, "keep-alive"))
            *keep = true;
    }
}

int yard_http_parse(const uint8_t *in, size_t n, yard_http_req_t *req)
{
    memset(req, 0, sizeof *req);
    size_t head_len = 0;
    int r = find_head_end(in, n, &head_len, req);
    if (r != YARD_HTTP_COMPLETE)
        return r;
    long line = line_end(in, 0, head_len);
    if (line <= 0)
        return fail(req, 400);
    if (parse_request_line(in, (size_t)line, req) != YARD_HTTP_COMPLETE)
        return YARD_HTTP_ERROR;

    bool have_cl = false, conn_close = false, conn_keep = false;
    int hosts = 0, te = 0;
    size_t cl = 0;
    size_t pos = (size_t)line;
    while (pos < head_len - 2) {
        size_t end = (size_t)line_end(in, pos, head_len);
        size_t i = pos;
        while (i < end - 2 && is_tchar(in[i]))
            i++;
        if (i == pos || in[i] != ':') /* obs-fold, space before ':', no name */
            return fail(req, 400);
        const uint8_t *name = in + pos;
        size_t name_len = i - pos;
        i++;
        while (i < end - 2 && (in[i] == ' ' || in[i] == '\t'))
            i++;
        size_t vend = end - 2;
        while (vend > i && (in[vend - 1] == ' ' || in[vend - 1] == '\t'))
            vend--;
        for (size_t j = i; j < vend; j++)
            if (!is_value_char(in[j]))
                return fail(req, 400);
        const uint8_t *v = in + i;
        size_t vn = vend - i;
        if (ieq(name, name_len, "content-length")) {
            size_t x;
            if (!parse_content_length(v, vn, &x) || (have_cl && x != cl))
                return fail(req, 400);
            have_cl = true;
            cl = x;
        } else if (ieq(name, name_len, "transfer-encoding")) {
            if (te++ || !ieq(v, vn, "chunked"))
                return fail(req, te > 1 ? 400 : 501);
        } else if (ieq(name, name_len, "connection")) {
            parse_connection(v, vn, &conn_close, &conn_keep);
        } else if (ieq(name, name_len, "host")) {
            hosts++;
        } else if (ieq(name, name_len, "expect")) {
            req->expect_continue = ieq(v, vn, "100-continue");
        }
        pos = end;
    }
    if (hosts > 1 || (req->minor == 1 && hosts == 0))
        return fail(req, 400);
    if (te && (have_cl || req->minor == 0))
        return fail(req, 400); /* the smuggling shapes: refuse rather than guess */
    req->keep_alive = req->minor == 1 ? !conn_close : (conn_keep && !conn_close);
    req->chunked = te != 0;
    req->head_len = head_len;

    if (req->chunked) {
        size_t raw = 0, body = 0;
        r = chunked_walk(in + head_len, n - head_len, NULL, &raw, &body, req);
        if (r != YARD_HTTP_COMPLETE)
            return r;
        req->body_len = body;
        req->total_len = head_len + raw;
        return YARD_HTTP_COMPLETE;
    }
    if (cl > YARD_HTTP_BODY_LIMIT)
        return fail(req, 413);
    if (n - head_len < cl)
        return YARD_HTTP_PARTIAL;
    req->body = in + head_len;
    req->body_len = cl;
    req->total_len = head_len + cl;
    return YARD_HTTP_COMPLETE;
}

void yard_http_dechunk(const uint8_t *in, const yard_http_req_t *req, uint8_t *out)
{
    yard_http_req_t scratch = *req;
    size_t raw, body;
    chunked_walk(in + req->head_len, req->total_len - req->head_len, out, &raw, &body, &scratch);
}

const char *yard_http_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    case 507: return "Insufficient Storage";
    default: return "Unknown";
    }
}
