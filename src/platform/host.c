#include "platform/host.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
