"""Lines of code (issue 23): echo, counter and broadcast chat in Eve, in our C apps and in the
reference peers, counted one way for all: the non-blank, non-comment lines of the program itself.

A line counts when, once its comments are taken out, something other than white space is
left on it: a line holding code and a comment counts, a line inside a block comment or a
documentation string does not, nor does a line of white space. The lines of a multi-line
string literal count (they are program text), except those that hold only white space.

Each language has a small lexer that knows its comments and the literals that may contain
comment markers (see `_MASKERS` and docs/harness.md, "Lines of code", for what each one does
not handle). What is counted for each cell of the table (which file, or which definitions in a
file that serves several apps) is `TABLE`, with a note per cell. Definitions are found when
the table is counted, from their heads (a regular expression matched at the start of a line,
comments and literals masked) to their ends (the language's own rule: matching braces, Erlang's
`.`, Elixir's `end`, Eve's indentation), so the table follows the sources as they change and
fails loudly when a head is gone or matches twice.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

RULE = ("non-blank, non-comment lines: a line counts when something other than white space is "
        "left on it once comments are removed (a line with code and a comment counts; a line "
        "inside a block comment, an Elixir @moduledoc/@doc, or of white space does not). "
        "Each language's comments are found by a lexer that skips string and character "
        "literals.")

# --------------------------------------------------------------------------------------------
# Masking: the text with every comment turned into spaces and every literal's visible
# characters into 'x' (white space and line breaks kept), so that what is left on a line is
# code, and braces, dots and semicolons left are the program's own.


class _Mask:
    def __init__(self, text: str):
        self.t = text
        self.n = len(text)
        self.out = list(text)

    def comment(self, i: int, j: int) -> None:
        for k in range(i, min(j, self.n)):
            if self.out[k] != "\n":
                self.out[k] = " "

    def literal(self, i: int, j: int) -> None:
        for k in range(i, min(j, self.n)):
            if not self.t[k].isspace():
                self.out[k] = "x"

    def eol(self, i: int) -> int:
        j = self.t.find("\n", i)
        return self.n if j < 0 else j

    def text(self) -> str:
        return "".join(self.out)


def _quoted(t: str, i: int, q: str, multiline: bool = False) -> int:
    """The end (exclusive) of a literal opened by t[i] == q, with backslash escapes; one that
    is not closed on its line (unless multiline) ends there."""
    j, n = i + 1, len(t)
    while j < n:
        c = t[j]
        if c == "\\":
            j += 2
        elif c == q:
            return j + 1
        elif c == "\n" and not multiline:
            return j
        else:
            j += 1
    return n


def mask_c(text: str, go: bool = False) -> str:
    """C (and Go with go=True): // and /* */ comments; "..." and '...' literals with escapes;
    Go's raw strings `...`. A // comment ending in a backslash goes on to the next line (C)."""
    m, t = _Mask(text), text
    i = 0
    while i < m.n:
        c = t[i]
        if t.startswith("//", i):
            j = m.eol(i)
            while not go and j < m.n and t[j - 1] == "\\":
                j = m.eol(j + 1)
            m.comment(i, j)
            i = j
        elif t.startswith("/*", i):
            i = _block_comment(m, i)
        elif c in "\"'":
            j = _quoted(t, i, c)
            m.literal(i, j)
            i = j
        elif go and c == "`":
            j = t.find("`", i + 1)
            j = m.n if j < 0 else j + 1
            m.literal(i, j)
            i = j
        else:
            i += 1
    return m.text()


def _block_comment(m: "_Mask", i: int) -> int:
    """Masks the /* ... */ comment at i (to the end when unclosed); returns where it ends."""
    j = m.t.find("*/", i + 2)
    j = m.n if j < 0 else j + 2
    m.comment(i, j)
    return j


def mask_go(text: str) -> str:
    return mask_c(text, go=True)


_RUST_RAW = re.compile(r'b?r(#*)"')


def mask_rust(text: str) -> str:
    """Rust: // and /* */ comments (nested), "..." strings over lines, raw strings r#"..."#
    (and br"..."), char literals 'x' and '\\n' (b'x' too); a lifetime 'a is code."""
    m, t = _Mask(text), text
    i = 0
    while i < m.n:
        c = t[i]
        word_before = i > 0 and (t[i - 1].isalnum() or t[i - 1] == "_")
        raw = None if word_before else _RUST_RAW.match(t, i)
        if t.startswith("//", i):
            j = m.eol(i)
            m.comment(i, j)
            i = j
        elif t.startswith("/*", i):
            depth, j = 1, i + 2
            while j < m.n and depth:
                if t.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif t.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            m.comment(i, j)
            i = j
        elif raw:
            j = t.find('"' + raw.group(1), raw.end())
            j = m.n if j < 0 else j + 1 + len(raw.group(1))
            m.literal(i, j)
            i = j
        elif c == '"':
            j = _quoted(t, i, c, multiline=True)
            m.literal(i, j)
            i = j
        elif c == "'" and (t.startswith("\\", i + 1) or t.startswith("'", i + 2)):
            j = _quoted(t, i, c)
            m.literal(i, j)
            i = j
        else:
            i += 1
    return m.text()


# After these, a / starts a regular expression literal; after anything else (an identifier, a
# number, a literal, ')' or ']') it divides.
_JS_REGEX_AFTER_KEYWORDS = {"return", "typeof", "instanceof", "in", "of", "new", "delete",
                            "void", "throw", "case", "do", "else", "yield", "await"}
_JS_REGEX_AFTER_PUNCT = set("(,=:[!&|?{};+-*%<>~^")


def _js_regex_end(t: str, i: int) -> int | None:
    """The end of a regular expression literal at t[i] == '/' (flags included), or None if the
    line ends first (then it was not one)."""
    j, n, cls = i + 1, len(t), False
    while j < n:
        c = t[j]
        if c == "\n":
            return None
        if c == "\\":
            j += 2
            continue
        if c == "[":
            cls = True
        elif c == "]":
            cls = False
        elif c == "/" and not cls:
            j += 1
            while j < n and (t[j].isalnum() or t[j] in "_$"):
                j += 1
            return j
        j += 1
    return None


def _js_code(m: _Mask, i: int, in_subst: bool) -> int:
    """Scans JavaScript code from i; in a template's ${...}, returns at its closing brace."""
    t, depth, prev = m.t, 0, ""
    while i < m.n:
        c = t[i]
        if c.isspace():
            i += 1
        elif t.startswith("//", i) or (i == 0 and t.startswith("#!")):
            j = m.eol(i)
            m.comment(i, j)
            i = j
        elif t.startswith("/*", i):
            i = _block_comment(m, i)
        elif c in "\"'":
            j = _quoted(t, i, c)
            m.literal(i, j)
            prev, i = "lit", j
        elif c == "`":
            i, prev = _js_template(m, i), "lit"
        elif c == "/" and (prev == "" or prev in _JS_REGEX_AFTER_PUNCT
                           or prev in _JS_REGEX_AFTER_KEYWORDS) \
                and (j := _js_regex_end(t, i)) is not None:
            m.literal(i, j)
            prev, i = "lit", j
        elif c.isalnum() or c in "_$":
            j = i
            while j < m.n and (t[j].isalnum() or t[j] in "_$"):
                j += 1
            prev, i = t[i:j], j
        else:
            if in_subst and c == "{":
                depth += 1
            elif in_subst and c == "}":
                if depth == 0:
                    return i
                depth -= 1
            prev, i = c, i + 1
    return m.n


def _js_template(m: _Mask, i: int) -> int:
    t, start, j = m.t, i, i + 1
    while j < m.n:
        c = t[j]
        if c == "\\":
            j += 2
        elif c == "`":
            m.literal(start, j + 1)
            return j + 1
        elif t.startswith("${", j):
            m.literal(start, j + 2)
            k = _js_code(m, j + 2, True)
            start, j = k, k + 1  # the closing brace is masked with the next piece of text
        else:
            j += 1
    m.literal(start, m.n)
    return m.n


def mask_js(text: str) -> str:
    """JavaScript: // and /* */ comments, a #! first line; '...' and "..." strings; template
    literals, their ${...} scanned as code (nested templates included); regular expression
    literals, told from division by the token before the / (see _JS_REGEX_AFTER_*)."""
    m = _Mask(text)
    _js_code(m, 0, False)
    return m.text()


def mask_erlang(text: str) -> str:
    """Erlang: % to the end of the line; "..." strings and '...' quoted atoms (escapes, may span
    lines); character literals $c and $\\c ($%, $", $' are not comments or quotes)."""
    m, t = _Mask(text), text
    i = 0
    while i < m.n:
        c = t[i]
        if c == "%":
            j = m.eol(i)
            m.comment(i, j)
            i = j
        elif c in "\"'":
            j = _quoted(t, i, c, multiline=True)
            m.literal(i, j)
            i = j
        elif c == "$":
            j = min(m.n, i + (3 if t.startswith("$\\", i) else 2))
            m.literal(i, j)
            i = j
        else:
            i += 1
    return m.text()


_EX_PAIRS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_EX_DOC = re.compile(r"@(?:moduledoc|doc|typedoc)\b[ \t]*")


def _ex_string(m: _Mask, i: int, open_len: int, close: str, interp: bool = True,
               escapes: bool = True, as_comment: bool = False) -> int:
    """A string, charlist, heredoc or sigil body from t[i] (its opening is open_len chars),
    to the close; #{...} inside is code when interp."""
    t, start, j = m.t, i, i + open_len
    mark = m.comment if as_comment else m.literal
    while j < m.n:
        if escapes and t[j] == "\\":
            j += 2
        elif t.startswith(close, j):
            mark(start, j + len(close))
            return j + len(close)
        elif interp and t.startswith("#{", j):
            mark(start, j + 2)
            k = _ex_code(m, j + 2, True)
            start, j = k, k + 1
        else:
            j += 1
    mark(start, m.n)
    return m.n


def _ex_literal(m: _Mask, i: int, as_comment: bool = False) -> int | None:
    """The literal starting at i (string, charlist, heredoc, sigil), its end; None if none."""
    t = m.t
    if t.startswith('"""', i) or t.startswith("'''", i):
        return _ex_string(m, i, 3, t[i] * 3, as_comment=as_comment)
    if t[i] in "\"'":
        return _ex_string(m, i, 1, t[i], as_comment=as_comment)
    if t[i] == "~" and i + 1 < m.n and t[i + 1].isalpha():
        j = i + 1
        while j < m.n and t[j].isalpha():
            j += 1
        if j >= m.n:
            return None
        lower = t[i + 1].islower()
        if t.startswith('"""', j) or t.startswith("'''", j):
            end = _ex_string(m, i, j - i + 3, t[j] * 3, interp=lower, escapes=lower,
                             as_comment=as_comment)
        else:
            d = t[j]
            end = _ex_string(m, i, j - i + 1, _EX_PAIRS.get(d, d), interp=lower,
                             escapes=lower or d in "\"'", as_comment=as_comment)
        while end < m.n and t[end].isalpha():  # modifiers
            end += 1
        mark = m.comment if as_comment else m.literal
        mark(i, end)
        return end
    return None


def _ex_code(m: _Mask, i: int, in_interp: bool) -> int:
    t, depth = m.t, 0
    while i < m.n:
        c = t[i]
        if c == "#":
            j = m.eol(i)
            m.comment(i, j)
            i = j
            continue
        if c == "@" and (d := _EX_DOC.match(t, i)):
            # Documentation, not program: the attribute and its text (or false) are comments.
            j = d.end()
            end = _ex_literal(m, j, as_comment=True) if j < m.n else None
            if end is None:
                w = re.match(r"(?:false|nil)\b", t[j:j + 5])
                end = j + (w.end() if w else 0)
            m.comment(i, end)
            i = end
            continue
        if c in "\"'~":
            end = _ex_literal(m, i)
            if end is not None:
                i = end
                continue
        if c == ":" and i + 1 < m.n and t[i + 1] in "\"'" and not t.startswith("::", i - 1):
            end = _ex_string(m, i, 2, t[i + 1])  # a quoted atom :"..."
            i = end
            continue
        if c == "?" and i + 1 < m.n and not (i > 0 and (t[i - 1].isalnum() or t[i - 1] in "_?!")):
            j = min(m.n, i + (3 if t[i + 1] == "\\" else 2))  # a character: ?# ?" ?\n
            m.literal(i, j)
            i = j
            continue
        if in_interp and c == "{":
            depth += 1
        elif in_interp and c == "}":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return m.n


def mask_elixir(text: str) -> str:
    """Elixir: # to the end of the line; strings, charlists, heredocs (\"\"\" and '''), sigils
    (~r/.../, ~s(...), ~S\"\"\"...\"\"\", any delimiter; interpolation only in lowercase ones),
    quoted atoms :"...", characters ?# ?" ?\\c; #{...} in a string is code. @moduledoc, @doc
    and @typedoc with their text (or false) are documentation: comments, not counted."""
    m = _Mask(text)
    _ex_code(m, 0, False)
    return m.text()


def mask_eve(text: str) -> str:
    """Eve (docs/eve.md, "Lexical rules"): # to the end of the line; "..." strings and '...'
    characters, on one line, with backslash escapes."""
    m, t = _Mask(text), text
    i = 0
    while i < m.n:
        c = t[i]
        if c == "#":
            j = m.eol(i)
            m.comment(i, j)
            i = j
        elif c in "\"'":
            j = _quoted(t, i, c)
            m.literal(i, j)
            i = j
        else:
            i += 1
    return m.text()


_MASKERS = {"c": mask_c, "go": mask_go, "js": mask_js, "erlang": mask_erlang,
            "elixir": mask_elixir, "eve": mask_eve, "rust": mask_rust}
_EXT = {".c": "c", ".h": "c", ".go": "go", ".js": "js", ".mjs": "js", ".cjs": "js",
        ".erl": "erlang", ".hrl": "erlang", ".ex": "elixir", ".exs": "elixir", ".eve": "eve", ".rs": "rust"}


def language(path: str | Path) -> str:
    try:
        return _EXT[Path(path).suffix]
    except KeyError:
        what = Path(path).suffix or "this file"
        raise ValueError(f"{path}: no line counter for {what}") from None


def code_lines(text: str, lang: str) -> list[str]:
    """The text's lines with comments blanked and literals masked."""
    lines = _MASKERS[lang](text).split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def count(text: str, lang: str) -> int:
    """The non-blank, non-comment lines of a text in a language (c go js erlang elixir eve
    rust)."""
    return sum(1 for ln in code_lines(text, lang) if ln.strip())


# --------------------------------------------------------------------------------------------
# Where a definition ends, from its head line, in the masked lines.

class LocError(Exception):
    pass


_OPEN, _CLOSE = "([{", ")]}"


def _balance(line: str) -> int:
    return sum(line.count(c) for c in _OPEN) - sum(line.count(c) for c in _CLOSE)


def _end_braces(lines: list[str], s: int, lang: str) -> int:
    """C, Go, JavaScript, Rust: a function, type or statement ends on the line where its brackets
    are all closed and it ends in '}' or ';' (Go: any line with brackets closed). A
    preprocessor line is one line, plus its backslash continuations."""
    if lines[s].lstrip().startswith("#"):
        e = s
        while lines[e].rstrip().endswith("\\") and e + 1 < len(lines):
            e += 1
        return e
    depth = 0
    for e in range(s, len(lines)):
        for c in lines[e]:
            if c in _OPEN:
                depth += 1
            elif c in _CLOSE:
                depth -= 1
        tail = lines[e].rstrip()
        if depth <= 0 and tail and (lang == "go" and tail[-1] not in ",+-*/=&|." or
                                    tail[-1] in "};"):
            return e
    raise LocError(f"line {s + 1}: definition never ends")


_ERL_OPENERS = re.compile(r"\b(?:begin|case|if|receive|try)\b|\bfun\b(?!\s+[a-z][\w@]*"
                          r"(?::[a-z][\w@]*)?\s*/)")
_ERL_TOKEN = re.compile(r"->|\.(?=\s|$)|[;()\[\]{}]|\bend\b|" + _ERL_OPENERS.pattern)


def _next_code(lines: list[str], e: int) -> int | None:
    for k in range(e + 1, len(lines)):
        if lines[k].strip():
            return k
    return None


def _end_erlang(lines: list[str], s: int, head: re.Pattern) -> int:
    """Erlang: the consecutive clauses whose heads match, up to the ';' (after the clause's
    '->', outside brackets and begin/case/fun/if/receive/try ... end) that a clause not
    matching follows, or the function's final '.'."""
    depth, body = 0, False
    e = s
    while e < len(lines):
        for tok in _ERL_TOKEN.finditer(lines[e]):
            x = tok.group()
            if x in ("(", "[", "{") or _ERL_OPENERS.fullmatch(x):
                depth += 1
            elif x in (")", "]", "}", "end"):
                depth -= 1
            elif depth == 0 and x == "->":
                body = True
            elif depth == 0 and x == ".":
                return e
            elif depth == 0 and x == ";" and body:
                nxt = _next_code(lines, e)
                if nxt is None or not head.match(lines[nxt]):
                    return e
                body = False
        e += 1
    raise LocError(f"line {s + 1}: function never ends")


_EX_DO = re.compile(r"\bdo\b(?!:)|\bfn\b|(?<![.:])\bend\b(?!:)")


def _end_elixir(lines: list[str], s: int, head: re.Pattern) -> int:
    """Elixir: a do ... end block to its end (do, fn and end counted); a one-line `, do:`
    definition to where its brackets close. Then the next clause, if its head matches."""
    e = s
    while True:
        depth, brackets = 0, 0
        while e < len(lines):
            for tok in _EX_DO.finditer(lines[e]):
                depth += -1 if tok.group() == "end" else 1
            brackets += _balance(lines[e])
            if depth <= 0 and brackets <= 0 and not lines[e].rstrip().endswith(","):
                break
            e += 1
        else:
            raise LocError(f"line {s + 1}: definition never ends")
        nxt = _next_code(lines, e)
        if nxt is None or not head.match(lines[nxt]):
            return e
        e = nxt


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _end_eve(lines: list[str], s: int, block: bool) -> int:
    """Eve: the line (and its bracketed continuation); with block, the lines indented under it."""
    e, brackets = s, 0
    while e < len(lines):
        brackets += _balance(lines[e])
        if brackets <= 0:
            break
        e += 1
    if not block:
        return e
    k = e
    while (nxt := _next_code(lines, k)) is not None and _indent(lines[nxt]) > _indent(lines[s]):
        k = nxt
    return k


# --------------------------------------------------------------------------------------------
# The table.

@dataclass
class Piece:
    """Part of a cell: a whole file (head None), or the definition whose first line matches
    head (re.match on the masked line) with, for Erlang and Elixir, its following clauses, or
    with through, the lines from head's line to the end of the definition through starts.
    For Eve, block=False takes the head's line alone, not the block under it."""
    path: str
    head: str | None = None
    through: str | None = None
    block: bool = True
    what: str = ""


@dataclass
class Cell:
    parts: list[Piece] = field(default_factory=list)
    note: str = ""
    na: str | None = None           # why there is no number
    without: list[Piece] = field(default_factory=list)  # a second figure: parts minus these
    without_label: str = ""
    scale: list[tuple[str, list[Piece]]] = field(default_factory=list)  # counted, shown in the note


COLUMNS = [("eve", "Eve"), ("c", "C (yard-serve app)"), ("go", "Go peer"),
           ("node", "Node peer"), ("erlang", "Erlang peer"), ("elixir", "Elixir peer"),
           ("rust", "Rust peer (tokio)")]
ROWS = [("echo", "echo"), ("counter", "counter"), ("chat", "broadcast chat")]

# The chat service's files: the app (apps/chat/: one module per concern, a header each)
# and its store (src/chat/, its headers in include/yard/).
_CHAT_FILES = tuple(f"apps/chat/{name}" for name in (
    "chat.h", "session.c", "session.h", "commands.c", "commands.h", "register.c",
    "register.h", "guard.c", "guard.h", "guest.c", "guest.h", "channel.c", "channel.h",
    "chanop.c", "chanop.h", "message.c", "message.h", "relay.c", "relay.h", "history.c",
    "history.h", "query.c", "query.h", "state.c", "state.h", "init.c")) + (
    "src/chat/store.c", "src/chat/store.h", "src/chat/requests.c", "src/chat/chatlog.c",
    "src/chat/chatlog_writer.c", "src/chat/chatlog_read.c", "src/chat/chatlog_seek.c",
    "src/chat/chatlog_int.h",
    "src/chat/accounts.c", "include/yard/chat_store.h", "include/yard/chatlog.h",
    "include/yard/chat_accounts.h")

_EVE_SCAFFOLD = "without the listener, the `listening` line, the error exit and SIGTERM"


def _eve_scaffold(path: str) -> list[Piece]:
    return [Piece(path, r"listen_on\s*:", block=False), Piece(path, r"if args\.size\(\)"),
            Piece(path, r"tcp_socket\.listen\(", block=False),
            Piece(path, r"\s+listening\s*\("), Piece(path, r"\s+error\s*\("),
            Piece(path, r"on signals terminate")]


_C_SHARED = ("yard-serve's engine (listening, accepting, reading, writing, under every model) "
             "is not counted.")
_GO_SHARED = "The shared launcher main.go (flags, listen, accept loop, signals) is not counted."
_NODE_SHARED = ("The shared server.js and lib/worker.js (flags, listen, dispatch, signals) are "
                "not counted.")
_ERL_SHARED = ("The module's shared part (main/0, flags, listen, acceptor pool, shutdown) is "
               "not counted.")
_RS_SHARED = ("The shared main.rs, opts.rs and shutdown.rs (flags, listen, signals, the sink's "
              "drain) and rt_tokio.rs's start and accept_loop are not counted.")
_EX_SHARED = ("The shared YardPeer module, options and acceptor pool (lib/yard_peer.ex, "
              "lib/options.ex) are not counted.")

TABLE: dict[str, dict[str, Cell]] = {
    "echo": {
        "eve": Cell([Piece("examples/eve/echo.eve")],
                    "The whole program: per-connection data and close callbacks, plus the "
                    "listener, its `listening` line, the error exit and the SIGTERM exit.",
                    without=_eve_scaffold("examples/eve/echo.eve"),
                    without_label=_EVE_SCAFFOLD),
        "c": Cell([Piece("apps/echo.c")],
                  "The sans-I/O app: a data callback that sends its input back, and the app's "
                  "descriptor. " + _C_SHARED),
        "go": Cell([Piece("peers/go/echo.go")],
                   "The whole file: serveEcho is io.Copy(c, c). " + _GO_SHARED),
        "node": Cell([Piece("peers/node/lib/apps.js", r"function serveEcho\(", what="serveEcho")],
                     "serveEcho in lib/apps.js (socket.pipe(socket)); the file also holds "
                     "counter and sink. " + _NODE_SHARED),
        "erlang": Cell([Piece("peers/erlang/src/yard_peer.erl", r"echo\(", what="echo/1")],
                       "echo/1 in yard_peer.erl (passive recv, send back). " + _ERL_SHARED),
        "elixir": Cell([Piece("peers/elixir/lib/conn.ex", r"\s*def serve\(:echo\b",
                              what="serve(:echo, ...)"),
                        Piece("peers/elixir/lib/conn.ex", r"\s*defp echo\(", what="echo/1")],
                       "In lib/conn.ex: the serve(:echo, ...) clause and echo/1 (passive recv, "
                       "send back). " + _EX_SHARED),
        "rust": Cell([Piece("peers/rust/src/rt_tokio.rs", r"async fn echo\b", what="echo")],
                     "echo in src/rt_tokio.rs (a read / write_all loop on the connection, plain or TLS). "
                     + _RS_SHARED),
    },
    "counter": {
        "eve": Cell([Piece("examples/eve/counter.eve")],
                    "The whole program: the shared count, put_be64, the data callback with a "
                    "task per request holding [count] or [+count], plus the listener, its "
                    "`listening` line, the error exit and the SIGTERM exit.",
                    without=_eve_scaffold("examples/eve/counter.eve"),
                    without_label=_EVE_SCAFFOLD),
        "c": Cell([Piece("apps/counter.c"),
                   Piece("include/yard/proto_counter.h", r"enum yard_counter_op\b",
                         what="enum yard_counter_op"),
                   Piece("include/yard/proto_counter.h", r"#define YARD_COUNTER_REPLY_LEN\b",
                         what="YARD_COUNTER_REPLY_LEN"),
                   Piece("include/yard/proto_counter.h", r"static inline int yard_counter_decode\(",
                         what="yard_counter_decode"),
                   Piece("src/proto/counter.c", r"void yard_counter_encode\(",
                         what="yard_counter_encode"),
                   Piece("src/proto/counter.c", r"size_t yard_counter_valid_prefix\(",
                         what="yard_counter_valid_prefix")],
                  "apps/counter.c whole (both --counter-sync modes: one atomic instruction per "
                  "request, or Eve-style permission tasks; its option table), and the protocol "
                  "helpers it calls from include/yard/proto_counter.h and src/proto/counter.c "
                  "(shared with yard-load). " + _C_SHARED),
        "go": Cell([Piece("peers/go/counter.go")],
                   "The whole file: one atomic.Uint64, a pipelined batch answered with one "
                   "write. " + _GO_SHARED),
        "node": Cell([Piece("peers/node/lib/apps.js", r"const OP_READ\b", what="OP_READ"),
                      Piece("peers/node/lib/apps.js", r"const OP_INCREMENT\b", what="OP_INCREMENT"),
                      Piece("peers/node/lib/apps.js", r"function serveCounter\(",
                            what="serveCounter"),
                      Piece("peers/node/lib/shared.js", r"function localCounter\(",
                            what="localCounter")],
                     "In lib/apps.js the opcodes and serveCounter, in lib/shared.js "
                     "localCounter (the single-process count). The --cluster variant (the "
                     "count in the primary, reached over IPC) is not counted. " + _NODE_SHARED),
        "erlang": Cell([Piece("peers/erlang/src/yard_peer.erl", r"handler\(counter\b",
                              what="handler(counter, _)"),
                        Piece("peers/erlang/src/yard_peer.erl", r"counter_loop\(",
                              what="counter_loop/1"),
                        Piece("peers/erlang/src/yard_peer.erl", r"counter\(", what="counter/1"),
                        Piece("peers/erlang/src/yard_peer.erl", r"valid_prefix\(",
                              what="valid_prefix/2"),
                        Piece("peers/erlang/src/yard_peer.erl", r"count_incs\(",
                              what="count_incs/2"),
                        Piece("peers/erlang/src/yard_peer.erl", r"replies\(", what="replies/3")],
                       "In yard_peer.erl: the handler(counter, _) clause that starts the "
                       "counter process, counter_loop/1 (that process), counter/1 (a "
                       "connection) and its helpers valid_prefix/2, count_incs/2, replies/3. "
                       + _ERL_SHARED),
        "elixir": Cell([Piece("peers/elixir/lib/conn.ex", r"\s*def serve\(:counter\b",
                              what="serve(:counter, ...)"),
                        Piece("peers/elixir/lib/conn.ex", r"defmodule YardPeer\.Counter\b",
                              what="YardPeer.Counter")],
                       "In lib/conn.ex: the serve(:counter, ...) clause and the whole "
                       "YardPeer.Counter module (one :atomics cell, add_get per batch). "
                       + _EX_SHARED),
        "rust": Cell([Piece("peers/rust/src/apps.rs", r"pub static COUNT\b", what="COUNT"),
                      Piece("peers/rust/src/apps.rs", r"pub fn counter_replies\(",
                            what="counter_replies"),
                      Piece("peers/rust/src/rt_tokio.rs", r"async fn counter\b",
                            what="counter")],
                     "In src/apps.rs the AtomicU64 and counter_replies (shared with monoio), "
                     "in src/rt_tokio.rs counter (a pipelined batch answered with one "
                     "write). " + _RS_SHARED),
    },
    "chat": {
        "eve": Cell([Piece("examples/eve/chat.eve")],
                    "The whole program: the shared room, broadcast (a task per member holding "
                    "[+member]), joins, leaves and line splitting, plus the listener, its "
                    "`listening` line, the error exit and the SIGTERM exit.",
                    without=_eve_scaffold("examples/eve/chat.eve"),
                    without_label=_EVE_SCAFFOLD),
        "c": Cell(na="n/a: no C app is a broadcast chat. apps/chat/ is an IRC-compatible "
                     "service (accounts, channels, durable history, catch-up), not comparable; "
                     "the closest C is the coro runtime's rendering of Eve's chat in a unit "
                     "test, which has fixed 16-byte messages over socketpairs and no listener.",
                  scale=[("the IRC-compatible chat service (apps/chat/ and its store, "
                          "src/chat/: sources and headers)",
                          [Piece(path) for path in _CHAT_FILES]),
                         ("the broadcast chat's server side in tests/unit/test_coro_examples.c "
                          "(CHAT_CLIENTS through session())",
                          [Piece("tests/unit/test_coro_examples.c", r"#define CHAT_CLIENTS\b",
                                 through=r"static void session\(",
                                 what="CHAT_CLIENTS .. session()")])]),
        "go": Cell([Piece("peers/go/broadcast.go")],
                   "The whole file: the room (a map of members under an RWMutex, read-locked "
                   "by each broadcast), and per client a reader goroutine (bufio ReadSlice "
                   "cuts the lines, 64 KiB at most) and a writer goroutine that writes what "
                   "was queued for it in one writev; a client with 1 MiB unwritten is "
                   "dropped. " + _GO_SHARED),
        "node": Cell([Piece("peers/node/lib/apps.js", r"const MAX_LINE\b", what="MAX_LINE"),
                      Piece("peers/node/lib/apps.js", r"const MAX_QUEUED\b", what="MAX_QUEUED"),
                      Piece("peers/node/lib/apps.js", r"function serveBroadcast\(",
                            what="serveBroadcast"),
                      Piece("peers/node/lib/apps.js", r"function broadcast\(", what="broadcast")],
                     "In lib/apps.js the two limits, serveBroadcast (the room is a Set; a "
                     "chunk's complete lines are cut with indexOf and forwarded in one write "
                     "per member, a partial line held) and broadcast (a member with 1 MiB "
                     "unwritten is destroyed). The Set itself is made in lib/worker.js. "
                     + _NODE_SHARED),
        "erlang": Cell([Piece("peers/erlang/src/yard_peer.erl", r"-define\(CHAT_MAX_LINE\b",
                              what="CHAT_MAX_LINE"),
                        Piece("peers/erlang/src/yard_peer.erl", r"-define\(CHAT_MAX_QUEUED\b",
                              what="CHAT_MAX_QUEUED"),
                        Piece("peers/erlang/src/yard_peer.erl", r"handler\(broadcast\b",
                              what="handler(broadcast, _)"),
                        Piece("peers/erlang/src/yard_peer.erl", r"broadcast\(",
                              what="broadcast/1"),
                        Piece("peers/erlang/src/yard_peer.erl", r"member\(", what="member/1")],
                       "In yard_peer.erl: the two limits, the handler(broadcast, _) clause that "
                       "starts the pg scope (the room), broadcast/1 (a connection joins the "
                       "group; the VM cuts lines with {packet, line}) and member/1 (its loop: "
                       "a line to every other member's process, a member's line to its "
                       "socket). " + _ERL_SHARED),
        "elixir": Cell([Piece("peers/elixir/lib/conn.ex", r"\s*def serve\(:broadcast\b",
                              what="serve(:broadcast, ...)"),
                        Piece("peers/elixir/lib/conn.ex", r"defmodule YardPeer\.Broadcast\b",
                              what="YardPeer.Broadcast")],
                       "In lib/conn.ex: the serve(:broadcast, ...) clause and the whole "
                       "YardPeer.Broadcast module (the room is a duplicate-key Registry, "
                       "Registry.dispatch sends a line to the other members' processes; the VM "
                       "cuts lines with packet: :line). Its start as a child of the "
                       "supervisor, one line in lib/yard_peer.ex, is not counted. "
                       + _EX_SHARED),
        "rust": Cell([Piece("peers/rust/src/apps.rs", r"pub const MAX_LINE\b", what="MAX_LINE"),
                      Piece("peers/rust/src/apps.rs", r"pub const MAX_QUEUED\b",
                            what="MAX_QUEUED"),
                      Piece("peers/rust/src/apps.rs", r"pub struct Lines\b", what="Lines"),
                      Piece("peers/rust/src/apps.rs", r"impl Lines\b", what="impl Lines"),
                      Piece("peers/rust/src/rt_tokio.rs", r"struct Room\b", what="Room"),
                      Piece("peers/rust/src/rt_tokio.rs", r"struct Member\b", what="Member"),
                      Piece("peers/rust/src/rt_tokio.rs", r"impl Room\b", what="impl Room"),
                      Piece("peers/rust/src/rt_tokio.rs", r"impl Member\b",
                            what="impl Member"),
                      Piece("peers/rust/src/rt_tokio.rs", r"async fn unless_killed\b",
                            what="unless_killed"),
                      Piece("peers/rust/src/rt_tokio.rs", r"async fn broadcast\b",
                            what="broadcast"),
                      Piece("peers/rust/src/rt_tokio.rs", r"async fn write_loop\b",
                            what="write_loop"),
                      Piece("peers/rust/src/rt_tokio.rs", r"async fn write_batch\b",
                            what="write_batch")],
                     "In src/apps.rs the two limits and Lines (a read's complete lines cut "
                     "into one Bytes shared by every recipient), in src/rt_tokio.rs the room "
                     "(a HashMap of members under an RwLock), a member (an unbounded channel "
                     "and an atomic count of its queued bytes), its reader task (broadcast) "
                     "and writer task (write_loop, write_batch: one writev for all queued). "
                     + _RS_SHARED),
    },
}


# --------------------------------------------------------------------------------------------
# Counting the table.

def _find(lines: list[str], head: str, path: str, start: int = 0) -> int:
    rx = re.compile(head)
    for k in range(start, len(lines)):
        if rx.match(lines[k]):
            return k
    raise LocError(f"{path}: no line starts with /{head}/ (was the definition renamed?)")


def locate(piece: Piece, lines: list[str], lang: str) -> tuple[int, int]:
    """The piece's first and last line (0-based, inclusive) in the masked lines."""
    if piece.head is None:
        return 0, len(lines) - 1
    s = _find(lines, piece.head, piece.path)
    anchor = _find(lines, piece.through, piece.path, s) if piece.through else s
    rx = re.compile(piece.through or piece.head)
    if lang in ("c", "go", "js", "rust"):
        e = _end_braces(lines, anchor, lang)
    elif lang == "erlang":
        e = _end_erlang(lines, anchor, rx)
    elif lang == "elixir":
        e = _end_elixir(lines, anchor, rx)
    else:
        e = _end_eve(lines, anchor, piece.block)
    # A head that matches again past its definition is ambiguous: say so rather than guess.
    for k in range(e + 1, len(lines)):
        if re.compile(piece.head).match(lines[k]):
            raise LocError(f"{piece.path}:{k + 1}: /{piece.head}/ matches again after "
                           f"lines {s + 1}-{e + 1}")
    return s, e


def _read(repo: Path, path: str, cache: dict) -> list[str]:
    if path not in cache:
        p = repo / path
        try:
            cache[path] = code_lines(p.read_text(encoding="utf-8", errors="replace"),
                                     language(path))
        except OSError as err:
            raise LocError(f"{path}: {err.strerror or err}") from None
    return cache[path]


def _count_pieces(repo: Path, pieces: list[Piece], cache: dict) -> tuple[set, list[dict]]:
    seen: set[tuple[str, int]] = set()
    files = []
    for p in pieces:
        lines = _read(repo, p.path, cache)
        s, e = locate(p, lines, language(p.path))
        mine = {(p.path, k) for k in range(s, e + 1) if lines[k].strip()}
        files.append({"path": p.path, "what": p.what or "whole file",
                      "lines": f"{s + 1}" if s == e else f"{s + 1}-{e + 1}",
                      "count": len(mine - seen)})
        seen |= mine
    return seen, files


def table(repo: Path = REPO) -> dict:
    """The counted table: {rule, columns, rows: [{app, title, cells: {column: cell}}]}; a
    cell has count (None for n/a), files (path, what, line range, lines counted), note, and
    where the table says so count_without and scale."""
    cache: dict = {}
    rows = []
    for app, title in ROWS:
        cells = {}
        for col, _ in COLUMNS:
            c = TABLE[app][col]
            out: dict = {"count": None, "files": [], "note": c.note}
            if c.na is None:
                seen, out["files"] = _count_pieces(repo, c.parts, cache)
                out["count"] = len(seen)
                if c.without:
                    minus, _ = _count_pieces(repo, c.without, cache)
                    out["count_without"] = len(seen - minus)
                    out["without"] = c.without_label
            else:
                out["na"] = c.na
            if c.scale:
                out["scale"] = [{"what": label, "count": len(_count_pieces(repo, ps, cache)[0]),
                                 "files": sorted({p.path for p in ps})} for label, ps in c.scale]
            cells[col] = out
        rows.append({"app": app, "title": title, "cells": cells})
    return {"rule": RULE, "commit": _commit(repo),
            "columns": [{"key": k, "title": t} for k, t in COLUMNS], "rows": rows}


def _commit(repo: Path) -> str | None:
    try:
        p = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, timeout=10)
        return p.stdout.strip() or None if p.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def cell_text(cell: dict) -> str:
    if cell["count"] is None:
        return "n/a"
    if "count_without" in cell:
        return f"{cell['count']} ({cell['count_without']})"
    return str(cell["count"])


def _at(f: dict) -> str:
    return ("lines " if "-" in f["lines"] else "line ") + f["lines"]


def _files_text(cell: dict) -> str:
    return "; ".join(f"{f['path']}" + ("" if f["what"] == "whole file" else
                                       f" {f['what']} ({_at(f)})") + f": {f['count']}"
                     for f in cell["files"])


def _scale_text(cell: dict) -> str:
    return " ".join(f"For scale: {s['what']}: {s['count']} lines." for s in cell.get("scale", []))


def text(t: dict) -> str:
    """The table as plain text: the grid, then each cell's files and note."""
    heads = ["", *(c["title"] for c in t["columns"])]
    grid = [heads] + [[r["title"], *(cell_text(r["cells"][c["key"]]) for c in t["columns"])]
                      for r in t["rows"]]
    widths = [max(len(row[i]) for row in grid) for i in range(len(heads))]
    out = [f"Lines of code: {t['rule']}",
           "Eve: whole programs; in brackets, " + _EVE_SCAFFOLD + " (which the other columns "
           "leave to shared code)." + (f" Sources at commit {t['commit']}." if t["commit"] else ""),
           ""]
    for i, row in enumerate(grid):
        out.append("  ".join(x.ljust(widths[k]) if k == 0 else x.rjust(widths[k])
                             for k, x in enumerate(row)).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    out.append("")
    for r in t["rows"]:
        for c in t["columns"]:
            cell = r["cells"][c["key"]]
            body = cell.get("na") if cell["count"] is None else \
                f"{_files_text(cell)}. {cell['note']}"
            extra = _scale_text(cell)
            out.append(f"- {r['title']}, {c['title']}: {body}" + (f" {extra}" if extra else ""))
    return "\n".join(out)


def html_section(repo: Path = REPO) -> str:
    """The report's "Lines of code" section."""
    import html as h
    try:
        t = table(repo)
    except LocError as err:
        return ("<section><h2>Lines of code</h2><p class='warn'>Could not be counted here: "
                f"{h.escape(str(err))}.</p></section>")
    head = "".join(f"<th>{h.escape(c['title'])}</th>" for c in t["columns"])
    body = "".join(
        f"<tr><td>{h.escape(r['title'])}</td>" + "".join(
            f"<td>{h.escape(cell_text(r['cells'][c['key']]))}</td>" for c in t["columns"])
        + "</tr>" for r in t["rows"])
    notes = []
    for r in t["rows"]:
        for c in t["columns"]:
            cell = r["cells"][c["key"]]
            if cell["count"] is None:
                what = h.escape(cell["na"])
            else:
                what = ("; ".join(
                    f"<code>{h.escape(f['path'])}</code>"
                    + ("" if f["what"] == "whole file" else
                       f" {h.escape(f['what'])} ({_at(f)})") + f": {f['count']}"
                    for f in cell["files"]) + ". " + h.escape(cell["note"]))
            extra = _scale_text(cell)
            notes.append(f"<li><b>{h.escape(r['title'])}, {h.escape(c['title'])}</b>: {what}"
                         + (f" {h.escape(extra)}" if extra else "") + "</li>")
    commit = f" Sources at commit <code>{h.escape(t['commit'])}</code>, counted when this " \
             "report was written." if t["commit"] else ""
    return ("<section><h2>Lines of code</h2>"
            "<p>The Eve study's measure of how hard a program is to write, for the same three "
            f"programs in each language. Counted: {h.escape(t['rule'])} Eve's programs are "
            "whole programs; in brackets, the same " + h.escape(_EVE_SCAFFOLD) + ", which the "
            "other columns leave to code they share (yard-serve's engine, the peers' "
            f"launchers). Printed by <code>yard loc</code>.{commit}</p>"
            f"<table><tr><th>program</th>{head}</tr>{body}</table>"
            "<h4>What each cell counts</h4><ul>" + "".join(notes) + "</ul></section>")
