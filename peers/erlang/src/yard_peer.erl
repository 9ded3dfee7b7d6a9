%% Switchyard's Erlang/OTP reference server: echo, counter, sink and the
%% broadcast chat with a process per connection, and the REST service on inets httpd
%% (yard_peer_rest). Started by peers/erlang/run; see docs/peers.md.
-module(yard_peer).
-export([main/0, counter_loop/1, setopts/2, format_addr/3]).

-define(SINK_BUFFER, 65536).
-define(DRAIN_MS, 150).
-define(ACCEPTORS, 8).
%% Broadcast: the longest line a client may send, its '\n' included (a longer
%% one disconnects it), and the bytes that may wait in a socket's queue before
%% a send to it fails and closes it (the client is not reading).
-define(CHAT_MAX_LINE, 65536).
-define(CHAT_MAX_QUEUED, 1048576).

-define(HANDSHAKE_MS, 10000).

-record(opts, {app, host, port, out = "/dev/null", flush = each,
               bcrypt_cost = 10, longpoll_ms = 5000,
               tls_listen = [], tls_cert, tls_key}).

main() ->
    Args = init:get_plain_arguments(),
    Opts = parse(Args, #opts{}),
    %% SIGTERM: stop accepting, let sinks drain and flush, exit 0. (OTP
    %% cannot catch SIGINT; it stays the VM's break handler, disabled by -noinput.)
    ok = gen_event:swap_handler(erl_signal_server, {erl_signal_handler, []},
                                {yard_peer_signal, self()}),
    os:set_signal(sigterm, handle),
    %% SIGHUP reloads the TLS certificate (yard_peer_tls:reload/0).
    os:set_signal(sighup, handle),
    Listens = listens(Opts),
    case Opts#opts.app of
        rest -> yard_peer_rest:start(Listens, Opts#opts.longpoll_ms, Opts#opts.bcrypt_cost);
        App -> start_tcp(App, Listens, Opts)
    end,
    receive
        shutdown -> shutdown(Opts#opts.app)
    end.

usage_error(Fmt, Args) ->
    io:format(standard_error, "yard-peer-erlang: " ++ Fmt ++ "~n", Args),
    erlang:halt(2).

parse([], O = #opts{app = undefined}) -> usage_error("--app is required: echo, counter, sink, rest or broadcast", []), O;
parse([], O = #opts{tls_listen = [], tls_cert = C, tls_key = K}) when C =/= undefined; K =/= undefined ->
    usage_error("--tls-cert and --tls-key apply to TLS listeners: add --tls-listen HOST:PORT", []), O;
parse([], O = #opts{tls_listen = [_ | _], tls_cert = C, tls_key = K}) when C =:= undefined; K =:= undefined ->
    usage_error("--tls-listen needs --tls-cert FILE and --tls-key FILE", []), O;
parse([], O = #opts{host = undefined, tls_listen = []}) -> usage_error("--listen is required, as HOST:PORT", []), O;
parse([], O) -> O;
parse(["--app", A | T], O) ->
    case lists:member(A, ["echo", "counter", "sink", "rest", "broadcast"]) of
        true -> parse(T, O#opts{app = list_to_atom(A)});
        false -> usage_error("--app ~p: expected echo, counter, sink, rest or broadcast", [A])
    end;
parse(["--listen", L | T], O) ->
    {H, P} = parse_listen("--listen", L),
    parse(T, O#opts{host = H, port = P});
parse(["--tls-listen", L | T], O) ->
    parse(T, O#opts{tls_listen = O#opts.tls_listen ++ [parse_listen("--tls-listen", L)]});
parse(["--tls-cert", F | T], O) -> parse(T, O#opts{tls_cert = F});
parse(["--tls-key", F | T], O) -> parse(T, O#opts{tls_key = F});
parse(["--out", P | T], O) -> parse(T, O#opts{out = P});
parse(["--flush", "each" | T], O) -> parse(T, O#opts{flush = each});
parse(["--flush", "buffered" | T], O) -> parse(T, O#opts{flush = buffered});
parse(["--flush", F | _], _) -> usage_error("--flush ~p: expected each or buffered", [F]);
%% The launcher turns these into +S before the VM starts; here they are only checked.
parse([F, N | T], O) when F =:= "--cluster"; F =:= "--schedulers" -> int(F, N, 1, 1024), parse(T, O);
parse(["--bcrypt-cost", N | T], O) -> parse(T, O#opts{bcrypt_cost = int("--bcrypt-cost", N, 4, 31)});
parse(["--longpoll-ms", N | T], O) -> parse(T, O#opts{longpoll_ms = int("--longpoll-ms", N, 0, 1 bsl 31)});
parse([F | _], _) -> usage_error("unknown flag or missing value: ~s (see peers/erlang/run --help)", [F]).

int(Flag, S, Min, Max) ->
    case string:to_integer(S) of
        {N, ""} when N >= Min, N =< Max -> N;
        _ -> usage_error("~s ~p: expected an integer ~b..~b", [Flag, S, Min, Max])
    end.

parse_listen(Flag, L) ->
    R = case re:run(L, "^\\[([^\\]]+)\\]:([0-9]+)$", [{capture, all_but_first, list}]) of
            {match, M} -> M;
            nomatch -> re:run(L, "^([^:\\[\\]]+):([0-9]+)$", [{capture, all_but_first, list}])
        end,
    case R of
        {match, [H, P]} -> listen_addr(Flag, L, H, list_to_integer(P));
        [H, P] -> listen_addr(Flag, L, H, list_to_integer(P));
        _ -> usage_error("~s ~p: expected HOST:PORT (IPv6 as [::1]:PORT)", [Flag, L])
    end.

listen_addr(Flag, L, _, P) when P > 65535 -> usage_error("~s ~p: port must be 0..65535", [Flag, L]);
listen_addr(Flag, L, H, P) ->
    case inet:parse_address(H) of
        {ok, Ip} -> {Ip, P};
        {error, _} ->
            case inet:getaddr(H, inet) of
                {ok, Ip} -> {Ip, P};
                {error, E} -> io:format(standard_error, "yard-peer-erlang: ~s ~s: ~p~n", [Flag, L, E]),
                              erlang:halt(1)
            end
    end.

%% The listeners to open, --listen first, then each --tls-listen with the
%% ssl options (loaded, so a bad file is exit 1 before anything listens).
listens(O) ->
    Plain = case O#opts.host of
                undefined -> [];
                H -> [{H, O#opts.port, plain}]
            end,
    case O#opts.tls_listen of
        [] -> Plain;
        Tls ->
            SslOpts = yard_peer_tls:server_opts(O#opts.tls_cert, O#opts.tls_key),
            Plain ++ [{H, P, {tls, SslOpts}} || {H, P} <- Tls]
    end.

%% One word of the listening line.
format_addr(Ip, Port, Kind) ->
    Prefix = case Kind of plain -> ""; _ -> "tls:" end,
    case tuple_size(Ip) of
        8 -> io_lib:format("~s[~s]:~b", [Prefix, inet:ntoa(Ip), Port]);
        4 -> io_lib:format("~s~s:~b", [Prefix, inet:ntoa(Ip), Port])
    end.

start_tcp(App, Listens, O) ->
    Handler = handler(App, O),
    register(yard_conns, spawn(fun() -> conns_loop(#{}) end)),
    Words = [begin
                 LS = listen_one(Ip, Port, Kind),
                 [spawn(fun() -> acceptor(LS, Handler) end) || _ <- lists:seq(1, ?ACCEPTORS)],
                 put(listen_sockets, [LS | case get(listen_sockets) of undefined -> []; L -> L end]),
                 format_addr(Ip, sock_port(LS), Kind)
             end || {Ip, Port, Kind} <- Listens],
    io:format("listening ~s~n", [lists:join(" ", Words)]).

listen_one(Ip, Port, Kind) ->
    Family = case tuple_size(Ip) of 8 -> inet6; 4 -> inet end,
    TcpOpts = [binary, Family, {ip, Ip}, {active, false}, {reuseaddr, true}, {nodelay, true},
               {backlog, 1024}, {buffer, 65536}],
    R = case Kind of
            plain -> gen_tcp:listen(Port, TcpOpts);
            {tls, SslOpts} -> ssl:listen(Port, TcpOpts ++ SslOpts)
        end,
    case R of
        {ok, LS} -> LS;
        {error, E} ->
            io:format(standard_error, "yard-peer-erlang: listen: ~p~n", [E]),
            erlang:halt(1)
    end.

sock_port(S) when is_port(S) -> {ok, P} = inet:port(S), P;
sock_port(S) -> {ok, {_, P}} = ssl:sockname(S), P.

%% A connection is a gen_tcp port or an ssl socket; the apps call these.
recv(S, N) when is_port(S) -> gen_tcp:recv(S, N);
recv(S, N) -> ssl:recv(S, N).
recv(S, N, T) when is_port(S) -> gen_tcp:recv(S, N, T);
recv(S, N, T) -> ssl:recv(S, N, T).
send(S, D) when is_port(S) -> gen_tcp:send(S, D);
send(S, D) -> ssl:send(S, D).
close(S) when is_port(S) -> gen_tcp:close(S);
close(S) -> ssl:close(S).
setopts(S, Opts) when is_port(S) -> inet:setopts(S, Opts);
setopts(S, Opts) -> ssl:setopts(S, Opts).

handler(echo, _) -> fun echo/1;
handler(counter, _) ->
    register(yard_counter, spawn(fun() -> counter_loop(0) end)),
    fun counter/1;
handler(broadcast, _) ->
    {ok, _} = pg:start_link(yard_chat),
    fun broadcast/1;
handler(sink, O) ->
    %% Truncate once; each connection then opens the file for appending
    %% (a raw file belongs to the process that opened it).
    {ok, F} = file:open(O#opts.out, [write, raw]),
    ok = file:close(F),
    Path = O#opts.out, Flush = O#opts.flush,
    fun(S) -> sink(S, Path, Flush) end.

%% The acceptor that takes a connection becomes its handler and spawns its
%% own replacement, so the pool stays ?ACCEPTORS strong and no socket changes
%% owner.
acceptor(LS, Handler) when is_port(LS) ->
    case gen_tcp:accept(LS) of
        {ok, S} ->
            spawn(fun() -> acceptor(LS, Handler) end),
            yard_conns ! {add, self(), S},
            Handler(S);
        {error, closed} -> ok;
        {error, _} -> timer:sleep(10), acceptor(LS, Handler)
    end;
%% TLS: the handshake runs in the connection's own process, once its
%% replacement is accepting; one that fails or stalls ends only this process.
acceptor(LS, Handler) ->
    case ssl:transport_accept(LS) of
        {ok, T} ->
            spawn(fun() -> acceptor(LS, Handler) end),
            %% The pair SIGHUP loaded last (yard_peer_tls), over the listen options.
            case ssl:handshake(T, yard_peer_tls:pair(), ?HANDSHAKE_MS) of
                {ok, S} ->
                    yard_conns ! {add, self(), S},
                    Handler(S);
                {error, _} -> ok
            end;
        {error, closed} -> ok;
        {error, _} -> timer:sleep(10), acceptor(LS, Handler)
    end.

conns_loop(M) ->
    receive
        {add, P, S} -> erlang:monitor(process, P), conns_loop(M#{P => S});
        {'DOWN', _, process, P, _} -> conns_loop(maps:remove(P, M));
        {list, From} -> From ! {conns, maps:to_list(M)}, conns_loop(M)
    end.

echo(S) ->
    case recv(S, 0) of
        {ok, Data} -> send(S, Data), echo(S);
        {error, _} -> close(S)
    end.

%% The counter is one process owning the value (as in the Eve study). A
%% connection sends it a pipelined batch's increments in one call and gets
%% back the value before them.
counter_loop(N) ->
    receive
        {add, From, Ref, Incs} -> From ! {Ref, N}, counter_loop(N + Incs)
    end.

counter(S) ->
    case recv(S, 0) of
        {ok, Data} ->
            {Ops, Bad} = valid_prefix(Data, 0),
            Incs = count_incs(Ops, 0),
            Ref = make_ref(),
            yard_counter ! {add, self(), Ref, Incs},
            Base = receive {Ref, B} -> B end,
            send(S, replies(Ops, Base, [])),
            case Bad of
                true -> close(S);
                false -> counter(S)
            end;
        {error, _} -> close(S)
    end.

valid_prefix(Data, I) when I < byte_size(Data) ->
    case binary:at(Data, I) of
        B when B =< 1 -> valid_prefix(Data, I + 1);
        _ -> {binary:part(Data, 0, I), true}
    end;
valid_prefix(Data, _) -> {Data, false}.

count_incs(<<>>, N) -> N;
count_incs(<<1, T/binary>>, N) -> count_incs(T, N + 1);
count_incs(<<_, T/binary>>, N) -> count_incs(T, N).

replies(<<>>, _, Acc) -> lists:reverse(Acc);
replies(<<1, T/binary>>, V, Acc) -> replies(T, V + 1, [<<(V + 1):64/big>> | Acc]);
replies(<<_, T/binary>>, V, Acc) -> replies(T, V, [<<V:64/big>> | Acc]).

%% Broadcast chat: the room is a pg process group. A client's process joins it
%% and lets the VM cut its client's bytes into lines ({packet, line}, at most
%% ?CHAT_MAX_LINE bytes: a longer line arrives cut, without its '\n', and ends
%% the connection). Each line is sent as a message to the other members'
%% processes, which write it to their own sockets; pg drops a process from the
%% group when it exits. A send never waits ({send_timeout, 0}): once more than
%% ?CHAT_MAX_QUEUED bytes wait in the socket's queue it fails and closes the
%% socket. A setopts on a socket that just closed fails harmlessly: its
%% {tcp_closed, S} is on its way.
broadcast(S) ->
    ok = pg:join(yard_chat, room, self()),
    setopts(S, [{packet, line}, {packet_size, ?CHAT_MAX_LINE},
                     {high_watermark, ?CHAT_MAX_QUEUED}, {low_watermark, ?CHAT_MAX_QUEUED div 2},
                     {send_timeout, 0}, {send_timeout_close, true}, {active, once}]),
    member(S).

member(S) ->
    receive
        {Data, S, Line} when Data =:= tcp; Data =:= ssl ->
            case binary:last(Line) of
                $\n ->
                    Self = self(),
                    [P ! {line, Line} || P <- pg:get_members(yard_chat, room), P =/= Self],
                    setopts(S, [{active, once}]),
                    member(S);
                _ -> close(S)
            end;
        {line, Line} ->
            case send(S, Line) of
                ok -> member(S);
                {error, _} -> close(S)
            end;
        {Closed, S} when Closed =:= tcp_closed; Closed =:= ssl_closed -> ok;
        {Error, S, _} when Error =:= tcp_error; Error =:= ssl_error -> close(S)
    end.

sink(S, Path, Flush) ->
    {ok, F} = file:open(Path, [append, raw, binary]),
    sink_loop(S, F, Flush, [], 0).

%% {active, once}: one message at a time, so the mailbox never outruns the
%% file, and a drain request can arrive between chunks.
sink_loop(S, F, Flush, Buf, Len) ->
    ok = case setopts(S, [{active, once}]) of ok -> ok; _ -> ok end,
    receive
        {Tag, S, Data} when Tag =:= tcp; Tag =:= ssl ->
            {Buf1, Len1} = sink_chunk(F, Flush, Buf, Len, Data),
            sink_loop(S, F, Flush, Buf1, Len1);
        drain -> sink_drain(S, F, Flush, Buf, Len);
        {Closed, S} when Closed =:= tcp_closed; Closed =:= ssl_closed -> sink_finish(S, F, Buf);
        {Error, S, _} when Error =:= tcp_error; Error =:= ssl_error -> sink_finish(S, F, Buf)
    end.

sink_chunk(F, each, Buf, Len, Data) ->
    ok = file:write(F, Data),
    {Buf, Len};
sink_chunk(F, buffered, Buf, Len, Data) ->
    %% A chunk never straddles two writes: flush first if it does not fit.
    Size = byte_size(Data),
    case Len + Size > ?SINK_BUFFER of
        true -> ok = write_buf(F, Buf), {[Data], Size};
        false -> {[Data | Buf], Len + Size}
    end.

%% Shutdown: take what is still queued, without waiting, then flush.
sink_drain(S, F, Flush, Buf, Len) ->
    receive
        {Tag, S, Data} when Tag =:= tcp; Tag =:= ssl ->
            {B, L} = sink_chunk(F, Flush, Buf, Len, Data), sink_drain(S, F, Flush, B, L)
    after 0 ->
        _ = setopts(S, [{active, false}]),
        case recv(S, 0, 0) of
            {ok, Data} -> {B, L} = sink_chunk(F, Flush, Buf, Len, Data), sink_drain(S, F, Flush, B, L);
            _ -> sink_finish(S, F, Buf)
        end
    end.

sink_finish(S, F, Buf) ->
    ok = write_buf(F, Buf),
    ok = file:close(F),
    close(S).

write_buf(_, []) -> ok;
write_buf(F, Buf) -> file:write(F, lists:reverse(Buf)).

shutdown(rest) -> erlang:halt(0);
shutdown(sink) ->
    [close(LS) || LS <- get(listen_sockets)],
    %% Bytes already sent get DRAIN_MS to arrive; then every connection
    %% flushes and exits.
    timer:sleep(?DRAIN_MS),
    yard_conns ! {list, self()},
    Conns = receive {conns, L} -> L end,
    Refs = [begin R = erlang:monitor(process, P), P ! drain, R end || {P, _} <- Conns],
    Deadline = erlang:monotonic_time(millisecond) + 2000,
    [receive {'DOWN', R, process, _, _} -> ok
     after max(0, Deadline - erlang:monotonic_time(millisecond)) -> ok end || R <- Refs],
    erlang:halt(0);
shutdown(_) -> erlang:halt(0).
