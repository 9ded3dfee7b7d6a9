/* Channel bans (bans.h). */
#include "bans.h"

#include <stdio.h>
#include <string.h>

#include "yard/proto_ircline.h"

bool chat_mask_match(const char *mask, const char *text)
{
    /* The usual glob walk: on a mismatch, go back to the last '*' and let
     * it take one more character of text. */
    const char *star = NULL, *resume = NULL;
    while (*text) {
        if (*mask == '*') {
            star = mask++;
            resume = text;
        } else if (*mask && (*mask == '?' || yard_irc_fold(*mask) == yard_irc_fold(*text))) {
            mask++;
            text++;
        } else if (star) {
            mask = star + 1;
            text = ++resume;
        } else {
            return false;
        }
    }
    while (*mask == '*')
        mask++;
    return !*mask;
}

bool chat_mask_matches(const char *mask, const struct chat_mask_subject *who)
{
    if (!strncmp(mask, YARD_EXTBAN_ACCOUNT, 3))
        return !who->guest && chat_mask_match(mask + 3, who->nick);
    const char *user = who->user[0] ? who->user : who->nick;
    char text[CHAT_NAME_MAX + CHAT_USER_MAX + 64];
    snprintf(text, sizeof text, "%s!%s@" SERVER, who->nick, user);
    if (chat_mask_match(mask, text))
        return true;
    char addr[64] = "";
    if (who->addr)
        chat_addr_text(who->addr, addr, sizeof addr);
    char *slash = strchr(addr, '/');
    if (slash)
        *slash = 0;
    if (!addr[0])
        return false;
    snprintf(text, sizeof text, "%s!%s@%s", who->nick, user, addr);
    return chat_mask_match(mask, text);
}

void chat_mask_subject_of(const struct session *s, struct chat_mask_subject *who)
{
    *who = (struct chat_mask_subject){.nick = s->account, .user = s->user,
                                      .addr = &s->login.addr, .guest = s->guest};
}

/* Does a mask of the record's list match who? */
static bool list_matches(const struct chat_banrec *r, int list,
                         const struct chat_mask_subject *who)
{
    for (unsigned i = 0; i < r->n && i < CHAT_BANS_MAX; i++)
        if (r->bans[i].list == list && chat_mask_matches(r->bans[i].mask, who))
            return true;
    return false;
}

bool chat_bans_match(const struct chat_banrec *r, const struct session *s)
{
    struct chat_mask_subject who;
    chat_mask_subject_of(s, &who);
    return list_matches(r, CHAT_LIST_BAN, &who) && !list_matches(r, CHAT_LIST_EXCEPT, &who);
}

bool chat_banned(chat_state_t *cs, const struct session *s, int c, const char *key)
{
    if (c >= 0 && !cs->chans[c].nbans)
        return false;
    struct chat_banrec r;
    chat_bans_get(cs, c >= 0 ? cs->chans[c].key : key, &r);
    return r.n && chat_bans_match(&r, s);
}

bool chat_invex(chat_state_t *cs, const struct session *s, int c, const char *key)
{
    if (c >= 0 && !cs->chans[c].nbans)
        return false;
    struct chat_banrec r;
    chat_bans_get(cs, c >= 0 ? cs->chans[c].key : key, &r);
    struct chat_mask_subject who;
    chat_mask_subject_of(s, &who);
    return r.n && list_matches(&r, CHAT_LIST_INVEX, &who);
}

int chat_list_of_mode(char mode)
{
    return mode == 'b' ? CHAT_LIST_BAN : mode == 'e' ? CHAT_LIST_EXCEPT
                                       : mode == 'I' ? CHAT_LIST_INVEX : -1;
}

bool chat_ban_normalize(const char *given, char out[CHAT_BANMASK_MAX + 1])
{
    return yard_mask_complete(given, out, CHAT_BANMASK_MAX + 1);
}

/* The mask's index in the list (compared casefolded), or -1. */
static int ban_index(const struct chat_banrec *r, int list, const char *mask)
{
    size_t n = strlen(mask);
    for (unsigned i = 0; i < r->n; i++) {
        const char *b = r->bans[i].mask;
        if (r->bans[i].list != list || strlen(b) != n)
            continue;
        size_t k = 0;
        while (k < n && yard_irc_fold(b[k]) == yard_irc_fold(mask[k]))
            k++;
        if (k == n)
            return (int)i;
    }
    return -1;
}

int chat_ban_set(struct chat_banrec *r, int list, const char *mask, bool on, const char *setter,
                 int64_t at_s)
{
    int i = ban_index(r, list, mask);
    if (!on) {
        if (i < 0)
            return 0;
        memmove(&r->bans[i], &r->bans[i + 1], (r->n - (unsigned)i - 1) * sizeof r->bans[0]);
        r->n--;
        memset(&r->bans[r->n], 0, sizeof r->bans[0]);
        return 1;
    }
    if (i >= 0)
        return 0;
    if (r->n >= CHAT_BANS_MAX)
        return -1;
    struct chat_ban *b = &r->bans[r->n++];
    memset(b, 0, sizeof *b);
    snprintf(b->mask, sizeof b->mask, "%s", mask);
    snprintf(b->by, sizeof b->by, "%s", setter);
    b->list = (uint8_t)list;
    b->at_s = at_s;
    return 1;
}

void chat_bans_list(struct chat_app *app, struct session *s, yard_fx_t *fx, int ch, int list)
{
    static const struct {
        int entry, end;
        const char *what;
    } numerics[] = {[CHAT_LIST_BAN] = {367, 368, "ban"},
                    [CHAT_LIST_EXCEPT] = {348, 349, "exception"},
                    [CHAT_LIST_INVEX] = {346, 347, "invite"}};
    struct chat_banrec r;
    char shown[CHAT_CHAN_MAX + 1];
    chat_channel_bans(app->cs, ch, shown, &r);
    unsigned listed = 0;
    for (unsigned i = 0; i < r.n && i < CHAT_BANS_MAX; i++) {
        if (r.bans[i].list != list)
            continue;
        chat_numeric(fx, s, numerics[list].entry, "%s %s %s %lld", shown, r.bans[i].mask,
                     r.bans[i].by, (long long)r.bans[i].at_s);
        listed++;
    }
    chat_numeric(fx, s, numerics[list].end, "%s :End of channel %s list", shown,
                 numerics[list].what);
    chat_charge(s, chat_lines_price(listed + 1));
}
