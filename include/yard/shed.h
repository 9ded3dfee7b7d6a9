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

#endif
