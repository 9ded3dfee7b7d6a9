defmodule YardPeer.JSON do
  @moduledoc """
  A JSON parser (RFC 8259): Elixir 1.14 has no JSON module and no package
  registry is reachable. Objects decode to `{:object, [{key, value}]}` in
  order (so duplicate keys can be refused), strings to UTF-8 binaries with
  escapes decoded, numbers to their text.
  """

  def decode(text) do
    {value, rest} = value(ws(text))

    case ws(rest) do
      "" -> {:ok, value}
      _ -> :error
    end
  catch
    :bad -> :error
  end

  defp ws(<<c, t::binary>>) when c in ~c" \t\n\r", do: ws(t)
  defp ws(b), do: b

  defp value("{" <> t), do: object(ws(t), [])
  defp value("[" <> t), do: array(ws(t), [])
  defp value("\"" <> t), do: string(t, [])
  defp value("true" <> t), do: {true, t}
  defp value("false" <> t), do: {false, t}
  defp value("null" <> t), do: {nil, t}

  defp value(<<c, _::binary>> = b) when c == ?- or c in ?0..?9 do
    rest = number(b)
    {{:number, binary_part(b, 0, byte_size(b) - byte_size(rest))}, rest}
  end

  defp value(_), do: throw(:bad)

  defp object("}" <> t, []), do: {{:object, []}, t}

  defp object("\"" <> t, acc) do
    {k, r} = string(t, [])

    case ws(r) do
      ":" <> r ->
        {v, r} = value(ws(r))

        case ws(r) do
          "," <> r -> object(ws(r), [{k, v} | acc])
          "}" <> r -> {{:object, Enum.reverse([{k, v} | acc])}, r}
          _ -> throw(:bad)
        end

      _ ->
        throw(:bad)
    end
  end

  defp object(_, _), do: throw(:bad)

  defp array("]" <> t, []), do: {[], t}

  defp array(b, acc) do
    {v, r} = value(b)

    case ws(r) do
      "," <> r -> array(ws(r), [v | acc])
      "]" <> r -> {Enum.reverse([v | acc]), r}
      _ -> throw(:bad)
    end
  end

  defp string("\"" <> t, acc), do: {IO.iodata_to_binary(Enum.reverse(acc)), t}

  defp string(<<"\\u", h::binary-size(4), t::binary>>, acc) do
    case hex(h) do
      hi when hi in 0xD800..0xDBFF ->
        case t do
          <<"\\u", l::binary-size(4), t::binary>> ->
            lo = hex(l)
            unless lo in 0xDC00..0xDFFF, do: throw(:bad)
            cp = 0x10000 + Bitwise.bsl(hi - 0xD800, 10) + (lo - 0xDC00)
            string(t, [<<cp::utf8>> | acc])

          _ ->
            throw(:bad)
        end

      lo when lo in 0xDC00..0xDFFF ->
        throw(:bad)

      cp ->
        string(t, [<<cp::utf8>> | acc])
    end
  end

  defp string(<<"\\", c, t::binary>>, acc) do
    ch =
      case c do
        ?" -> ?"
        ?\\ -> ?\\
        ?/ -> ?/
        ?b -> ?\b
        ?f -> ?\f
        ?n -> ?\n
        ?r -> ?\r
        ?t -> ?\t
        _ -> throw(:bad)
      end

    string(t, [ch | acc])
  end

  defp string(<<c, _::binary>>, _) when c < 0x20, do: throw(:bad)
  defp string(<<c, t::binary>>, acc), do: string(t, [c | acc])
  defp string(<<>>, _), do: throw(:bad)

  defp hex(h) do
    if h =~ ~r/^[0-9a-fA-F]{4}$/, do: String.to_integer(h, 16), else: throw(:bad)
  end

  defp number(b) do
    b1 = case b do
      "-" <> r -> r
      _ -> b
    end

    b2 = case b1 do
      "0" <> r -> r
      <<c, _::binary>> when c in ?1..?9 -> digits(b1)
      _ -> throw(:bad)
    end

    b3 = case b2 do
      "." <> r -> digits1(r)
      _ -> b2
    end

    case b3 do
      <<e, r::binary>> when e in ~c"eE" ->
        digits1(case r do
          <<s, r2::binary>> when s in ~c"+-" -> r2
          _ -> r
        end)

      _ ->
        b3
    end
  end

  defp digits1(<<c, _::binary>> = b) when c in ?0..?9, do: digits(b)
  defp digits1(_), do: throw(:bad)

  defp digits(<<c, t::binary>>) when c in ?0..?9, do: digits(t)
  defp digits(b), do: b
end
