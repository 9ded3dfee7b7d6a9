"""irctest controller for Switchyard's chat (yard-serve --app chat).

irctest imports this module by name (--controller yard_chat) and calls
get_irctest_controller_class(); tests/irctest/run puts this directory on
PYTHONPATH. The server runs as a new user would run a public one: --guests,
a fresh data directory per test, and accounts made with `yard-chat account
add` (the password on stdin, never on the command line).

Environment:
  YARD_BIN    the directory holding yard-serve and yard-chat (default: build/bin)
  YARD_MODEL  the concurrency model (default: epoll)
"""

import os
import subprocess
from pathlib import Path
from typing import Any, Optional, Type

from irctest import patma
from irctest.basecontrollers import BaseServerController, DirectoryBasedController
from irctest.runner import NotImplementedByController
from irctest.specifications import Capabilities, OptionalBehaviors

REPO = Path(__file__).resolve().parents[2]


def _bin(name: str) -> str:
    return str(Path(os.environ.get("YARD_BIN", REPO / "build" / "bin")) / name)


class YardChatController(BaseServerController, DirectoryBasedController):
    software_name = "Switchyard chat"
    _port_wait_interval = 0.02
    supported_sasl_mechanisms = {"PLAIN"}
    supports_sts = False
    # A JOIN, PART, MODE, KICK or TOPIC is told to the channel (its maker
    # included) through the log, written by the log's own thread: it can
    # arrive after the PONG irctest synchronizes on (docs/chat.md,
    # "Differences from other IRC servers"). Sable's controller waits so too.
    sync_sleep_time = 0.1

    # What the chat announces (docs/chat.md, "Protocol"); irctest uses these
    # to decide which tests apply.
    capabilities = frozenset(
        (
            Capabilities.ACCOUNT_TAG,
            Capabilities.AWAY_NOTIFY,
            Capabilities.BATCH,
            Capabilities.ECHO_MESSAGE,
            Capabilities.EXTENDED_JOIN,
            Capabilities.EXTENDED_MONITOR,
            Capabilities.LABELED_RESPONSE,
            Capabilities.MESSAGE_TAGS,
            Capabilities.MULTI_PREFIX,
            Capabilities.READ_MARKER,
            Capabilities.SERVER_TIME,
            Capabilities.SETNAME,
        )
    )
    # The ISUPPORT values irctest's testValues checks.
    isupport = {
        "CHANTYPES": "#&",
        "ELIST": "MNU",
        "PREFIX": "(ov)@+",
        "TARGMAX": patma.ANYSTR,
    }
    optional_behaviors = frozenset(
        (
            OptionalBehaviors.ELIST_M,
            OptionalBehaviors.ELIST_N,
            OptionalBehaviors.ELIST_U,
            OptionalBehaviors.MULTI_JOIN,
            OptionalBehaviors.MULTI_KICK,
            OptionalBehaviors.MULTI_PRIVMSG,
        )
    )

    def run(
        self,
        hostname: str,
        port: int,
        *,
        password: Optional[str],
        ssl: bool,
        run_services: bool,
        faketime: Optional[str],
        websocket_hostname: Optional[str] = None,
        websocket_port: Optional[int] = None,
        **_: Any,
    ) -> None:
        if websocket_hostname is not None or websocket_port is not None:
            raise NotImplementedByController("Websocket")
        if faketime:
            raise NotImplementedByController("faketime")
        assert self.proc is None
        self.create_config()
        assert self.directory
        self.port = port
        self.hostname = hostname
        self.data = self.directory / "data"
        self.data.mkdir(exist_ok=True)
        # The server operator irctest's OPER, KILL and WALLOPS tests log in as.
        subprocess.run(
            [_bin("yard-chat"), "oper", "add", "operuser", "--data", str(self.data),
             "--cost", "4"],
            input=b"operpassword\n",
            check=True,
            stdout=subprocess.DEVNULL,
        )
        if password is not None:
            # The server's password, in DIR/server-password: PASS is then checked
            # against it, and accounts log in with SASL only.
            subprocess.run(
                [_bin("yard-chat"), "server-password", "set", "--data", str(self.data),
                 "--cost", "4"],
                input=(password + "\n").encode(),
                check=True,
                stdout=subprocess.DEVNULL,
            )
        address = "%s:%d" % ("127.0.0.1" if hostname == "localhost" else hostname, port)
        argv = [
            _bin("yard-serve"),
            "--app", "chat",
            "--model", os.environ.get("YARD_MODEL", "epoll"),
            "--data", str(self.data),
            "--guests",
            "--server-name", "My.Little.Server",  # the name irctest's tests expect
            # irctest's clients arrive in quick bursts from one address.
            "--flood-rate", "0",
            "--login-failures-per-addr", "1000/1m",
            "--login-failures-per-account", "1000/1m",
        ]
        if password is not None:
            argv.append("--server-password-required")
        if ssl:
            self.gen_ssl()
            argv += ["--tls-listen", address,
                     "--tls-cert", str(self.pem_path), "--tls-key", str(self.key_path)]
        else:
            argv += ["--listen", address]
        self.proc = self.execute(argv)

    def wait_for_services(self) -> None:
        # Accounts are the chat's own (no services process to wait for).
        pass

    def registerUser(self, case: Any, username: str, password: Optional[str] = None) -> None:
        assert password
        subprocess.run(
            [_bin("yard-chat"), "account", "add", username, "--data", str(self.data),
             "--cost", "4"],
            input=(password + "\n").encode(),
            check=True,
            stdout=subprocess.DEVNULL,
        )


def get_irctest_controller_class() -> Type[YardChatController]:
    return YardChatController
