/* The unique id: text round trip, rejection of malformed strings, fresh secrets and tags. */
#include <arpa/inet.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "platform/socket.h"
#include "test.h"

static void make_id(const char *host, int family, uint16_t port, chorus_unique_id_t *id)
{
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof(addr));
    if (family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&addr;
        sin->sin_family = AF_INET;
        sin->sin_port = htons(port);
        inet_pton(AF_INET, host, &sin->sin_addr);
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&addr;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(port);
        inet_pton(AF_INET6, host, &sin6->sin6_addr);
    }
    TEST_ASSERT(bootstrap_id_make(&addr, id) == CHORUS_SUCCESS, "bootstrap_id_make");
}

static void test_round_trip(const char *host, int family, const char *expect)
{
    chorus_unique_id_t id, back;
    char text[CHORUS_UNIQUE_ID_STRING_BYTES], name[SOCK_ADDR_STRLEN];
    make_id(host, family, 41234, &id);
    TEST_ASSERT(bootstrap_id_to_string(&id, text, sizeof(text)) == CHORUS_SUCCESS, "to_string");
    TEST_ASSERT(strlen(text) == 2 * CHORUS_UNIQUE_ID_BYTES, "length %zu", strlen(text));
    for (const char *p = text; *p; p++) TEST_ASSERT((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'), "'%c'", *p);
    TEST_ASSERT(bootstrap_id_from_string(text, &back) == CHORUS_SUCCESS, "from_string");
    TEST_ASSERT(memcmp(&id, &back, sizeof(id)) == 0, "round trip changed the id");

    struct sockaddr_storage root;
    bootstrap_secret_t secret, again;
    TEST_ASSERT(bootstrap_id_parse(&back, &root, &secret) == CHORUS_SUCCESS, "parse");
    TEST_ASSERT(strcmp(sock_addr_str(&root, name, sizeof(name)), expect) == 0, "root %s, expected %s", name, expect);
    TEST_ASSERT(bootstrap_id_parse(&id, &root, &again) == CHORUS_SUCCESS && again.tag == secret.tag,
                "the tag is a function of the secret");

    for (char *p = text; *p; p++)
        if (*p >= 'a' && *p <= 'f') *p = (char)(*p - 'a' + 'A');
    TEST_ASSERT(bootstrap_id_from_string(text, &back) == CHORUS_SUCCESS && memcmp(&id, &back, sizeof(id)) == 0,
                "upper-case hex reads the same");
}

static void test_rejections(void)
{
    chorus_unique_id_t id, out;
    char text[CHORUS_UNIQUE_ID_STRING_BYTES + 2], small[CHORUS_UNIQUE_ID_STRING_BYTES - 1];
    make_id("127.0.0.1", AF_INET, 1, &id);
    TEST_ASSERT(bootstrap_id_to_string(&id, small, sizeof(small)) == CHORUS_ERR_INVALID_ARGUMENT, "short buffer");
    bootstrap_id_to_string(&id, text, sizeof(text));
    memset(&out, 0x5a, sizeof(out));
    chorus_unique_id_t untouched = out;

    char bad[sizeof(text)];
    strcpy(bad, text);
    bad[2 * CHORUS_UNIQUE_ID_BYTES - 1] = '\0';
    TEST_ASSERT(bootstrap_id_from_string(bad, &out) == CHORUS_ERR_INVALID_ARGUMENT, "too short");
    strcpy(bad, text);
    strcat(bad, "0");
    TEST_ASSERT(bootstrap_id_from_string(bad, &out) == CHORUS_ERR_INVALID_ARGUMENT, "too long");
    TEST_ASSERT(bootstrap_id_from_string("", &out) == CHORUS_ERR_INVALID_ARGUMENT, "empty");
    TEST_ASSERT(bootstrap_id_from_string(NULL, &out) == CHORUS_ERR_INVALID_ARGUMENT, "NULL");
    strcpy(bad, text);
    bad[77] = 'g';
    TEST_ASSERT(bootstrap_id_from_string(bad, &out) == CHORUS_ERR_INVALID_ARGUMENT, "non-hex");
    strcpy(bad, text);
    bad[10] = ' ';
    TEST_ASSERT(bootstrap_id_from_string(bad, &out) == CHORUS_ERR_INVALID_ARGUMENT, "space");
    strcpy(bad, text);
    bad[0] = bad[0] == '0' ? '1' : '0'; /* magic */
    TEST_ASSERT(bootstrap_id_from_string(bad, &out) == CHORUS_ERR_INVALID_ARGUMENT, "bad magic");
    strcpy(bad, text);
    bad[8] = '7'; /* low byte of the version */
    TEST_ASSERT(bootstrap_id_from_string(bad, &out) == CHORUS_ERR_INVALID_ARGUMENT, "bad version");
    strcpy(bad, text);
    bad[16] = '9'; /* address family */
    TEST_ASSERT(bootstrap_id_from_string(bad, &out) == CHORUS_ERR_INVALID_ARGUMENT, "bad family");
    TEST_ASSERT(memcmp(&out, &untouched, sizeof(out)) == 0, "a rejected string must not write the output");
}

static void test_fresh_secrets(void)
{
    chorus_unique_id_t a, b;
    struct sockaddr_storage root;
    bootstrap_secret_t sa, sb;
    make_id("::1", AF_INET6, 7, &a);
    make_id("::1", AF_INET6, 7, &b);
    TEST_ASSERT(memcmp(&a, &b, sizeof(a)) != 0, "two ids for the same root must differ");
    TEST_ASSERT(bootstrap_id_parse(&a, &root, &sa) == CHORUS_SUCCESS && bootstrap_id_parse(&b, &root, &sb) == CHORUS_SUCCESS,
                "parse");
    TEST_ASSERT(memcmp(sa.key, sb.key, sizeof(sa.key)) != 0, "secrets must differ");
    TEST_ASSERT(sa.tag != sb.tag, "tags must differ");
    TEST_ASSERT(memcmp(&a, &b, 32) == 0, "everything but the secret is the same");
}

int main(void)
{
    test_set_timeout(30);
    test_round_trip("127.0.0.1", AF_INET, "127.0.0.1:41234");
    test_round_trip("::1", AF_INET6, "[::1]:41234");
    test_round_trip("fd00::2", AF_INET6, "[fd00::2]:41234");
    test_rejections();
    test_fresh_secrets();
    return test_report();
}
