#include "platform/host.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The first line of dir/name into buf, without its newline; 0 if it cannot be read. */
static int host_read_line(const char *dir, const char *name, char *buf, size_t len)
{
    char path[160];
    snprintf(path, sizeof(path), "%s%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (ok) buf[strcspn(buf, "\n")] = 0;
    return ok;
}

/* FNV-1a: an identity hash, not a secret; collisions would need equal host names anyway. */
static uint64_t host_hash(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

void host_identity(const char *override, char *out, size_t len)
{
    if (override && *override) {
        snprintf(out, len, "%s", override);
        return;
    }
    char name[256] = "";
    gethostname(name, sizeof(name) - 1);
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof(boot), f)) boot[0] = 0;
        fclose(f);
    }
    struct stat ns;
    uint64_t netns = stat("/proc/self/ns/net", &ns) == 0 ? (uint64_t)ns.st_ino : 0;
    uint64_t h = 0xcbf29ce484222325ull;
    h = host_hash(h, name, strlen(name) + 1);
    h = host_hash(h, boot, strlen(boot) + 1);
    h = host_hash(h, &netns, sizeof(netns));
    snprintf(out, len, "%.32s-%016llx", name, (unsigned long long)h);
}

static size_t host_cache_bytes(int level)
{
    int cpu = sched_getcpu();
    for (int i = 0; i < 8; i++) {
        char path[96], text[32] = "", type[32] = "";
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cache/index%d/", cpu < 0 ? 0 : cpu, i);
        if (!host_read_line(path, "level", text, sizeof(text))) break;
        if (atoi(text) != level || !host_read_line(path, "type", type, sizeof(type)) ||
            strncmp(type, "Instruction", 11) == 0)
            continue;
        if (!host_read_line(path, "size", text, sizeof(text))) break;
        char *end;
        unsigned long v = strtoul(text, &end, 10);
        unsigned long mult = *end == 'K' ? 1ul << 10 : *end == 'M' ? 1ul << 20 : 1;
        if (v) return (size_t)v * mult;
    }
    long v = sysconf(level == 2 ? _SC_LEVEL2_CACHE_SIZE : _SC_LEVEL3_CACHE_SIZE);
    return v > 0 ? (size_t)v : 0;
}

size_t host_l2_bytes(void) { return host_cache_bytes(2); }
size_t host_l3_bytes(void) { return host_cache_bytes(3); }
