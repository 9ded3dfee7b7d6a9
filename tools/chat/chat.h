/* yard-chat's subcommands. */
#ifndef YARD_CHAT_TOOL_H
#define YARD_CHAT_TOOL_H

int chat_account_main(int argc, char **argv);
int chat_oper_main(int argc, char **argv);
int chat_server_password_main(int argc, char **argv);
int chat_kline_main(int argc, char **argv);
int chat_log_main(int argc, char **argv);
int chat_connect_main(int argc, char **argv);

#endif
