%% The REST study's service on OTP's own HTTP server (inets httpd), with the
%% stores in public ETS tables that every request process reads and writes
%% directly. bcrypt is our NIF over libcrypt (peers/beam_bcrypt), run on a
%% dirty CPU scheduler: a hash blocks only the request's own process.
-module(yard_peer_rest).
-export([start/3, do/1]).

-include_lib("inets/include/httpd.hrl").

%% Listens: {Ip, Port, plain | {tls, SslOpts}}, one httpd each (an https one
%% for TLS), all serving the same stores.
start(Listens, LongPollMs, BcryptCost) ->
    ok = inets:start(),
    [ets:new(T, [named_table, public, set, {read_concurrency, true}, {write_concurrency, true}])
     || T <- [yard_users, yard_passwords]],
    persistent_term:put(yard_longpoll_ms, LongPollMs),
    persistent_term:put(yard_bcrypt_cost, BcryptCost),
    persistent_term:put(yard_dummy_hash, yard_bcrypt:dummy_hash(BcryptCost)),
    Dir = filename:basedir(user_cache, "yard-peer-erlang"),
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    Words = [httpd_on(Ip, Port, Kind, Dir) || {Ip, Port, Kind} <- Listens],
    io:format("listening ~s~n", [lists:join(" ", Words)]).

httpd_on(Ip, Port, Kind, Dir) ->
    Family = case tuple_size(Ip) of 8 -> inet6only; 4 -> inet end,
    Socket = case Kind of
                 plain -> [];
                 {tls, SslOpts} -> [{socket_type, {ssl, SslOpts}}]
             end,
    Config = [{port, Port}, {bind_address, Ip}, {ipfamily, Family},
              {server_name, "yard-peer-erlang"}, {server_root, Dir}, {document_root, Dir},
              {modules, [?MODULE]}, {max_clients, 100000},
              {keep_alive_timeout, 120},
              {max_body_size, 1048576}] ++ Socket,
    case inets:start(httpd, Config) of
        {ok, Pid} ->
            [{port, P}] = httpd:info(Pid, [port]),
            yard_peer:format_addr(Ip, P, Kind);
        {error, E} ->
            io:format(standard_error, "yard-peer-erlang: httpd: ~p~n", [E]),
            erlang:halt(1)
    end.

do(#mod{method = Method, request_uri = Uri, entity_body = Body, socket = Sock}) ->
    %% httpd writes the head and the body separately; without TCP_NODELAY the
    %% body waits for the client's delayed ACK, 40 ms per keep-alive request.
    _ = yard_peer:setopts(Sock, [{nodelay, true}]),
    Path = case string:split(Uri, "?") of [P | _] -> P end,
    {Code, Type, Out} = route(Method, string:split(Path, "/", all), Body),
    Bin = iolist_to_binary(Out),
    Headers = [{code, Code}, {content_type, Type},
               {content_length, integer_to_list(byte_size(Bin))}]
        ++ allow(Code, Path),
    {break, [{response, {response, Headers, [Bin]}}]}.

allow(405, "/user/set/" ++ _) -> [{allow, "POST"}];
allow(405, "/password/" ++ _) -> [{allow, "POST"}];
allow(405, _) -> [{allow, "GET"}];
allow(_, _) -> [].

text(Code, Body) -> {Code, "text/plain", Body}.

route(M, ["", ""], _) -> get_only(M, fun() -> text(200, "OK") end);
route(M, ["", "longPoll"], _) ->
    get_only(M, fun() ->
        %% The request already has its own process; it just waits.
        receive after persistent_term:get(yard_longpoll_ms) -> ok end,
        text(200, "OK")
    end);
route(M, ["", "password", Op, User], Body) when (Op =:= "set" orelse Op =:= "verify"), User =/= "" ->
    post_only(M, fun() ->
        case password(Body) of
            {ok, Pw} -> password(Op, key(User), Pw);
            {error, Answer} -> Answer
        end
    end);
route(M, ["", "user", "set", User], Body) when User =/= "" ->
    post_only(M, fun() ->
        case yard_json:is_object(Body) of
            true -> ets:insert(yard_users, {key(User), string:trim(Body)}), text(200, "OK");
            false -> text(400, "Bad JSON: expected an object.")
        end
    end);
route(M, ["", "user", "get", User], _) when User =/= "" ->
    get_only(M, fun() ->
        case ets:lookup(yard_users, key(User)) of
            [{_, Json}] -> {200, "application/json", Json};
            [] -> text(400, "User not found.")
        end
    end);
route(_, _, _) -> text(404, "Not found.").

key(User) -> uri_string:percent_decode(User).

%% The password of a body, or the 400 that refuses it. Over 72 bytes is
%% refused as yard-serve does: bcrypt would silently use only the first 72.
password(Body) ->
    Max = yard_bcrypt:max_password(),
    case yard_json:password(Body) of
        {ok, Pw} when byte_size(Pw) > Max ->
            {error, text(400, "Password longer than 72 bytes (bcrypt uses only the first 72)")};
        {ok, Pw} ->
            case binary:match(Pw, <<0>>) of
                nomatch -> {ok, Pw};
                _ -> {error, text(400, "Bad password: NUL byte.")}
            end;
        missing -> {error, text(400, "Missing password.")};
        bad -> {error, text(400, "Bad JSON.")}
    end.

password("set", User, Pw) ->
    case yard_bcrypt:hash(Pw, persistent_term:get(yard_bcrypt_cost)) of
        <<"$2", _/binary>> = Hash -> ets:insert(yard_passwords, {User, Hash}), text(200, "OK");
        {error, _} -> text(500, "Hashing failed.")
    end;
password("verify", User, Pw) ->
    case ets:lookup(yard_passwords, User) of
        [{_, Hash}] ->
            case yard_bcrypt:verify(Pw, Hash) of
                true -> text(200, "OK");
                false -> text(403, "Forbidden")
            end;
        [] ->
            %% Same work as for a known user, so the time does not tell.
            _ = yard_bcrypt:verify(Pw, persistent_term:get(yard_dummy_hash)),
            text(400, "Password not found")
    end.

get_only(M, F) when M =:= "GET"; M =:= "HEAD" -> F();
get_only(_, _) -> text(405, "Method not allowed.").

post_only("POST", F) -> F();
post_only(_, _) -> text(405, "Method not allowed.").
