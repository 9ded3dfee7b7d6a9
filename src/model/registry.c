#include <string.h>

#include "models.h"

const yard_model_t *const yard_models[] = {&yard_model_fork,     &yard_model_thread,
                                           &yard_model_epoll,    &yard_model_reactors,
                                           &yard_model_coro,     &yard_model_uring,
                                           NULL};

const yard_model_t *yard_model_find(const char *name)
{
    for (const yard_model_t *const *m = yard_models; *m; m++)
        if (strcmp((*m)->name, name) == 0)
            return *m;
    return NULL;
}
