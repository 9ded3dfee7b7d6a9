defmodule YardPeer.Conn do
  @moduledoc """
  The byte protocols, one process per connection: echo, counter, sink and
  the broadcast chat.
  The REST app's connections are `YardPeer.Rest`.
  """

  @sink_buffer 65536

  def serve(:echo, sock, _), do: echo(sock)
  def serve(:counter, sock, _), do: YardPeer.Counter.serve(sock)
  def serve(:broadcast, sock, _), do: YardPeer.Broadcast.serve(sock)
  def serve(:rest, sock, opts), do: YardPeer.Rest.serve(sock, opts)

  def serve(:sink, sock, opts) do
    {:ok, f} = :file.open(opts.out, [:append, :raw, :binary])
    sink(sock, f, opts.flush, [], 0)
  end

  # Passive receive: the process sleeps in recv, the bytes go straight back.
  defp echo(sock) do
    case YardPeer.Sock.recv(sock, 0) do
      {:ok, data} ->
        YardPeer.Sock.send(sock, data)
        echo(sock)

      {:error, _} ->
        YardPeer.Sock.close(sock)
    end
  end

  @doc "Truncates --out once; each connection then opens it for appending."
  def setup_sink(opts) do
    {:ok, f} = :file.open(opts.out, [:write, :raw])
    :ok = :file.close(f)
  end

  # {active, once}: one message at a time, so the mailbox never outruns the
  # file, and :drain (shutdown) can arrive between chunks.
  defp sink(sock, f, flush, buf, len) do
    YardPeer.Sock.setopts(sock, active: :once)

    receive do
      {tag, ^sock, data} when tag in [:tcp, :ssl] ->
        {buf, len} = chunk(f, flush, buf, len, data)
        sink(sock, f, flush, buf, len)

      :drain ->
        drain(sock, f, flush, buf, len)

      {closed, ^sock} when closed in [:tcp_closed, :ssl_closed] ->
        finish(sock, f, buf)

      {error, ^sock, _} when error in [:tcp_error, :ssl_error] ->
        finish(sock, f, buf)
    end
  end

  defp chunk(f, :each, buf, len, data) do
    :ok = :file.write(f, data)
    {buf, len}
  end

  # A chunk never straddles two writes: flush first when it does not fit.
  defp chunk(f, :buffered, buf, len, data) do
    size = byte_size(data)

    if len + size > @sink_buffer do
      :ok = write_buf(f, buf)
      {[data], size}
    else
      {[data | buf], len + size}
    end
  end

  # Shutdown: take what is already queued, without waiting, then flush.
  defp drain(sock, f, flush, buf, len) do
    receive do
      {tag, ^sock, data} when tag in [:tcp, :ssl] ->
        {buf, len} = chunk(f, flush, buf, len, data)
        drain(sock, f, flush, buf, len)
    after
      0 ->
        YardPeer.Sock.setopts(sock, active: false)

        case YardPeer.Sock.recv(sock, 0, 0) do
          {:ok, data} ->
            {buf, len} = chunk(f, flush, buf, len, data)
            drain(sock, f, flush, buf, len)

          _ ->
            finish(sock, f, buf)
        end
    end
  end

  defp finish(sock, f, buf) do
    :ok = write_buf(f, buf)
    :ok = :file.close(f)
    YardPeer.Sock.close(sock)
  end

  defp write_buf(_, []), do: :ok
  defp write_buf(f, buf), do: :file.write(f, Enum.reverse(buf))
end

defmodule YardPeer.Counter do
  @moduledoc """
  The Eve study's shared counter in one `:atomics` cell: every connection
  process adds a pipelined batch's increments with one `add_get` and
  derives each reply from the value before them, so no process serialises
  the others.
  """

  def setup, do: :persistent_term.put(__MODULE__, :atomics.new(1, signed: false))

  def serve(sock) do
    ref = :persistent_term.get(__MODULE__)
    loop(sock, ref)
  end

  defp loop(sock, ref) do
    case YardPeer.Sock.recv(sock, 0) do
      {:ok, data} ->
        {ops, bad?} = valid_prefix(data, 0)
        incs = count_incs(ops, 0)
        base = :atomics.add_get(ref, 1, incs) - incs
        YardPeer.Sock.send(sock, replies(ops, base, []))
        if bad?, do: YardPeer.Sock.close(sock), else: loop(sock, ref)

      {:error, _} ->
        YardPeer.Sock.close(sock)
    end
  end

  # Requests are 0 (read) and 1 (increment); anything else ends the
  # connection after the valid bytes before it are answered.
  defp valid_prefix(data, i) when i < byte_size(data) do
    case :binary.at(data, i) do
      b when b <= 1 -> valid_prefix(data, i + 1)
      _ -> {binary_part(data, 0, i), true}
    end
  end

  defp valid_prefix(data, _), do: {data, false}

  defp count_incs(<<>>, n), do: n
  defp count_incs(<<1, t::binary>>, n), do: count_incs(t, n + 1)
  defp count_incs(<<_, t::binary>>, n), do: count_incs(t, n)

  defp replies(<<>>, _, acc), do: Enum.reverse(acc)
  defp replies(<<1, t::binary>>, v, acc), do: replies(t, v + 1, [<<v + 1::64>> | acc])
  defp replies(<<_, t::binary>>, v, acc), do: replies(t, v, [<<v::64>> | acc])
end

defmodule YardPeer.Broadcast do
  @moduledoc """
  The broadcast chat: every line a client sends goes, unchanged, to every
  other client, in the order it was sent. The room is a `Registry` with
  duplicate keys; a connection process registers under `:room` (the registry
  forgets it when it exits) and sends each of its client's lines to the other
  members' processes with `Registry.dispatch/3`, each of which writes it to
  its own socket.

  The VM cuts the bytes into lines (`packet: :line`) up to `@max_line` bytes,
  the `\\n` included; a longer line arrives cut, without its `\\n`, and ends
  the connection. A send never waits (`send_timeout: 0`): once more than
  `@max_queued` bytes wait in a socket's queue it fails and closes the socket
  (the client is not reading). A setopts on a socket that just closed fails
  harmlessly: its `:tcp_closed` is on its way.
  """

  @max_line 65536
  @max_queued 1_048_576

  def room,
    do: {Registry, keys: :duplicate, name: __MODULE__, partitions: System.schedulers_online()}

  def serve(sock) do
    {:ok, _} = Registry.register(__MODULE__, :room, nil)

    YardPeer.Sock.setopts(sock,
      packet: :line,
      packet_size: @max_line,
      high_watermark: @max_queued,
      low_watermark: div(@max_queued, 2),
      send_timeout: 0,
      send_timeout_close: true,
      active: :once
    )

    loop(sock)
  end

  defp loop(sock) do
    receive do
      {tag, ^sock, line} when tag in [:tcp, :ssl] ->
        if :binary.last(line) == ?\n do
          me = self()

          Registry.dispatch(__MODULE__, :room, fn members ->
            for {pid, _} <- members, pid != me, do: send(pid, {:line, line})
          end)

          YardPeer.Sock.setopts(sock, active: :once)
          loop(sock)
        else
          YardPeer.Sock.close(sock)
        end

      {:line, line} ->
        case YardPeer.Sock.send(sock, line) do
          :ok -> loop(sock)
          {:error, _} -> YardPeer.Sock.close(sock)
        end

      {closed, ^sock} when closed in [:tcp_closed, :ssl_closed] ->
        :ok

      {error, ^sock, _} when error in [:tcp_error, :ssl_error] ->
        YardPeer.Sock.close(sock)
    end
  end
end
