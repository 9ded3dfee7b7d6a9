defmodule YardPeer.Sock do
  @moduledoc """
  A connection is a `:gen_tcp` port or an `:ssl` socket (`--tls-listen`);
  the apps read and write it through these, and match both kinds of
  message (`{:tcp, s, data}` or `{:ssl, s, data}`, and so on).
  """

  def recv(s, n) when is_port(s), do: :gen_tcp.recv(s, n)
  def recv(s, n), do: :ssl.recv(s, n)
  def recv(s, n, t) when is_port(s), do: :gen_tcp.recv(s, n, t)
  def recv(s, n, t), do: :ssl.recv(s, n, t)
  def send(s, d) when is_port(s), do: :gen_tcp.send(s, d)
  def send(s, d), do: :ssl.send(s, d)
  def close(s) when is_port(s), do: :gen_tcp.close(s)
  def close(s), do: :ssl.close(s)
  def setopts(s, opts) when is_port(s), do: :inet.setopts(s, opts)
  def setopts(s, opts), do: :ssl.setopts(s, opts)
  def port(s) when is_port(s), do: :inet.port(s)

  def port(s) do
    with {:ok, {_, p}} <- :ssl.sockname(s), do: {:ok, p}
  end
end

defmodule YardPeer.TLS do
  @moduledoc """
  The TLS side of the launcher contract (docs/tls.md): the certificate
  chain and key are read and checked before anything listens, so a missing,
  unreadable or malformed file, or a key that is not the certificate's, is
  exit 1 with a message naming the file. `:ssl` then gets them decoded:
  TLS 1.3 and 1.2 only, OTP's defaults otherwise.

  SIGHUP reads the two files again (`reload/0`): the pair in use is a
  persistent term that each new handshake takes (`pair/0`, given to
  `:ssl.handshake/3`), so connections already made keep theirs. A pair that
  does not load keeps the one in use, and stderr says why.
  """

  require Record
  Record.defrecordp(:otp_cert, :OTPCertificate,
    Record.extract(:OTPCertificate, from_lib: "public_key/include/public_key.hrl"))
  Record.defrecordp(:otp_tbs, :OTPTBSCertificate,
    Record.extract(:OTPTBSCertificate, from_lib: "public_key/include/public_key.hrl"))
  Record.defrecordp(:otp_spki, :OTPSubjectPublicKeyInfo,
    Record.extract(:OTPSubjectPublicKeyInfo, from_lib: "public_key/include/public_key.hrl"))
  Record.defrecordp(:pk_alg, :PublicKeyAlgorithm,
    Record.extract(:PublicKeyAlgorithm, from_lib: "public_key/include/public_key.hrl"))

  @key_types [:ECPrivateKey, :RSAPrivateKey, :PrivateKeyInfo]

  # As yard-serve's default --tls-handshake-timeout.
  def handshake_ms, do: 10_000

  def server_opts(cert_file, key_file) do
    {:ok, _} = Application.ensure_all_started(:ssl)

    case load(cert_file, key_file) do
      {:ok, pair} ->
        :persistent_term.put(__MODULE__, {cert_file, key_file, pair})
        pair ++ [versions: [:"tlsv1.3", :"tlsv1.2"], reuse_sessions: true]

      {:error, msg} ->
        fail(msg)
    end
  end

  @doc "The certificate and key new handshakes use: what SIGHUP loaded last."
  def pair, do: elem(:persistent_term.get(__MODULE__), 2)

  def reload do
    case :persistent_term.get(__MODULE__, nil) do
      nil ->
        :ok

      {cert_file, key_file, _} ->
        case load(cert_file, key_file) do
          {:ok, pair} ->
            :persistent_term.put(__MODULE__, {cert_file, key_file, pair})
            IO.puts(:stderr, "yard-peer-elixir: SIGHUP: reloaded the TLS certificate and key")

          {:error, msg} ->
            IO.puts(:stderr, "yard-peer-elixir: SIGHUP: keeping the certificate in use: " <> msg)
        end
    end
  end

  # {:ok, [cert: ders, key: key]}, or {:error, msg} naming the file at fault.
  defp load(cert_file, key_file) do
    certs = for {:Certificate, der, :not_encrypted} <- pem("--tls-cert", cert_file), do: der
    if certs == [], do: throw("--tls-cert #{cert_file}: not a PEM certificate")

    key_entry =
      Enum.find(pem("--tls-key", key_file), fn {t, _, enc} ->
        t in @key_types and enc == :not_encrypted
      end) || throw("--tls-key #{key_file}: not a PEM private key")

    if not matches?(hd(certs), key_entry) do
      throw("--tls-key #{key_file} is not the key of --tls-cert #{cert_file}: key values mismatch")
    end

    {key_type, key_der, _} = key_entry
    {:ok, [cert: certs, key: {key_type, key_der}]}
  catch
    msg when is_binary(msg) -> {:error, msg}
  end

  defp pem(flag, file) do
    case File.read(file) do
      {:ok, bin} ->
        try do
          :public_key.pem_decode(bin)
        rescue
          _ -> []
        end

      {:error, e} ->
        throw("#{flag} #{file}: #{:file.format_error(e)}")
    end
  end

  # The key is the certificate's when what it signs the certificate's
  # public key verifies.
  defp matches?(cert_der, key_entry) do
    key = :public_key.pem_entry_decode(key_entry)
    tbs = otp_cert(:public_key.pkix_decode_cert(cert_der, :otp), :tbsCertificate)
    spki = otp_tbs(tbs, :subjectPublicKeyInfo)
    params = pk_alg(otp_spki(spki, :algorithm), :parameters)

    pub =
      case otp_spki(spki, :subjectPublicKey) do
        {:ECPoint, _} = point -> {point, params}
        other -> other
      end

    msg = "switchyard"
    :public_key.verify(msg, :sha256, :public_key.sign(msg, :sha256, key), pub)
  rescue
    _ -> false
  end

  defp fail(msg) do
    IO.puts(:stderr, "yard-peer-elixir: " <> msg)
    System.halt(1)
  end
end
