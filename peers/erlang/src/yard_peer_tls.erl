%% The TLS side of the launcher contract (docs/tls.md): the certificate chain
%% and key are read and checked here, so that a missing, unreadable or
%% malformed file, or a key that is not the certificate's, is exit 1 with a
%% message naming the file, before anything listens. The ssl application
%% then gets them decoded: TLS 1.2 and 1.3 only, OTP's defaults otherwise.
-module(yard_peer_tls).
-export([server_opts/2]).

-include_lib("public_key/include/public_key.hrl").

-define(KEY_TYPES, ['ECPrivateKey', 'RSAPrivateKey', 'PrivateKeyInfo']).

server_opts(CertFile, KeyFile) ->
    {ok, _} = application:ensure_all_started(ssl),
    Certs = [Der || {'Certificate', Der, not_encrypted} <- pem("--tls-cert", CertFile)],
    Certs =:= [] andalso fail("--tls-cert ~s: not a PEM certificate", [CertFile]),
    KeyEntry = case [E || E = {T, _, not_encrypted} <- pem("--tls-key", KeyFile),
                          lists:member(T, ?KEY_TYPES)] of
                   [E | _] -> E;
                   [] -> fail("--tls-key ~s: not a PEM private key", [KeyFile])
               end,
    matches(hd(Certs), KeyEntry) orelse
        fail("--tls-key ~s is not the key of --tls-cert ~s: key values mismatch", [KeyFile, CertFile]),
    {KeyType, KeyDer, _} = KeyEntry,
    [{cert, Certs}, {key, {KeyType, KeyDer}}, {versions, ['tlsv1.3', 'tlsv1.2']},
     {reuse_sessions, true}].

pem(Flag, File) ->
    case file:read_file(File) of
        {ok, Bin} ->
            try public_key:pem_decode(Bin)
            catch _:_ -> []
            end;
        {error, E} -> fail("~s ~s: ~s", [Flag, File, file:format_error(E)])
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

fail(Fmt, Args) ->
    io:format(standard_error, "yard-peer-erlang: " ++ Fmt ++ "~n", Args),
    erlang:halt(1).
