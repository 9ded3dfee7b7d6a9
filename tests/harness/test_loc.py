"""The lines-of-code table (issue 23): each language's counter on tricky inputs (comment
markers inside literals, block comments over several lines, code followed by a comment, lines
of spaces), the definitions it delimits, the real table, `yard loc` and the report's section."""

import json
from pathlib import Path

import pytest

import harness_paths  # noqa: F401
from harness_paths import REPO
from yard import cli, loc
from yard.report import write_report


def test_c():
    src = "\n".join([
        '#include "a.h"  // a comment after code counts',
        "   ",                                  # spaces only
        "/* a block comment",
        "   over // three lines",
        "   ends here */",
        'const char *s = "/* not a comment */ // nor this";',
        "char c = '\"'; /* a quote in a char */ int x;",
        "char d = '/'; char e = '\\''; // escaped quote",
        "int y; /* opens",
        "closes */ int z;",
        "/* whole line */",
        "// a line comment \\",
        "   continued by its backslash",
        'const char *t = "a \\" b // c";',
        "",
    ])
    assert loc.count(src, "c") == 7


def test_go():
    src = "\n".join([
        "package main // the package",
        "",
        "import \"fmt\"",
        "/*",
        "func hidden() {}",
        "*/",
        "var raw = `a raw string",
        "// this line is in the raw string",
        "",
        "/* so is this */`",
        "var r = '\"' // a rune",
        "var s = \"// not a comment\"",
        "\t\t",
        "// a comment \\",
        "func f() {}",  # no backslash continuation in Go
    ])
    # package, import, 3 lines of the raw string (its empty line is blank), r, s, func
    assert loc.count(src, "go") == 8


def test_javascript():
    src = "\n".join([
        "#!/usr/bin/env node",
        "'use strict'; // counts",
        "const a = 'it''s'; const b = \"/* no */\";",
        "const re = /\\/\\*[/*]+/g; // a regex with comment markers",
        "const half = a / 2; const q = b / 3; // division, not regex",
        "const t = `line one // in a template",
        "${ /* a comment in the substitution */ a }",
        "/* still template text */ ${`nested ${b}`} end`;",
        "/* a block",
        "   comment */",
        "x = y; /* trailing */",
        "    ",
        "if (ok) return /[}]/.test(s);",
        "",
    ])
    # not the #! line, not the block comment lines, not the blank ones
    assert loc.count(src, "js") == 9


def test_javascript_template_substitution_keeps_code():
    # The substitution's comment is removed but its code stays; a line with only the comment
    # inside a multi-line substitution does not count.
    src = "const s = `a ${\n  // only a comment\n  x\n} b`;\n"
    assert loc.count(src, "js") == 3


def test_erlang():
    src = "\n".join([
        "%% a module comment",
        "-module(m). % trailing",
        'f() -> "100% sure".',
        "g() -> $%.",
        "h() -> $\\%.  % escaped char, then a comment",
        "i() -> '50%'.",
        "j() -> \"a string",
        "% inside the string",
        "\".",
        "   ",
        "%%% only a comment",
        'k() -> [$", ok]. % a quote as a character',
        "",
    ])
    assert loc.count(src, "erlang") == 9


def test_elixir():
    src = "\n".join([
        "defmodule M do",
        '  @moduledoc """',
        "  Documentation: not counted.",
        "  # not a comment either, but still documentation",
        '  """',
        '  @doc "one line of doc"',
        "  @doc false",
        '  def f, do: "# not a comment" # a comment',
        "  def g, do: ?#",
        '  def h(x), do: "#{x # a comment in the interpolation',
        '  } # and after"',
        "  def i, do: ~r/#[a-z]+/",
        "  def j, do: ~S(no #{interp} #here)",
        "  def k, do: :\"atom # with a hash\"",
        "  def l(x), do: x  ",
        "  # a comment",
        '  @x """',
        "  a heredoc that is not a doc: counted",
        '  """',
        "end",
        "",
    ])
    # defmodule, f, g, h (2 lines), i, j, k, l, the @x heredoc (3), end
    assert loc.count(src, "elixir") == 13


def test_eve():
    src = "\n".join([
        "# a comment",
        'x : string = "# not a comment"  # a comment',
        "c : char = '#'",
        "d : char = '\\''  # an escaped quote",
        "    ",
        "f: (n: int) int:",
        "    # an indented comment",
        '    return n  # "quoted" in a comment',
        "",
    ])
    # x, c, d, f, return
    assert loc.count(src, "eve") == 5


def test_language_by_extension():
    assert loc.language("a/b.erl") == "erlang" and loc.language("x.ex") == "elixir"
    with pytest.raises(ValueError):
        loc.language("x.py")


def _span(text: str, lang: str, head: str, **kw) -> tuple[int, int]:
    lines = loc.code_lines(text, lang)
    s, e = loc.locate(loc.Piece("t", head, **kw), lines, lang)
    return s + 1, e + 1


def test_delimiting_definitions():
    c = "int a;\nstatic int f(int x,\n             int y)\n{\n    return '}';  /* } */\n}\nint b;\n"
    assert _span(c, "c", r"static int f\(") == (2, 6)
    assert _span("#define A \\\n  1\nint x;\n", "c", r"#define A\b") == (1, 2)
    js = "const A = 1;\nfunction f(s) {\n  const t = `}${'{'}`;\n  return /}/;\n}\nf();\n"
    assert _span(js, "js", r"const A\b") == (1, 1)
    assert _span(js, "js", r"function f\(") == (2, 5)
    erl = "\n".join([
        "h(a, _) -> fun a/1;",
        "h(b, _) ->",
        "    spawn(fun() -> x end),",
        "    fun b/1;",
        "h(c, _) -> c.",
        "f(X) when X > 1; X < -1 ->",
        "    case X of 2 -> two; _ -> \"other.\" end;",
        "f(_) -> 1.0.",
        "g() -> ok.",
    ])
    assert _span(erl, "erlang", r"h\(b\b") == (2, 4)
    assert _span(erl, "erlang", r"f\(") == (6, 8)
    ex = "\n".join([
        "  def a, do: 1",
        "  defp b(x) do",
        "    Enum.map(x, fn y -> y end)",
        "  end",
        "",
        "  defp b(_), do: :end",
        "  def c, do: 3",
    ])
    assert _span(ex, "elixir", r"\s*defp b\(") == (2, 6)
    assert _span(ex, "elixir", r"\s*def a\b") == (1, 1)
    eve = "x : int = 1\nif x > 0:\n    # a comment\n    x = 2\n\n    x = 3\ny : int = (1 +\n  2)\n"
    assert _span(eve, "eve", r"if x") == (2, 6)
    assert _span(eve, "eve", r"y :", block=False) == (7, 8)


def test_a_missing_or_ambiguous_head_is_an_error():
    with pytest.raises(loc.LocError, match="no line starts"):
        _span("int a;\n", "c", r"int b\b")
    with pytest.raises(loc.LocError, match="matches again"):
        _span("int a;\nint b;\nint a;\n", "c", r"int a\b")


def test_the_real_table():
    t = loc.table(REPO)
    assert [r["app"] for r in t["rows"]] == ["echo", "counter", "chat"]
    assert [c["key"] for c in t["columns"]] == ["eve", "c", "go", "node", "erlang", "elixir",
                                                "rust"]
    for r in t["rows"]:
        for key, cell in r["cells"].items():
            spec = loc.TABLE[r["app"]][key]
            if spec.na:
                assert cell["count"] is None and cell["na"].startswith("n/a")
            else:
                assert cell["count"] > 0 and cell["note"], (r["app"], key)
                assert sum(f["count"] for f in cell["files"]) == cell["count"]
            pieces = spec.parts + spec.without + [p for _, ps in spec.scale for p in ps]
            for p in pieces:
                assert (REPO / p.path).is_file(), p.path
    cells = {r["app"]: r["cells"] for r in t["rows"]}
    # The Eve programs are whole programs; without the scaffolding they are smaller.
    for app in ("echo", "counter", "chat"):
        e = cells[app]["eve"]
        assert 0 < e["count_without"] < e["count"]
    # No C app is a broadcast chat; every peer has one (--app broadcast), counted like its
    # echo and counter: Go's own file whole, the others' definitions.
    assert cells["chat"]["c"]["count"] is None
    for k in ("go", "node", "erlang", "elixir", "rust"):
        assert cells["chat"][k]["count"] > 0, k
    assert [f["path"] for f in cells["chat"]["go"]["files"]] == ["peers/go/broadcast.go"]
    assert cells["chat"]["go"]["files"][0]["what"] == "whole file"
    for k, path in (("node", "peers/node/lib/apps.js"),
                    ("erlang", "peers/erlang/src/yard_peer.erl"),
                    ("elixir", "peers/elixir/lib/conn.ex")):
        assert {f["path"] for f in cells["chat"][k]["files"]} == {path}, k
        assert all(f["what"] != "whole file" for f in cells["chat"][k]["files"]), k
    assert [s["count"] > 0 for s in cells["chat"]["c"]["scale"]] == [True, True]


def test_yard_loc_text_and_json(capsys):
    assert cli.main(["loc"]) == 0
    out = capsys.readouterr().out
    assert "broadcast chat" in out and "Elixir peer" in out and "n/a" in out
    assert cli.main(["loc", "--json"]) == 0
    t = json.loads(capsys.readouterr().out)
    assert t["rows"][0]["cells"]["go"]["files"][0]["path"] == "peers/go/echo.go"


def test_report_has_the_section(tmp_path: Path):
    out = tmp_path / "r"
    (out / "raw").mkdir(parents=True)
    p = write_report(out, {"suite": "smoke", "started": "now", "experiments": []})
    html = p.read_text()
    assert "<h2>Lines of code</h2>" in html
    assert "examples/eve/chat.eve" in html and "broadcast chat" in html
    assert "non-blank, non-comment" in html


def test_rust_lexer():
    """Rust: nested block comments, raw strings that hold quotes and comment markers, and
    lifetimes that are not character literals."""
    src = ("fn f<'a>(x: &'a str) -> char { // a comment\n"
           "    /* outer /* inner */ still comment */\n"
           "    let s = r#\"a \"b\" // not a comment\"#;\n"
           "    let c = '\\n'; let d = '/'; let e = b'\"';\n"
           "    let m = \"two\n lines\";\n"
           "}\n")
    masked = loc.code_lines(src, "rust")
    assert masked[0].rstrip() == "fn f<'a>(x: &'a str) -> char {"
    assert masked[1].strip() == ""
    assert "//" not in masked[2] and masked[2].rstrip().endswith(";")
    assert masked[3].count(";") == 3 and "'a" not in masked[3]
    assert loc.count(src, "rust") == 6
    assert _span(src, "rust", r"fn f\b") == (1, 7)
