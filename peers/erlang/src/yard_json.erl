%% A JSON parser (RFC 8259) for the REST peer: OTP 25 has no JSON module.
%% is_object/1 says whether a text is one JSON object (user info is stored
%% as sent); password/1 takes the string "password" out of a password body.
-module(yard_json).
-export([is_object/1, decode/1, password/1]).

is_object(Text) ->
    case decode(Text) of {ok, {obj, _}} -> true; _ -> false end.

%% {ok, Term} | error. Objects are {obj, [{Key, Value}]} in order, strings
%% UTF-8 binaries with escapes decoded, numbers kept as their text.
decode(Text) ->
    try value(ws(iolist_to_binary(Text))) of
        {V, Rest} -> case ws(Rest) of <<>> -> {ok, V}; _ -> error end
    catch throw:bad -> error
    end.

%% {ok, Password} | missing | bad: a body must be an object whose
%% "password" is a string (duplicate keys are refused, as yard-serve does).
password(Body) ->
    case decode(Body) of
        {ok, {obj, Members}} ->
            Keys = [K || {K, _} <- Members],
            case {length(lists:usort(Keys)) =:= length(Keys), lists:keyfind(<<"password">>, 1, Members)} of
                {false, _} -> bad;
                {true, {_, P}} when is_binary(P) -> {ok, P};
                {true, {_, _}} -> bad;
                {true, false} -> missing
            end;
        _ -> bad
    end.

ws(<<C, T/binary>>) when C =:= $\s; C =:= $\t; C =:= $\n; C =:= $\r -> ws(T);
ws(B) -> B.

value(<<"{", T/binary>>) -> object(ws(T), []);
value(<<"[", T/binary>>) -> array(ws(T), []);
value(<<"\"", T/binary>>) -> string(T, []);
value(<<"true", T/binary>>) -> {true, T};
value(<<"false", T/binary>>) -> {false, T};
value(<<"null", T/binary>>) -> {null, T};
value(<<C, _/binary>> = B) when C =:= $-; C >= $0, C =< $9 ->
    Rest = number(B),
    {{num, binary:part(B, 0, byte_size(B) - byte_size(Rest))}, Rest};
value(_) -> throw(bad).

object(<<"}", T/binary>>, []) -> {{obj, []}, T};
object(<<"\"", T/binary>>, Acc) ->
    {K, R} = string(T, []),
    case ws(R) of
        <<":", R1/binary>> ->
            {V, R2} = value(ws(R1)),
            case ws(R2) of
                <<",", R3/binary>> -> object(ws(R3), [{K, V} | Acc]);
                <<"}", R3/binary>> -> {{obj, lists:reverse([{K, V} | Acc])}, R3};
                _ -> throw(bad)
            end;
        _ -> throw(bad)
    end;
object(_, _) -> throw(bad).

array(<<"]", T/binary>>, []) -> {[], T};
array(B, Acc) ->
    {V, R} = value(B),
    case ws(R) of
        <<",", R1/binary>> -> array(ws(R1), [V | Acc]);
        <<"]", R1/binary>> -> {lists:reverse([V | Acc]), R1};
        _ -> throw(bad)
    end.

string(<<"\"", T/binary>>, Acc) -> {iolist_to_binary(lists:reverse(Acc)), T};
string(<<"\\u", A, B, C, D, T/binary>>, Acc) ->
    case hex4(A, B, C, D) of
        Hi when Hi >= 16#D800, Hi =< 16#DBFF ->
            case T of
                <<"\\u", E, F, G, H, T1/binary>> ->
                    case hex4(E, F, G, H) of
                        Lo when Lo >= 16#DC00, Lo =< 16#DFFF ->
                            Cp = 16#10000 + ((Hi - 16#D800) bsl 10) + (Lo - 16#DC00),
                            string(T1, [<<Cp/utf8>> | Acc]);
                        _ -> throw(bad)
                    end;
                _ -> throw(bad)
            end;
        Cp when Cp >= 16#DC00, Cp =< 16#DFFF -> throw(bad);
        Cp -> string(T, [<<Cp/utf8>> | Acc])
    end;
string(<<"\\", C, T/binary>>, Acc) ->
    Ch = case C of
             $" -> $"; $\\ -> $\\; $/ -> $/; $b -> 8; $f -> 12; $n -> $\n; $r -> $\r; $t -> $\t;
             _ -> throw(bad)
         end,
    string(T, [Ch | Acc]);
string(<<C, _/binary>>, _) when C < 16#20 -> throw(bad);
string(<<C, T/binary>>, Acc) -> string(T, [C | Acc]);
string(<<>>, _) -> throw(bad).

hex4(A, B, C, D) -> lists:foldl(fun(X, N) -> N * 16 + hex(X) end, 0, [A, B, C, D]).

hex(C) when C >= $0, C =< $9 -> C - $0;
hex(C) when C >= $a, C =< $f -> C - $a + 10;
hex(C) when C >= $A, C =< $F -> C - $A + 10;
hex(_) -> throw(bad).

number(B) ->
    B1 = case B of <<"-", R/binary>> -> R; _ -> B end,
    B2 = case B1 of
             <<"0", R1/binary>> -> R1;
             <<C, _/binary>> when C >= $1, C =< $9 -> digits(B1);
             _ -> throw(bad)
         end,
    B3 = case B2 of <<".", R2/binary>> -> digits1(R2); _ -> B2 end,
    case B3 of
        <<E, R3/binary>> when E =:= $e; E =:= $E ->
            digits1(case R3 of <<S, R4/binary>> when S =:= $+; S =:= $- -> R4; _ -> R3 end);
        _ -> B3
    end.

digits1(<<C, _/binary>> = B) when C >= $0, C =< $9 -> digits(B);
digits1(_) -> throw(bad).

digits(<<C, T/binary>>) when C >= $0, C =< $9 -> digits(T);
digits(B) -> B.
