#!/usr/bin/env python3
"""What the engine's libraries may reference, checked on their object files.

1. Apps are sans-I/O: no object of the apps library references a system
   call that reads, writes, syncs, opens, sends, receives, polls, sleeps,
   reads a clock or asks which process it is in. The engine's functions that
   do such things are called from jobs the engine runs (yard_fx_io), never by
   an app directly.
2. Layers: an object references only symbols of its own library or of the
   layers below it (proto <- core <- coro <- models; coro <- eve_rt;
   core <- chat_store <- apps), so no layer depends on one above or beside
   it.
3. What apps may call below them: of the engine's core, only the functions
   of the app interface (ENGINE_FOR_APPS: effects, the news bus, the shared
   region, logging, flag parsing, bcrypt for jobs); none that reads a
   clock (the clocks come in the effects context) or a file. Of the chat's
   store (yard/chat_store.h), only the requests' entry and what needs no
   I/O (STORE_FOR_APPS); opening and closing it only from the chat's init.
4. Locks stay inside the modules that own them: of the apps, only the chat's
   state (state.c: members and channels, behind its API), its guard
   (guard.c: the login limits) and its K-lines (kline.c: the copy of
   DIR/klines in shared memory) take a mutex, and the state's own lock
   functions are referenced by no other object (LOCK_OWNERS).
5. A module split over several files keeps its insides to itself: the
   functions its private header declares (src/core/conn_int.h: conn_*,
   src/chat/chatlog_int.h: chatlog_*, src/coro/sched_int.h: sched_*) are
   referenced only by the module's own objects (conn*.c.o, chatlog*.c.o,
   sched*.c.o), as when they were static (PRIVATE_MODULES).

Usage: check_symbols.py --nm NM proto=LIB core=LIB coro=LIB models=LIB apps=LIB eve_rt=LIB
                        chat_store=LIB
       check_symbols.py --self-test
Exit 0 when every rule holds; 1 with each violation named (object, symbol,
rule) otherwise; 2 on a usage error."""
import re
import subprocess
import sys

# What an app must not call: the list and its close relatives.
FORBIDDEN = re.compile(
    r"^(?:__)?(?:"
    r"read|write|pread|pread64|pwrite|pwrite64|readv|writev|preadv|pwritev|"
    r"fsync|fdatasync|msync|sync_file_range|syncfs|"
    r"open|open64|openat|openat64|creat|fopen|fopen64|fdopen|close|"
    r"mmap|mmap64|munmap|ftruncate|truncate|unlink|rename|"
    r"send|sendto|sendmsg|recv|recvfrom|recvmsg|accept|accept4|connect|"
    r"getpid|gettid|fork|vfork|system|popen|pthread_create|"
    r"epoll_\w+|poll|ppoll|select|pselect|"
    r"sleep|usleep|nanosleep|clock_nanosleep|"
    r"time|clock_gettime|gettimeofday|getrandom"
    r")(?:_chk)?$")

# The engine's (core's) functions an app may call.
ENGINE_FOR_APPS = re.compile(
    r"^yard_(?:fx_\w+|access_obj_create|bus_create|bus_publish|shm_alloc|shm_mutex_\w+|"
    r"log|log_\w+|parse_\w+|opt_\w+|bcrypt_hash|bcrypt_verify|bcrypt_dummy|stopping)$")

# The chat store's functions an app may call: the requests' entry, and what
# needs no I/O (the log's tail in shared memory, deferred records, names).
STORE_FOR_APPS = {
    "yard_chat_store_run", "yard_chat_store_log", "yard_chat_store_motd",
    "yard_chat_store_klines_gen",
    "yard_chatlog_read_tail", "yard_chatlog_take", "yard_chatlog_cursor_end",
    "yard_chatlog_cursor_at", "yard_chatlog_defer", "yard_chatlog_last_id",
    "yard_chatlog_target_hash", "yard_chatlog_opts_default",
    "yard_account_name_valid", "yard_certfp_canon", "yard_mask_complete",
    "yard_kline_normalize",
}
# ... and only the chat's init and fini open and close it.
STORE_FOR_INIT = {"yard_chat_store_open", "yard_chat_store_close"}
CHAT_INIT_OBJECT = "init.c.o"

# The state's lock functions (state.c keeps them static: nothing else may
# reach them), and the mutex calls under any lock.
STATE_LOCK = {"chat_lock", "chat_unlock"}
MUTEX = re.compile(r"^(?:pthread_mutex_(?:lock|trylock|timedlock|unlock)|yard_shm_mutex_lock)$")
# The app objects that own a lock, and so may take one.
LOCK_OWNERS = {"state.c.o", "guard.c.o", "kline.c.o"}
STATE_OBJECT = "state.c.o"

# Modules split over several files: the prefix of their shared private
# functions, and the prefix of the objects that may reference them.
PRIVATE_MODULES = {"conn_": "conn", "chatlog_": "chatlog", "sched_": "sched"}

# Which libraries each layer may reference besides itself.
ALLOWED = {
    "proto": set(),
    "coro": {"core", "proto"},
    "core": {"proto"},
    "models": {"core", "coro", "proto"},
    "chat_store": {"core", "proto"},
    "apps": {"core", "proto", "chat_store"},
    # the Eve runtime (src/eve_rt): what generated programs call, on coro
    "eve_rt": {"coro", "core", "proto"},
}


def parse_nm(text):
    """nm output of an archive -> {object: (defined set, undefined set)}."""
    objs, cur = {}, None
    for line in text.splitlines():
        line = line.rstrip()
        if not line:
            continue
        if line.endswith(":") and " " not in line:
            cur = line[:-1]
            objs[cur] = (set(), set())
            continue
        if cur is None:
            continue
        parts = line.split()
        kind, name = parts[-2], parts[-1]
        if kind == "U":
            objs[cur][1].add(name)
        elif kind in "TDBRCVWGSidtbr" and kind.isupper():
            objs[cur][0].add(name)
    return objs


def check(libs):
    """libs: {layer: {object: (defined, undefined)}} -> list of violations."""
    owner = {}
    for layer, objs in libs.items():
        for defined, _ in objs.values():
            for sym in defined:
                owner.setdefault(sym, layer)
    problems = []
    for layer, objs in libs.items():
        for obj, (_, undefined) in sorted(objs.items()):
            for sym in sorted(undefined):
                if layer == "apps" and sym in STATE_LOCK and obj != STATE_OBJECT:
                    problems.append(f"apps/{obj}: references {sym}, the chat state's lock "
                                    f"(call an operation of state.h that locks inside, or "
                                    f"chat_state_locked)")
                elif layer == "apps" and MUTEX.match(sym) and obj not in LOCK_OWNERS:
                    problems.append(f"apps/{obj}: references {sym}, a lock taken outside the "
                                    f"modules that own one (LOCK_OWNERS)")
                if layer == "apps" and FORBIDDEN.match(sym):
                    problems.append(f"apps/{obj}: calls {sym}, which does I/O or depends on "
                                    f"the process or the clock (apps are sans-I/O: use an "
                                    f"engine effect or a job)")
                other = owner.get(sym)
                module = next((m for p, m in PRIVATE_MODULES.items() if sym.startswith(p)), None)
                if other and module and not obj.startswith(module):
                    problems.append(f"{layer}/{obj}: references {sym}, private to the {module} "
                                    f"files ({module}_int.h)")
                if other and other != layer and other not in ALLOWED[layer]:
                    problems.append(f"{layer}/{obj}: references {sym}, defined in {other}, "
                                    f"which is not below {layer}")
                elif layer == "apps" and other == "core" and not ENGINE_FOR_APPS.match(sym):
                    problems.append(f"apps/{obj}: references {sym}, an engine function that "
                                    f"is not part of the app interface (ENGINE_FOR_APPS)")
                elif layer == "apps" and other == "chat_store" and sym not in STORE_FOR_APPS \
                        and not (sym in STORE_FOR_INIT and obj == CHAT_INIT_OBJECT):
                    problems.append(f"apps/{obj}: references {sym}, a function of the chat "
                                    f"store that does I/O (ask the store through a request, "
                                    f"yard_chat_store_run)")
    return problems


def self_test():
    """The rules must be able to fail: synthetic objects that break each."""
    good = {
        "proto": {"p.o": ({"yard_p"}, set())},
        "coro": {"c.o": ({"yard_c"}, {"malloc", "yard_k"}),
                 "sched.c.o": ({"sched_enqueue"}, set()),
                 "sched_api.c.o": ({"yard_coro_go"}, {"sched_enqueue"})},
        "core": {"k.o": ({"yard_k"}, {"yard_p", "write"}),
                 "conn.c.o": ({"conn_flush"}, set()),
                 "conn_tls.c.o": ({"conn_tls_seal"}, {"conn_flush"})},
        "models": {"m.o": ({"yard_m"}, {"yard_k", "yard_c", "epoll_wait"})},
        "apps": {"a.o": ({"yard_a"}, {"yard_fx_send", "yard_chatlog_take", "snprintf"}),
                 "init.c.o": ({"yard_i"}, {"yard_chat_store_open"}),
                 "state.c.o": ({"chat_state_locked"}, {"chat_lock", "yard_shm_mutex_lock",
                                                       "pthread_mutex_unlock"}),
                 "guard.c.o": ({"yard_g"}, {"yard_shm_mutex_lock", "pthread_mutex_unlock"})},
        "eve_rt": {"e.o": ({"eve_e"}, {"yard_c", "yard_k", "write"})},
        "chat_store": {"s.o": ({"yard_chat_store_open", "yard_chatlog_take",
                                "yard_chatlog_append"}, {"yard_k", "write"}),
                       "chatlog.c.o": ({"chatlog_lock"}, set()),
                       "chatlog_read.c.o": ({"yard_chatlog_read"}, {"chatlog_lock"})},
    }
    good["core"]["k.o"][0].update({"yard_fx_send", "yard_wall_ns", "yard_read_text_file"})
    assert check(good) == [], check(good)
    cases = [
        ("apps", "a.o", "pwrite64", "calls pwrite64"),
        ("apps", "a.o", "__read_chk", "calls __read_chk"),
        ("apps", "a.o", "epoll_ctl", "calls epoll_ctl"),
        ("apps", "a.o", "getpid", "calls getpid"),
        ("apps", "a.o", "yard_m", "defined in models"),
        ("apps", "a.o", "yard_c", "defined in coro"),
        ("core", "k.o", "yard_m", "defined in models"),
        ("coro", "c.o", "yard_m", "defined in models"),
        ("core", "k.o", "yard_c", "defined in coro"),
        ("proto", "p.o", "yard_k", "defined in core"),
        ("eve_rt", "e.o", "yard_m", "defined in models"),
        ("eve_rt", "e.o", "yard_a", "defined in apps"),
        ("coro", "c.o", "eve_e", "defined in eve_rt"),
        ("models", "m.o", "eve_e", "defined in eve_rt"),
        ("apps", "a.o", "yard_wall_ns", "not part of the app interface"),
        ("apps", "a.o", "yard_read_text_file", "not part of the app interface"),
        ("apps", "a.o", "yard_chatlog_append", "does I/O"),
        ("apps", "a.o", "yard_chat_store_open", "does I/O"),
        ("core", "k.o", "yard_chatlog_take", "defined in chat_store"),
        ("chat_store", "s.o", "yard_a", "defined in apps"),
        ("apps", "a.o", "chat_lock", "the chat state's lock"),
        ("apps", "init.c.o", "chat_unlock", "the chat state's lock"),
        ("apps", "a.o", "pthread_mutex_lock", "outside the modules that own one"),
        ("apps", "a.o", "yard_shm_mutex_lock", "outside the modules that own one"),
        ("core", "k.o", "conn_flush", "private to the conn files"),
        ("models", "m.o", "conn_tls_seal", "private to the conn files"),
        ("chat_store", "s.o", "chatlog_lock", "private to the chatlog files"),
        ("coro", "c.o", "sched_enqueue", "private to the sched files"),
    ]
    for layer, obj, sym, want in cases:
        libs = {k: {o: (set(d), set(u)) for o, (d, u) in v.items()} for k, v in good.items()}
        libs[layer][obj][1].add(sym)
        got = check(libs)
        assert len(got) == 1 and want in got[0], (layer, sym, got)
    sample = "\nx.o:\n0000000000000000 T yard_x\n                 U write\n"
    assert parse_nm(sample) == {"x.o": ({"yard_x"}, {"write"})}
    print("check_symbols self-test: every rule can fail")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) < 3 or argv[0] != "--nm":
        print(__doc__, file=sys.stderr)
        return 2
    nm, libs = argv[1], {}
    for arg in argv[2:]:
        layer, _, path = arg.partition("=")
        if layer not in ALLOWED or not path:
            print(f"check_symbols: bad argument {arg!r}", file=sys.stderr)
            return 2
        out = subprocess.run([nm, path], capture_output=True, text=True)
        if out.returncode != 0:
            print(f"check_symbols: {nm} {path}: {out.stderr.strip()}", file=sys.stderr)
            return 2
        libs[layer] = parse_nm(out.stdout)
        if not libs[layer]:
            print(f"check_symbols: {path} holds no objects", file=sys.stderr)
            return 2
    problems = check(libs)
    for p in problems:
        print(p)
    n = sum(len(v) for v in libs.values())
    print(f"check_symbols: {n} objects in {len(libs)} libraries, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
