%% bcrypt for the BEAM peers: the NIF in c_src/yard_bcrypt_nif.c over the
%% system's libcrypt ("$2b$", as yard-serve). Both calls run on a dirty CPU
%% scheduler, so a hash blocks only the process that asked for it.
%% Built by peers/Makefile into ebin/ and priv/; the Erlang and Elixir peers
%% put ebin/ on their code path.
-module(yard_bcrypt).
-export([hash/2, verify/2, dummy_hash/1, max_password/0]).
-on_load(init/0).

-define(MAX_PASSWORD, 72).

init() ->
    Ebin = filename:dirname(code:which(?MODULE)),
    erlang:load_nif(filename:join([Ebin, "..", "priv", "yard_bcrypt_nif"]), 0).

%% hash(Password, Cost) -> <<"$2b$...">> (60 bytes) | {error, Why}.
%% Password: at most 72 bytes, no NUL (badarg otherwise); Cost 4..31.
hash(_Password, _Cost) -> erlang:nif_error(not_loaded).

%% verify(Password, Hash) -> boolean(), comparing every byte.
verify(_Password, _Hash) -> erlang:nif_error(not_loaded).

%% A hash of a random secret nobody knows, made once at start-up: an unknown
%% user's verify is checked against it, so it costs what a known user's does.
dummy_hash(Cost) ->
    Secret = base64:encode(crypto:strong_rand_bytes(24)),
    <<"$2", _/binary>> = hash(Secret, Cost).

max_password() -> ?MAX_PASSWORD.
