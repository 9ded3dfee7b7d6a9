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

    if opts.app == :rest, do: YardPeer.Rest.setup(opts)
    if opts.app == :counter, do: YardPeer.Counter.setup()
    if opts.app == :sink, do: Conn.setup_sink(opts)

    ls = listen(opts)
    {:ok, port} = :inet.port(ls)

    acceptors = max(4, System.schedulers_online())

    room = if opts.app == :broadcast, do: [YardPeer.Broadcast.room()], else: []

    children =
      [{Task.Supervisor, name: YardPeer.Conns}] ++
        room ++
        for i <- 1..acceptors do
          Supervisor.child_spec({Acceptor, {ls, opts}}, id: {Acceptor, i})
        end

    {:ok, _} = Supervisor.start_link(children, strategy: :one_for_one, name: YardPeer.Sup)
    IO.puts("listening #{format_addr(opts.host, port)}")

    receive do
      :shutdown -> shutdown(opts.app, ls)
    end
  end

  defp listen(opts) do
    family = if tuple_size(opts.host) == 8, do: :inet6, else: :inet
    # REST: the socket parses HTTP heads itself ({packet, http_bin}); the
    # connection switches to raw for bodies and back.
    packet = if opts.app == :rest, do: [packet: :http_bin, packet_size: 8192], else: []

    tcp_opts =
      [:binary, family, ip: opts.host, active: false, reuseaddr: true, nodelay: true,
       backlog: 1024, buffer: 65536] ++ packet

    case :gen_tcp.listen(opts.port, tcp_opts) do
      {:ok, ls} ->
        ls

      {:error, e} ->
        IO.puts(:stderr, "yard-peer-elixir: listen: #{inspect(e)}")
        System.halt(1)
    end
  end

  defp format_addr(ip, port) when tuple_size(ip) == 8, do: "[#{:inet.ntoa(ip)}]:#{port}"
  defp format_addr(ip, port), do: "#{:inet.ntoa(ip)}:#{port}"

  defp shutdown(:sink, ls) do
    :gen_tcp.close(ls)
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
  @moduledoc "Replaces OTP's default signal handler: SIGTERM tells the main process to stop."
  @behaviour :gen_event

  @impl true
  def init({main, _}) when is_pid(main), do: {:ok, main}
  def init(main), do: {:ok, main}

  @impl true
  def handle_event(sig, main) when sig in [:sigterm, :sigint] do
    send(main, :shutdown)
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
end
