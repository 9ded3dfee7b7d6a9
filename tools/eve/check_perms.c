/* yard-eve's checker (check.c): permission scopes and what they hold on a
 * variable; every use of a variable checked against them, and the
 * permission lists of tasks, callbacks, lambdas and functions opened. */
#include "check_int.h"

#include <stdio.h>
#include <string.h>

/* ---- permission scopes and holdings ------------------------------------------------------ */

const char *chk_ps_noun(const pscope_t *ps)
{
    switch (ps->kind) {
    case PS_ROOT: return "program";
    case PS_FUNC: return "function";
    case PS_METHOD: return "method";
    case PS_TASK: case PS_PFOR: return "task";
    case PS_CALLBACK: return "callback";
    case PS_LAMBDA: return "lambda";
    }
    return "task";
}

static bool path_covers(const char *grant, const char *path)
{
    size_t n = strlen(grant);
    return strncmp(grant, path, n) == 0 && (path[n] == 0 || path[n] == '.');
}

static int grant_hold(eve_perm_kind_t k)
{
    switch (k) {
    case EVE_PERM_READ: return H_READ;
    case EVE_PERM_FULL: return H_FULL;
    case EVE_PERM_NULL: return H_NULL;
    case EVE_CAPTURE_COPY: return H_COPY;
    case EVE_CAPTURE_REF: return H_REF;
    }
    return H_NONE;
}

/* path with its first component replaced by the alias's path */
static const char *realias(chk_t *c, const char *alias_path, const char *path)
{
    const char *dot = strchr(path, '.');
    if (!dot)
        return alias_path;
    size_t a = strlen(alias_path), r = strlen(dot);
    char *p = chk_alloc(c, a + r + 1);
    if (!p)
        return alias_path;
    memcpy(p, alias_path, a);
    memcpy(p + a, dot, r + 1);
    return p;
}

/* What ps holds on the variable (path starts with its name). *shown: the
 * name a message should give (the granted path, or the aliased object). */
static int held(chk_t *c, pscope_t *ps, eve_sym_t *sym, const char *path, const char **shown)
{
    for (int hops = 0; hops < 64; hops++) {
        *shown = path;
        if (!ps || ps->kind == PS_ROOT)
            return H_FULL;
        grant_t *best = NULL;
        size_t bestlen = 0;
        for (grant_t *g = sym->grants; g; g = g->next) {
            size_t n = strlen(g->path);
            if (g->ps == ps && path_covers(g->path, path) && (!best || n > bestlen)) {
                best = g;
                bestlen = n;
            }
        }
        if (best) {
            *shown = best->path;
            return grant_hold(best->kind);
        }
        if (sym->owner == ps) {
            if (sym->alias) {
                path = realias(c, sym->alias_path, path);
                sym = sym->alias;
                continue;
            }
            return sym->own;
        }
        if (!sym->shared && eve_ty_is_value(sym->ty))
            return H_IMPLICIT;
        return H_NONE;
    }
    return H_FULL;
}

/* A use of variable sym (at path) in the current scope. via: the function
 * whose permission list asks for it, or NULL. */
void chk_check_access(chk_t *c, eve_pos_t pos, eve_sym_t *sym, const char *path, int mode, const char *via)
{
    if (mode == A_DEFER) {
        c->pending.sym = sym;
        c->pending.path = path;
        c->pending.pos = pos;
        c->pending.set = true;
        return;
    }
    if (sym->kind == EVE_SYM_LIBOBJ) {
        if (mode == A_WRITE)
            chk_err(c, pos, "cannot modify '%s': it belongs to the library", sym->name);
        return;
    }
    if (sym->kind != EVE_SYM_VAR)
        return;
    const char *shown;
    int h = held(c, c->ps, sym, path, &shown);
    const char *noun = chk_ps_noun(c->ps);
    char suffix[EVE_MAX_MSG / 2] = "";
    if (via)
        snprintf(suffix, sizeof suffix, " (calling '%s' needs it)", via);
    switch (h) {
    case H_NONE:
        chk_err(c, pos, "'%s' is used but not declared in the %s's permissions%s", shown, noun, suffix);
        break;
    case H_NULL:
        if (mode != A_REFER)
            chk_err(c, pos, "'%s' has only the null permission in the %s (-%s): it may be passed on, not used%s",
                shown, noun, shown, suffix);
        break;
    case H_IMPLICIT:
        if (mode == A_WRITE)
            chk_err(c, pos, "'%s' is modified but the %s has only a copy of it (write [+%s])%s", shown, noun,
                shown, suffix);
        break;
    case H_COPY:
        if (mode == A_WRITE)
            chk_err(c, pos, "'%s' is a copy in the %s (=%s): it cannot be modified%s", shown, noun, shown, suffix);
        break;
    case H_READ:
        if (mode == A_WRITE)
            chk_err(c, pos, "'%s' is modified but the %s has only read permission (write [+%s])%s", shown,
                noun, shown, suffix);
        break;
    default:
        break;
    }
}

void chk_flush_pending(chk_t *c, int mode, const char *via)
{
    if (c->pending.set) {
        c->pending.set = false;
        chk_check_access(c, c->pending.pos, c->pending.sym, c->pending.path, mode, via);
    }
}

void chk_push_grant(chk_t *c, pscope_t *ps, eve_sym_t *sym, eve_perm_kind_t kind, const char *path)
{
    grant_t *g = chk_alloc(c, sizeof *g);
    if (!g)
        return;
    g->ps = ps;
    g->kind = kind;
    g->path = path;
    g->sym = sym;
    g->next = sym->grants;
    sym->grants = g;
    g->undo = ps->granted;
    ps->granted = g;
}

void chk_pop_grants(pscope_t *ps)
{
    for (grant_t *g = ps->granted; g; g = g->undo)
        if (g->sym->grants == g)
            g->sym->grants = g->next;
    ps->granted = NULL;
}

const char *chk_perm_sigil(eve_perm_kind_t k)
{
    switch (k) {
    case EVE_PERM_FULL: return "+";
    case EVE_PERM_NULL: return "-";
    case EVE_CAPTURE_COPY: return "=";
    case EVE_CAPTURE_REF: return "&";
    default: return "";
    }
}

/* The root name of a permission path, in buf. */
static const char *path_root(const char *path, char *buf, size_t size)
{
    size_t n = strcspn(path, ".");
    if (n >= size)
        n = size - 1;
    memcpy(buf, path, n);
    buf[n] = 0;
    return buf;
}

/* The type at a dotted path below a variable's type; reports a missing field. */
static const eve_ty_t *path_type(chk_t *c, eve_pos_t pos, const eve_ty_t *t, const char *path)
{
    const char *p = strchr(path, '.');
    while (p && !chk_is_err(t)) {
        p++;
        char name[EVE_MAX_IDENT + 1];
        size_t n = strcspn(p, ".");
        if (n > EVE_MAX_IDENT)
            n = EVE_MAX_IDENT;
        memcpy(name, p, n);
        name[n] = 0;
        eve_member_t *m = t->kind == EVE_TY_CLASS ? chk_find_member(c, t->cls, name, false) : NULL;
        if (!m || m->kind != EVE_MEM_FIELD) {
            char buf[96];
            chk_err(c, pos, "%s has no field '%s'", chk_tn(t, buf), name);
            return c->t_err;
        }
        t = m->ty;
        p = strchr(p, '.');
    }
    return t;
}

/* Resolves one entry of a permission list to its variable; NULL (reported)
 * if it names none. */
eve_sym_t *chk_perm_sym(chk_t *c, const eve_perm_t *pm)
{
    char root[EVE_MAX_IDENT + 1];
    path_root(pm->name, root, sizeof root);
    eve_sym_t *s = chk_lookup(c, root);
    if (!s) {
        chk_err(c, pm->pos, "unknown name '%s'", root);
        return NULL;
    }
    if (s->kind == EVE_SYM_LIBOBJ) {
        /* the paper's Program 2 writes [+stderr]: harmless, so not refused */
        eve_warning(c->cx, pm->pos, "'%s' belongs to the library and needs no permission: '%s%s' is ignored", root,
                    chk_perm_sigil(pm->kind), pm->name);
        return NULL;
    }
    if (s->kind != EVE_SYM_VAR) {
        chk_err(c, pm->pos, "'%s' is not a variable: permissions name variables", root);
        return NULL;
    }
    path_type(c, pm->pos, s->ty, pm->name);
    return s;
}

static const char *hold_words(int h, const char *name, char *buf, size_t size)
{
    switch (h) {
    case H_NONE: snprintf(buf, size, "does not hold '%s'", name); break;
    case H_NULL: snprintf(buf, size, "holds only '-%s'", name); break;
    case H_IMPLICIT: case H_COPY: snprintf(buf, size, "holds only a copy of '%s'", name); break;
    case H_READ: snprintf(buf, size, "holds only '%s'", name); break;
    default: snprintf(buf, size, "holds '%s'", name); break;
    }
    return buf;
}

/* Opens the permission list of a task, parallel for, callback or lambda
 * (function lists: resolve_fn). loopvar: a parallel for's own variable. */
void chk_open_perms(chk_t *c, pscope_t *ps, const eve_perms_t *perms, eve_sym_t *loopvar)
{
    pscope_t *parent = ps->parent;
    bool spawned = (ps->kind == PS_TASK || ps->kind == PS_PFOR) && ps->in_finish && parent;
    for (size_t i = 0; i < perms->n; i++) {
        const eve_perm_t *pm = &perms->v[i];
        eve_sym_t *s = chk_perm_sym(c, pm);
        if (!s)
            continue;
        perms->v[i].sym = s; /* for the code generator */
        /* A refused entry is still granted as written: one mistake, one error. */
        chk_push_grant(c, ps, s, pm->kind, pm->name);
        const char *noun = chk_ps_noun(ps), *sigil = chk_perm_sigil(pm->kind), *name = pm->name;
        bool capture = pm->kind == EVE_CAPTURE_COPY || pm->kind == EVE_CAPTURE_REF;
        char w[EVE_MAX_MSG / 2];
        const char *shown = name;
        int h = spawned ? held(c, parent, s, name, &shown) : H_FULL;
        if (capture && s->shared) {
            chk_err(c, pm->pos, "'%s' is shared: name it with a permission (%s, +%s or -%s), not %s%s", name, name,
                name, name, sigil, name);
        } else if (s == loopvar) {
            if (capture)
                chk_err(c, pm->pos, "'%s' is the parallel for's own variable: name it %s, +%s or -%s", name, name,
                    name, name);
        } else if (pm->kind == EVE_CAPTURE_REF) {
            /* the variable must outlive the scope: a global, or the parent's
             * own (or its &x) while the parent waits in finish */
            if (s->global)
                continue;
            if (spawned && (s->owner == parent || h == H_REF)) {
                if (h < H_REF)
                    chk_err(c, pm->pos, "the task asks for '&%s' but its parent %s (inside 'finish' a task may ask "
                        "only for permissions its parent holds)", name, hold_words(h, shown, w, sizeof w));
            } else if (ps->kind == PS_TASK || ps->kind == PS_PFOR) {
                chk_err(c, pm->pos, "'&%s' refers to a variable the task may outlive: capture a copy (=%s), or "
                    "spawn the task inside 'finish'", name, name);
            } else {
                chk_err(c, pm->pos, "'&%s' refers to a variable the %s may outlive: capture a copy (=%s) or make it "
                    "shared (T@) and name it", name, noun, name);
            }
        } else if (spawned) {
            /* inside finish: only what the parent holds */
            bool ok = pm->kind == EVE_PERM_FULL ? h >= H_REF : pm->kind == EVE_PERM_NULL ? h >= H_NULL
                                                                                            : h >= H_IMPLICIT;
            if (!ok)
                chk_err(c, pm->pos, "the task asks for '%s%s' but its parent %s (inside 'finish' a task may ask only "
                    "for permissions its parent holds)", sigil, name, hold_words(h, shown, w, sizeof w));
        }
    }
}
