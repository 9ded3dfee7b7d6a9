%% The TLS side of the launcher contract (docs/tls.md): the certificate chain
%% and key are read and checked here, so that a missing, unreadable or
%% malformed file, or a key that is not the certificate's, is exit 1 with a
%% message naming the file, before anything listens. The ssl application
%% then gets them decoded: TLS 1.2 and 1.3 only, OTP's defaults otherwise.
%%
%% SIGHUP reads the two files again (reload/0): the pair in use lives in a
%% persistent term, which each new handshake takes (pair/0, given to
%% ssl:handshake/3; inets httpd, whose handshakes are its own, asks sni_fun,
%% so there a client that sends a server name gets the new pair). A pair
%% that does not load keeps the one in use, and stderr says why.
-module(yard_peer_tls).
-export([server_opts/2, pair/0, reload/0]).

-include_lib("public_key/include/public_key.hrl").

-define(KEY_TYPES, ['ECPrivateKey', 'RSAPrivateKey', 'PrivateKeyInfo']).

server_opts(CertFile, KeyFile) ->
    {ok, _} = application:ensure_all_started(ssl),
    case load(CertFile, KeyFile) of
        {ok, Pair} ->
            persistent_term:put(?MODULE, {CertFile, KeyFile, Pair}),
            Pair ++ [{versions, ['tlsv1.3', 'tlsv1.2']}, {reuse_sessions, true},
                     {sni_fun, fun(_Name) -> pair() end}];
        {error, Msg} ->
            io:format(standard_error, "yard-peer-erlang: ~s~n", [Msg]),
            erlang:halt(1)
    end.

%% The certificate and key new handshakes use: what SIGHUP loaded last.
pair() -> element(3, persistent_term:get(?MODULE)).

reload() ->
    case persistent_term:get(?MODULE, undefined) of
        undefined -> ok;
        {CertFile, KeyFile, _} ->
            case load(CertFile, KeyFile) of
                {ok, Pair} ->
                    persistent_term:put(?MODULE, {CertFile, KeyFile, Pair}),
                    log("SIGHUP: reloaded the TLS certificate and key");
                {error, Msg} ->
                    log("SIGHUP: keeping the certificate in use: " ++ Msg)
            end
    end.

%% {ok, [{cert, Ders}, {key, Key}]}, or {error, Msg} naming the file at fault.
load(CertFile, KeyFile) ->
    try
        Certs = [Der || {'Certificate', Der, not_encrypted} <- pem("--tls-cert", CertFile)],
        Certs =:= [] andalso throw(fmt("--tls-cert ~s: not a PEM certificate", [CertFile])),
        KeyEntry = case [E || E = {T, _, not_encrypted} <- pem("--tls-key", KeyFile),
                              lists:member(T, ?KEY_TYPES)] of
                       [E | _] -> E;
                       [] -> throw(fmt("--tls-key ~s: not a PEM private key", [KeyFile]))
                   end,
        matches(hd(Certs), KeyEntry) orelse
            throw(fmt("--tls-key ~s is not the key of --tls-cert ~s: key values mismatch",
                      [KeyFile, CertFile])),
        {KeyType, KeyDer, _} = KeyEntry,
        {ok, [{cert, Certs}, {key, {KeyType, KeyDer}}]}
    catch
        throw:Msg -> {error, Msg}
    end.

pem(Flag, File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            try public_key:pem_decode(Bin)
            catch _:_ -> []
            end;
        {error, E} -> throw(fmt("~s ~s: ~s", [Flag, File, file:format_error(E)]))
    end.

%% The key is the certificate's when what it signs the certificate's public
%% key verifies.
matches(CertDer, KeyEntry) ->
    try
        Key = public_key:pem_entry_decode(KeyEntry),
        #'OTPCertificate'{tbsCertificate = #'OTPTBSCertificate'{subjectPublicKeyInfo = Info}} =
            public_key:pkix_decode_cert(CertDer, otp),
        #'OTPSubjectPublicKeyInfo'{algorithm = #'PublicKeyAlgorithm'{parameters = Params},
                                   subjectPublicKey = Pub0} = Info,
        Pub = case Pub0 of
                  #'ECPoint'{} -> {Pub0, Params};
                  _ -> Pub0
              end,
        Msg = <<"switchyard">>,
        public_key:verify(Msg, sha256, public_key:sign(Msg, sha256, Key), Pub)
    catch _:_ -> false
    end.

fmt(Fmt, Args) -> lists:flatten(io_lib:format(Fmt, Args)).

log(Msg) -> io:format(standard_error, "yard-peer-erlang: ~s~n", [Msg]).
