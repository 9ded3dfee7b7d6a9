#include <string.h>

#include "apps.h"

const yard_app_t *const yard_apps[] = {&yard_app_echo, &yard_app_counter, &yard_app_sink,
                                       &yard_app_chat, &yard_app_rest, NULL};

const yard_app_t *yard_app_find(const char *name)
{
    for (const yard_app_t *const *a = yard_apps; *a; a++)
        if (strcmp((*a)->name, name) == 0)
            return *a;
    return NULL;
}
