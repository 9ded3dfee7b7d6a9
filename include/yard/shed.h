/* Shedding the connections pending at a listener when the process is out
 * of descriptors, without a race against the process's other threads. */
#ifndef YARD_SHED_H
#define YARD_SHED_H

/* Accepts and closes up to budget connections pending at a non-blocking
 * listener, from a descriptor table no other thread allocates from (Linux:
 * a short-lived thread with a private copy of the table that holds only the
 * listener). Their clients see the connection closed. Returns how many were
 * shed (0: none was pending), or -1 with errno set when this cannot be done
 * here (ENOSYS on a platform without it, ENFILE when the whole system is out
 * of files, or the thread could not start): the caller then spends a
 * reserve descriptor instead. Blocks the caller while it runs (about the
 * time to start a thread and copy the descriptor table). */
int yard_shed_pending(int listen_fd, int budget);

/* At most this many connections shed at a time. */
#define YARD_SHED_BUDGET 4096

/* A descriptor kept open for yard_shed's fallback (/dev/null), or -1. */
int yard_reserve_fd_open(void);

/* What a loop out of descriptors calls: yard_shed_pending, or where that
 * cannot be done, the reserve descriptor's way, one connection per
 * accept, until none is pending or the budget is spent (another thread may
 * take the slot the reserve frees: then fewer). *reserve_fd is reopened
 * afterwards, and first if an earlier fallback lost it; reserve_fd may be
 * NULL. Returns how many connections were shed. */
int yard_shed(int listen_fd, int budget, int *reserve_fd);

#endif
