/* The knob table: value syntax, defaults, errors naming the variable, and the generated documentation. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "util/params.h"

static void check_parsers(void)
{
    int64_t v;
    TEST_ASSERT(params_parse_size("4M", &v) == 0 && v == 4 << 20, "4M -> %lld", (long long)v);
    TEST_ASSERT(params_parse_size("64K", &v) == 0 && v == 65536, "64K");
    TEST_ASSERT(params_parse_size("1GiB", &v) == 0 && v == 1 << 30, "1GiB");
    TEST_ASSERT(params_parse_size("999", &v) == 0 && v == 999, "999");
    TEST_ASSERT(params_parse_size("12Q", &v) != 0, "12Q accepted");
    TEST_ASSERT(params_parse_size("", &v) != 0, "empty size accepted");
    TEST_ASSERT(params_parse_size("-1", &v) != 0, "negative size accepted");
    TEST_ASSERT(params_parse_ms("1.5s", &v) == 0 && v == 1500, "1.5s -> %lld", (long long)v);
    TEST_ASSERT(params_parse_ms("10m", &v) == 0 && v == 600000, "10m");
    TEST_ASSERT(params_parse_ms("250", &v) == 0 && v == 250, "250 is ms");
    TEST_ASSERT(params_parse_ms("3 days", &v) != 0, "unknown unit accepted");
    TEST_ASSERT(params_parse_int("0x10", &v) == 0 && v == 16, "hex int");
    TEST_ASSERT(params_parse_int("12abc", &v) != 0, "trailing junk accepted");
}

static void check_load(void)
{
    chorus_params_t p;
    char err[256] = "";
    unsetenv("CHORUS_CHUNK_SIZE");
    unsetenv("CHORUS_TIMEOUT");
    TEST_ASSERT(params_load(&p, err, sizeof(err)) == CHORUS_SUCCESS, "defaults: %s", err);
    TEST_ASSERT(p.chunk_size == 256 << 10 && p.timeout == 600000 && p.connect_timeout == 60000,
                "defaults chunk %lld timeout %lld", (long long)p.chunk_size, (long long)p.timeout);
    params_free(&p);

    setenv("CHORUS_CHUNK_SIZE", "1M", 1);
    setenv("CHORUS_SOCKET_IFNAME", "^docker,lo", 1);
    TEST_ASSERT(params_load(&p, err, sizeof(err)) == CHORUS_SUCCESS, "env: %s", err);
    TEST_ASSERT(p.chunk_size == 1 << 20 && strcmp(p.socket_ifname, "^docker,lo") == 0, "env values not taken");
    params_free(&p);

    /* auto: only where the default is auto (the arena's slot), as -1 for the user of the knob to resolve */
    unsetenv("CHORUS_SHM_SLOT_SIZE");
    TEST_ASSERT(params_load(&p, err, sizeof(err)) == CHORUS_SUCCESS && p.shm_slot_size == -1, "slot default: %lld",
                (long long)p.shm_slot_size);
    params_free(&p);
    setenv("CHORUS_SHM_SLOT_SIZE", "AUTO", 1);
    TEST_ASSERT(params_load(&p, err, sizeof(err)) == CHORUS_SUCCESS && p.shm_slot_size == -1, "AUTO: %s", err);
    params_free(&p);
    setenv("CHORUS_SHM_SLOT_SIZE", "0", 1);
    TEST_ASSERT(params_load(&p, err, sizeof(err)) == CHORUS_SUCCESS && p.shm_slot_size == 0, "0: %s", err);
    params_free(&p);
    unsetenv("CHORUS_SHM_SLOT_SIZE");
    setenv("CHORUS_CHUNK_SIZE", "auto", 1);
    TEST_ASSERT(params_load(&p, err, sizeof(err)) == CHORUS_ERR_INVALID_ARGUMENT, "CHORUS_CHUNK_SIZE=auto accepted");
    TEST_ASSERT(strstr(err, "CHORUS_CHUNK_SIZE") && !strstr(err, "expected auto"), "chunk error: %s", err);
    setenv("CHORUS_CHUNK_SIZE", "1M", 1);

    setenv("CHORUS_TIMEOUT", "soon", 1);
    TEST_ASSERT(params_load(&p, err, sizeof(err)) == CHORUS_ERR_INVALID_ARGUMENT, "bad value accepted");
    TEST_ASSERT(strstr(err, "CHORUS_TIMEOUT") && strstr(err, "soon"), "error does not name the knob: %s", err);
    unsetenv("CHORUS_TIMEOUT");
    unsetenv("CHORUS_CHUNK_SIZE");
    unsetenv("CHORUS_SOCKET_IFNAME");
}

static void check_markdown(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    params_markdown(f);
    fclose(f);
    TEST_ASSERT(strstr(text, "| `CHORUS_CONNECT_TIMEOUT` | duration | `60s` |") != NULL, "markdown row missing:\n%s", text);
    free(text);
}

int main(void)
{
    test_set_timeout(30);
    check_parsers();
    check_load();
    check_markdown();
    return test_report();
}
