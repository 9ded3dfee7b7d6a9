/* The Eve standard library as the checker sees it (docs/eve.md, "The
 * standard library"): every type, object, function, method and event a
 * program may use without declaring it, with its signature. The code
 * generator binds the same names to the runtime. Format: check.h. */
#include "check.h"

#define TYPE(name, sig) {EVE_LIB_TYPE, NULL, name, sig, false}
#define MODULE(name) {EVE_LIB_MODULE, NULL, name, NULL, false}
#define GLOBAL(name, sig) {EVE_LIB_GLOBAL, NULL, name, sig, false}
#define FUNC(owner, name, sig) {EVE_LIB_FUNC, owner, name, sig, false}
#define METHOD(owner, name, sig) {EVE_LIB_METHOD, owner, name, sig, false}
#define MUTATOR(owner, name, sig) {EVE_LIB_METHOD, owner, name, sig, true}
#define STATIC(owner, name, sig) {EVE_LIB_STATIC, owner, name, sig, false}
#define EVENT(owner, name, sig) {EVE_LIB_EVENT, owner, name, sig, false}

const eve_lib_entry_t eve_stdlib[] = {
    /* the basic types: values */
    TYPE("int", "value"),
    TYPE("bool", "value"),
    TYPE("float", "value"),
    TYPE("char", "value"),
    TYPE("string", "value"),
    TYPE("void", "value"),
    /* containers and events */
    TYPE("vector", "object<T>"),
    TYPE("set", "object<T>"),
    TYPE("map", "object<K,V>"),
    TYPE("emitter", "object<T>"),
    /* the library's objects */
    TYPE("tcp_socket", "object"),
    TYPE("tcp_listener", "object"),
    TYPE("read_buffer", "object"),
    TYPE("write_buffer", "object"),
    TYPE("timer", "object"),
    TYPE("stream", "object"),
    TYPE("signal_set", "object"),

    /* objects every program has */
    GLOBAL("stdout", "stream"),
    GLOBAL("stderr", "stream"),
    GLOBAL("args", "vector<string>"), /* args[0] is the program's name */
    GLOBAL("signals", "signal_set"),

    /* functions every program has */
    FUNC(NULL, "exit", "(status: int) void"),
    FUNC(NULL, "to_string", "(value: basic) string"),
    FUNC(NULL, "to_int", "(value: basic) int"),  /* a string's decimal digits, a char's code */
    FUNC(NULL, "to_float", "(value: basic) float"),
    FUNC(NULL, "range", "(from: int, to: int) vector<int>"),
    FUNC(NULL, "clock_ns", "() int"), /* a monotonic clock, nanoseconds */

    /* modules: `import text` */
    MODULE("text"),
    /* the paper's modules (its Program 2: import io.socket.*, import
     * util.timeout): the sockets and the timers, which every program has
     * anyway; importing them is allowed and brings nothing new */
    MODULE("io.socket"),
    MODULE("util.timeout"),
    FUNC("text", "find", "(s: string, c: char) int"), /* -1: not found */
    FUNC("text", "trim", "(s: string) string"),

    /* string: a value; s[i] is a char; for (c in s) */
    METHOD("string", "size", "() int"),
    METHOD("string", "substring", "(from: int, to: int) string"),
    METHOD("string", "find", "(c: char) int"),

    /* vector<T>: v[i] is a T; for (x in v) */
    METHOD("vector", "size", "() int"),
    METHOD("vector", "contains", "(value: T) bool"),
    MUTATOR("vector", "push", "(value: T) void"),
    MUTATOR("vector", "pop", "() T"),
    MUTATOR("vector", "remove", "(value: T) void"), /* every element equal to value */
    MUTATOR("vector", "clear", "() void"),

    /* set<T>: for (x in s) */
    METHOD("set", "size", "() int"),
    METHOD("set", "contains", "(value: T) bool"),
    MUTATOR("set", "add", "(value: T) void"),
    MUTATOR("set", "insert", "(value: T) void"), /* the paper's name for add */
    MUTATOR("set", "remove", "(value: T) void"),
    MUTATOR("set", "clear", "() void"),

    /* map<K,V>: m[k] is a V (assigning inserts); for (k in m) gives the keys */
    METHOD("map", "size", "() int"),
    METHOD("map", "contains", "(key: K) bool"),
    MUTATOR("map", "remove", "(key: K) void"),
    MUTATOR("map", "clear", "() void"),

    /* emitter<T>: emit(value) runs every callback registered on the event
     * (emitter<void>: emit()); each callback runs as a task of its own. */
    METHOD("emitter", "emit", "(value: T) void"),

    /* tcp_listener: what tcp_socket.listen makes */
    STATIC("tcp_socket", "listen", "(address: string) tcp_listener"),
    EVENT("tcp_listener", "listening", "string"),     /* "HOST:PORT", the real port */
    EVENT("tcp_listener", "connection", "tcp_socket"),
    EVENT("tcp_listener", "error", "string"),
    MUTATOR("tcp_listener", "close", "() void"),

    /* tcp_socket: a connection */
    EVENT("tcp_socket", "data", "read_buffer"),
    EVENT("tcp_socket", "close", "void"),
    MUTATOR("tcp_socket", "write", "(data: bytes) void"),
    MUTATOR("tcp_socket", "close", "() void"),
    /* the paper's buffers (Program 2): the data event's bytes, in a data
     * callback of this socket; and writing a vector of chars */
    METHOD("tcp_socket", "read_buffer", "() vector<char>"),
    MUTATOR("tcp_socket", "write_buffer", "(data: vector<char>) void"),

    /* read_buffer: bytes received; b[i] is a char; for (c in b) */
    METHOD("read_buffer", "size", "() int"),
    METHOD("read_buffer", "to_string", "() string"),

    /* write_buffer: bytes to send */
    METHOD("write_buffer", "size", "() int"),
    MUTATOR("write_buffer", "append", "(data: bytes) void"),
    MUTATOR("write_buffer", "append_byte", "(byte: int) void"), /* the low 8 bits */
    MUTATOR("write_buffer", "clear", "() void"),

    /* stream: stdout and stderr (the library orders concurrent writes:
     * writing needs no permission) */
    METHOD("stream", "write", "(data: bytes) void"),
    METHOD("stream", "write_line", "(line: string) void"),

    /* timer: declared (t : timer), started, emits tick */
    MUTATOR("timer", "start", "(milliseconds: int) void"), /* tick every period */
    MUTATOR("timer", "once", "(milliseconds: int) void"),  /* one tick */
    MUTATOR("timer", "stop", "() void"),
    EVENT("timer", "tick", "void"),

    /* signal_set: signals */
    EVENT("signal_set", "terminate", "void"), /* SIGTERM or SIGINT */
    EVENT("signal_set", "hangup", "void"),    /* SIGHUP */
};

const size_t eve_stdlib_count = sizeof eve_stdlib / sizeof eve_stdlib[0];
