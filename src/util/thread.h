/* Threads of Chorus's own (the rendezvous root, the flight recorder's helper, stream threads). */
#ifndef CHORUS_THREAD_H
#define CHORUS_THREAD_H

#include <pthread.h>
#include <signal.h>

/* Start a thread with every signal blocked (it inherits this thread's mask, restored here), so that the
 * application's signals are never handled on a Chorus thread. Returns 0 or pthread_create's error. */
static inline int thread_start_quiet(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(thread, attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

#endif
