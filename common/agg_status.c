#include "agg/status.h"

#include <stdarg.h>
#include <stdio.h>

const char *agg_status_string(agg_status_t status)
{
    switch (status) {
    case AGG_OK:                 return "success";
    case AGG_INPROGRESS:         return "operation in progress";
    case AGG_ERR_GENERIC:        return "generic error";
    case AGG_ERR_NOT_SUPPORTED:  return "not supported";
    case AGG_ERR_NO_MEMORY:      return "out of memory";
    case AGG_ERR_INVALID_PARAM:  return "invalid argument";
    case AGG_ERR_IO:             return "input/output error";
    case AGG_ERR_TIMEOUT:        return "timed out";
    case AGG_ERR_CONFIG:         return "invalid configuration";
    case AGG_ERR_PARSE:          return "parse error";
    case AGG_ERR_NOT_FOUND:      return "not found";
    case AGG_ERR_OOB:            return "out-of-band collective failed";
    case AGG_ERR_SHUTDOWN:       return "shutting down";
    case AGG_ERR_DEVICE:         return "a GPU runtime call failed";
    case AGG_ERR_SESSION_INIT:   return "cannot connect to the aggregation manager";
    case AGG_ERR_PROTOCOL:       return "protocol error";
    case AGG_ERR_VERSION:        return "wire protocol version mismatch";
    case AGG_ERR_JOB_CREATE:     return "job creation failed";
    case AGG_ERR_NO_JOB:         return "no such job";
    case AGG_ERR_NO_SWITCHSIM:   return "no aggregation nodes registered with the manager";
    case AGG_ERR_TOPOLOGY:       return "topology error";
    case AGG_ERR_AUTH:           return "authentication failed (wrong shared secret?)";
    case AGG_ERR_QUOTA:          return "quota exceeded";
    case AGG_ERR_NO_RESOURCE:    return "no aggregation resources left";
    case AGG_ERR_GROUP_ALLOC:    return "group allocation failed";
    case AGG_ERR_GROUP_ID:       return "no such group";
    case AGG_ERR_NO_TREE:        return "no aggregation tree covers these hosts";
    case AGG_ERR_GROUP_JOIN:     return "group join failed";
    case AGG_ERR_SAT_LOCK_BUSY:  return "SAT lock held by another group (lock failed, retryable)";
    case AGG_ERR_SAT_UNAVAILABLE: return "no streaming aggregation (SAT) group for this communicator";
    case AGG_ERR_DATA_MISMATCH:  return "group members disagree on operation, type or count";
    case AGG_ERR_BAD_FRAGMENT:   return "malformed fragment";
    }
    return "unknown status";
}

void agg_errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
