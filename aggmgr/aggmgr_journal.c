/*
 * The journal: every job and group the manager admits or ends, appended to
 * am_journal as it happens, read back when the manager starts. A record is
 * a 16-byte header (magic, type, version, body length, CRC32C of header and
 * body) and a body in this host's byte order: the file never leaves the head
 * node. What a record holds is the outcome (a job's adapters and its tree's
 * root, a group's members and whether it got a SAT part), never the request,
 * so reading it back does not depend on what else was there when it was
 * made. The first record names the fabric it was written for.
 *
 * Past am_journal_max bytes it is rewritten as what stands now (into
 * PATH.new, fsynced, renamed over PATH). A tail that is cut short or fails
 * its checksum (the manager died in a write, the disk lied) is copied to
 * PATH.damaged and cut off, with a warning; everything before it counts.
 */
#include "aggmgr.h"

#include <errno.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agg/log.h"

#define AGGMGR_JOURNAL_MAGIC   0x314a4741u /* "AGJ1" read as bytes */
#define AGGMGR_JOURNAL_VERSION 1

enum {
    AGGMGR_JREC_HEAD      = 1, /* the fabric and the ids handed out so far */
    AGGMGR_JREC_JOB       = 2,
    AGGMGR_JREC_JOB_END   = 3,
    AGGMGR_JREC_GROUP     = 4,
    AGGMGR_JREC_GROUP_END = 5,
    AGGMGR_JREC_JOB_TREE  = 6, /* a job's tree built again around switches that are down */
};

enum { AGGMGR_JSYNC_CHANGE, AGGMGR_JSYNC_BATCH, AGGMGR_JSYNC_NONE }; /* am_journal_sync */

typedef struct aggmgr_jhdr {
    uint32_t magic;
    uint16_t type;
    uint16_t version;
    uint32_t length; /* body bytes */
    uint32_t crc;    /* CRC32C of this header (crc read as 0) and the body */
} aggmgr_jhdr_t;

typedef struct aggmgr_jhead {
    uint64_t fabric;    /* aggmgr__fabric_print of the fabric it was written for */
    uint32_t next_job_id, next_group_id, next_tree_id, reserved;
} aggmgr_jhead_t;

typedef struct aggmgr_jjob {
    uint32_t id, world_size, osts, max_groups, payload_per_ost, osts_per_group;
    uint32_t tree_id, sat_tree_id, root, owner_pid, num_hosts, num_down;
    uint64_t key;
    char     owner_host[AGG_WIRE_NAME_LEN];
    /* then int32_t cas[world_size], uint32_t host_of[world_size],
       char hosts[num_hosts][AGG_WIRE_NAME_LEN], uint32_t down[num_down] */
} aggmgr_jjob_t;

typedef struct aggmgr_jtree {
    uint32_t job_id, root, tree_id, sat_tree_id, num_down, reserved;
    /* then uint32_t down[num_down]: the switches its tree was built around */
} aggmgr_jtree_t;

typedef struct aggmgr_jgroup {
    uint32_t job_id, id, num_members, flags, llt_osts;
    int32_t  sat_status;
    uint32_t sat_osts, sat_payload;
    /* then int32_t members[num_members] */
} aggmgr_jgroup_t;

typedef struct aggmgr_jref {
    uint32_t job_id, group_id;
} aggmgr_jref_t;

/* FNV-1a over what identifies the fabric: its nodes and how they are cabled. */
static uint64_t aggmgr__fabric_mix(uint64_t h, uint64_t v)
{
    int i;

    for (i = 0; i < 8; ++i) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t aggmgr__fabric_print(const aggmgr_topo_t *topo)
{
    uint64_t h = 0xcbf29ce484222325ull;
    int i, p;

    for (i = 0; i < topo->num_nodes; ++i) {
        const aggmgr_node_t *n = &topo->nodes[i];

        h = aggmgr__fabric_mix(h, ((uint64_t)n->type << 32) | (uint32_t)n->num_ports);
        h = aggmgr__fabric_mix(h, n->guid);
        for (p = 1; p <= n->num_ports; ++p) {
            h = aggmgr__fabric_mix(h, ((uint64_t)(uint32_t)n->ports[p].peer_node << 32) |
                                          (uint32_t)n->ports[p].peer_port);
        }
    }
    return h;
}

static uint32_t aggmgr__jcrc(const aggmgr_jhdr_t *hdr, const void *body)
{
    aggmgr_jhdr_t h = *hdr;
    uint32_t crc;

    h.crc = 0;
    crc   = crc32_iscsi((unsigned char *)&h, sizeof(h), 0xffffffffu);
    return crc32_iscsi((unsigned char *)body, (int)hdr->length, crc);
}

/* Said once: from now on what changes is not kept across a restart. */
static void aggmgr__jfail(aggmgr_t *am, const char *what, int err)
{
    if (!am->journal.failed) {
        agg_error("journal %s: %s: %s; changes from now on are not kept across a restart "
                  "(fix the disk and restart the manager)", am->journal.path, what,
                  strerror(err));
    }
    am->journal.failed = 1;
}

static int aggmgr__jsync_mode(const aggmgr_t *am)
{
    return (int)agg_conf_int(&am->conf, AGG_CONF_AM_JOURNAL_SYNC);
}

/* Header and parts written as one record with one write. */
static int aggmgr__jwrite(int fd, uint16_t type, const void *const *parts, const size_t *lens,
                          int n, uint64_t *size)
{
    aggmgr_jhdr_t hdr = {.magic = AGGMGR_JOURNAL_MAGIC, .type = type,
                         .version = AGGMGR_JOURNAL_VERSION};
    size_t len = 0, off = sizeof(hdr);
    uint8_t *buf;
    ssize_t w;
    int i, rc = 0;

    for (i = 0; i < n; ++i) {
        len += lens[i];
    }
    buf = malloc(sizeof(hdr) + len);
    if (buf == NULL) {
        errno = ENOMEM;
        return -1;
    }
    for (i = 0; i < n; ++i) {
        if (lens[i] > 0) {
            memcpy(buf + off, parts[i], lens[i]);
        }
        off += lens[i];
    }
    hdr.length = (uint32_t)len;
    hdr.crc    = aggmgr__jcrc(&hdr, buf + sizeof(hdr));
    memcpy(buf, &hdr, sizeof(hdr));
    for (off = 0; off < sizeof(hdr) + len; off += (size_t)w) {
        w = write(fd, buf + off, sizeof(hdr) + len - off);
        if (w < 0 && errno == EINTR) {
            w = 0;
            continue;
        }
        if (w <= 0) {
            rc = -1;
            break;
        }
    }
    free(buf);
    if (rc == 0) {
        *size += sizeof(hdr) + len;
    }
    return rc;
}

static int aggmgr__jwrite_head(const aggmgr_t *am, int fd, uint64_t *size)
{
    aggmgr_jhead_t head = {.fabric = aggmgr__fabric_print(&am->topo),
                           .next_job_id = am->next_job_id,
                           .next_group_id = am->next_group_id,
                           .next_tree_id = am->next_tree_id};
    const void *parts[] = {&head};
    size_t lens[] = {sizeof(head)};

    return aggmgr__jwrite(fd, AGGMGR_JREC_HEAD, parts, lens, 1, size);
}

static int aggmgr__jwrite_job(const aggmgr_t *am, int fd, const aggmgr_job_t *job,
                              uint64_t *size)
{
    aggmgr_jjob_t rec = {.id = job->id, .world_size = job->world_size, .osts = job->osts,
                         .max_groups = job->max_groups,
                         .payload_per_ost = job->payload_per_ost,
                         .osts_per_group = job->osts_per_group, .tree_id = job->tree_id,
                         .sat_tree_id = job->sat_tree_id,
                         .root = (uint32_t)job->tree.nodes[0].topo_node,
                         .owner_pid = job->owner_pid, .num_down = job->num_down,
                         .key = job->key};
    uint32_t *host_of = malloc(job->world_size * sizeof(*host_of));
    char (*hosts)[AGG_WIRE_NAME_LEN] = malloc(job->world_size * sizeof(*hosts));
    uint32_t r, h, nh = 0;
    int rc = -1;

    (void)am;
    if (host_of == NULL || hosts == NULL) {
        errno = ENOMEM;
        goto out;
    }
    memcpy(rec.owner_host, job->owner_host, sizeof(rec.owner_host));
    /* the distinct hosts, ranks of one host mostly next to each other */
    for (r = 0; r < job->world_size; ++r) {
        if (nh > 0 && strncmp(hosts[host_of[r - 1]], job->rank_host[r], AGG_WIRE_NAME_LEN) == 0) {
            host_of[r] = host_of[r - 1];
            continue;
        }
        for (h = 0; h < nh && strncmp(hosts[h], job->rank_host[r], AGG_WIRE_NAME_LEN) != 0;
             ++h) {
        }
        if (h == nh) {
            memcpy(hosts[nh++], job->rank_host[r], AGG_WIRE_NAME_LEN);
        }
        host_of[r] = h;
    }
    rec.num_hosts = nh;
    {
        const void *parts[] = {&rec, job->cas, host_of, hosts, job->down};
        size_t lens[] = {sizeof(rec), job->world_size * sizeof(int32_t),
                         job->world_size * sizeof(uint32_t), nh * sizeof(*hosts),
                         job->num_down * sizeof(uint32_t)};

        rc = aggmgr__jwrite(fd, AGGMGR_JREC_JOB, parts, lens, 5, size);
    }
out:
    free(host_of);
    free(hosts);
    return rc;
}

static int aggmgr__jwrite_group(int fd, const aggmgr_group_t *g, uint64_t *size)
{
    aggmgr_jgroup_t rec = {.job_id = g->job->id, .id = g->id, .num_members = g->num_members,
                           .flags = g->flags, .llt_osts = g->llt.osts,
                           .sat_status = g->sat.status, .sat_osts = g->sat_osts,
                           .sat_payload = g->sat_payload};
    const void *parts[] = {&rec, g->sel};
    size_t lens[] = {sizeof(rec), g->num_members * sizeof(int32_t)};

    return aggmgr__jwrite(fd, AGGMGR_JREC_GROUP, parts, lens, 2, size);
}

/* What stands now, oldest job first, each followed by its groups, oldest first. */
static int aggmgr__jwrite_all(const aggmgr_t *am, int fd, uint64_t *size)
{
    const aggmgr_job_t *job, **jobs = NULL;
    const aggmgr_group_t *g, **groups = NULL;
    uint32_t nj = 0, ng, i, k, cap = 0;
    int rc = aggmgr__jwrite_head(am, fd, size);

    for (job = am->jobs; job != NULL; job = job->next) {
        nj++;
    }
    jobs = malloc((nj + 1) * sizeof(*jobs));
    if (jobs == NULL) {
        errno = ENOMEM;
        return -1;
    }
    for (job = am->jobs, i = nj; job != NULL; job = job->next) {
        jobs[--i] = job;
    }
    for (i = 0; rc == 0 && i < nj; ++i) {
        rc = aggmgr__jwrite_job(am, fd, jobs[i], size);
        for (ng = 0, g = jobs[i]->groups; g != NULL; g = g->next) {
            ng += g->journaled;
        }
        if (ng > cap) {
            free(groups);
            cap    = ng;
            groups = malloc(cap * sizeof(*groups));
            if (groups == NULL) {
                errno = ENOMEM;
                rc    = -1;
                break;
            }
        }
        for (k = ng, g = jobs[i]->groups; g != NULL; g = g->next) {
            if (g->journaled) {
                groups[--k] = g;
            }
        }
        for (k = 0; rc == 0 && k < ng; ++k) {
            rc = aggmgr__jwrite_group(fd, groups[k], size);
        }
    }
    free(groups);
    free(jobs);
    return rc;
}

/* fsyncs the directory so a rename or a new file survives a crash. */
static void aggmgr__jsync_dir(const char *path)
{
    char dir[4096];
    int fd;

    snprintf(dir, sizeof(dir), "%s", path);
    fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Rewrites the journal as what stands now; the old one stays until the new one is whole. */
static int aggmgr__jcompact(aggmgr_t *am)
{
    aggmgr_journal_t *j = &am->journal;
    char tmp[4200];
    uint64_t size = 0;
    int fd;

    snprintf(tmp, sizeof(tmp), "%s.new", j->path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return -1;
    }
    if (aggmgr__jwrite_all(am, fd, &size) != 0 || fsync(fd) != 0 || rename(tmp, j->path) != 0) {
        int err = errno;

        close(fd);
        unlink(tmp);
        errno = err;
        return -1;
    }
    aggmgr__jsync_dir(j->path);
    if (lseek(fd, 0, SEEK_END) < 0) {
        close(fd);
        return -1;
    }
    if (j->fd >= 0) {
        close(j->fd);
    }
    /* appends go to the new file: it was opened for writing at its end */
    j->fd    = fd;
    j->size  = size;
    j->dirty = 0;
    agg_debug("journal %s rewritten: %llu bytes", j->path, (unsigned long long)size);
    return 0;
}

/* After a record: on disk now, or soon, and compacted when it has grown past its bound. */
static void aggmgr__jafter(aggmgr_t *am)
{
    aggmgr_journal_t *j = &am->journal;

    j->dirty = 1;
    if ((uint64_t)agg_conf_int(&am->conf, AGG_CONF_AM_JOURNAL_MAX) < j->size &&
        aggmgr__jcompact(am) != 0) {
        aggmgr__jfail(am, "cannot rewrite it", errno);
        return;
    }
    if (aggmgr__jsync_mode(am) == AGGMGR_JSYNC_CHANGE && j->dirty) {
        if (fdatasync(j->fd) != 0) {
            aggmgr__jfail(am, "fdatasync", errno);
        }
        j->dirty = 0;
    }
}

static int aggmgr__jon(const aggmgr_t *am)
{
    return am->journal.path[0] != '\0' && am->journal.fd >= 0 && !am->journal.replaying &&
           !am->journal.failed;
}

void aggmgr_journal_job(aggmgr_t *am, const aggmgr_job_t *job)
{
    if (!aggmgr__jon(am)) {
        return;
    }
    if (aggmgr__jwrite_job(am, am->journal.fd, job, &am->journal.size) != 0) {
        aggmgr__jfail(am, "cannot append a job", errno);
        return;
    }
    aggmgr__jafter(am);
}

static void aggmgr__jref(aggmgr_t *am, uint16_t type, uint32_t job_id, uint32_t group_id)
{
    aggmgr_jref_t ref = {.job_id = job_id, .group_id = group_id};
    const void *parts[] = {&ref};
    size_t lens[] = {sizeof(ref)};

    if (!aggmgr__jon(am)) {
        return;
    }
    if (aggmgr__jwrite(am->journal.fd, type, parts, lens, 1, &am->journal.size) != 0) {
        aggmgr__jfail(am, "cannot append an end", errno);
        return;
    }
    aggmgr__jafter(am);
}

void aggmgr_journal_job_tree(aggmgr_t *am, const aggmgr_job_t *job)
{
    aggmgr_jtree_t rec = {.job_id = job->id, .root = (uint32_t)job->tree.nodes[0].topo_node,
                          .tree_id = job->tree_id, .sat_tree_id = job->sat_tree_id,
                          .num_down = job->num_down};
    const void *parts[] = {&rec, job->down};
    size_t lens[] = {sizeof(rec), job->num_down * sizeof(uint32_t)};

    if (!aggmgr__jon(am)) {
        return;
    }
    if (aggmgr__jwrite(am->journal.fd, AGGMGR_JREC_JOB_TREE, parts, lens, 2,
                       &am->journal.size) != 0) {
        aggmgr__jfail(am, "cannot append a job's new tree", errno);
        return;
    }
    aggmgr__jafter(am);
}

void aggmgr_journal_job_end(aggmgr_t *am, uint32_t job_id)
{
    aggmgr__jref(am, AGGMGR_JREC_JOB_END, job_id, 0);
}

void aggmgr_journal_group(aggmgr_t *am, aggmgr_group_t *g)
{
    if (!aggmgr__jon(am)) {
        return;
    }
    if (aggmgr__jwrite_group(am->journal.fd, g, &am->journal.size) != 0) {
        aggmgr__jfail(am, "cannot append a group", errno);
        return;
    }
    g->journaled = 1;
    aggmgr__jafter(am);
}

void aggmgr_journal_group_end(aggmgr_t *am, const aggmgr_group_t *g)
{
    aggmgr__jref(am, AGGMGR_JREC_GROUP_END, g->job->id, g->id);
}

void aggmgr_journal_flush(aggmgr_t *am)
{
    aggmgr_journal_t *j = &am->journal;

    if (j->path[0] != '\0' && j->fd >= 0 && j->dirty &&
        aggmgr__jsync_mode(am) == AGGMGR_JSYNC_BATCH) {
        if (fdatasync(j->fd) != 0) {
            aggmgr__jfail(am, "fdatasync", errno);
        }
        j->dirty = 0;
    }
}

void aggmgr_journal_close(aggmgr_t *am)
{
    aggmgr_journal_t *j = &am->journal;

    if (j->path[0] == '\0') {
        return; /* never opened: fd means nothing */
    }
    if (j->fd >= 0) {
        if (j->dirty && aggmgr__jsync_mode(am) != AGGMGR_JSYNC_NONE) {
            fdatasync(j->fd);
        }
        close(j->fd);
    }
    j->fd = -1;
}

/* ---- reading it back ---------------------------------------------------- */

static unsigned aggmgr__count_groups(const aggmgr_t *am)
{
    const aggmgr_job_t *job;
    unsigned n = 0;

    for (job = am->jobs; job != NULL; job = job->next) {
        n += job->num_groups;
    }
    return n;
}

static agg_status_t aggmgr__japply(aggmgr_t *am, const aggmgr_jhdr_t *h, const uint8_t *body,
                                   int first, char *why, size_t whylen)
{
    const aggmgr_jhead_t *head;
    const aggmgr_jjob_t *jj;
    const aggmgr_jgroup_t *jg;
    const aggmgr_jref_t *ref;
    uint64_t fabric;

    if (first != (h->type == AGGMGR_JREC_HEAD)) {
        snprintf(why, whylen, first ? "it does not begin with its header record" :
                                      "a second header record");
        return AGG_ERR_PROTOCOL;
    }
    switch (h->type) {
    case AGGMGR_JREC_HEAD:
        if (h->length != sizeof(*head)) {
            break;
        }
        head   = (const aggmgr_jhead_t *)body;
        fabric = aggmgr__fabric_print(&am->topo);
        if (head->fabric != fabric) {
            snprintf(why, whylen, "it was written for another fabric (fingerprint %016llx, "
                     "%s is %016llx): its jobs' adapters and trees mean nothing here",
                     (unsigned long long)head->fabric, am->topo.source,
                     (unsigned long long)fabric);
            return AGG_ERR_TOPOLOGY;
        }
        am->next_job_id   = head->next_job_id;
        am->next_group_id = head->next_group_id;
        am->next_tree_id  = head->next_tree_id;
        return AGG_OK;
    case AGGMGR_JREC_JOB: {
        aggmgr_job_rec_t rec;

        jj = (const aggmgr_jjob_t *)body;
        if (h->length < sizeof(*jj) || jj->world_size > (1u << 24) ||
            jj->num_hosts > jj->world_size || jj->num_down > (1u << 24) ||
            h->length != sizeof(*jj) + (size_t)jj->world_size * 8 +
                             (size_t)jj->num_hosts * AGG_WIRE_NAME_LEN +
                             (size_t)jj->num_down * 4) {
            break;
        }
        rec = (aggmgr_job_rec_t){
            .id = jj->id, .world_size = jj->world_size, .osts = jj->osts,
            .max_groups = jj->max_groups, .payload_per_ost = jj->payload_per_ost,
            .osts_per_group = jj->osts_per_group, .tree_id = jj->tree_id,
            .sat_tree_id = jj->sat_tree_id, .root = jj->root, .owner_pid = jj->owner_pid,
            .num_hosts = jj->num_hosts, .key = jj->key, .owner_host = jj->owner_host,
            .cas = (const int32_t *)(jj + 1),
            .host_of = (const uint32_t *)(jj + 1) + jj->world_size,
            .hosts = (const char *)((const uint32_t *)(jj + 1) + 2 * (size_t)jj->world_size),
            .num_down = jj->num_down,
        };
        rec.down = (const uint32_t *)(rec.hosts + (size_t)jj->num_hosts * AGG_WIRE_NAME_LEN);
        return aggmgr_job_restore(am, &rec, why, whylen);
    }
    case AGGMGR_JREC_JOB_TREE: {
        const aggmgr_jtree_t *jt = (const aggmgr_jtree_t *)body;

        if (h->length < sizeof(*jt) || jt->num_down > (1u << 24) ||
            h->length != sizeof(*jt) + (size_t)jt->num_down * 4) {
            break;
        }
        return aggmgr_job_retree(am, jt->job_id, jt->root, jt->tree_id, jt->sat_tree_id,
                                 (const uint32_t *)(jt + 1), jt->num_down, why, whylen);
    }
    case AGGMGR_JREC_GROUP: {
        aggmgr_group_rec_t rec;

        jg = (const aggmgr_jgroup_t *)body;
        if (h->length < sizeof(*jg) || jg->num_members > (1u << 24) ||
            h->length != sizeof(*jg) + (size_t)jg->num_members * 4) {
            break;
        }
        rec = (aggmgr_group_rec_t){
            .job_id = jg->job_id, .id = jg->id, .num_members = jg->num_members,
            .flags = jg->flags, .llt_osts = jg->llt_osts, .sat_status = jg->sat_status,
            .sat_osts = jg->sat_osts, .sat_payload = jg->sat_payload,
            .members = (const int32_t *)(jg + 1),
        };
        return aggmgr_group_restore(am, &rec, why, whylen);
    }
    case AGGMGR_JREC_JOB_END:
    case AGGMGR_JREC_GROUP_END:
        if (h->length != sizeof(*ref)) {
            break;
        }
        ref = (const aggmgr_jref_t *)body;
        if ((h->type == AGGMGR_JREC_JOB_END ? aggmgr_job_destroy(am, ref->job_id) :
             aggmgr_group_destroy(am, ref->job_id, ref->group_id)) != AGG_OK) {
            snprintf(why, whylen, "the end of job %u's %s%u, which is not there", ref->job_id,
                     h->type == AGGMGR_JREC_JOB_END ? "self" : "group ",
                     h->type == AGGMGR_JREC_JOB_END ? 0 : ref->group_id);
            return AGG_ERR_PROTOCOL;
        }
        return AGG_OK;
    default:
        snprintf(why, whylen, "a record of unknown type %u", h->type);
        return AGG_ERR_PROTOCOL;
    }
    snprintf(why, whylen, "a record of type %u whose %u bytes do not hold what it says",
             h->type, h->length);
    return AGG_ERR_PROTOCOL;
}

/* Keeps the damaged tail beside the journal, then cuts it off. */
static agg_status_t aggmgr__jcut(aggmgr_t *am, int fd, const uint8_t *data, size_t good,
                                 size_t total, const char *what, char *err, size_t errlen)
{
    char aside[4200];
    int afd;

    snprintf(aside, sizeof(aside), "%s.damaged", am->journal.path);
    afd = open(aside, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (afd < 0 || write(afd, data + good, total - good) != (ssize_t)(total - good) ||
        fsync(afd) != 0) {
        snprintf(err, errlen, "journal %s: %s at byte %zu, and its last %zu bytes cannot be "
                 "kept in %s (%s)", am->journal.path, what, good, total - good, aside,
                 strerror(errno));
        if (afd >= 0) {
            close(afd);
        }
        return AGG_ERR_IO;
    }
    close(afd);
    if (ftruncate(fd, (off_t)good) != 0) {
        snprintf(err, errlen, "journal %s: cannot cut it at byte %zu: %s", am->journal.path,
                 good, strerror(errno));
        return AGG_ERR_IO;
    }
    agg_warn("journal %s: %s at byte %zu; the %zu bytes from there (a write the manager "
             "did not finish) are kept in %s and left out", am->journal.path, what, good,
             total - good, aside);
    return AGG_OK;
}

agg_status_t aggmgr_journal_open(aggmgr_t *am, char *err, size_t errlen)
{
    aggmgr_journal_t *j = &am->journal;
    const char *path = agg_conf_str(&am->conf, AGG_CONF_AM_JOURNAL);
    unsigned jobs = 0, groups = 0;
    uint8_t *data = NULL;
    size_t total = 0, off = 0;
    agg_status_t st = AGG_OK;
    struct stat sb;
    int fd, first = 1;

    j->fd      = -1;
    j->path[0] = '\0';
    if (path[0] == '\0') {
        return AGG_OK;
    }
    if (strlen(path) >= sizeof(j->path) - 16) {
        snprintf(err, errlen, "am_journal: the path is longer than %zu characters",
                 sizeof(j->path) - 17);
        return AGG_ERR_CONFIG;
    }
    snprintf(j->path, sizeof(j->path), "%s", path);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(err, errlen, "journal %s: cannot open it: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return AGG_ERR_IO;
    }
    total = (size_t)sb.st_size;
    data  = malloc(total + 1);
    if (data == NULL) {
        close(fd);
        snprintf(err, errlen, "journal %s: %zu bytes do not fit in memory", path, total);
        return AGG_ERR_NO_MEMORY;
    }
    if (total > 0 && pread(fd, data, total, 0) != (ssize_t)total) {
        snprintf(err, errlen, "journal %s: cannot read it: %s", path, strerror(errno));
        st = AGG_ERR_IO;
        goto out;
    }
    j->replaying = 1;
    while (off < total) {
        aggmgr_jhdr_t h;
        char why[512] = "";

        if (total - off < sizeof(h)) {
            st = aggmgr__jcut(am, fd, data, off, total, "a record cut short", err, errlen);
            break;
        }
        memcpy(&h, data + off, sizeof(h));
        if (h.magic != AGGMGR_JOURNAL_MAGIC || h.version != AGGMGR_JOURNAL_VERSION) {
            st = aggmgr__jcut(am, fd, data, off, total, "no record begins", err, errlen);
            break;
        }
        if (h.length > total - off - sizeof(h)) {
            st = aggmgr__jcut(am, fd, data, off, total, "a record cut short", err, errlen);
            break;
        }
        if (aggmgr__jcrc(&h, data + off + sizeof(h)) != h.crc) {
            st = aggmgr__jcut(am, fd, data, off, total, "a record fails its checksum", err,
                              errlen);
            break;
        }
        /* the body is copied so that it is aligned for the structs it holds */
        {
            uint8_t *body = malloc(h.length + 1);

            if (body == NULL) {
                st = AGG_ERR_NO_MEMORY;
                snprintf(err, errlen, "journal %s: out of memory", path);
                break;
            }
            memcpy(body, data + off + sizeof(h), h.length);
            st = aggmgr__japply(am, &h, body, first, why, sizeof(why));
            free(body);
        }
        if (st != AGG_OK) {
            snprintf(err, errlen, "journal %s: the record at byte %zu: %s (nothing was "
                     "changed; move the file away to start without it)", path, off, why);
            break;
        }
        jobs   += h.type == AGGMGR_JREC_JOB;
        groups += h.type == AGGMGR_JREC_GROUP;
        first = 0;
        off  += sizeof(h) + h.length;
    }
    j->replaying = 0;
    if (st != AGG_OK) {
        goto out;
    }
    j->fd   = fd;
    j->size = off;
    fd      = -1;
    /* a new file gets its header; a long one is rewritten at once */
    if ((off == 0 || off > (uint64_t)agg_conf_int(&am->conf, AGG_CONF_AM_JOURNAL_MAX)) &&
        aggmgr__jcompact(am) != 0) {
        snprintf(err, errlen, "journal %s: cannot write it: %s", path, strerror(errno));
        st = AGG_ERR_IO;
        goto out;
    }
    if (lseek(j->fd, 0, SEEK_END) < 0) {
        snprintf(err, errlen, "journal %s: %s", path, strerror(errno));
        st = AGG_ERR_IO;
        goto out;
    }
    if (off > 0) {
        agg_info("journal %s: %u jobs and %u groups stand after %u jobs and %u groups read "
                 "back; their clients have am_restore_grace_ms to come back", path,
                 am->num_jobs, aggmgr__count_groups(am), jobs, groups);
    } else {
        aggmgr__jsync_dir(path);
    }
out:
    free(data);
    if (fd >= 0) {
        close(fd);
    }
    if (st != AGG_OK && j->fd >= 0) {
        close(j->fd);
        j->fd = -1;
    }
    return st;
}
