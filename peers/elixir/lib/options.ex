defmodule YardPeer.Options do
  @moduledoc "The launcher's flags (peers/elixir/USAGE); a bad one exits 2 naming it."

  defstruct app: nil, host: nil, port: nil, out: "/dev/null", flush: :each,
            bcrypt_cost: 10, longpoll_ms: 5000

  @apps ~w(echo counter sink rest broadcast)

  def parse(argv), do: parse(argv, %__MODULE__{})

  defp parse([], %{app: nil}),
    do: usage("--app is required: echo, counter, sink, rest or broadcast")
  defp parse([], %{host: nil}), do: usage("--listen is required, as HOST:PORT")
  defp parse([], o), do: o

  defp parse(["--app", a | t], o) when a in @apps, do: parse(t, %{o | app: String.to_atom(a)})
  defp parse(["--app", a | _], _),
    do: usage("--app #{inspect(a)}: expected echo, counter, sink, rest or broadcast")

  defp parse(["--listen", l | t], o) do
    {host, port} = listen(l)
    parse(t, %{o | host: host, port: port})
  end

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

  defp listen(l) do
    case Regex.run(~r/^\[([^\]]+)\]:([0-9]+)$/, l) || Regex.run(~r/^([^:\[\]]+):([0-9]+)$/, l) do
      [_, h, p] ->
        port = String.to_integer(p)
        if port > 65535, do: usage("--listen #{inspect(l)}: port must be 0..65535")
        {addr(l, h), port}

      nil ->
        usage("--listen #{inspect(l)}: expected HOST:PORT (IPv6 as [::1]:PORT)")
    end
  end

  defp addr(l, h) do
    with {:error, _} <- :inet.parse_address(String.to_charlist(h)),
         {:error, e} <- :inet.getaddr(String.to_charlist(h), :inet) do
      IO.puts(:stderr, "yard-peer-elixir: --listen #{l}: #{inspect(e)}")
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
