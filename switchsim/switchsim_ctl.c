/*
 * switchsim's control link to aggmgr: registration, then group
 * configuration and teardown requests, each answered with a status, and the
 * counters when asked.
 */
#include "switchsim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/net.h"
#include "agg/sock.h"

#define SWITCHSIM_CTL_TIMEOUT_MS 5000

static int switchsim__guid_cmp(const void *a, const void *b)
{
    const agg_wire_switch_t *x = a, *y = b;

    return x->guid < y->guid ? -1 : x->guid > y->guid;
}

/* Registering again, it must be given the switches it has (sorted as sw is). */
static agg_status_t switchsim__same_switches(switchsim_t *sim, const agg_wire_switch_t *sw,
                                             uint32_t n)
{
    uint32_t i;

    for (i = 0; i < n && n == sim->num_ans; ++i) {
        if (sw[i].guid != sim->ans[i].guid) {
            break;
        }
    }
    if (n != sim->num_ans || i < n) {
        agg_error("aggmgr now gives this switchsim %u switches, not the %u it hosts (switch "
                  "%u differs): it cannot keep serving its groups", n, sim->num_ans, i);
        return AGG_ERR_TOPOLOGY;
    }
    return AGG_OK;
}

/* Tells the manager, registered with again, which groups' parts this switchsim serves. */
static agg_status_t switchsim__report_parts(switchsim_t *sim, int timeout_ms)
{
    agg_msg_sim_parts_t *msg;
    agg_msg_group_ref_t *ref;
    switchsim_group_t *g;
    uint32_t n = 0, max = (AGG_WIRE_MAX_BODY - sizeof(*msg)) / sizeof(*ref);
    agg_status_t st;

    pthread_rwlock_rdlock(&sim->lock);
    msg = calloc(1, sizeof(*msg) + (size_t)sim->num_groups * sizeof(*ref));
    if (msg == NULL) {
        pthread_rwlock_unlock(&sim->lock);
        return AGG_ERR_NO_MEMORY;
    }
    ref = (agg_msg_group_ref_t *)(msg + 1);
    for (g = sim->groups; g != NULL && n < max; g = g->next) {
        ref[n++] = (agg_msg_group_ref_t){.job_id = g->job_id, .group_id = g->id,
                                         .tree = g->tree, .part = g->part};
    }
    pthread_rwlock_unlock(&sim->lock);
    msg->num_parts = n;
    agg_wire_swap(msg, AGG_FMT_SIM_PARTS, 1);
    agg_wire_swap(ref, AGG_FMT_GROUP_REF, n);
    /* not waited for here: the manager may ask things (STATS, GROUP_CONFIG) before
       it answers, and the control loop reads them in turn, the answer with them */
    st = agg_msg_send(sim->am_fd, AGG_MSG_SIM_PARTS, 0, msg, sizeof(*msg) + n * sizeof(*ref),
                      timeout_ms);
    free(msg);
    if (st == AGG_OK && n > 0) {
        agg_info("registered with aggmgr again as switchsim %u, serving %u groups' parts; it "
                 "tears down those it no longer holds", sim->sim_id, n);
    } else if (st != AGG_OK) {
        agg_error("could not tell aggmgr which groups this switchsim serves: %s",
                  agg_status_string(st));
    }
    return st;
}

agg_status_t switchsim_ctl_register(switchsim_t *sim, int timeout_ms)
{
    agg_msg_sim_register_t reg = {0};
    agg_msg_sim_register_reply_t *rep;
    agg_wire_switch_t *sw;
    size_t len, max = sizeof(*rep) + 65536 * sizeof(agg_wire_switch_t);
    uint8_t *buf;
    agg_status_t st;

    reg.pid                = (uint32_t)getpid();
    reg.an_osts            = (uint32_t)agg_conf_int(&sim->conf, AGG_CONF_AN_OSTS);
    reg.an_payload_per_ost = (uint32_t)agg_conf_int(&sim->conf, AGG_CONF_AN_PAYLOAD_PER_OST);
    reg.an_max_groups      = (uint32_t)agg_conf_int(&sim->conf, AGG_CONF_AN_MAX_GROUPS);
    reg.an_sat_flows       = (uint32_t)agg_conf_int(&sim->conf, AGG_CONF_AN_SAT_FLOWS);
    reg.workers            = sim->num_workers;
    gethostname(reg.host, sizeof(reg.host) - 1);
    snprintf(reg.data_addr, sizeof(reg.data_addr), "%s", switchsim_net_addr(sim));
    agg_wire_swap(&reg, AGG_FMT_SIM_REGISTER, 1);

    buf = malloc(max);
    if (buf == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    {
        /* the switches it asks for follow the fixed part */
        const char *select = agg_conf_str(&sim->conf, AGG_CONF_SIM_SWITCHES);
        size_t slen = strlen(select) + 1;
        uint8_t msg[sizeof(reg) + 4096];

        if (slen > 4096) {
            agg_error("sim_switches is longer than 4095 characters");
            free(buf);
            return AGG_ERR_CONFIG;
        }
        memcpy(msg, &reg, sizeof(reg));
        memcpy(msg + sizeof(reg), select, slen);
        st = agg_msg_call(sim->am_fd, AGG_MSG_SIM_REGISTER, msg, sizeof(reg) + slen,
                          AGG_MSG_SIM_REGISTER_REPLY, buf, max, &len, timeout_ms);
    }
    if (st != AGG_OK) {
        agg_error("registration with aggmgr failed: %s", agg_status_string(st));
        goto out;
    }
    rep = (agg_msg_sim_register_reply_t *)buf;
    if (len < sizeof(*rep)) {
        st = AGG_ERR_PROTOCOL;
        goto out;
    }
    agg_wire_swap(rep, AGG_FMT_SIM_REGISTER_REPLY, 1);
    if (rep->status != AGG_OK) {
        st = rep->status;
        agg_error("aggmgr refused registration: %s", agg_status_string(st));
        goto out;
    }
    if (len != sizeof(*rep) + (size_t)rep->num_switches * sizeof(agg_wire_switch_t)) {
        agg_error("SIM_REGISTER_REPLY of %zu bytes does not hold %u switches", len,
                  rep->num_switches);
        st = AGG_ERR_PROTOCOL;
        goto out;
    }
    sw = (agg_wire_switch_t *)(rep + 1);
    agg_wire_swap(sw, AGG_FMT_SWITCH, rep->num_switches);
    qsort(sw, rep->num_switches, sizeof(*sw), switchsim__guid_cmp);
    if (sim->num_ans > 0) {
        /* again: the switches it hosts already, whose groups it serves */
        st = switchsim__same_switches(sim, sw, rep->num_switches);
        if (st == AGG_OK) {
            sim->sim_id = rep->sim_id;
            st = switchsim__report_parts(sim, timeout_ms);
        }
        goto out;
    }
    st = switchsim_an_init(sim, sw, rep->num_switches);
    if (st != AGG_OK) {
        goto out;
    }
    sim->sim_id = rep->sim_id;
    agg_info("registered with aggmgr as switchsim %u, hosting %u switches (host segment %s)",
             sim->sim_id, sim->num_ans, sim->host_name);
    st = switchsim__report_parts(sim, timeout_ms); /* none: the manager's groups read back
                                                       from its journal are not here */
out:
    free(buf);
    return st;
}

static agg_status_t switchsim__reply_status(switchsim_t *sim, uint16_t type,
                                            uint32_t txid, agg_status_t status)
{
    agg_msg_status_t rep = {.status = status};

    agg_wire_swap(&rep, AGG_FMT_STATUS, 1);
    return agg_msg_send(sim->am_fd, type, txid, &rep, sizeof(rep),
                        SWITCHSIM_CTL_TIMEOUT_MS);
}

static agg_status_t switchsim__on_group_config(switchsim_t *sim, uint32_t txid,
                                               uint8_t *body, size_t len)
{
    agg_msg_group_config_reply_t rep = {0};
    agg_msg_group_config_t *cfg = (agg_msg_group_config_t *)body;
    agg_wire_tree_node_t *nodes;
    agg_wire_member_t *members;
    agg_wire_port_t *ports;
    switchsim_group_t *g = NULL;
    agg_status_t st = AGG_OK;

    if (len < sizeof(*cfg)) {
        st = AGG_ERR_PROTOCOL;
        goto reply;
    }
    agg_wire_swap(cfg, AGG_FMT_GROUP_CONFIG, 1);
    rep.group_id = cfg->group_id;
    rep.tree     = cfg->tree;
    if (len != sizeof(*cfg) + (size_t)cfg->num_nodes * sizeof(*nodes) +
               (size_t)cfg->num_members * sizeof(*members) +
               (size_t)cfg->num_ports * sizeof(*ports)) {
        agg_error("GROUP_CONFIG of %zu bytes does not hold %u nodes, %u members and %u ports",
                  len, cfg->num_nodes, cfg->num_members, cfg->num_ports);
        st = AGG_ERR_PROTOCOL;
        goto reply;
    }
    nodes   = (agg_wire_tree_node_t *)(cfg + 1);
    members = (agg_wire_member_t *)(nodes + cfg->num_nodes);
    agg_wire_swap(nodes, AGG_FMT_TREE_NODE, cfg->num_nodes);
    ports   = (agg_wire_port_t *)(members + cfg->num_members);
    agg_wire_swap(members, AGG_FMT_MEMBER, cfg->num_members);
    agg_wire_swap(ports, AGG_FMT_PORT, cfg->num_ports);
    st = switchsim_group_create(sim, cfg, nodes, members, ports, &g);
    /* members on this host: shared memory; elsewhere: the data port, if there is one */
    if (st == AGG_OK) {
        st = agg_dp_ep_format(&rep.here, g->shm_name, sim->host_name);
    }
    if (st == AGG_OK && sim->net != NULL) {
        st = agg_net_ep_format(&rep.away, switchsim_net_addr(sim), cfg->group_id, cfg->tree,
                               cfg->part);
    }
    if (st != AGG_OK && g != NULL) { /* laid out, but its address does not fit an endpoint */
        agg_error("group %u: the endpoint of its part %u does not fit %zu bytes", cfg->group_id,
                  cfg->part, sizeof(rep.here.addr));
        switchsim_group_destroy(sim, cfg->group_id, (uint8_t)cfg->tree, cfg->part);
    }
reply:
    rep.status = st;
    agg_wire_swap(&rep, AGG_FMT_GROUP_CONFIG_REPLY, 1);
    return agg_msg_send(sim->am_fd, AGG_MSG_GROUP_CONFIG_REPLY, txid, &rep,
                        sizeof(rep), SWITCHSIM_CTL_TIMEOUT_MS);
}

static agg_status_t switchsim__on_stats(switchsim_t *sim, uint32_t txid)
{
    agg_msg_stats_reply_t rep;

    switchsim_stats_reply(sim, &rep);
    agg_wire_swap(&rep, AGG_FMT_STATS_REPLY, 1);
    return agg_msg_send(sim->am_fd, AGG_MSG_STATS_REPLY, txid, &rep, sizeof(rep),
                        SWITCHSIM_CTL_TIMEOUT_MS);
}

void switchsim_ctl_report(switchsim_t *sim)
{
    agg_msg_sim_report_t rep;
    int32_t why;

    memset(&rep, 0, sizeof(rep));
    while (switchsim_net_broken(sim, rep.addr, sizeof(rep.addr), &why)) {
        rep.what   = AGG_SIM_REPORT_LINK_DOWN;
        rep.status = why;
        agg_wire_swap(&rep, AGG_FMT_SIM_REPORT, 1);
        if (agg_msg_send(sim->am_fd, AGG_MSG_SIM_REPORT, 0, &rep, sizeof(rep),
                         SWITCHSIM_CTL_TIMEOUT_MS) != AGG_OK) {
            agg_warn("could not tell aggmgr that the link to %s broke", rep.addr);
        }
        memset(&rep, 0, sizeof(rep));
    }
}

agg_status_t switchsim_ctl_handle(switchsim_t *sim)
{
    static uint8_t body[AGG_WIRE_MAX_BODY];
    agg_msg_group_ref_t *ref;
    agg_msg_hdr_t hdr;
    agg_status_t st;

    st = agg_msg_recv(sim->am_fd, &hdr, body, sizeof(body), SWITCHSIM_CTL_TIMEOUT_MS);
    if (st != AGG_OK) {
        return st == AGG_ERR_TIMEOUT ? AGG_ERR_PROTOCOL : st;
    }
    switch (hdr.type) {
    case AGG_MSG_GROUP_CONFIG:
        return switchsim__on_group_config(sim, hdr.txid, body, hdr.length);
    case AGG_MSG_GROUP_TEARDOWN:
        if (hdr.length != sizeof(*ref)) {
            return switchsim__reply_status(sim, AGG_MSG_GROUP_TEARDOWN_REPLY, hdr.txid,
                                           AGG_ERR_PROTOCOL);
        }
        ref = (agg_msg_group_ref_t *)body;
        agg_wire_swap(ref, AGG_FMT_GROUP_REF, 1);
        return switchsim__reply_status(sim, AGG_MSG_GROUP_TEARDOWN_REPLY, hdr.txid,
                                       ref->tree > AGG_TREE_SAT ? AGG_ERR_PROTOCOL :
                                       switchsim_group_destroy(sim, ref->group_id,
                                                               (uint8_t)ref->tree, ref->part));
    case AGG_MSG_STATS:
        return switchsim__on_stats(sim, hdr.txid);
    case AGG_MSG_SIM_PARTS_REPLY: {
        agg_msg_status_t rep = {.status = AGG_ERR_PROTOCOL};

        if (hdr.length == sizeof(rep)) {
            memcpy(&rep, body, sizeof(rep));
            agg_wire_swap(&rep, AGG_FMT_STATUS, 1);
        }
        if (rep.status != AGG_OK) {
            agg_error("aggmgr did not take the groups this switchsim serves: %s",
                      agg_status_string(rep.status));
        }
        return AGG_OK;
    }
    default:
        agg_error("unexpected %s from aggmgr", agg_msg_type_name(hdr.type));
        return switchsim__reply_status(sim, AGG_MSG_ERROR_REPLY, hdr.txid,
                                       AGG_ERR_PROTOCOL);
    }
}
