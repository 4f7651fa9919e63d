#include "agg/wire.h"

#include <stdio.h>
#include <string.h>

static size_t agg__wire_field_size(char c)
{
    switch (c) {
    case 'h': return 2;
    case 'l': return 4;
    case 'q': return 8;
    case 's': return AGG_WIRE_NAME_LEN;
    }
    return 0;
}

size_t agg_wire_fmt_size(const char *fmt)
{
    size_t size = 0;

    for (; *fmt; ++fmt) {
        size += agg__wire_field_size(*fmt);
    }
    return size;
}

size_t agg_wire_swap(void *s, const char *fmt, size_t count)
{
    uint8_t *p = s;
    size_t i;
    const char *f;

    for (i = 0; i < count; ++i) {
        for (f = fmt; *f; ++f) {
            uint16_t v16;
            uint32_t v32;
            uint64_t v64;

            /* memcpy keeps this legal for fields the compiler thinks unaligned */
            switch (*f) {
            case 'h':
                memcpy(&v16, p, 2);
                v16 = __builtin_bswap16(v16);
                memcpy(p, &v16, 2);
                break;
            case 'l':
                memcpy(&v32, p, 4);
                v32 = __builtin_bswap32(v32);
                memcpy(p, &v32, 4);
                break;
            case 'q':
                memcpy(&v64, p, 8);
                v64 = __builtin_bswap64(v64);
                memcpy(p, &v64, 8);
                break;
            }
            p += agg__wire_field_size(*f);
        }
    }
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "agg_wire_swap assumes a little-endian host; make the swaps conditional"
#endif
    return (size_t)(p - (uint8_t *)s);
}

agg_status_t agg_wire_reply_decode(void *rep, size_t len, size_t full, const char *fmt)
{
    int32_t status;

    if (len == sizeof(agg_msg_status_t)) {
        agg_wire_swap(rep, AGG_FMT_STATUS, 1);
        memcpy(&status, rep, sizeof(status));
        return status != AGG_OK ? (agg_status_t)status : AGG_ERR_PROTOCOL;
    }
    if (len != full || full < sizeof(status)) {
        return AGG_ERR_PROTOCOL;
    }
    agg_wire_swap(rep, fmt, 1);
    memcpy(&status, rep, sizeof(status));
    return (agg_status_t)status;
}

void agg_wire_hdr_encode(agg_msg_hdr_t *out, uint16_t type, uint32_t length,
                         uint32_t txid)
{
    out->magic   = AGG_WIRE_MAGIC;
    out->version = AGG_WIRE_VERSION;
    out->type    = type;
    out->length  = length;
    out->txid    = txid;
    agg_wire_swap(out, AGG_FMT_HDR, 1);
}

agg_status_t agg_wire_hdr_decode(agg_msg_hdr_t *hdr)
{
    agg_wire_swap(hdr, AGG_FMT_HDR, 1);
    if (hdr->magic != AGG_WIRE_MAGIC) {
        return AGG_ERR_PROTOCOL;
    }
    if (hdr->version != AGG_WIRE_VERSION) {
        return AGG_ERR_VERSION;
    }
    if (hdr->length > AGG_WIRE_MAX_BODY) {
        return AGG_ERR_PROTOCOL;
    }
    return AGG_OK;
}

const char *agg_msg_type_name(unsigned type)
{
    static const char *const names[AGG_MSG__MAX] = {
        [AGG_MSG_HELLO]                = "HELLO",
        [AGG_MSG_HELLO_REPLY]          = "HELLO_REPLY",
        [AGG_MSG_SIM_REGISTER]         = "SIM_REGISTER",
        [AGG_MSG_SIM_REGISTER_REPLY]   = "SIM_REGISTER_REPLY",
        [AGG_MSG_GROUP_CONFIG]         = "GROUP_CONFIG",
        [AGG_MSG_GROUP_CONFIG_REPLY]   = "GROUP_CONFIG_REPLY",
        [AGG_MSG_GROUP_TEARDOWN]       = "GROUP_TEARDOWN",
        [AGG_MSG_GROUP_TEARDOWN_REPLY] = "GROUP_TEARDOWN_REPLY",
        [AGG_MSG_JOB_CREATE]           = "JOB_CREATE",
        [AGG_MSG_JOB_CREATE_REPLY]     = "JOB_CREATE_REPLY",
        [AGG_MSG_JOB_DESTROY]          = "JOB_DESTROY",
        [AGG_MSG_JOB_DESTROY_REPLY]    = "JOB_DESTROY_REPLY",
        [AGG_MSG_GROUP_CREATE]         = "GROUP_CREATE",
        [AGG_MSG_GROUP_CREATE_REPLY]   = "GROUP_CREATE_REPLY",
        [AGG_MSG_GROUP_DESTROY]        = "GROUP_DESTROY",
        [AGG_MSG_GROUP_DESTROY_REPLY]  = "GROUP_DESTROY_REPLY",
        [AGG_MSG_STATS]                = "STATS",
        [AGG_MSG_STATS_REPLY]          = "STATS_REPLY",
        [AGG_MSG_ERROR_REPLY]          = "ERROR_REPLY",
        [AGG_MSG_SIM_REPORT]           = "SIM_REPORT",
        [AGG_MSG_STATE]                = "STATE",
        [AGG_MSG_STATE_REPLY]          = "STATE_REPLY",
        [AGG_MSG_JOB_ATTACH]           = "JOB_ATTACH",
        [AGG_MSG_JOB_ATTACH_REPLY]     = "JOB_ATTACH_REPLY",
        [AGG_MSG_SIM_PARTS]            = "SIM_PARTS",
        [AGG_MSG_SIM_PARTS_REPLY]      = "SIM_PARTS_REPLY",
    };

    if (type >= AGG_MSG__MAX || names[type] == NULL) {
        return "UNKNOWN";
    }
    return names[type];
}

void agg_wire_stats_print(const agg_msg_stats_reply_t *s, void *file)
{
    const struct {
        const char *name;
        uint64_t    value;
    } rows[] = {
        {"fragments_in", s->fragments_in},     {"llt_fragments_in", s->llt_fragments_in},
        {"sat_chunks_in", s->sat_chunks_in},   {"bytes_in", s->bytes_in},
        {"sat_bytes_in", s->sat_bytes_in},     {"fragments_reduced", s->fragments_reduced},
        {"results_out", s->results_out},       {"errors", s->errors},
        {"duplicates", s->duplicates},         {"locks_granted", s->locks_granted},
        {"locks_busy", s->locks_busy},         {"zcopy_bytes", s->zcopy_bytes},
        {"faults", s->faults},                 {"resent", s->resent},
        {"corrupt", s->corrupt},
        {"groups", s->groups},                 {"sat_groups", s->sat_groups},
        {"groups_total", s->groups_total},     {"workers", s->workers},
    };
    size_t i;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); ++i) {
        fprintf(file, "%s %llu\n", rows[i].name, (unsigned long long)rows[i].value);
    }
}
