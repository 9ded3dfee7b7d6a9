defmodule YardPeer.Rest do
  @moduledoc """
  The REST study's service: HTTP/1.1 over `:gen_tcp`, one process per
  connection, the stores in ETS as the study's Phoenix service kept them.

  The socket parses request heads itself (`packet: :http_bin`); for a body
  the connection switches to `:raw` (Content-Length) or `:line` and `:raw`
  (chunked) and back, so bytes of the next pipelined request stay in the
  socket's buffer for the next head. Requests on a connection are answered
  in order. bcrypt runs in `:yard_bcrypt`'s NIF on a dirty CPU scheduler.
  """

  alias YardPeer.JSON

  @max_body 65536
  @max_headers 100
  @idle_ms 60_000
  @request_ms 10_000
  @max_password 72

  def setup(opts) do
    # Public tables with concurrent reads and writes: every connection
    # process reads and writes them directly, as Phoenix's ETS store does.
    for t <- [:yard_users, :yard_passwords] do
      :ets.new(t, [:named_table, :public, :set, read_concurrency: true, write_concurrency: true])
    end

    :persistent_term.put(__MODULE__, %{
      cost: opts.bcrypt_cost,
      longpoll_ms: opts.longpoll_ms,
      dummy: :yard_bcrypt.dummy_hash(opts.bcrypt_cost)
    })
  end

  def serve(sock, _opts), do: loop(sock, :persistent_term.get(__MODULE__))

  defp loop(sock, conf) do
    case YardPeer.Sock.recv(sock, 0, @idle_ms) do
      {:ok, {:http_request, method, target, version}} ->
        deadline = System.monotonic_time(:millisecond) + @request_ms

        case request(sock, method, target, version, deadline) do
          {:ok, req} ->
            {code, headers, body} = route(req, conf)
            keep? = keep_alive?(req)
            respond(sock, req, code, headers, body, keep?)
            if keep?, do: loop(sock, conf), else: YardPeer.Sock.close(sock)

          {:error, code} ->
            respond(sock, nil, code, [], reason(code), false)
            YardPeer.Sock.close(sock)

          :closed ->
            YardPeer.Sock.close(sock)
        end

      {:ok, {:http_error, _}} ->
        respond(sock, nil, 400, [], "Bad request.", false)
        YardPeer.Sock.close(sock)

      {:ok, _} ->
        respond(sock, nil, 400, [], "Bad request.", false)
        YardPeer.Sock.close(sock)

      {:error, :emsgsize} ->
        respond(sock, nil, 431, [], reason(431), false)
        YardPeer.Sock.close(sock)

      {:error, _} ->
        YardPeer.Sock.close(sock)
    end
  end

  # ---- the request ------------------------------------------------------

  defp request(sock, method, target, version, deadline) do
    with {:ok, path} <- path(target),
         :ok <- version_ok(version),
         {:ok, headers} <- headers(sock, deadline, [], 0),
         req = %{method: method, path: path, version: version, headers: headers},
         :ok <- host_ok(req),
         {:ok, body} <- body(sock, req, deadline) do
      YardPeer.Sock.setopts(sock, packet: :http_bin)
      {:ok, Map.put(req, :body, body)}
    end
  end

  defp path({:abs_path, p}), do: {:ok, p |> String.split("?", parts: 2) |> hd()}
  defp path(_), do: {:error, 400}

  defp version_ok({1, v}) when v in [0, 1], do: :ok
  defp version_ok(_), do: {:error, 505}

  defp headers(sock, deadline, acc, n) do
    case YardPeer.Sock.recv(sock, 0, left(deadline)) do
      {:ok, :http_eoh} ->
        {:ok, Enum.reverse(acc)}

      {:ok, {:http_header, _, name, _, value}} when n < @max_headers ->
        headers(sock, deadline, [{header_name(name), value} | acc], n + 1)

      {:ok, {:http_header, _, _, _, _}} ->
        {:error, 431}

      {:ok, _} ->
        {:error, 400}

      {:error, :emsgsize} ->
        {:error, 431}

      {:error, :timeout} ->
        {:error, 408}

      {:error, _} ->
        :closed
    end
  end

  # Known names come as atoms ('Content-Length'), others as given.
  defp header_name(a) when is_atom(a), do: a |> Atom.to_string() |> String.downcase()
  defp header_name(b), do: String.downcase(b)

  defp header(req, name), do: for({^name, v} <- req.headers, do: v)

  defp host_ok(%{version: {1, 1}} = req) do
    if length(header(req, "host")) == 1, do: :ok, else: {:error, 400}
  end

  defp host_ok(_), do: :ok

  defp body(sock, req, deadline) do
    case {header(req, "transfer-encoding"), header(req, "content-length")} do
      {[], []} ->
        {:ok, ""}

      {[], lengths} ->
        with {:ok, n} <- content_length(lengths) do
          continue(sock, req)
          fixed(sock, n, deadline)
        end

      {[te], []} when req.version == {1, 1} ->
        if String.downcase(String.trim(te)) == "chunked" do
          continue(sock, req)
          YardPeer.Sock.setopts(sock, packet: :line, packet_size: 8192)
          chunked(sock, deadline, [], 0)
        else
          {:error, 501}
        end

      _ ->
        {:error, 400}
    end
  end

  # Every Content-Length header must give the same number.
  defp content_length(values) do
    parsed = values |> Enum.flat_map(&String.split(&1, ",")) |> Enum.map(&String.trim/1)

    case Enum.uniq(parsed) do
      [v] ->
        case Integer.parse(v) do
          {n, ""} when n > @max_body -> {:error, 413}
          {n, ""} when n >= 0 -> {:ok, n}
          _ -> {:error, 400}
        end

      _ ->
        {:error, 400}
    end
  end

  defp continue(sock, req) do
    if Enum.any?(header(req, "expect"), &(String.downcase(&1) == "100-continue")),
      do: YardPeer.Sock.send(sock, "HTTP/1.1 100 Continue\r\n\r\n")
  end

  defp fixed(_, 0, _), do: {:ok, ""}

  defp fixed(sock, n, deadline) do
    YardPeer.Sock.setopts(sock, packet: :raw)

    case YardPeer.Sock.recv(sock, n, left(deadline)) do
      {:ok, data} -> {:ok, data}
      {:error, :timeout} -> {:error, 408}
      {:error, _} -> :closed
    end
  end

  # Chunked: a size line, that many bytes, CRLF; size 0 ends, then trailer
  # lines up to an empty one. The socket is in packet: :line for the lines.
  defp chunked(sock, deadline, acc, total) do
    with {:ok, line} <- line(sock, deadline),
         {:ok, size} <- chunk_size(line) do
      cond do
        size == 0 ->
          with :ok <- trailer(sock, deadline), do: {:ok, IO.iodata_to_binary(Enum.reverse(acc))}

        total + size > @max_body ->
          {:error, 413}

        true ->
          YardPeer.Sock.setopts(sock, packet: :raw)

          with {:ok, data} <- raw(sock, size, deadline),
               {:ok, "\r\n"} <- raw(sock, 2, deadline) do
            YardPeer.Sock.setopts(sock, packet: :line)
            chunked(sock, deadline, [data | acc], total + size)
          else
            {:ok, _} -> {:error, 400}
            other -> other
          end
      end
    end
  end

  defp chunk_size(line) do
    with true <- String.ends_with?(line, "\r\n"),
         [hex | _] <- String.split(String.trim_trailing(line, "\r\n"), ";", parts: 2),
         {n, ""} <- Integer.parse(hex, 16),
         true <- n >= 0 do
      {:ok, n}
    else
      _ -> {:error, 400}
    end
  end

  defp trailer(sock, deadline) do
    case line(sock, deadline) do
      {:ok, "\r\n"} -> :ok
      {:ok, l} -> if String.ends_with?(l, "\r\n"), do: trailer(sock, deadline), else: {:error, 400}
      other -> other
    end
  end

  defp line(sock, deadline) do
    case YardPeer.Sock.recv(sock, 0, left(deadline)) do
      {:ok, l} -> {:ok, l}
      {:error, :emsgsize} -> {:error, 400}
      {:error, :timeout} -> {:error, 408}
      {:error, _} -> :closed
    end
  end

  defp raw(sock, n, deadline) do
    case YardPeer.Sock.recv(sock, n, left(deadline)) do
      {:ok, d} -> {:ok, d}
      {:error, :timeout} -> {:error, 408}
      {:error, _} -> :closed
    end
  end

  defp left(deadline), do: max(0, deadline - System.monotonic_time(:millisecond))

  # HTTP/1.1 keeps the connection unless it says close; 1.0 closes unless
  # it asks for keep-alive.
  defp keep_alive?(req) do
    tokens =
      req |> header("connection") |> Enum.flat_map(&String.split(&1, ","))
      |> Enum.map(&(&1 |> String.trim() |> String.downcase()))

    case req.version do
      {1, 1} -> "close" not in tokens
      _ -> "keep-alive" in tokens
    end
  end

  # ---- the answer -------------------------------------------------------

  defp respond(sock, req, code, headers, body, keep?) do
    type = Keyword.get(headers, :type, "text/plain; charset=utf-8")
    body_out = if req && req.method == :HEAD, do: "", else: body

    head = [
      "HTTP/1.1 ", Integer.to_string(code), " ", reason_phrase(code), "\r\n",
      "date: ", date(), "\r\n",
      "content-type: ", type, "\r\n",
      "content-length: ", Integer.to_string(IO.iodata_length(body)), "\r\n",
      for({:allow, v} <- headers, do: ["allow: ", v, "\r\n"]),
      if(keep?, do: [], else: "connection: close\r\n"),
      "\r\n"
    ]

    YardPeer.Sock.send(sock, [head, body_out])
  end

  defp date, do: Calendar.strftime(DateTime.utc_now(), "%a, %d %b %Y %H:%M:%S GMT")

  @phrases %{200 => "OK", 400 => "Bad Request", 403 => "Forbidden", 404 => "Not Found",
             405 => "Method Not Allowed", 408 => "Request Timeout",
             413 => "Content Too Large", 431 => "Request Header Fields Too Large",
             500 => "Internal Server Error", 501 => "Not Implemented",
             505 => "HTTP Version Not Supported"}
  defp reason_phrase(code), do: Map.get(@phrases, code, "Unknown")
  defp reason(code), do: reason_phrase(code) <> "."

  # ---- the routes (docs/rest.md) ------------------------------------------

  defp route(req, conf) do
    case String.split(req.path, "/") do
      ["", ""] -> get(req, fn -> text(200, "OK") end)
      ["", "longPoll"] -> get(req, fn -> long_poll(conf) end)
      ["", "password", op, user] when op in ["set", "verify"] and user != "" ->
        post(req, fn -> password(op, user, req.body, conf) end)
      ["", "user", "set", user] when user != "" -> post(req, fn -> user_set(user, req.body) end)
      ["", "user", "get", user] when user != "" -> get(req, fn -> user_get(user) end)
      _ -> text(404, "Not found.")
    end
  end

  defp get(%{method: m}, f) when m in [:GET, :HEAD], do: f.()
  defp get(_, _), do: {405, [allow: "GET"], "Method not allowed."}

  defp post(%{method: :POST}, f), do: f.()
  defp post(_, _), do: {405, [allow: "POST"], "Method not allowed."}

  defp text(code, body), do: {code, [], body}

  # The request's own process waits; nothing else is held.
  defp long_poll(conf) do
    Process.sleep(conf.longpoll_ms)
    text(200, "OK")
  end

  defp user_set(user, body) do
    case JSON.decode(body) do
      {:ok, {:object, _}} ->
        :ets.insert(:yard_users, {user, String.trim(body)})
        text(200, "OK")

      _ ->
        text(400, "Bad JSON: expected an object.")
    end
  end

  defp user_get(user) do
    case :ets.lookup(:yard_users, user) do
      [{_, json}] -> {200, [type: "application/json"], json}
      [] -> text(400, "User not found.")
    end
  end

  defp password(op, user, body, conf) do
    case password_of(body) do
      {:ok, pw} -> password(op, user, pw, conf, :checked)
      {:error, answer} -> answer
    end
  end

  defp password("set", user, pw, conf, :checked) do
    case :yard_bcrypt.hash(pw, conf.cost) do
      "$2" <> _ = hash ->
        :ets.insert(:yard_passwords, {user, hash})
        text(200, "OK")

      {:error, _} ->
        text(500, "Hashing failed.")
    end
  end

  defp password("verify", user, pw, conf, :checked) do
    case :ets.lookup(:yard_passwords, user) do
      [{_, hash}] ->
        if :yard_bcrypt.verify(pw, hash), do: text(200, "OK"), else: text(403, "Forbidden")

      [] ->
        # The same work as for a known user, so the time does not tell.
        _ = :yard_bcrypt.verify(pw, conf.dummy)
        text(400, "Password not found")
    end
  end

  defp password_of(body) do
    case JSON.decode(body) do
      {:ok, {:object, members}} ->
        keys = Enum.map(members, &elem(&1, 0))

        cond do
          length(Enum.uniq(keys)) != length(keys) -> {:error, text(400, "Bad JSON.")}
          true -> check_password(List.keyfind(members, "password", 0))
        end

      _ ->
        {:error, text(400, "Bad JSON.")}
    end
  end

  defp check_password(nil), do: {:error, text(400, "Missing password.")}

  defp check_password({_, pw}) when is_binary(pw) and byte_size(pw) > @max_password,
    do: {:error, text(400, "Password longer than 72 bytes (bcrypt uses only the first 72)")}

  defp check_password({_, pw}) when is_binary(pw) do
    if String.contains?(pw, <<0>>),
      do: {:error, text(400, "Bad password: NUL byte.")},
      else: {:ok, pw}
  end

  defp check_password(_), do: {:error, text(400, "Bad JSON.")}
end
