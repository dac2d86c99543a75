/* Result names and messages, generated from errors.def. */
#include "chorus/chorus.h"

const char *chorus_result_name(chorus_result_t result)
{
    switch (result) {
#define CHORUS_ERROR(sym, val, name, msg) \
    case sym: return #sym;
#include "errors.def"
#undef CHORUS_ERROR
    }
    return "CHORUS_ERR_UNKNOWN";
}

const char *chorus_strerror(chorus_result_t result)
{
    switch (result) {
#define CHORUS_ERROR(sym, val, name, msg) \
    case sym: return msg;
#include "errors.def"
#undef CHORUS_ERROR
    }
    return "unknown result code";
}
