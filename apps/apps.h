#ifndef YARD_APPS_H
#define YARD_APPS_H

#include "yard/app.h"

extern const yard_app_t yard_app_echo;
extern const yard_app_t yard_app_counter;
extern const yard_app_t yard_app_sink;
extern const yard_app_t yard_app_chat;
extern const yard_app_t yard_app_rest;

#endif
