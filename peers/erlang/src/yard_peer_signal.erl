%% Replaces OTP's default signal handler: SIGTERM/SIGINT tell the main
%% process to shut down cleanly (drain, flush, exit 0); SIGHUP reloads the
%% TLS certificate and key (nothing without --tls-listen).
-module(yard_peer_signal).
-behaviour(gen_event).
-export([init/1, handle_event/2, handle_call/2, handle_info/2]).

init({Main, _}) when is_pid(Main) -> {ok, Main};
init(Main) -> {ok, Main}.

handle_event(Sig, Main) when Sig =:= sigterm; Sig =:= sigint -> Main ! shutdown, {ok, Main};
handle_event(sighup, Main) -> yard_peer_tls:reload(), {ok, Main};
handle_event(_, Main) -> {ok, Main}.

handle_call(_, Main) -> {ok, ok, Main}.
handle_info(_, Main) -> {ok, Main}.
