defmodule YardPeer.Options do
  @moduledoc "The launcher's flags (peers/elixir/USAGE); a bad one exits 2 naming it."

  defstruct app: nil, host: nil, port: nil, out: "/dev/null", flush: :each,
            bcrypt_cost: 10, longpoll_ms: 5000, tls_listen: [], tls_cert: nil, tls_key: nil

  @apps ~w(echo counter sink rest broadcast)

  def parse(argv), do: parse(argv, %__MODULE__{})

  defp parse([], %{app: nil}),
    do: usage("--app is required: echo, counter, sink, rest or broadcast")
  defp parse([], %{tls_listen: [], tls_cert: c, tls_key: k}) when c != nil or k != nil,
    do: usage("--tls-cert and --tls-key apply to TLS listeners: add --tls-listen HOST:PORT")
  defp parse([], %{tls_listen: [_ | _], tls_cert: c, tls_key: k}) when c == nil or k == nil,
    do: usage("--tls-listen needs --tls-cert FILE and --tls-key FILE")
  defp parse([], %{host: nil, tls_listen: []}), do: usage("--listen is required, as HOST:PORT")
  defp parse([], o), do: o

  defp parse(["--app", a | t], o) when a in @apps, do: parse(t, %{o | app: String.to_atom(a)})
  defp parse(["--app", a | _], _),
    do: usage("--app #{inspect(a)}: expected echo, counter, sink, rest or broadcast")

  defp parse(["--listen", l | t], o) do
    {host, port} = listen("--listen", l)
    parse(t, %{o | host: host, port: port})
  end

  defp parse(["--tls-listen", l | t], o),
    do: parse(t, %{o | tls_listen: o.tls_listen ++ [listen("--tls-listen", l)]})

  defp parse(["--tls-cert", f | t], o), do: parse(t, %{o | tls_cert: f})
  defp parse(["--tls-key", f | t], o), do: parse(t, %{o | tls_key: f})

  defp parse(["--out", p | t], o), do: parse(t, %{o | out: p})
  defp parse(["--flush", "each" | t], o), do: parse(t, %{o | flush: :each})
  defp parse(["--flush", "buffered" | t], o), do: parse(t, %{o | flush: :buffered})
  defp parse(["--flush", f | _], _), do: usage("--flush #{inspect(f)}: expected each or buffered")
  # The launcher turns these into +S before the VM starts; here they are only checked.
  defp parse([f, n | t], o) when f in ["--schedulers", "--cluster"] do
    int(f, n, 1, 1024)
    parse(t, o)
  end

  defp parse(["--bcrypt-cost", n | t], o),
    do: parse(t, %{o | bcrypt_cost: int("--bcrypt-cost", n, 4, 31)})

  defp parse(["--longpoll-ms", n | t], o),
    do: parse(t, %{o | longpoll_ms: int("--longpoll-ms", n, 0, 2_147_483_647)})

  defp parse([f | _], _), do: usage("unknown flag or missing value: #{f} (see peers/elixir/run --help)")

  defp int(flag, s, min, max) do
    case Integer.parse(s) do
      {n, ""} when n >= min and n <= max -> n
      _ -> usage("#{flag} #{inspect(s)}: expected an integer #{min}..#{max}")
    end
  end

  defp listen(flag, l) do
    case Regex.run(~r/^\[([^\]]+)\]:([0-9]+)$/, l) || Regex.run(~r/^([^:\[\]]+):([0-9]+)$/, l) do
      [_, h, p] ->
        port = String.to_integer(p)
        if port > 65535, do: usage("#{flag} #{inspect(l)}: port must be 0..65535")
        {addr(flag, l, h), port}

      nil ->
        usage("#{flag} #{inspect(l)}: expected HOST:PORT (IPv6 as [::1]:PORT)")
    end
  end

  defp addr(flag, l, h) do
    with {:error, _} <- :inet.parse_address(String.to_charlist(h)),
         {:error, e} <- :inet.getaddr(String.to_charlist(h), :inet) do
      IO.puts(:stderr, "yard-peer-elixir: #{flag} #{l}: #{inspect(e)}")
      System.halt(1)
    else
      {:ok, ip} -> ip
    end
  end

  defp usage(msg) do
    IO.puts(:stderr, "yard-peer-elixir: " <> msg)
    System.halt(2)
  end
end
