/*
 * The unique id: 128 opaque bytes, laid out (little-endian, see wire.h) as
 *   u32 magic, u16 protocol version, u16 zero, root address (BOOTSTRAP_ADDR_BYTES), 16-byte secret,
 *   zeros up to CHORUS_UNIQUE_ID_BYTES.
 * Its text form is the bytes in lower-case hex.
 */
#include <string.h>

#include "bootstrap/handshake.h"
#include "bootstrap/wire.h"
#include "platform/socket.h"
#include "util/log.h"
#include "util/util.h"

#define ID_ADDR_OFFSET 8
#define ID_SECRET_OFFSET (ID_ADDR_OFFSET + BOOTSTRAP_ADDR_BYTES)

_Static_assert(ID_SECRET_OFFSET + BOOTSTRAP_SECRET_BYTES <= CHORUS_UNIQUE_ID_BYTES, "unique id too small");

chorus_result_t bootstrap_id_make(const struct sockaddr_storage *root, chorus_unique_id_t *id_p)
{
    chorus_unique_id_t id;
    uint8_t *p = (uint8_t *)id.internal;
    memset(&id, 0, sizeof(id));
    wire_put32(p, BOOTSTRAP_MAGIC);
    wire_put16(p + 4, BOOTSTRAP_PROTOCOL_VERSION);
    bootstrap_put_addr(p + ID_ADDR_OFFSET, root);
    CHECK(sock_random_bytes(p + ID_SECRET_OFFSET, BOOTSTRAP_SECRET_BYTES));
    *id_p = id;
    return CHORUS_SUCCESS;
}

chorus_result_t bootstrap_id_parse(const chorus_unique_id_t *id, struct sockaddr_storage *root_p,
                                   bootstrap_secret_t *secret_p)
{
    const uint8_t *p = (const uint8_t *)id->internal;
    if (wire_get32(p) != BOOTSTRAP_MAGIC || wire_get16(p + 4) != BOOTSTRAP_PROTOCOL_VERSION)
        return CHORUS_ERR_INVALID_ARGUMENT;
    struct sockaddr_storage root;
    CHECK(bootstrap_get_addr(p + ID_ADDR_OFFSET, &root));
    bootstrap_secret_t secret;
    memcpy(secret.key, p + ID_SECRET_OFFSET, BOOTSTRAP_SECRET_BYTES);
    static const char label[] = "chorus communicator tag";
    uint8_t mac[HANDSHAKE_MAC_BYTES];
    CHECK(handshake_hmac(secret.key, label, sizeof(label) - 1, mac));
    secret.tag = wire_get64(mac);
    *root_p = root;
    *secret_p = secret;
    return CHORUS_SUCCESS;
}

chorus_result_t bootstrap_id_to_string(const chorus_unique_id_t *id, char *str, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    if (!id || !str || len < CHORUS_UNIQUE_ID_STRING_BYTES) return CHORUS_ERR_INVALID_ARGUMENT;
    const uint8_t *p = (const uint8_t *)id->internal;
    for (size_t i = 0; i < CHORUS_UNIQUE_ID_BYTES; i++) {
        str[2 * i] = digits[p[i] >> 4];
        str[2 * i + 1] = digits[p[i] & 15];
    }
    str[2 * CHORUS_UNIQUE_ID_BYTES] = '\0';
    return CHORUS_SUCCESS;
}

static int id_hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

chorus_result_t bootstrap_id_from_string(const char *str, chorus_unique_id_t *id_p)
{
    size_t len = str ? strnlen(str, 2 * CHORUS_UNIQUE_ID_BYTES + 1) : 0;
    if (!id_p || len != 2 * CHORUS_UNIQUE_ID_BYTES) {
        LOG_WARN(LOG_SUB_BOOTSTRAP, "a unique id string has exactly %d hex digits, not %s%zu", 2 * CHORUS_UNIQUE_ID_BYTES,
                 len > 2 * CHORUS_UNIQUE_ID_BYTES ? "over " : "", CHORUS_MIN(len, 2 * CHORUS_UNIQUE_ID_BYTES));
        return CHORUS_ERR_INVALID_ARGUMENT;
    }
    chorus_unique_id_t id;
    for (size_t i = 0; i < CHORUS_UNIQUE_ID_BYTES; i++) {
        int hi = id_hex_value(str[2 * i]), lo = id_hex_value(str[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            LOG_WARN(LOG_SUB_BOOTSTRAP, "the unique id string has a non-hex character at %zu", hi < 0 ? 2 * i : 2 * i + 1);
            return CHORUS_ERR_INVALID_ARGUMENT;
        }
        id.internal[i] = (char)(hi << 4 | lo);
    }
    struct sockaddr_storage root;
    bootstrap_secret_t secret;
    if (bootstrap_id_parse(&id, &root, &secret) != CHORUS_SUCCESS) {
        LOG_WARN(LOG_SUB_BOOTSTRAP, "the unique id string is not a Chorus unique id of protocol version %d",
                 BOOTSTRAP_PROTOCOL_VERSION);
        return CHORUS_ERR_INVALID_ARGUMENT;
    }
    *id_p = id;
    return CHORUS_SUCCESS;
}
