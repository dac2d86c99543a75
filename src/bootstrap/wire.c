/* Encodings shared by the root and the ranks (the formats are described in wire.h). */
#include "bootstrap/wire.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/util.h"

void bootstrap_put_addr(uint8_t *p, const struct sockaddr_storage *addr)
{
    memset(p, 0, BOOTSTRAP_ADDR_BYTES);
    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)addr;
        wire_put16(p, 4);
        wire_put16(p + 2, ntohs(sin->sin_port));
        memcpy(p + 8, &sin->sin_addr, 4);
    } else if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)addr;
        wire_put16(p, 6);
        wire_put16(p + 2, ntohs(sin6->sin6_port));
        wire_put32(p + 4, sin6->sin6_scope_id);
        memcpy(p + 8, &sin6->sin6_addr, 16);
    }
}

chorus_result_t bootstrap_get_addr(const uint8_t *p, struct sockaddr_storage *addr_p)
{
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof(addr));
    if (wire_get16(p) == 4) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&addr;
        sin->sin_family = AF_INET;
        sin->sin_port = htons(wire_get16(p + 2));
        memcpy(&sin->sin_addr, p + 8, 4);
    } else if (wire_get16(p) == 6) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&addr;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(wire_get16(p + 2));
        sin6->sin6_scope_id = wire_get32(p + 4);
        memcpy(&sin6->sin6_addr, p + 8, 16);
    } else {
        return CHORUS_ERR_INVALID_ARGUMENT;
    }
    *addr_p = addr;
    return CHORUS_SUCCESS;
}

void bootstrap_put_peer(uint8_t *p, const bootstrap_peer_info_t *info)
{
    bootstrap_put_addr(p, &info->addr);
    wire_put32(p + BOOTSTRAP_ADDR_BYTES, (uint32_t)info->pid);
    memset(p + BOOTSTRAP_ADDR_BYTES + 4, 0, BOOTSTRAP_HOST_BYTES);
    memcpy(p + BOOTSTRAP_ADDR_BYTES + 4, info->host, strnlen(info->host, BOOTSTRAP_HOST_BYTES - 1));
    uint8_t *id = p + BOOTSTRAP_ADDR_BYTES + 4 + BOOTSTRAP_HOST_BYTES;
    memset(id, 0, BOOTSTRAP_HOSTID_BYTES);
    memcpy(id, info->hostid, strnlen(info->hostid, BOOTSTRAP_HOSTID_BYTES - 1));
}

chorus_result_t bootstrap_get_peer(const uint8_t *p, bootstrap_peer_info_t *info_p)
{
    bootstrap_peer_info_t info;
    memset(&info, 0, sizeof(info));
    CHECK(bootstrap_get_addr(p, &info.addr));
    info.pid = (int)wire_get32(p + BOOTSTRAP_ADDR_BYTES);
    /* The sender's host name is not trusted to be terminated. */
    memcpy(info.host, p + BOOTSTRAP_ADDR_BYTES + 4, BOOTSTRAP_HOST_BYTES - 1);
    memcpy(info.hostid, p + BOOTSTRAP_ADDR_BYTES + 4 + BOOTSTRAP_HOST_BYTES, BOOTSTRAP_HOSTID_BYTES - 1);
    *info_p = info;
    return CHORUS_SUCCESS;
}

static uint8_t *bootstrap_reply(uint32_t kind, chorus_result_t code, uint32_t count, size_t body, size_t *len_p)
{
    uint8_t *msg = malloc(BOOTSTRAP_REPLY_HEADER_BYTES + body);
    if (!msg) return NULL;
    wire_put32(msg, BOOTSTRAP_MAGIC);
    wire_put32(msg + 4, kind);
    wire_put32(msg + 8, (uint32_t)code);
    wire_put32(msg + 12, count);
    *len_p = BOOTSTRAP_REPLY_HEADER_BYTES + body;
    return msg;
}

uint8_t *bootstrap_reply_error(chorus_result_t code, const char *text, size_t *len_p)
{
    size_t n = strnlen(text, BOOTSTRAP_REPLY_TEXT_MAX);
    uint8_t *msg = bootstrap_reply(BOOTSTRAP_REPLY_ERROR, code, (uint32_t)n, n, len_p);
    if (msg) memcpy(msg + BOOTSTRAP_REPLY_HEADER_BYTES, text, n);
    return msg;
}

uint8_t *bootstrap_reply_table(const bootstrap_peer_info_t *peers, int nranks, size_t *len_p)
{
    size_t body = (size_t)nranks * BOOTSTRAP_ENTRY_BYTES;
    uint8_t *msg = bootstrap_reply(BOOTSTRAP_REPLY_TABLE, CHORUS_SUCCESS, (uint32_t)nranks, body, len_p);
    for (int i = 0; msg && i < nranks; i++)
        bootstrap_put_peer(msg + BOOTSTRAP_REPLY_HEADER_BYTES + (size_t)i * BOOTSTRAP_ENTRY_BYTES, &peers[i]);
    return msg;
}

int bootstrap_format_ranks(char *buf, size_t len, const uint8_t *flag, int n)
{
    static const char more[] = ", ...";
    size_t off = 0;
    int count = 0, cut = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (!flag[i]) continue;
        int j = i;
        while (j + 1 < n && flag[j + 1]) j++;
        count += j - i + 1;
        char item[32];
        int w = j == i ? snprintf(item, sizeof(item), "%s%d", off ? ", " : "", i)
                       : snprintf(item, sizeof(item), "%s%d-%d", off ? ", " : "", i, j);
        /* Whole items only, with room kept for the ellipsis: a cut list never shows a wrong number. */
        if (!cut && off + (size_t)w + sizeof(more) <= len) {
            memcpy(buf + off, item, (size_t)w + 1);
            off += (size_t)w;
        } else {
            cut = 1;
        }
        i = j;
    }
    if (cut && off + sizeof(more) <= len) memcpy(buf + off, off ? more : more + 2, sizeof(more) - (off ? 0 : 2));
    return count;
}

chorus_result_t bootstrap_fail(chorus_result_t res, char *err, size_t errlen, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    LOG_WARN(LOG_SUB_BOOTSTRAP, "%s", msg);
    if (err && errlen) snprintf(err, errlen, "%s", msg);
    return res;
}
