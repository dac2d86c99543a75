/* A tiny test harness: TEST_ASSERT records failures with file and line; test_main() bounds the whole
 * run with an alarm so a hang fails the test instead of stalling CI, and prints "N passed, N failed". */
#ifndef CHORUS_TEST_H
#define CHORUS_TEST_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int test_failures;
static int test_checks;

#define TEST_ASSERT(cond, ...)                                          \
    do {                                                                \
        test_checks++;                                                  \
        if (!(cond)) {                                                  \
            test_failures++;                                            \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                               \
            fprintf(stderr, "\n");                                      \
        }                                                               \
    } while (0)

static void test_on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test timed out (hang?)\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(124);
}

/* Call first in main(): fail the whole test after `seconds`. */
static inline void test_set_timeout(unsigned seconds)
{
    signal(SIGALRM, test_on_alarm);
    alarm(seconds);
}

/* Call last in main(). */
static inline int test_report(void)
{
    printf("%d passed, %d failed\n", test_checks - test_failures, test_failures);
    return test_failures ? 1 : 0;
}

#endif
