defmodule YardPeer do
  @moduledoc """
  Switchyard's Elixir reference server: echo, counter, sink, the broadcast
  chat and the REST study's service, with only what ships with Elixir and
  OTP. Started by peers/elixir/run; see docs/peers.md.

  One supervisor owns a `Task.Supervisor` for the connections and a pool of
  acceptor tasks. An acceptor hands each socket to a fresh connection process
  (`Task.Supervisor.start_child/2`, then `:gen_tcp.controlling_process/2`).
  """

  alias YardPeer.{Acceptor, Conn, Options}

  @drain_ms 150

  def main(argv) do
    opts = Options.parse(argv)

    # SIGTERM: stop accepting, let sinks drain and flush, exit 0.
    :ok =
      :gen_event.swap_handler(
        :erl_signal_server,
        {:erl_signal_handler, []},
        {YardPeer.Signal, self()}
      )

    :os.set_signal(:sigterm, :handle)
    # SIGHUP reloads the TLS certificate (YardPeer.TLS.reload/0).
    :os.set_signal(:sighup, :handle)

    if opts.app == :rest, do: YardPeer.Rest.setup(opts)
    if opts.app == :counter, do: YardPeer.Counter.setup()
    if opts.app == :sink, do: Conn.setup_sink(opts)

    # --listen first, then each --tls-listen: the listening line's order.
    plain = if opts.host, do: [{opts.host, opts.port, :plain}], else: []

    tls =
      if opts.tls_listen == [] do
        []
      else
        ssl = YardPeer.TLS.server_opts(opts.tls_cert, opts.tls_key)
        for {host, port} <- opts.tls_listen, do: {host, port, {:tls, ssl}}
      end

    lss = for {host, port, kind} <- plain ++ tls, do: {host, listen(host, port, kind, opts), kind}

    acceptors = max(4, System.schedulers_online())

    room = if opts.app == :broadcast, do: [YardPeer.Broadcast.room()], else: []

    children =
      [{Task.Supervisor, name: YardPeer.Conns}] ++
        room ++
        for {{_, ls, _}, n} <- Enum.with_index(lss), i <- 1..acceptors do
          Supervisor.child_spec({Acceptor, {ls, opts}}, id: {Acceptor, n, i})
        end

    {:ok, _} = Supervisor.start_link(children, strategy: :one_for_one, name: YardPeer.Sup)

    words =
      for {host, ls, kind} <- lss do
        {:ok, port} = YardPeer.Sock.port(ls)
        if(kind == :plain, do: "", else: "tls:") <> format_addr(host, port)
      end

    IO.puts("listening " <> Enum.join(words, " "))

    receive do
      :shutdown -> shutdown(opts.app, for({_, ls, _} <- lss, do: ls))
    end
  end

  defp listen(host, port, kind, opts) do
    family = if tuple_size(host) == 8, do: :inet6, else: :inet
    # REST: the socket parses HTTP heads itself ({packet, http_bin}); the
    # connection switches to raw for bodies and back.
    packet = if opts.app == :rest, do: [packet: :http_bin, packet_size: 8192], else: []

    tcp_opts =
      [:binary, family, ip: host, active: false, reuseaddr: true, nodelay: true,
       backlog: 1024, buffer: 65536] ++ packet

    result =
      case kind do
        :plain -> :gen_tcp.listen(port, tcp_opts)
        {:tls, ssl_opts} -> :ssl.listen(port, tcp_opts ++ ssl_opts)
      end

    case result do
      {:ok, ls} ->
        ls

      {:error, e} ->
        IO.puts(:stderr, "yard-peer-elixir: listen: #{inspect(e)}")
        System.halt(1)
    end
  end

  defp format_addr(ip, port) when tuple_size(ip) == 8, do: "[#{:inet.ntoa(ip)}]:#{port}"
  defp format_addr(ip, port), do: "#{:inet.ntoa(ip)}:#{port}"

  defp shutdown(:sink, lss) do
    Enum.each(lss, &YardPeer.Sock.close/1)
    # Bytes already sent get @drain_ms to arrive; then every connection
    # takes what is queued, flushes and exits.
    Process.sleep(@drain_ms)
    conns = Task.Supervisor.children(YardPeer.Conns)
    refs = for pid <- conns, do: (send(pid, :drain); Process.monitor(pid))
    deadline = System.monotonic_time(:millisecond) + 2000

    for ref <- refs do
      receive do
        {:DOWN, ^ref, :process, _, _} -> :ok
      after
        max(0, deadline - System.monotonic_time(:millisecond)) -> :ok
      end
    end

    System.halt(0)
  end

  defp shutdown(_, _), do: System.halt(0)
end

defmodule YardPeer.Signal do
  @moduledoc """
  Replaces OTP's default signal handler: SIGTERM tells the main process to
  stop; SIGHUP reloads the TLS certificate and key (nothing without TLS).
  """
  @behaviour :gen_event

  @impl true
  def init({main, _}) when is_pid(main), do: {:ok, main}
  def init(main), do: {:ok, main}

  @impl true
  def handle_event(sig, main) when sig in [:sigterm, :sigint] do
    send(main, :shutdown)
    {:ok, main}
  end

  def handle_event(:sighup, main) do
    YardPeer.TLS.reload()
    {:ok, main}
  end

  def handle_event(_, main), do: {:ok, main}

  @impl true
  def handle_call(_, main), do: {:ok, :ok, main}

  @impl true
  def handle_info(_, main), do: {:ok, main}
end

defmodule YardPeer.Acceptor do
  @moduledoc """
  One of the acceptor pool: accepts, starts the connection's process under
  `YardPeer.Conns` and gives it the socket. Transient: a closed listener
  ends it normally (shutdown); any other failure restarts it.
  """
  use Task, restart: :transient

  def start_link({ls, opts}), do: Task.start_link(__MODULE__, :loop, [ls, opts])

  def loop(ls, opts) when not is_port(ls), do: tls_loop(ls, opts)

  def loop(ls, opts) do
    case :gen_tcp.accept(ls) do
      {:ok, sock} ->
        {:ok, pid} =
          Task.Supervisor.start_child(YardPeer.Conns, fn ->
            receive do
              {:socket, ^sock} -> YardPeer.Conn.serve(opts.app, sock, opts)
            end
          end)

        case :gen_tcp.controlling_process(sock, pid) do
          :ok -> send(pid, {:socket, sock})
          {:error, _} -> Process.exit(pid, :kill) && :gen_tcp.close(sock)
        end

        loop(ls, opts)

      {:error, :closed} ->
        :ok

      {:error, reason} when reason in [:emfile, :enfile, :econnaborted] ->
        Process.sleep(10)
        loop(ls, opts)
    end
  end

  # TLS: the handshake (bounded, as yard-serve's default
  # --tls-handshake-timeout) runs in the connection's process, so a slow or
  # broken one holds up neither the acceptor nor anyone else.
  defp tls_loop(ls, opts) do
    case :ssl.transport_accept(ls) do
      {:ok, t} ->
        {:ok, pid} =
          Task.Supervisor.start_child(YardPeer.Conns, fn ->
            receive do
              {:socket, ^t} ->
                # The pair SIGHUP loaded last, over the listen options.
                case :ssl.handshake(t, YardPeer.TLS.pair(), YardPeer.TLS.handshake_ms()) do
                  {:ok, sock} -> YardPeer.Conn.serve(opts.app, sock, opts)
                  {:error, _} -> :ok
                end
            end
          end)

        case :ssl.controlling_process(t, pid) do
          :ok -> send(pid, {:socket, t})
          {:error, _} -> Process.exit(pid, :kill) && :ssl.close(t)
        end

        tls_loop(ls, opts)

      {:error, :closed} ->
        :ok

      {:error, _} ->
        Process.sleep(10)
        tls_loop(ls, opts)
    end
  end
end
