/*
 * What the manager holds, as text for operators (agg_info -S): its jobs
 * with their quotas and groups, the switches something holds, the
 * switchsims registered. Jobs and groups in id order, switches in fabric
 * order, so two managers holding the same state print the same lines
 * (the lines about connections, "waiting:" and "switchsim", aside). The job
 * key is never shown.
 */
#include "aggmgr.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "agg/sock.h"

typedef struct aggmgr_text {
    char  *buf;
    size_t cap, len;
} aggmgr_text_t;

static void aggmgr__put(aggmgr_text_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void aggmgr__put(aggmgr_text_t *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->len + 1 >= t->cap) {
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0) {
        t->len += (size_t)n < t->cap - t->len ? (size_t)n : t->cap - t->len - 1;
    }
}

static int aggmgr__by_job_id(const void *a, const void *b)
{
    const aggmgr_job_t *x = *(const aggmgr_job_t *const *)a, *y = *(const aggmgr_job_t *const *)b;

    return x->id < y->id ? -1 : x->id > y->id;
}

static int aggmgr__by_group_id(const void *a, const void *b)
{
    const aggmgr_group_t *x = *(const aggmgr_group_t *const *)a;
    const aggmgr_group_t *y = *(const aggmgr_group_t *const *)b;

    return x->id < y->id ? -1 : x->id > y->id;
}

static void aggmgr__state_groups(aggmgr_text_t *t, const aggmgr_job_t *job)
{
    const aggmgr_group_t *g, **all;
    uint32_t n = 0, i;

    for (g = job->groups; g != NULL; g = g->next) {
        n++;
    }
    all = malloc((n + 1) * sizeof(*all));
    if (all == NULL) {
        aggmgr__put(t, "  (%u groups: out of memory)\n", n);
        return;
    }
    for (n = 0, g = job->groups; g != NULL; g = g->next) {
        all[n++] = g;
    }
    qsort(all, n, sizeof(*all), aggmgr__by_group_id);
    for (i = 0; i < n; ++i) {
        g = all[i];
        aggmgr__put(t, "  group %u: %u members, %s, LLT %u OSTs on %d nodes", g->id,
                    g->num_members, aggmgr_group_state_name(g->state), g->llt.osts,
                    g->llt.tree.num_nodes);
        if (g->sat.status == AGG_OK) {
            aggmgr__put(t, ", SAT part of %u chunks of %u bytes", g->sat.osts, g->sat.payload);
        } else if (g->flags & AGG_GROUP_F_SAT) {
            aggmgr__put(t, ", no SAT part (%s)", agg_status_string(g->sat.status));
        }
        aggmgr__put(t, "%s\n", (g->flags & AGG_GROUP_F_REPRODUCIBLE) ? ", reproducible" : "");
    }
    free(all);
}

size_t aggmgr_state_text(const aggmgr_t *am, char *buf, size_t cap)
{
    aggmgr_text_t t = {.buf = buf, .cap = cap};
    const aggmgr_job_t *job, **jobs;
    uint32_t nj = 0, ng = 0, i;
    int64_t now = agg_time_ms();
    int n;

    if (cap == 0) {
        return 0;
    }
    buf[0] = '\0';
    for (job = am->jobs; job != NULL; job = job->next) {
        nj++;
        ng += job->num_groups;
    }
    aggmgr__put(&t, "manager: %u jobs, %u groups; next ids: job %u, group %u, tree %u\n", nj,
                ng, am->next_job_id + 1, am->next_group_id + 1, am->next_tree_id);
    jobs = malloc((nj + 1) * sizeof(*jobs));
    if (jobs == NULL) {
        aggmgr__put(&t, "(out of memory)\n");
        return t.len;
    }
    for (nj = 0, job = am->jobs; job != NULL; job = job->next) {
        jobs[nj++] = job;
    }
    qsort(jobs, nj, sizeof(*jobs), aggmgr__by_job_id);
    for (i = 0; i < nj; ++i) {
        job = jobs[i];
        aggmgr__put(&t, "job %u: %u ranks (rank 0: pid %u on %s) on %u adapters; tree %u, "
                    "depth %d, %d nodes, root %s", job->id, job->world_size, job->owner_pid,
                    job->owner_host, job->num_cas, job->tree_id, job->tree.depth,
                    job->tree.num_nodes, am->topo.nodes[job->tree.nodes[0].topo_node].id);
        if (job->sat_tree_id != 0) {
            aggmgr__put(&t, "; SAT tree %u", job->sat_tree_id);
        }
        aggmgr__put(&t, "; quota %u OSTs of %u bytes (%u held by groups), %u groups (%u "
                    "held)\n", job->osts, job->payload_per_ost, job->osts_used,
                    job->max_groups, job->num_groups);
        aggmgr__state_groups(&t, job);
    }
    for (n = 0; n < am->topo.num_nodes; ++n) {
        const aggmgr_an_t *an = &am->ans[n];

        if (an->osts_used == 0 && an->groups_used == 0 && an->sat_flows_used == 0 &&
            an->trees_rooted == 0) {
            continue;
        }
        aggmgr__put(&t, "switch %s: OSTs %u/%u, groups %u/%u, SAT flows %u/%u, roots %u "
                    "trees\n", am->topo.nodes[n].id, an->osts_used, an->osts_cap,
                    an->groups_used, an->groups_cap, an->sat_flows_used, an->sat_flows_cap,
                    an->trees_rooted);
    }
    for (i = 0; i < nj; ++i) {
        job = jobs[i];
        if (job->restored_until_ms != 0) {
            aggmgr__put(&t, "waiting: job %u, read back from the journal, for its rank 0 "
                        "(released in %lld ms)\n", job->id,
                        (long long)(job->restored_until_ms > now ?
                                    job->restored_until_ms - now : 0));
        }
    }
    free(jobs);
    for (n = 0; n < am->num_sims; ++n) {
        const aggmgr_sim_t *s = &am->sims[n];

        if (s->fd >= 0) {
            aggmgr__put(&t, "switchsim %u: pid %u on %s, %u reduction threads%s%s\n", s->id,
                        s->pid, s->host, s->workers, s->data_addr[0] ? ", data port " : "",
                        s->data_addr);
        } else if (s->away_until_ms != 0) {
            aggmgr__put(&t, "switchsim %u: pid %u on %s, away (its control connection "
                        "closed): its groups kept %lld ms more\n", s->id, s->pid, s->host,
                        (long long)(s->away_until_ms > now ? s->away_until_ms - now : 0));
        }
    }
    if (am->journal.path[0] != '\0') {
        aggmgr__put(&t, "journal: %s, %llu bytes%s\n", am->journal.path,
                    (unsigned long long)am->journal.size,
                    am->journal.failed ? ", NOT WRITTEN since a write failed" : "");
    }
    return t.len;
}
