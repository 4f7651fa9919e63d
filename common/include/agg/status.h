/*
 * One status type for the whole stack. AGG_OK is 0, AGG_INPROGRESS is 1 and
 * every error is negative, grouped by what failed: -1xx generic, -2xx the
 * manager and its protocol, -3xx groups and resources, -4xx the data path.
 */
#ifndef AGG_STATUS_H
#define AGG_STATUS_H

#include <stddef.h>

typedef enum agg_status {
    AGG_OK                    = 0,
    AGG_INPROGRESS            = 1,

    AGG_ERR_GENERIC           = -100,
    AGG_ERR_NOT_SUPPORTED     = -101,
    AGG_ERR_NO_MEMORY         = -102,
    AGG_ERR_INVALID_PARAM     = -103,
    AGG_ERR_IO                = -104,
    AGG_ERR_TIMEOUT           = -105,
    AGG_ERR_CONFIG            = -106,
    AGG_ERR_PARSE             = -107,
    AGG_ERR_NOT_FOUND         = -108,
    AGG_ERR_OOB               = -109,
    AGG_ERR_SHUTDOWN          = -110,
    AGG_ERR_DEVICE            = -111, /* a GPU runtime call failed */

    AGG_ERR_SESSION_INIT      = -200, /* cannot connect to the manager */
    AGG_ERR_PROTOCOL          = -201, /* malformed or unexpected message */
    AGG_ERR_VERSION           = -202, /* peer speaks another wire version */
    AGG_ERR_JOB_CREATE        = -203,
    AGG_ERR_NO_JOB            = -204,
    AGG_ERR_NO_SWITCHSIM      = -205, /* no aggregation nodes registered */
    AGG_ERR_TOPOLOGY          = -206,
    AGG_ERR_AUTH              = -207, /* peer failed shared-secret authentication */

    AGG_ERR_QUOTA             = -300,
    AGG_ERR_NO_RESOURCE       = -301,
    AGG_ERR_GROUP_ALLOC       = -302,
    AGG_ERR_GROUP_ID          = -303,
    AGG_ERR_NO_TREE           = -304,
    AGG_ERR_GROUP_JOIN        = -305,
    AGG_ERR_SAT_LOCK_BUSY     = -306, /* another group streams on a switch: retry */
    AGG_ERR_SAT_UNAVAILABLE   = -307, /* no SAT group for this communicator */

    AGG_ERR_DATA_MISMATCH     = -400, /* members disagree on op/type/count */
    AGG_ERR_BAD_FRAGMENT      = -401,
} agg_status_t;

/* A short English description of a status; never NULL. */
const char *agg_status_string(agg_status_t status);

/*
 * Formats a message for a caller-supplied error buffer (`err` may be NULL or
 * errlen 0: nothing is written). Used where a function reports what was
 * wrong with its input, e.g. "FILE:LINE: expected ...".
 */
void agg_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
