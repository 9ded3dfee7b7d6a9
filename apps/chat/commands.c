/* The chat's command table and its dispatcher (commands.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel.h"
#include "chanop.h"
#include "commands.h"
#include "guest.h"
#include "history.h"
#include "kline.h"
#include "label.h"
#include "message.h"
#include "monitor.h"
#include "oper.h"
#include "query.h"
#include "register.h"

/* What one phase of a connection (before registration, or registered)
 * does with a command: its handler (NULL: not in this phase) and the
 * parameters it needs. */
struct chat_phase {
    int min_params;
    chat_cmd_fn *handler;
};

/* The answer to too few parameters where it is not 461. */
struct chat_too_few {
    int code;
    const char *text;
};

struct chat_cmd_row {
    const char *name;
    struct chat_phase before; /* before registration: handler NULL answers 451 */
    struct chat_phase registered;
    const struct chat_too_few *too_few; /* NULL: 461 "<command> :Not enough parameters" */
    bool by_lines; /* charged by the lines of its answer (chat_lines_price) */
};

static void ping(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    chat_sendf(fx, ":" SERVER " PONG %s :%s", app->server_name, m->params[0]);
}

static void pong(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
}

static void quit(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (s->slot >= 0) /* the channels it is told in (the connection ends with it) */
        chat_charge(s, (int)chat_member_channels(app->cs, s->slot));
    snprintf(s->quit_reason, sizeof s->quit_reason, "Quit: %s", m->n ? m->params[0] : "");
    chat_sendf(fx, "ERROR :Closing Link: %s (Quit: %s)", chat_who(s), m->n ? m->params[0] : "");
    yard_fx_close(fx, NULL);
}

static const struct chat_too_few no_nickname = {431, ":No nickname given"};

/* Sorted by name (strcmp), for bsearch: chat_commands_check says so at start.
 * AUTHENTICATE needs no parameter here: an account that has logged in is
 * told 907 whatever it sends, so the handler counts them itself. */
static const struct chat_cmd_row commands[] = {
    /* name          before registration          registered                        too few, by lines */
    {"AUTHENTICATE", {0, chat_cmd_authenticate},  {0, chat_cmd_authenticate},       NULL, false},
    {"AWAY",         {0, NULL},                   {0, chat_cmd_away},               NULL, false},
    {"CAP",          {0, chat_cmd_cap},           {0, chat_cmd_cap},                NULL, false},
    {"CHATHISTORY",  {0, NULL},                   {0, chat_cmd_chathistory},        NULL, false},
    {"INFO",         {0, NULL},                   {0, chat_cmd_info},               NULL, false},
    {"INVITE",       {0, NULL},                   {0, chat_cmd_invite},             NULL, false},
    {"ISON",         {0, NULL},                   {1, chat_cmd_ison},               NULL, false},
    {"JOIN",         {0, NULL},                   {1, chat_cmd_join},               NULL, false},
    {"KICK",         {0, NULL},                   {2, chat_cmd_kick},               NULL, false},
    {"KILL",         {0, NULL},                   {1, chat_cmd_kill},               NULL, false},
    {"KLINE",        {0, NULL},                   {1, chat_cmd_kline},              NULL, false},
    {"LIST",         {0, NULL},                   {0, chat_cmd_list},               NULL, true},
    {"LUSERS",       {0, NULL},                   {0, chat_cmd_lusers},             NULL, false},
    {"MARKREAD",     {0, NULL},                   {0, chat_cmd_markread},           NULL, false},
    {"MODE",         {0, NULL},                   {1, chat_cmd_mode},               NULL, false},
    {"MONITOR",      {0, NULL},                   {1, chat_cmd_monitor},            NULL, false},
    {"MOTD",         {0, NULL},                   {0, chat_cmd_motd},               NULL, false},
    {"NAMES",        {0, NULL},                   {0, chat_cmd_names},              NULL, true},
    {"NICK",         {1, chat_cmd_nick},          {1, chat_cmd_nick_registered},    &no_nickname, false},
    {"NOTICE",       {0, NULL},                   {0, chat_cmd_notice},             NULL, false},
    {"OPER",         {0, NULL},                   {2, chat_cmd_oper},               NULL, false},
    {"PART",         {0, NULL},                   {1, chat_cmd_part},               NULL, false},
    {"PASS",         {1, chat_cmd_pass},          {0, chat_cmd_pass_registered},    NULL, false},
    {"PING",         {1, ping},                   {1, ping},                        NULL, false},
    {"PONG",         {0, pong},                   {0, pong},                        NULL, false},
    {"PRIVMSG",      {0, NULL},                   {0, chat_cmd_privmsg},            NULL, false},
    {"QUIT",         {0, quit},                   {0, quit},                        NULL, false},
    {"SETNAME",      {0, NULL},                   {1, chat_cmd_setname},            NULL, false},
    {"STATS",        {0, NULL},                   {0, chat_cmd_stats},              NULL, false},
    {"TAGMSG",       {0, NULL},                   {0, chat_cmd_tagmsg},             NULL, false},
    {"TIME",         {0, NULL},                   {0, chat_cmd_time},               NULL, false},
    {"TOPIC",        {0, NULL},                   {1, chat_cmd_topic},              NULL, false},
    {"UNKLINE",      {0, NULL},                   {1, chat_cmd_unkline},            NULL, false},
    {"USER",         {4, chat_cmd_user},          {0, chat_cmd_reregister},         NULL, false},
    {"USERHOST",     {0, NULL},                   {1, chat_cmd_userhost},           NULL, false},
    {"VERSION",      {0, NULL},                   {0, chat_cmd_version},            NULL, false},
    {"WALLOPS",      {0, NULL},                   {1, chat_cmd_wallops},            NULL, false},
    {"WHO",          {0, NULL},                   {0, chat_cmd_who},                NULL, true},
    {"WHOIS",        {0, NULL},                   {1, chat_cmd_whois},              &no_nickname, false},
    {"WHOWAS",       {0, NULL},                   {1, chat_cmd_whowas},             &no_nickname, false},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static int by_name(const void *key, const void *row)
{
    return strcmp(key, ((const struct chat_cmd_row *)row)->name);
}

int chat_commands_check(void)
{
    for (size_t i = 1; i < NCOMMANDS; i++)
        if (strcmp(commands[i - 1].name, commands[i].name) >= 0)
            return -1;
    return 0;
}

static void dispatch(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    const struct chat_cmd_row *c = bsearch(m->cmd, commands, NCOMMANDS, sizeof commands[0],
                                           by_name);
    bool registered = s->state == ST_READY;
    const struct chat_phase *ph = !c ? NULL : registered ? &c->registered : &c->before;
    if (!registered && (!ph || !ph->handler)) {
        chat_numeric(fx, s, 451, "%s :You have not registered", m->cmd);
        return;
    }
    if (!ph) {
        chat_numeric(fx, s, 421, "%s :Unknown command", m->cmd);
        return;
    }
    if (m->n < ph->min_params) {
        if (c->too_few)
            chat_numeric(fx, s, c->too_few->code, "%s", c->too_few->text);
        else
            chat_numeric(fx, s, 461, "%s :Not enough parameters", m->cmd);
        return;
    }
    size_t at = fx->out ? fx->out->len : 0;
    ph->handler(app, s, fx, m);
    if (c->by_lines && fx->out && fx->out->len > at) {
        const uint8_t *p = yard_buf_head(fx->out) + at, *end = yard_buf_head(fx->out) + fx->out->len;
        unsigned long lines = 0;
        while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
            lines++;
            p++;
        }
        chat_charge(s, chat_lines_price(lines));
    }
}

/* A line that is no command (yard_irc_parse refused it): 421, labeled when
 * it had a label. */
void chat_not_a_command(struct session *s, yard_fx_t *fx, const yard_irc_msg_t *m)
{
    chat_label_begin(s, fx, m);
    chat_numeric(fx, s, 421, "* :Not a command");
    chat_label_settle(s, fx);
}

/* A request with a label (labeled-response) gets its answer labeled,
 * whichever of the answers above it is (label.h). */
void chat_command(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    chat_label_begin(s, fx, m);
    dispatch(app, s, fx, m);
    chat_label_settle(s, fx);
}
