/* The engine's side of a permission object (the app's side, in app.h, is
 * opaque). The blocking and event-loop models grant permissions with the
 * process-shared rwlock; a model that schedules permissions itself (coro:
 * Eve-style tasks) keeps its own state in `model`, which starts zeroed and
 * which only that model reads. */
#ifndef YARD_ACCESS_H
#define YARD_ACCESS_H

#include <pthread.h>
#include <stdalign.h>

#include "yard/app.h"

#define YARD_ACCESS_MODEL_BYTES 64

struct yard_access_obj {
    pthread_rwlock_t lock; /* process-shared */
    alignas(16) unsigned char model[YARD_ACCESS_MODEL_BYTES];
};

#endif
