%% A JSON validator (RFC 8259) for the REST peer: OTP 25 has no JSON module.
%% It only answers whether a text is one JSON object; the text is stored as is.
-module(yard_json).
-export([is_object/1]).

is_object(Text) ->
    B = iolist_to_binary(Text),
    case ws(B) of
        <<"{", _/binary>> = V ->
            try ws(value(V)) of <<>> -> true; _ -> false
            catch throw:bad -> false
            end;
        _ -> false
    end.

ws(<<C, T/binary>>) when C =:= $\s; C =:= $\t; C =:= $\n; C =:= $\r -> ws(T);
ws(B) -> B.

value(<<"{", T/binary>>) -> object(ws(T));
value(<<"[", T/binary>>) -> array(ws(T));
value(<<"\"", T/binary>>) -> string(T);
value(<<"true", T/binary>>) -> T;
value(<<"false", T/binary>>) -> T;
value(<<"null", T/binary>>) -> T;
value(<<C, _/binary>> = B) when C =:= $-; C >= $0, C =< $9 -> number(B);
value(_) -> throw(bad).

object(<<"}", T/binary>>) -> T;
object(B) -> members(B).

members(<<"\"", T/binary>>) ->
    case ws(string(T)) of
        <<":", R/binary>> ->
            case ws(value(ws(R))) of
                <<",", R2/binary>> -> members(ws(R2));
                <<"}", R2/binary>> -> R2;
                _ -> throw(bad)
            end;
        _ -> throw(bad)
    end;
members(_) -> throw(bad).

array(<<"]", T/binary>>) -> T;
array(B) -> elements(B).

elements(B) ->
    case ws(value(B)) of
        <<",", R/binary>> -> elements(ws(R));
        <<"]", R/binary>> -> R;
        _ -> throw(bad)
    end.

string(<<"\"", T/binary>>) -> T;
string(<<"\\u", A, B, C, D, T/binary>>) ->
    _ = [hex(X) || X <- [A, B, C, D]],
    string(T);
string(<<"\\", C, T/binary>>) ->
    case lists:member(C, "\"\\/bfnrt") of true -> string(T); false -> throw(bad) end;
string(<<C, _/binary>>) when C < 16#20 -> throw(bad);
string(<<_, T/binary>>) -> string(T);
string(<<>>) -> throw(bad).

hex(C) when C >= $0, C =< $9; C >= $a, C =< $f; C >= $A, C =< $F -> ok;
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
